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

from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Labels, Sample
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
class WarmMemo:
    """What warm-zero worked out from label sets, kept by a scrape plan for the next payload.

    Each answer is held with the label tuples it came from and reused only while a payload's
    compare equal (see ``translation.plan``): label sets rarely change from scrape to scrape,
    values always do, and a label set is all warm-zero reads of a family.
    """

    # family name -> (its samples' label tuples, series_labels of the family)
    series: dict[str, tuple[list[Labels], list[Labels]]] = field(default_factory=dict)
    # inheritance -> (the reference's series labels, the expected series made of them)
    expected: dict[Inheritance, tuple[list[Labels], tuple[Labels, ...]]] = field(
        default_factory=dict
    )
    # rule name -> (expected series, the served family's series labels, zeros, missing count)
    zeros: dict[str, tuple[tuple[Labels, ...], list[Labels] | None, tuple[Sample, ...], int]] = (
        field(default_factory=dict)
    )
    dirty: bool = False  # an answer changed since the owner last sized the memo

    def series_labels(self, family: Family) -> list[Labels]:
        """``series.series_labels``, reused while the family's samples carry the same labels."""
        labels = [sample.labels for sample in family.samples]
        held = self.series.get(family.name)
        if held is not None and held[0] == labels:
            return held[1]
        result = series_labels(family)
        self.series[family.name] = (labels, result)
        self.dirty = True
        return result

    def label_set_count(self) -> int:
        """How many label tuples the memo refers to."""
        series = sum(len(a) + len(b) for a, b in self.series.values())
        expected = sum(len(a) + len(b) for a, b in self.expected.values())
        zeros = sum(len(a) + len(b or ()) + len(z) for a, b, z, _ in self.zeros.values())
        return series + expected + zeros

    def size(self, labels_size: Callable[[Labels], int]) -> int:
        """The len() of the strings held that no other memo entry holds, roughly."""
        held = {id(t): t for a, _ in self.series.values() for t in a}
        held.update((id(t), t) for _, b in self.expected.values() for t in b)
        zeros = sum(len(s.name) + labels_size(s.labels) for z in self.zeros.values() for s in z[2])
        return sum(map(labels_size, held.values())) + zeros


@dataclass(slots=True)
class _Reads:
    """What one warm_zero call has read of its payload; gone when the call returns.

    Rules that inherit from one family read it once (the shipped contract has three on
    max_total_num_tokens), and rules that inherit alike share their expected series.
    """

    families: Mapping[str, AnyFamily]
    parse: Callable[[AnyFamily | None], Family | None] = parsed_or_none
    memo: WarmMemo = field(default_factory=WarmMemo)
    label_sets: dict[str, list[Labels] | None] = field(default_factory=dict)
    expected: dict[Inheritance, tuple[Labels, ...] | None] = field(default_factory=dict)

    def reference(self, name: str) -> list[Labels] | None:
        if name not in self.label_sets:
            family = self.parse(self.families.get(name))
            self.label_sets[name] = self.memo.series_labels(family) if family is not None else None
        return self.label_sets[name]

    def expected_series(self, warm: CompiledWarmZero) -> tuple[Labels, ...] | None:
        inherit = warm.inherit
        if inherit is None:
            return warm.expected
        if inherit not in self.expected:
            bases = self.reference(inherit.labels_from)
            self.expected[inherit] = None if bases is None else self._expected(inherit, bases)
        return self.expected[inherit]

    def _expected(self, inherit: Inheritance, bases: list[Labels]) -> tuple[Labels, ...]:
        held = self.memo.expected.get(inherit)
        if held is not None and (held[0] is bases or held[0] == bases):
            return held[1]
        result = expected_labels(inherited(inherit, bases), inherit.overlays)
        self.memo.expected[inherit] = (bases, result)
        self.memo.dirty = True
        return result

    def zeros(
        self, warm: CompiledWarmZero, expected: tuple[Labels, ...], present: Family | None
    ) -> tuple[tuple[Sample, ...], int]:
        """The zero samples of the expected series ``present`` lacks, and how many series."""
        have = self.memo.series_labels(present) if present is not None else None
        held = self.memo.zeros.get(warm.name)
        if held is not None and held[0] == expected and held[1] == have:
            return held[2], held[3]
        seen = set(have) if have is not None else set()
        missing = [labels for labels in expected if labels not in seen]
        name = warm.name
        zeros = tuple(
            s for labels in missing for s in zero_series(name, warm.type, labels, warm.buckets)
        )
        self.memo.zeros[name] = (expected, have, zeros, len(missing))
        self.memo.dirty = True
        return zeros, len(missing)


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
    memo: WarmMemo | None = None,
) -> dict[str, WarmOutcome]:
    """Add zero series in place for every warm-zero rule; return what was done per rule.

    ``parse`` reads a family (translate passes its run's, which shares the translation's
    parses and the caller's caches); ``memo``, a scrape plan's, what the previous payload's
    label sets gave.
    """
    index = by_name(families)
    reads = _Reads(index, parse, memo if memo is not None else WarmMemo())
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
        zeros, missing = reads.zeros(warm, expected, present)
        if not missing:
            outcomes[name] = WarmOutcome(0, "every expected series is real")
            continue
        if present is None:
            meta = FamilyMeta(name, warm.type, warm.help, warm.unit)
            families.append(Family(meta, tuple(zeros)))
        else:
            # By identity: list.index compares by value, field by field, every family before it.
            target = index[name]
            position = next(i for i, family in enumerate(families) if family is target)
            families[position] = Family(present.meta, (*present.samples, *zeros))
        outcomes[name] = WarmOutcome(missing, f"{missing} of {len(expected)} series warm-zero")
    return outcomes
