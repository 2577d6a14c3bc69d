"""What going from one engine release to another changes, from the release catalogues alone.

No engine and no snapshot is needed: the families added, removed, re-typed, relabelled and
re-documented, and the likely renames, are ``engines.diff_catalogues``'. Given dashboards and
rule files, a query breaks when one of its selectors reads a family the old release defines
and the new one lacks, defines with another type (the selected sample is gone), or defines
without a label the query reads (a matcher, a ``by``/``on`` grouping). A query of a contract
row breaks when the row reads such a family. For each break, the contract's rules say whether
the bridge keeps it working (a rule that serves the old name from the new release's families)
or which row serves the data under another name. Pure: catalogues, analysed queries and the
contract's rules in, an ``EngineDiff`` out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from metricbridge.analysis.dashboards import InputProblem, LoadResult, Query
from metricbridge.analysis.promql import LabelUseKind, Selector
from metricbridge.analysis.series_match import matches_empty
from metricbridge.config.schema import Disposition, FamilyRule
from metricbridge.engines import Catalogue, CatalogueDiff, EngineFamily, diff_catalogues
from metricbridge.translation.contract_index import ContractIndex

__all__ = ["BreakKind", "Bridge", "EngineDiff", "QueryBreak", "diff_engines"]

# Rows no community family serves: no rule of theirs bridges anything.
_NO_SOURCE = frozenset({Disposition.ENGINE, Disposition.STRUCTURAL, Disposition.DROP})
# Dropping or ignoring a label a series lacks changes nothing (as in check).
_REMOVING = frozenset({LabelUseKind.WITHOUT, LabelUseKind.IGNORING})


class BreakKind(StrEnum):
    """Why a query stops working with the new release."""

    REMOVED = "removed"  # the family is gone
    RENAMED = "renamed"  # the family is gone, and the catalogues show its new name
    RETYPED = "retyped"  # the family has another type: the selected sample is gone
    RELABELLED = "relabelled"  # the family lost a label the query reads
    ROW_SOURCE = "row source removed"  # a contract row the query reads loses its source


@dataclass(frozen=True, slots=True)
class Bridge:
    """A contract rule (``config/aliases.yaml`` unless ``-c``) serving ``rule`` from ``reads``."""

    rule: str
    disposition: str
    reads: tuple[str, ...]

    def __str__(self) -> str:
        """``sglang:x (alias of sglang:y)``."""
        return f"{self.rule} ({self.disposition} of {', '.join(self.reads)})"


@dataclass(frozen=True, slots=True)
class QueryBreak:
    """One selector of one query that the new release breaks.

    ``subject`` is the sample name selected, ``family`` the old release's family it reads.
    ``bridge``: a rule that serves the old name from the new release's families, so the query
    keeps working through the bridge (not failing). Else ``alternative``: a row serving the
    data under another name. ``excused``: one side of an `or` whose other side still reads a
    family of the new release (not failing either).
    """

    file: str
    location: str
    line: int | None
    expr: str
    kind: BreakKind
    subject: str
    family: str
    reason: str
    bridge: Bridge | None = None
    alternative: Bridge | None = None
    excused: bool = False

    @property
    def failing(self) -> bool:
        """Whether the query stops working: not when bridged or excused."""
        return self.bridge is None and not self.excused


@dataclass(frozen=True, slots=True)
class EngineDiff:
    """The catalogue differences and, for the given files, the queries that break."""

    changes: CatalogueDiff
    engine: str = "sglang"
    files: tuple[str, ...] = ()
    queries: int = 0
    breaks: tuple[QueryBreak, ...] = ()
    not_checked: tuple[InputProblem, ...] = ()

    @property
    def failing(self) -> tuple[QueryBreak, ...]:
        """The breaks that fail the diff."""
        return tuple(b for b in self.breaks if b.failing)

    @property
    def breaking(self) -> bool:
        """Whether a query of a given file stops working."""
        return bool(self.failing)


def diff_engines(
    old: Catalogue,
    new: Catalogue,
    files: Sequence[tuple[str, LoadResult]] = (),
    rules: Iterable[FamilyRule] = (),
    assumed_labels: Iterable[str] = ("instance", "job"),
) -> EngineDiff:
    """Compare two releases; with ``files``, find the queries that break and their bridges."""
    changes = diff_catalogues(old, new)
    judge = _Judge(old, new, changes, tuple(rules), frozenset(assumed_labels) | {"__name__"})
    breaks = [b for _, load in files for query in load.queries for b in judge.query(query)]
    return EngineDiff(
        changes=changes,
        engine=old.engine,
        files=tuple(file for file, _ in files),
        queries=sum(len(load.queries) for _, load in files),
        breaks=tuple(breaks),
        not_checked=tuple(problem for _, load in files for problem in load.problems),
    )


def rule_reads(rule: FamilyRule) -> tuple[str, ...]:
    """The families a rule reads: its source (or own name), derive operands, label donors."""
    if rule.disposition in _NO_SOURCE:
        return ()
    names: list[str] = []
    if rule.derive is None:
        names.append(rule.input_name)
    else:
        operands = (rule.derive.numerator, rule.derive.denominator)
        names += [o.family for o in operands if o is not None and o.family is not None]
        if rule.derive.labels_from is not None:
            names.append(rule.derive.labels_from)
    if rule.warm_zero is not None and rule.warm_zero.labels_from is not None:
        names.append(rule.warm_zero.labels_from)
    return tuple(dict.fromkeys(names))


class _Judge:
    """The breaks of each query between two releases."""

    def __init__(
        self,
        old: Catalogue,
        new: Catalogue,
        changes: CatalogueDiff,
        rules: tuple[FamilyRule, ...],
        assumed: frozenset[str],
    ) -> None:
        self.old, self.new, self.assumed = old, new, assumed
        self.rules = rules
        self.contract = ContractIndex(rules, {})
        self.renames: Mapping[str, str] = {r.old: r.new for r in changes.renames}
        self.release = f"{_engine(new)} {new.version}"

    def query(self, query: Query) -> list[QueryBreak]:
        found: dict[Selector, list[QueryBreak]] = {}
        for selector in query.usage.selectors:
            if selector not in found:
                found[selector] = self._selector(query, selector)
        excused = self._excused(query, found)
        seen: dict[tuple[str, str], QueryBreak] = {}
        for selector, breaks in found.items():
            for item in breaks:
                if selector in excused:
                    item = _excuse(item)  # noqa: PLW2901 - the excused copy replaces it
                seen.setdefault((item.kind.value, item.subject), item)
        return list(seen.values())

    def _excused(self, query: Query, found: Mapping[Selector, list[QueryBreak]]) -> set[Selector]:
        """Selectors on one side of an `or` whose other side reads what the new release has."""
        excused: set[Selector] = set()
        for left, right in query.usage.fallbacks:
            for side, other in ((left, right), (right, left)):
                if other and all(not found.get(s) and self._reads_new(s) for s in other):
                    excused.update(s for s in side if s not in other)
        return excused

    def _reads_new(self, selector: Selector) -> bool:
        name = selector.metric
        if name is None or selector.metric_is_variable:
            return False
        return self.new.find(name) is not None or name in self.contract.by_sample

    def _selector(self, query: Query, selector: Selector) -> list[QueryBreak]:
        name = selector.metric
        if name is None or selector.metric_is_variable:
            return []
        family = self.old.find(name)
        if family is not None:
            return self._family(query, selector, name, family)
        rule = self.contract.by_sample.get(name)
        return [] if rule is None else self._row(query, name, rule)

    def _family(
        self, query: Query, selector: Selector, name: str, family: EngineFamily
    ) -> list[QueryBreak]:
        after = self.new.get(family.name)
        if after is None:
            renamed = self.renames.get(family.name)
            if renamed is None:
                kind, reason = BreakKind.REMOVED, f"{self.release} no longer defines {family.name}"
            else:
                kind = BreakKind.RENAMED
                reason = f"{self.release} renamed {family.name} to {renamed}"
            return [self._break(query, kind, name, family, reason, successor=renamed)]
        if family.type != after.type and name not in after.sample_names:
            reason = (
                f"{family.name} is a {after.type} in {self.release}, a {family.type} before: "
                f"it has no {name} (it has {', '.join(after.sample_names)})"
            )
            return [
                self._break(query, BreakKind.RETYPED, name, family, reason, successor=family.name)
            ]
        lost = set(family.all_label_names) - set(after.all_label_names)
        read = sorted(lost & self._labels_read(query, selector))
        if not read:
            return []
        labels = ", ".join(read)
        reason = f"{self.release} defines {family.name} without {labels}, which the query reads"
        return [self._break(query, BreakKind.RELABELLED, name, family, reason)]

    def _labels_read(self, query: Query, selector: Selector) -> set[str]:
        """Labels the query needs on ``selector``'s series (an absent one matching "" aside)."""
        labels = {
            m.name
            for m in selector.matchers
            if m.name not in self.assumed and (m.is_variable or not matches_empty(m))
        }
        for use in query.usage.label_uses:
            if use.kind not in _REMOVING and selector in use.selectors:
                labels.update(label for label in use.labels if label not in self.assumed)
        return labels

    def _row(self, query: Query, name: str, rule: FamilyRule) -> list[QueryBreak]:
        """A contract row breaks when it reads a family the old release has and the new lacks."""
        for source in rule_reads(rule):
            family = self.old.find(source)
            if family is None or self.new.get(family.name) is not None:
                continue
            renamed = self.renames.get(family.name)
            reason = (
                f"contract row {rule.name} ({rule.disposition}) reads {family.name}, which "
                f"{self.release} no longer defines"
            )
            if renamed is not None:
                reason += f" (renamed to {renamed})"
            item = QueryBreak(
                query.file,
                query.location,
                query.line,
                query.raw,
                BreakKind.ROW_SOURCE,
                name,
                family.name,
                reason,
                alternative=self._alternative(renamed, rule.name),
            )
            return [item]
        return []

    def _break(  # noqa: PLR0913 - the parts of a break, each from the caller's case
        self,
        query: Query,
        kind: BreakKind,
        name: str,
        family: EngineFamily,
        reason: str,
        *,
        successor: str | None = None,
    ) -> QueryBreak:
        bridge = self._bridge(name, family)
        alternative = None if bridge is not None else self._alternative(successor, name)
        return QueryBreak(
            query.file,
            query.location,
            query.line,
            query.raw,
            kind,
            name,
            family.name,
            reason,
            bridge=bridge,
            alternative=alternative,
        )

    def _bridge(self, name: str, family: EngineFamily) -> Bridge | None:
        """A rule serving ``name`` under that name from families the new release defines."""
        rule = self.contract.by_sample.get(name)
        if rule is None:
            return None
        reads = rule_reads(rule)
        if not reads or family.name in reads or name in reads:
            return None
        if any(self.new.find(source) is None for source in reads):
            return None
        return Bridge(rule.name, rule.disposition.value, reads)

    def _alternative(self, successor: str | None, name: str) -> Bridge | None:
        """A row that serves ``successor`` (the family's new name, or itself) as another name."""
        if successor is None:
            return None
        family = self.new.find(successor)
        if family is None:
            return None
        wanted = {family.name, *family.sample_names}
        for rule in self.rules:
            reads = rule_reads(rule)
            if rule.name != name and wanted & set(reads) and rule.name not in wanted:
                return Bridge(rule.name, rule.disposition.value, reads)
        return None


def _excuse(item: QueryBreak) -> QueryBreak:
    reason = f"{item.reason} (not failing: the other side of an `or` reads a family it defines)"
    return dataclasses.replace(item, reason=reason, excused=True)


def _engine(catalogue: Catalogue) -> str:
    return "SGLang" if catalogue.engine == "sglang" else catalogue.engine
