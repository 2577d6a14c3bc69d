"""Warm-zero: serve 0 for each expected counter or histogram series the engine has not created yet.

SGLang creates labelled counters on their first event (and skips zero increments), so a fresh
engine lacks them and every panel on them reads "No data"; the contract pre-warms them with
``inc(0)``. The expected series are the product of inherited label sets (from a family present
from start-up), explicit value lists and fixed values. A synthetic series has exactly the labels
the engine will use, so when the real one appears Prometheus sees one continuous counter.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from metricbridge.config.schema import FamilyRule, WarmZero
from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Labels, RawFamily
from metricbridge.translation.series import by_name, parsed_or_none, series_labels, zero_series


@dataclass(frozen=True, slots=True)
class WarmOutcome:
    """What warm-zero did for one rule: series synthesized, or why none could be."""

    synthesized: int
    reason: str


def _inherited(warm: WarmZero, families: dict[str, AnyFamily]) -> list[Labels] | None:
    if warm.labels_from is None:
        return [()]
    reference = parsed_or_none(families.get(warm.labels_from))
    if reference is None:
        return None
    out: dict[Labels, None] = {}
    for labels in series_labels(reference):
        kept = dict(labels)
        if warm.keep_labels is not None:
            kept = {k: v for k, v in kept.items() if k in warm.keep_labels}
        for label in warm.drop_labels:
            kept.pop(label, None)
        for label, value in warm.defaults.items():
            kept.setdefault(label, value)
        out.setdefault(tuple(sorted(kept.items())), None)
    return list(out)


# Expected series by (rule, reference bytes): the reference (a start-up gauge) rarely changes,
# so most scrapes skip the parse and the product entirely.
_EXPECTED: dict[tuple[object, bytes], list[Labels]] = {}
_EXPECTED_MAX = 1024


def _identity(warm: WarmZero) -> tuple[object, ...]:
    """A hashable value for a WarmZero (its dicts are not hashable; id() could be reused)."""
    return (
        warm.labels_from,
        warm.keep_labels,
        warm.drop_labels,
        tuple(sorted(warm.defaults.items())),
        tuple(sorted(warm.values.items())),
        tuple(sorted(warm.set.items())),
    )


def expected_series(warm: WarmZero, families: dict[str, AnyFamily]) -> list[Labels] | None:
    """Every label set the family should have, or None if the reference family is absent."""
    reference = families.get(warm.labels_from) if warm.labels_from else None
    # Bytes, not the view: a cache key must not keep a whole upstream payload alive.
    key = (_identity(warm), bytes(reference.body)) if isinstance(reference, RawFamily) else None
    if key is not None and key in _EXPECTED:
        return _EXPECTED[key]
    expected = _expected_series(warm, families)
    if key is not None and expected is not None:
        if len(_EXPECTED) >= _EXPECTED_MAX:
            _EXPECTED.clear()
        _EXPECTED[key] = expected
    return expected


def _expected_series(warm: WarmZero, families: dict[str, AnyFamily]) -> list[Labels] | None:
    inherited = _inherited(warm, families)
    if inherited is None:
        return None
    value_lists = [[(label, value) for value in values] for label, values in warm.values.items()]
    out: dict[Labels, None] = {}
    for base in inherited:
        for combo in itertools.product(*value_lists):
            labels = dict(base) | dict(combo) | warm.set
            out.setdefault(tuple(sorted(labels.items())), None)
    return list(out)


def warm_zero(families: list[AnyFamily], rules: Sequence[FamilyRule]) -> dict[str, WarmOutcome]:
    """Add zero series in place for every warm-zero rule; return what was done per rule."""
    index = by_name(families)
    outcomes: dict[str, WarmOutcome] = {}
    for rule in rules:
        warm = rule.warm_zero
        if warm is None:
            continue
        expected = expected_series(warm, index)
        if expected is None:
            outcomes[rule.name] = WarmOutcome(
                0, f"warm-zero waits for {warm.labels_from}, which is absent"
            )
            continue
        present = parsed_or_none(index.get(rule.name))
        if present is not None and present.meta.type is not rule.type:
            outcomes[rule.name] = WarmOutcome(
                0, f"engine serves {rule.name} as a {present.meta.type}"
            )
            continue
        have = set(series_labels(present)) if present is not None else set()
        missing = [labels for labels in expected if labels not in have]
        if not missing:
            outcomes[rule.name] = WarmOutcome(0, "every expected series is real")
            continue
        zeros = [
            s
            for labels in missing
            for s in zero_series(rule.name, rule.type, labels, warm.buckets or ())
        ]
        if present is None:
            meta = FamilyMeta(rule.name, rule.type, rule.help or rule.note, rule.unit)
            families.append(Family(meta, tuple(zeros)))
        else:
            families[families.index(index[rule.name])] = Family(
                present.meta, (*present.samples, *zeros)
            )
        outcomes[rule.name] = WarmOutcome(
            len(missing), f"{len(missing)} of {len(expected)} series warm-zero"
        )
    return outcomes
