"""What a derivation reads: an operand's series, its label filter and grouping, memoised.

An operand (``FamilySeries``) names a family, optionally one sample of it (a histogram's
``_sum``), and labels it must or must not have; its series come back without the matched
labels. A formula groups series by ``by`` labels. Both read a sample's labels alone, and an
engine sends the same label tuples scrape after scrape, so a scrape plan keeps what they made
of each tuple (``DeriveMemo``), bounded by the series it serves. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from metricbridge.model.family import AnyFamily, Family, Labels, sample_base
from metricbridge.translation.compiled import FamilySeries
from metricbridge.translation.series import parsed_or_none, value_samples

__all__ = ["DeriveMemo", "Parse", "Values", "grouper", "selected"]

# How a derivation reads a family: parsed, or None if absent or unreadable (translate passes
# its run's, which shares the parses of the translation and the caller's caches).
Parse = Callable[[AnyFamily | None], Family | None]
Values = list[tuple[Labels, float]]  # (labels, value) of each derived series


@dataclass(slots=True)
class DeriveMemo:
    """What the label filters made of each label set, kept by a scrape plan for the next payload.

    An operand's filter (its matched and excluded labels) and a formula's grouping read a
    sample's labels alone, and an engine sends the same label tuples scrape after scrape: the
    answer is looked up by the tuple instead of sorted again. Each table is emptied when it
    outgrows the series it serves (labels that change every scrape), so it stays bounded.
    """

    rests: dict[FamilySeries, dict[Labels, Labels | None]] = field(default_factory=dict)
    # Per (series key, by): one table per counter read, so that its bound is that counter's.
    groups: dict[tuple[str, frozenset[str]], dict[Labels, Labels]] = field(default_factory=dict)
    dirty: bool = False  # an entry was added since the owner last sized the memo

    def rest_table(self, operand: FamilySeries, series: int) -> dict[Labels, Labels | None]:
        """The operand's table: label set -> labels without the matched ones, None if filtered."""
        table = self.rests.setdefault(operand, {})
        if len(table) > _bound(series):
            table.clear()
        return table

    def group_table(self, name: str, by: frozenset[str], series: int) -> dict[Labels, Labels]:
        """The grouping of series ``name``'s table: label set -> its ``by`` labels, sorted."""
        table = self.groups.setdefault((name, by), {})
        if len(table) > _bound(series):
            table.clear()
        return table

    def label_set_count(self) -> int:
        """How many label tuples the memo refers to (keys and answers)."""
        rests = sum(len(table) for table in self.rests.values())
        return 2 * (rests + sum(len(table) for table in self.groups.values()))


def _bound(series: int) -> int:
    """Entries a table may hold for this many series: more means labels that change each scrape."""
    return 2 * series + 64


_UNSEEN = object()  # a label set not in a memo table yet (None is an answer there)


def _rest(labels: Labels, operand: FamilySeries) -> Labels | None:
    if operand.pairs.issubset(labels) and operand.excluded.isdisjoint(labels):
        matched = operand.labels
        return tuple(sorted(p for p in labels if p[0] not in matched))
    return None


def selected(
    operand: FamilySeries,
    families: Mapping[str, AnyFamily],
    parse: Parse = parsed_or_none,
    memo: DeriveMemo | None = None,
) -> Values | None:
    """(labels without the matched ones, value) of the operand's series; None if absent."""
    family = parse(families.get(operand.family))
    if family is None:
        return None
    if operand.sample is None:
        samples = value_samples(family)
    else:  # a histogram's or summary's _sum or _count
        name = f"{sample_base(family.name, family.meta.type)}_{operand.sample}"
        samples = [s for s in family.samples if s.name == name]
    out = []
    if memo is None:
        for sample in samples:
            rest = _rest(sample.labels, operand)
            if rest is not None:
                out.append((rest, sample.value))
        return out
    table = memo.rest_table(operand, len(samples))
    for sample in samples:
        labels = sample.labels
        held = table.get(labels, _UNSEEN)
        if held is _UNSEEN:
            held = table[labels] = _rest(labels, operand)
            memo.dirty = True
        if held is not None:
            out.append((held, sample.value))  # type: ignore[arg-type]
    return out


def _group(labels: Labels, by: frozenset[str]) -> Labels:
    return tuple(sorted(p for p in labels if p[0] in by))


def grouper(
    name: str, by: frozenset[str], memo: DeriveMemo | None, series: int
) -> Callable[[Labels], Labels]:
    """``_group`` for one ``by`` over series ``name``, looked up in the memo when there is one."""
    if memo is None:
        return lambda labels: _group(labels, by)
    table = memo.group_table(name, by, series)

    def group(labels: Labels) -> Labels:
        held = table.get(labels)
        if held is None:
            held = table[labels] = _group(labels, by)
            memo.dirty = True
        return held

    return group
