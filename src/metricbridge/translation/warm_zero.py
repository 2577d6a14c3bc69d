"""Warm-zero: serve 0 for each expected counter or histogram series the engine has not created yet.

SGLang creates labelled counters on their first event (and skips zero increments), so a fresh
engine lacks them and every panel on them reads "No data"; the contract pre-warms them with
``inc(0)``. The expected series are the product of inherited label sets (from a family present
from start-up), explicit value lists and fixed values. A synthetic series has exactly the labels
the engine will use, so when the real one appears Prometheus sees one continuous counter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Labels
from metricbridge.translation.compiled import CompiledWarmZero, Inheritance
from metricbridge.translation.compiler import expected_labels
from metricbridge.translation.series import by_name, parsed_or_none, series_labels, zero_series


@dataclass(frozen=True, slots=True)
class WarmOutcome:
    """What warm-zero did for one rule: series synthesized, or why none could be."""

    synthesized: int
    reason: str


def inherited(inherit: Inheritance, reference: list[Labels]) -> list[Labels]:
    """The reference's label sets as the rule keeps them: kept, dropped, defaulted, deduplicated."""
    if inherit.keeps_all:
        return reference  # series_labels: sorted, each label set once
    keep, drop, defaults = inherit.keep_labels, inherit.drop_labels, inherit.defaults
    out: dict[Labels, None] = {}
    for labels in reference:
        kept = dict(labels) if keep is None else {k: v for k, v in labels if k in keep}
        for label in drop:
            kept.pop(label, None)
        for label, value in defaults:
            kept.setdefault(label, value)
        out.setdefault(tuple(sorted(kept.items())), None)
    return list(out)


@dataclass(slots=True)
class _Reads:
    """What one warm_zero call has read of its payload; gone when the call returns.

    Rules that inherit from one family read it once (the shipped contract has three on
    max_total_num_tokens), and rules that inherit alike share their expected series.
    """

    families: Mapping[str, AnyFamily]
    parse: Callable[[AnyFamily | None], Family | None] = parsed_or_none
    label_sets: dict[str, list[Labels] | None] = field(default_factory=dict)
    expected: dict[Inheritance, tuple[Labels, ...] | None] = field(default_factory=dict)

    def reference(self, name: str) -> list[Labels] | None:
        if name not in self.label_sets:
            family = self.parse(self.families.get(name))
            self.label_sets[name] = series_labels(family) if family is not None else None
        return self.label_sets[name]

    def expected_series(self, warm: CompiledWarmZero) -> tuple[Labels, ...] | None:
        inherit = warm.inherit
        if inherit is None:
            return warm.expected
        if inherit not in self.expected:
            bases = self.reference(inherit.labels_from)
            self.expected[inherit] = (
                None
                if bases is None
                else expected_labels(inherited(inherit, bases), inherit.overlays)
            )
        return self.expected[inherit]


def expected_series(
    warm: CompiledWarmZero, families: Mapping[str, AnyFamily]
) -> tuple[Labels, ...] | None:
    """Every label set the family should have, or None if its reference family is absent.

    Without ``labels_from`` the answer was computed by ``compile_rules``; with it, it is
    computed from the payload's reference family.
    """
    return _Reads(families).expected_series(warm)


def warm_zero(
    families: list[AnyFamily],
    rules: tuple[CompiledWarmZero, ...],
    parse: Callable[[AnyFamily | None], Family | None] = parsed_or_none,
) -> dict[str, WarmOutcome]:
    """Add zero series in place for every warm-zero rule; return what was done per rule.

    ``parse`` reads a family (translate passes its run's, which shares the translation's
    parses and the caller's caches).
    """
    index = by_name(families)
    reads = _Reads(index, parse)
    outcomes: dict[str, WarmOutcome] = {}
    for warm in rules:
        name = warm.name
        expected = reads.expected_series(warm)
        if expected is None:
            outcomes[name] = WarmOutcome(
                0, f"warm-zero waits for {warm.labels_from}, which is absent"
            )
            continue
        present = parse(index.get(name))
        if present is not None and present.meta.type is not warm.type:
            outcomes[name] = WarmOutcome(0, f"engine serves {name} as a {present.meta.type}")
            continue
        have = set(series_labels(present)) if present is not None else set()
        missing = [labels for labels in expected if labels not in have]
        if not missing:
            outcomes[name] = WarmOutcome(0, "every expected series is real")
            continue
        zeros = [
            s for labels in missing for s in zero_series(name, warm.type, labels, warm.buckets)
        ]
        if present is None:
            meta = FamilyMeta(name, warm.type, warm.help, warm.unit)
            families.append(Family(meta, tuple(zeros)))
        else:
            families[families.index(index[name])] = Family(present.meta, (*present.samples, *zeros))
        outcomes[name] = WarmOutcome(
            len(missing), f"{len(missing)} of {len(expected)} series warm-zero"
        )
    return outcomes
