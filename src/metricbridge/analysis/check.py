"""Check analysed queries against the served catalog: every selector, label and value they need.

For each query: every selector must reach served series (``resolve``); every label name a
matcher, grouping, vector match, label function or legend reads must be on the series it reads
from; every ``=``/``=~`` matcher must match a served value, and all of a selector's matchers
together some served series. Template-variable placeholders match any value. Labels the scraper
adds (``instance``, ``job``, and whatever the caller assumes) are not in the payload and count
as present. Pure: analysed queries and a catalog in, a ``CheckReport`` out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from metricbridge.analysis.catalog import Catalog
from metricbridge.analysis.dashboards import LoadResult, Query, QueryKind
from metricbridge.analysis.engine_notes import EngineNote, EngineView
from metricbridge.analysis.findings import CheckReport, Finding, FindingKind
from metricbridge.analysis.produced_labels import produced_labels
from metricbridge.analysis.promql import (
    VARIABLE_PLACEHOLDER,
    LabelMatcher,
    LabelUse,
    LabelUseKind,
    MatchOp,
    Selector,
)
from metricbridge.analysis.resolve import Miss, Resolver, Target
from metricbridge.analysis.series_match import accepts, matches_empty, series_accepts
from metricbridge.analysis.value_notes import explain_value
from metricbridge.translation.contract_index import ContractIndex, MissingClass

__all__ = ["DEFAULT_ASSUMED_LABELS", "PROMETHEUS_SERIES", "check_queries"]

# Prometheus attaches these to every scraped series; nothing else is assumed without being asked.
DEFAULT_ASSUMED_LABELS = ("instance", "job")
# Series Prometheus makes itself for every target or alert, never in a payload.
PROMETHEUS_SERIES = (
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "ALERTS",
    "ALERTS_FOR_STATE",
)
_RECORD = re.compile(r'> record "(?P<name>[^"]+)"$')
_SHOWN_VALUES = 8


def check_queries(
    files: Sequence[tuple[str, LoadResult]],
    catalog: Catalog,
    contract: ContractIndex,
    assumed_labels: Iterable[str] = DEFAULT_ASSUMED_LABELS,
    engine: EngineView | None = None,
) -> CheckReport:
    """Check every query of every file; findings keep file and document order.

    Names recorded by a recording rule in any of ``files`` count as existing (their labels are
    not checked), as do the series Prometheus makes itself (``up``, ``ALERTS`` ...). With
    ``engine``, the engine release the payload is of explains a family it lacks: one created
    later or behind a feature switch is a note, not a failure.
    """
    external = dict.fromkeys(PROMETHEUS_SERIES, "made by Prometheus")
    for file, load in files:
        for query in load.queries:
            match = _RECORD.search(query.location)
            if query.kind is QueryKind.RECORDING_RULE and match:
                external.setdefault(match["name"], f"recorded by a rule in {file}")
    resolver = Resolver(catalog, contract, external, engine)
    assumed = frozenset(assumed_labels) | {"__name__"}
    findings: list[Finding] = []
    for _, load in files:
        for query in load.queries:
            findings.extend(_QueryCheck(query, resolver, assumed).run())
    return CheckReport(
        files=tuple(file for file, _ in files),
        queries=sum(len(load.queries) for _, load in files),
        findings=tuple(findings),
        not_checked=tuple(problem for _, load in files for problem in load.problems),
    )


_Issue = tuple[FindingKind, str, str]  # kind, subject, reason


# Dropping or ignoring a label a series lacks changes nothing: dashboards written for DP and
# non-DP engines alike say `without (dp_rank)` on purpose.
_REMOVING = frozenset({LabelUseKind.WITHOUT, LabelUseKind.IGNORING})


def _excused(
    fallbacks: Iterable[tuple[tuple[Selector, ...], tuple[Selector, ...]]],
    found: Mapping[Selector, list[Finding]],
) -> set[Selector]:
    """Selectors of one side of an `or` whose other side is served cleanly: not failures.

    `new_name or old_name` bridges a rename: whichever the engine serves, the panel shows it.
    """
    excused: set[Selector] = set()
    for left, right in fallbacks:
        for side, other in ((left, right), (right, left)):
            if other and not any(found.get(selector) for selector in other):
                excused.update(s for s in side if s not in other)
    return excused


def _as_note(finding: Finding) -> Finding:
    """The finding kept for the report, not failing: the other side of an `or` is served."""
    reason = f"{finding.reason} (not failing: the other side of an `or` is served)"
    return dataclasses.replace(finding, reason=reason, excused=True)


class _QueryCheck:
    """The findings of one query, deduplicated by kind and subject."""

    def __init__(self, query: Query, resolver: Resolver, assumed: frozenset[str]) -> None:
        self.query = query
        self.resolver = resolver
        self.assumed = assumed
        self.targets: dict[Selector, Target | Miss] = {}
        self.found: dict[tuple[str, str, str, str, str], Finding] = {}
        self.notes: dict[_Issue, EngineNote] = {}  # what the release says of a value issue

    def run(self) -> list[Finding]:
        """Check selectors, then label uses, then legend labels."""
        by_selector: dict[Selector, list[Finding]] = {}
        for selector in self.query.usage.selectors:
            if selector in self.targets:
                continue
            result = self.targets[selector] = self.resolver.resolve(selector)
            found = by_selector[selector] = []
            if isinstance(result, Miss):
                cls = result.verdict.cls if result.verdict is not None else None
                issue = (result.kind, result.subject, result.reason)
                found.append(self._finding(issue, cls, result.hint, result.engine))
            elif result.opaque is None:
                issues = self._selector_issues(selector, result)
                found += [self._finding(issue, engine=self.notes.get(issue)) for issue in issues]
        excused = _excused(self.query.usage.fallbacks, by_selector)
        for selector, found in by_selector.items():
            for finding in found:
                self._add(finding if selector not in excused else _as_note(finding))
        for use in self.query.usage.label_uses:
            self._label_use(use)
        self._legend()
        return list(self.found.values())

    def _finding(
        self,
        issue: _Issue,
        contract: MissingClass | None = None,
        hint: str | None = None,
        engine: EngineNote | None = None,
    ) -> Finding:
        query, (kind, subject, reason) = self.query, issue
        return Finding(
            query.file,
            query.location,
            query.line,
            query.raw,
            kind,
            subject,
            reason,
            contract,
            hint,
            engine=engine,
        )

    def _add(self, finding: Finding) -> None:
        self.found.setdefault(finding.key, finding)

    def _selector_issues(self, selector: Selector, target: Target) -> list[_Issue]:
        """Matcher issues; with ``{a="x" or b="y"}`` one clean alternative suffices."""
        if not selector.alternatives:
            return self._matcher_issues(selector.matchers, target)
        outcomes = [
            self._matcher_issues(selector.matchers + g, target) for g in selector.alternatives
        ]
        return [] if any(not issues for issues in outcomes) else outcomes[0]

    def _matcher_issues(self, matchers: tuple[LabelMatcher, ...], target: Target) -> list[_Issue]:
        labels, regexes = target.label_names, self.resolver.regexes
        issues: list[_Issue] = []
        judged: list[LabelMatcher] = []
        for matcher in matchers:
            name = matcher.name
            if name in self.assumed or VARIABLE_PLACEHOLDER in name:
                continue
            if name not in labels:
                # A series without the label has it empty: {x=""} and {x!="a"} still match.
                if matcher.is_variable or not matches_empty(matcher):
                    have = ", ".join(sorted(labels)) or "none"
                    reason = (
                        f"{matcher} needs label {name}, absent from {target.names} (labels: {have})"
                    )
                    issues.append((FindingKind.MISSING_LABEL, name, reason))
                continue
            if matcher.is_variable:
                continue
            judged.append(matcher)
            if matcher.op in (MatchOp.EQUAL, MatchOp.RE) and not any(
                accepts(matcher, series.get(name, ""), regexes) for series in target.series()
            ):
                issues.append(self._value_issue(matcher, target))
        if (
            not issues
            and judged
            and not any(series_accepts(tuple(judged), s, regexes) for s in target.series())
        ):
            together = ", ".join(str(m) for m in judged)
            reason = (
                f"each matcher matches some series of {target.names}, but none has {{{together}}}"
            )
            issues.append((FindingKind.NO_MATCHING_SERIES, together, reason))
        return issues

    def _value_issue(self, matcher: LabelMatcher, target: Target) -> _Issue:
        """A value no served series has; a note when the release serves it behind a switch."""
        reason = self._no_value(matcher, target)
        engine = self.resolver.engine
        names = sorted({name for _, name in target.parts})
        note = None
        if engine is not None and matcher.op is MatchOp.EQUAL and len(names) == 1:
            note = explain_value(engine, names[0], matcher.name, matcher.value)
        if note is None:
            return (FindingKind.NO_MATCHING_VALUE, str(matcher), reason)
        reason = f"{reason}; {note.detail} (not failing)"
        issue = (FindingKind.NO_MATCHING_VALUE, str(matcher), reason)
        self.notes[issue] = note
        return issue

    @staticmethod
    def _no_value(matcher: LabelMatcher, target: Target) -> str:
        values = sorted({s[matcher.name] for s in target.series() if matcher.name in s})
        shown = ", ".join(f'"{v}"' for v in values[:_SHOWN_VALUES])
        if len(values) > _SHOWN_VALUES:
            shown += f" and {len(values) - _SHOWN_VALUES} more"
        return f"{matcher} matches no served series of {target.names} (served values: {shown})"

    def _label_use(self, use: LabelUse) -> None:
        if use.kind in _REMOVING:
            return
        for label in use.labels:
            if label in self.assumed:
                continue
            for selector in use.selectors:
                target = self.targets.get(selector)
                if not isinstance(target, Target) or target.opaque is not None:
                    continue
                if label not in target.label_names:
                    reason = f"{use.kind} ({label}) reads label {label}, absent from {target.names}"
                    self._add(self._finding((FindingKind.MISSING_LABEL, label, reason)))

    def _legend(self) -> None:
        """Legend, annotation and alert templates read labels of the query's result."""
        wanted = [label for label in self.query.legend_labels if label not in self.assumed]
        targets = [t for t in self.targets.values() if isinstance(t, Target)]
        if not wanted or not targets or any(t.opaque is not None for t in targets):
            return
        have = frozenset().union(*(t.label_names for t in targets))
        have |= produced_labels(self.query.expr)
        for label in wanted:
            if label not in have:
                names = ", ".join(sorted({t.names for t in targets}))
                reason = f"the legend or template reads {{{{{label}}}}}, absent from {names}"
                self._add(self._finding((FindingKind.MISSING_LABEL, label, reason)))
