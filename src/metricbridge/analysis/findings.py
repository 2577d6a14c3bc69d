"""What ``metricbridge check`` reports: findings per query, and the report of a whole run."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from metricbridge.analysis.dashboards import InputProblem
from metricbridge.analysis.engine_notes import EngineClass, EngineNote
from metricbridge.translation.contract_index import MissingClass

__all__ = ["CheckReport", "Finding", "FindingKind", "NotFailing"]


class FindingKind(StrEnum):
    """What a query needs that the served payload lacks."""

    MISSING_FAMILY = "missing family"  # no served family has samples by that name
    WRONG_SUFFIX = "wrong suffix"  # the family is served, but its type has no such sample
    NO_MATCHING_NAME = "no matching name"  # a __name__ regex or variable name matches nothing
    MISSING_LABEL = "missing label"  # a label a matcher, grouping or legend reads is absent
    NO_MATCHING_VALUE = "no matching value"  # an = or =~ matcher matches no served value
    NO_MATCHING_SERIES = "no matching series"  # each matcher matches, all together match nothing


class NotFailing(StrEnum):
    """Why a finding is reported without failing the check (the values are the report's keys)."""

    STRUCTURAL = "structural"  # a structural row: absent by contract
    PENDING = "pending"  # a rate between two fetches: one payload cannot show it
    EXCUSED = "excused"  # one side of an `or` whose other side is served
    LAZY = "lazy"  # the engine release creates the family on an event the payload predates
    FEATURE = "feature"  # the engine release serves the family only with a feature switch


_NOT_FAILING = frozenset({MissingClass.STRUCTURAL, MissingClass.PENDING})
_ENGINE_NOT_FAILING = {EngineClass.LAZY: NotFailing.LAZY, EngineClass.FEATURE: NotFailing.FEATURE}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem of one query: where it is, what it is about, and why.

    ``expr`` is the query as written (variables not substituted); ``subject`` is the metric
    name, label name or matcher concerned; ``contract`` classifies a missing family by the
    contract (None for label and value findings); ``engine`` is what the engine release says
    about it (lazy, behind a feature switch, removed...; None when the release says nothing);
    ``hint`` suggests a served alternative, such as the other spelling of the ``sglang`` prefix.
    """

    file: str
    location: str
    line: int | None
    expr: str
    kind: FindingKind
    subject: str
    reason: str
    contract: MissingClass | None = None
    hint: str | None = None
    excused: bool = False  # one side of an `or` whose other side is served
    engine: EngineNote | None = None

    @property
    def failing(self) -> bool:
        """Whether the finding fails the check.

        All do but structurally absent families, rates that one payload cannot show (the
        running bridge serves them from its second fetch), excused ones, and families the
        engine release creates later or only behind a feature switch.
        """
        if self.excused or self.contract in _NOT_FAILING:
            return False
        return self.engine is None or self.engine.failing

    @property
    def why_not_failing(self) -> NotFailing | None:
        """For a finding that does not fail, why: structural, pending, excused, lazy, feature."""
        if self.failing:
            return None
        if self.excused:
            return NotFailing.EXCUSED
        if self.contract is MissingClass.PENDING:
            return NotFailing.PENDING
        if self.engine is not None and not self.engine.failing:
            return _ENGINE_NOT_FAILING[self.engine.cls]
        return NotFailing.STRUCTURAL

    @property
    def shown_class(self) -> str | None:
        """The class a report shows: the engine release's when it has one, else the contract's."""
        if self.engine is not None:
            return self.engine.cls.value
        return None if self.contract is None else self.contract.value

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Identity across two payloads (the reason's details may differ): for ``diff``."""
        return (self.file, self.location, self.expr, self.kind.value, self.subject)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Everything one check found: ``not_checked`` lists what could not be verified."""

    files: tuple[str, ...]
    queries: int
    findings: tuple[Finding, ...]
    not_checked: tuple[InputProblem, ...]

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings that fail the check."""
        return tuple(f for f in self.findings if f.failing)
