"""What a fetch wave came to, counted and logged: the bridge's bookkeeping on the event loop.

Self-metrics for each upstream and the translation, and logs that record changes, not every
fetch: an upstream's failure when it starts or changes reason, a dropped family when it first
appears (then at debug while it repeats).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from metricbridge.errors import ExpositionError, UpstreamError
from metricbridge.exposition.reader import Exposition
from metricbridge.model.family import Format
from metricbridge.model.names import shortened
from metricbridge.service.scrape import Upstream
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.snapshot import Attempt, UpstreamResult
from metricbridge.service.translation_job import Read
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.pipeline import MergeDrop
from metricbridge.translation.translate import RowState, Translation

log = logging.getLogger("metricbridge.bridge")
_PROBLEMS_REMEMBERED = 1000  # dropped families logged (and remembered) per upstream and fetch


class Accounting:
    """Counts and logs each fetch's outcome; remembers what it logged, to log changes only."""

    def __init__(self, metrics: SelfMetrics, family_sample_limit: int) -> None:
        self.metrics = metrics
        self.family_sample_limit = family_sample_limit
        self._status: dict[str, str] = {}  # upstream label -> failure reason, "" when up
        # Per upstream (and "translation"), the problems the previous fetch logged (``_mark``):
        # a family dropped for one reason is logged at warning when it first appears, then at
        # debug.
        self._problems_seen: dict[str, frozenset[tuple[str, str]]] = {}
        # Per upstream, the families the family sample limit dropped from its previous payload.
        self._over_limit: dict[str, frozenset[str]] = {}

    def record(self, attempt: Attempt, read: Read) -> tuple[UpstreamResult, Exposition]:
        """Account for what one upstream's fetch and read came to."""
        upstream, metrics = attempt.upstream, self.metrics
        if read.largest is not None:
            metrics.largest_family.labels(upstream.label).set(read.largest)
            self._over_the_limit(upstream.label, read.over_limit)
        exc = read.failure
        if exc is not None or read.exposition is None:
            exc = exc or UpstreamError("malformed", "nothing read")
            reason = exc.reason if isinstance(exc, UpstreamError) else "malformed"
            metrics.upstream_duration.labels(upstream.label, "failed").observe(attempt.duration)
            metrics.upstream_failures.labels(upstream.label, reason).inc()
            metrics.upstream_up.labels(upstream.label).set(0)
            self._note_state(upstream, reason, f"{reason}: {exc}")
            failed = UpstreamResult(upstream, ok=False, reason=reason, message=str(exc))
            return failed, Exposition([], [], Format.TEXT)
        exposition = read.exposition
        self.log_problems(upstream.label, f"upstream {upstream.label}", exposition.problems)
        metrics.upstream_duration.labels(upstream.label, "ok").observe(attempt.duration)
        for problem in exposition.problems:
            metrics.exposition_problems.labels(problem.reason).inc()
        metrics.upstream_up.labels(upstream.label).set(1)
        metrics.upstream_bytes.labels(upstream.label).set(read.size)
        self._note_state(upstream, "", "")
        return UpstreamResult(upstream, ok=True, size=read.size), exposition

    def _over_the_limit(self, label: str, over: tuple[tuple[str, int], ...]) -> None:
        """Count what the family sample limit dropped; log a family when it starts or stops."""
        limit = self.family_sample_limit
        before = self._over_limit.get(label, frozenset())
        for family, samples in over:
            self.metrics.samples_dropped.labels("sample_limit").inc(samples)
            level = logging.DEBUG if family in before else logging.WARNING
            log.log(
                level,
                "upstream %s: dropped family %s: %d samples, over --family-sample-limit (%d)",
                label,
                family,
                samples,
                limit,
            )
        now = frozenset(family for family, _ in over)
        for family in sorted(before - now):
            log.info(
                "upstream %s: family %s is no longer over --family-sample-limit", label, family
            )
        self._over_limit[label] = now

    def log_problems(self, key: str, who: str, problems: Sequence[ExpositionError]) -> None:
        """Log each dropped family at warning when it is new, at debug while it repeats.

        Every one is counted in ``metricbridge_exposition_problems_total`` whatever its level;
        only the first ``_PROBLEMS_REMEMBERED`` are remembered, so a payload of a million bad
        families costs a bounded memory and, past that, one summary line.
        """
        kept = problems[:_PROBLEMS_REMEMBERED]
        # A family dropped for the same reason again is no news, whatever its line or value now.
        marks = [_mark(problem) for problem in kept]
        seen = self._problems_seen.get(key, frozenset())
        for problem, mark in zip(kept, marks, strict=True):
            level = logging.DEBUG if mark in seen else logging.WARNING
            log.log(level, "%s: dropped a family: %s", who, shortened(str(problem)))
        if len(problems) > _PROBLEMS_REMEMBERED:
            more = len(problems) - _PROBLEMS_REMEMBERED
            log.warning("%s: and %d more dropped families", who, more)
        self._problems_seen[key] = frozenset(marks)

    def _note_state(self, upstream: Upstream, reason: str, detail: str) -> None:
        """Log changes of an upstream's state loudly and repeats quietly; ``reason`` "" is up.

        A dead engine must not flood the log, but a new way of failing (a timeout, then HTTP
        500) is news.
        """
        previous = self._status.get(upstream.label)  # None before the first fetch
        self._status[upstream.label] = reason
        if not reason:
            if previous:
                log.info("upstream %s is back", upstream.label)
        elif reason == previous:
            log.debug("upstream %s still failing: %s", upstream.label, shortened(detail))
        elif previous:
            log.warning(
                "upstream %s fetch failed: %s (was failing with %s)",
                upstream.label,
                detail,
                previous,
            )
        else:
            log.warning("upstream %s fetch failed: %s", upstream.label, shortened(detail))

    def merge(self, drops: Sequence[MergeDrop]) -> None:
        """Count and log what the merge of the upstreams left out."""
        for drop in drops:
            self.metrics.samples_dropped.labels(drop.reason).inc(drop.samples)
            if drop.reason == "duplicate_family":
                # Another bridge's self-metrics (reserved_name) are expected and not logged.
                log.warning(
                    "family %s from %s duplicates %s's; dropped",
                    drop.family,
                    drop.source,
                    drop.kept_from,
                )

    def nothing_served(self, rules: CompiledRules) -> None:
        """No upstream could be read: nothing of the engine is served, every row is missing."""
        metrics = self.metrics
        for direction in ("in", "out"):
            metrics.families.labels(direction).set(0)
            metrics.samples.labels(direction).set(0)
        metrics.warm_zero_series.set(0)
        rows = len(rules.rows)
        for state in RowState:
            metrics.contract_rows.labels(state.value).set(rows if state is RowState.MISSING else 0)

    def translation(self, translation: Translation) -> None:
        """What the translation served, dropped and found wrong."""
        stats, metrics = translation.stats, self.metrics
        metrics.families.labels("in").set(stats.families_in)
        metrics.families.labels("out").set(stats.families_out)
        metrics.samples.labels("in").set(stats.samples_in)
        metrics.samples.labels("out").set(stats.samples_out)
        for reason, count in stats.dropped.items():
            if count:
                metrics.samples_dropped.labels(reason).inc(count)
        self.log_problems("translation", "translation", translation.problems)
        states = dict.fromkeys(RowState, 0)
        for status in translation.rows.values():
            states[status.state] += 1
        for state, count in states.items():
            metrics.contract_rows.labels(state.value).set(count)
        metrics.warm_zero_series.set(translation.warm_zero_series)


def _mark(problem: ExpositionError) -> tuple[str, str]:
    """What makes a problem news: its family and reason, or its text when it has no family."""
    if problem.family is None:
        return ("", str(problem))
    return (problem.family, problem.reason)
