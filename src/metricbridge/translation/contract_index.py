"""Why a name is not served, according to the contract: structural, engine, upstream or unknown.

A dashboard that selects a contract family the bridge cannot serve is in one of three
situations: the row is ``structural`` (never emitted by contract: expected absent, not an
error), ``engine`` (needs instrumentation inside the engine; the row's note says what), or
``upstream`` (the bridge honours the row from community data, but this payload lacks what it
needs; the translation's reason says what). A rate the bridge derives from two fetches is
``pending`` in one payload (the translation marks its status ``pending``): served by the
running bridge from its second fetch, so not a failure either. A name no row knows is
``unknown``. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from metricbridge.config.schema import Disposition, FamilyRule
from metricbridge.model.family import TYPE_SUFFIXES, MetricType, sample_base
from metricbridge.model.regex import Pattern
from metricbridge.translation.rows import APPROXIMATION_SWITCH
from metricbridge.translation.translate import RowState, RowStatus

__all__ = ["ContractIndex", "MissingClass", "Verdict", "row_sources"]

# Engine rows often leave the type to the engine: any sample suffix may then be selected.
_ANY_SUFFIX = ("", "_total", "_created", "_bucket", "_sum", "_count")


class MissingClass(StrEnum):
    """How the contract explains a missing family."""

    STRUCTURAL = "structural"  # absent by contract: not a failure
    ENGINE = "engine"  # needs engine instrumentation
    UPSTREAM = "upstream"  # a translated row whose community source this payload lacks
    PENDING = "pending"  # a rate between two fetches: one payload cannot show it
    UNKNOWN = "unknown"  # not a contract row


@dataclass(frozen=True, slots=True)
class Verdict:
    """The class of a missing name, the contract row that decided it, and why."""

    cls: MissingClass
    row: str | None = None
    detail: str | None = None


_UNKNOWN = Verdict(MissingClass.UNKNOWN)


class ContractIndex:
    """Contract rows by every sample name a query could use for them."""

    def __init__(self, rows: Iterable[FamilyRule], states: Mapping[str, RowStatus]) -> None:
        """Index ``rows``; ``states`` is the translation's status of each row."""
        self.states = dict(states)
        self.rows: dict[str, FamilyRule] = {}
        self.by_sample: dict[str, FamilyRule] = {}
        for rule in rows:
            self.rows.setdefault(rule.name, rule)
            for name in _sample_names(rule):
                self.by_sample.setdefault(name, rule)

    def classify(self, name: str) -> Verdict:
        """The verdict for a selected sample name that is not served."""
        rule = self.by_sample.get(name)
        return _UNKNOWN if rule is None else self._verdict(rule)

    def classify_pattern(self, pattern: Pattern) -> Verdict:
        """The verdict for a name regex that matches nothing served.

        Structural only if every row it matches is structural; engine if any is engine.
        """
        rules = {r.name: r for n, r in self.by_sample.items() if pattern.fullmatch(n)}
        verdicts = [self._verdict(rule) for rule in rules.values()]
        if not verdicts:
            return _UNKNOWN
        for cls in (MissingClass.ENGINE, MissingClass.UPSTREAM, MissingClass.UNKNOWN):
            if found := next((v for v in verdicts if v.cls is cls), None):
                return found
        return verdicts[0]

    def sources(self, row: str) -> tuple[str, ...] | None:
        """The upstream families contract row ``row`` is served from (see ``row_sources``)."""
        rule = self.rows.get(row)
        return None if rule is None else row_sources(rule)

    def missing_classes(self) -> Counter[MissingClass]:
        """The rows the translation left missing, by how the contract explains each.

        A row with no status (no upstream data at all) is classed by its disposition alone, as
        ``contract_report`` counts it missing.
        """
        counts: Counter[MissingClass] = Counter()
        for name, rule in self.rows.items():
            status = self.states.get(name)
            if status is None or status.state is RowState.MISSING:
                counts[self._verdict(rule).cls] += 1
        return counts

    def _verdict(self, rule: FamilyRule) -> Verdict:
        status = self.states.get(rule.name)
        if rule.disposition is Disposition.STRUCTURAL:
            return Verdict(MissingClass.STRUCTURAL, rule.name, rule.note or "never emitted")
        if rule.disposition is Disposition.ENGINE or (status is not None and status.engine):
            note = rule.note or "no note in the contract"
            if rule.disposition is Disposition.APPROXIMATE:
                # Engine until a profile switches the stand-in on: say which, or a dashboard
                # built for the profile reads as broken for want of instrumentation alone.
                note = f"{APPROXIMATION_SWITCH} ({note})"
            return Verdict(MissingClass.ENGINE, rule.name, note)
        if status is not None and status.state is RowState.STRUCTURAL:
            return Verdict(MissingClass.STRUCTURAL, rule.name, status.reason)
        if status is not None and status.pending:
            return Verdict(MissingClass.PENDING, rule.name, status.reason)
        reason = status.reason if status is not None else f"{rule.disposition} row"
        return Verdict(MissingClass.UPSTREAM, rule.name, reason)


# Rows the engine alone serves, or nothing does: no community family to wait for.
_NO_SOURCE = frozenset({Disposition.ENGINE, Disposition.STRUCTURAL, Disposition.DROP})


def row_sources(rule: FamilyRule) -> tuple[str, ...] | None:
    """The upstream families a row is served from, when it is served from families alone.

    An alias, scale, select or relabel reads its source (a native row, its own name); a derived
    row its operands and the family it takes labels from. A warm-zero row is served as soon as
    the family it inherits labels from is there, so that family alone. None for a row no
    community family serves (engine, structural, drop) or one that also reads /server_info:
    what it waits for is then not only a family.
    """
    if rule.disposition in _NO_SOURCE:
        return None
    if rule.warm_zero is not None and rule.warm_zero.labels_from is not None:
        return (rule.warm_zero.labels_from,)
    if rule.derive is None:
        return (rule.input_name,)
    names: list[str] = []
    for operand in (rule.derive.numerator, rule.derive.denominator):
        if operand is None:
            continue
        if operand.family is None:
            return None
        names.append(operand.family)
    if rule.derive.labels_from is not None:
        names.append(rule.derive.labels_from)
    return tuple(dict.fromkeys(names)) or None


def _sample_names(rule: FamilyRule) -> list[str]:
    """The family name and every sample name its type allows."""
    suffixes = _ANY_SUFFIX if rule.type is MetricType.UNKNOWN else TYPE_SUFFIXES[rule.type]
    base = sample_base(rule.name, rule.type)
    if rule.type is MetricType.UNKNOWN and rule.name.endswith("_total"):
        base = rule.name[: -len("_total")]
    return [rule.name, *(base + suffix for suffix in suffixes)]
