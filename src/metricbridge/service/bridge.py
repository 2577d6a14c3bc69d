"""The running bridge: fetch every upstream once per scrape wave, translate once, share the result.

Concurrent scrapes join the fetch already in flight (single flight), and a finished fetch is
reused for ``cache_ttl`` seconds, so fifty scrapers cost one upstream request. Nothing older
than the latest completed fetch is ever served; when every upstream fails, the engine part of
the response is empty and ``metricbridge_upstream_up`` says why. Each caller waits at most its
own timeout: one whose time runs out while the shared fetch goes on gets no engine data.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import aiohttp

from metricbridge.errors import ExpositionError, UpstreamError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition
from metricbridge.model.family import Format
from metricbridge.service.scrape import Fetched, Upstream, fetch
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.snapshot import Attempt, FetchSettings, Snapshot, UpstreamResult
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.pipeline import MergeDrop, read_payload, translate_upstreams
from metricbridge.translation.relabel_cache import RelabelCache
from metricbridge.translation.translate import RowState, SynthState, Translation

log = logging.getLogger("metricbridge.bridge")
# Below this much time left, a request takes the cut-short fetch it joined instead of another.
_WORTH_RETRYING = 0.05
_PROBLEMS_REMEMBERED = 1000  # dropped families logged (and remembered) per upstream and fetch


class Bridge:
    """Holds the rules, the upstreams and the latest snapshot; no HTTP serving here."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        rules: CompiledRules,
        session: aiohttp.ClientSession,
        metrics: SelfMetrics,
        settings: FetchSettings,
    ) -> None:
        self.upstreams = tuple(upstreams)
        self.rules = rules
        self.session = session
        self.metrics = metrics
        self.settings = settings
        self._latest: Snapshot | None = None
        self._inflight: asyncio.Task[Snapshot] | None = None
        self._inflight_since = self._inflight_timeout = 0.0
        self._fetches = 0  # numbers the fetches, so one left behind is warned about once
        self._warned_fetch = 0
        self._status: dict[str, str] = {}  # upstream label -> failure reason, "" when up
        # Per upstream (and "translation"), the problems the previous fetch logged: the same
        # dropped family is logged at warning when it first appears, then at debug.
        self._problems_seen: dict[str, frozenset[str]] = {}
        self.state = SynthState()  # rates and idleness carried from fetch to fetch
        self.server_info: dict[str, object] | None = None  # kept fresh by a background poller
        # What reading and writing remember from one fetch to the next; used on the event loop
        # only (a name[] response, written in a thread, goes without).
        self.caches = CodecCaches()
        self.relabel_cache = RelabelCache()  # what relabel steps made of each label set
        metrics.track_caches((*self.caches, self.relabel_cache.lru))

    def replace_rules(self, rules: CompiledRules) -> None:
        """Swap the rules; the next scrape fetches afresh so it is translated with them.

        The caches start empty too: what they hold was read, parsed and written for the old
        rules (their HELP texts, the families they parse).
        """
        self.rules = rules
        self._latest = None
        self.state = SynthState()
        self.caches.reset()
        self.relabel_cache.reset()

    async def snapshot(self, timeout: float) -> Snapshot:
        """The latest snapshot if fresh, else the one being fetched, else a new fetch.

        The caller waits at most ``timeout`` seconds. A new fetch is bounded by it, but a fetch
        in flight may have been started with a longer one (the heartbeat, /contract, a scraper
        with a longer timeout): a caller whose time runs out first gets a snapshot with no
        engine data, and the fetch goes on for the others. Nor does a shorter deadline speak
        for a longer one: a fetch that timed out at its starter's deadline is neither cached
        nor taken by a caller with time to spare, who fetches again.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            latest = self._latest
            if latest is not None and loop.time() - latest.finished_at <= self.settings.cache_ttl:
                self.metrics.coalesced.inc("cached")
                return latest
            inflight = self._inflight
            if inflight is None:
                return await self._start(deadline - loop.time())
            self.metrics.coalesced.inc("joined")
            # asyncio.wait, unlike wait_for, never cancels what it waits for: others share it.
            done, _ = await asyncio.wait((inflight,), timeout=deadline - loop.time())
            if not done:
                return self._left_behind(timeout)
            if inflight.cancelled():
                return self._stopped()
            snapshot = inflight.result()
            # A fetch cut short by a shorter deadline than ours (a scraper with a tiny
            # X-Prometheus-Scrape-Timeout-Seconds) says nothing of what we can get: try again
            # with the time we have left. It was not cached, so this starts a fetch or joins one.
            if not snapshot.cut_short or deadline - loop.time() < _WORTH_RETRYING:
                return snapshot

    async def _start(self, timeout: float) -> Snapshot:
        """Start a fetch bounded by ``timeout`` and wait for it."""
        loop = asyncio.get_running_loop()
        # The stale snapshot will never be served again; let its renders go before the new
        # payload arrives, so a 10 MB engine is not held twice.
        self._latest = None
        inflight = self._inflight = loop.create_task(self._collect(timeout))
        inflight.add_done_callback(self._clear_inflight)
        self._fetches += 1
        self._inflight_since, self._inflight_timeout = loop.time(), timeout
        # asyncio.wait, not a plain await: a scraper that disconnects (its handler cancelled)
        # must not cancel the fetch others have joined.
        await asyncio.wait((inflight,))
        return self._stopped() if inflight.cancelled() else inflight.result()

    def stop(self) -> None:
        """Give up the fetch in flight: shutting down, its waiters are answered at once."""
        if self._inflight is not None:
            self._inflight.cancel()

    def _stopped(self) -> Snapshot:
        """For the waiters of a fetch given up at shutdown: their own metrics, no engine data."""
        message = "the bridge is shutting down; the fetch in flight was given up"
        return self._without_engine("shutting_down", message)

    def _without_engine(self, reason: str, message: str) -> Snapshot:
        """A snapshot of the bridge's own metrics only, every upstream marked ``reason``."""
        results = tuple(
            UpstreamResult(upstream, ok=False, reason=reason, message=message)
            for upstream in self.upstreams
        )
        loop = asyncio.get_running_loop()
        return Snapshot(loop.time(), results, None, self.settings.gzip_level, self.rules)

    def _left_behind(self, timeout: float) -> Snapshot:
        """For a caller whose time ran out before the fetch in flight: no engine data.

        The previous snapshot is no answer: it was dropped as stale when this fetch began.
        """
        loop = asyncio.get_running_loop()
        self.metrics.gave_up.inc()
        self.metrics.changed()  # the response about to be rendered must count itself
        # One warning per fetch left behind; fifty scrapers giving up on it are one event.
        level = logging.DEBUG if self._warned_fetch == self._fetches else logging.WARNING
        self._warned_fetch = self._fetches
        log.log(
            level,
            "answered without engine data: the request's %.3gs wait ran out while the upstream "
            "fetch it joined was still running (%.3gs so far, its own timeout %.3gs)",
            timeout,
            loop.time() - self._inflight_since,
            self._inflight_timeout,
        )
        message = f"the fetch in flight did not finish within this request's {timeout:.3g}s"
        return self._without_engine("gave_up", message)

    def _clear_inflight(self, task: asyncio.Task[Snapshot]) -> None:
        self._inflight = None
        if not task.cancelled() and task.exception() is None:
            snapshot = task.result()
            # A reload can run between the fetch's last step and this callback; a snapshot of
            # the old rules must not be reused for cache_ttl after the reload said it was done.
            # A fetch cut short by its starter's deadline is not reused either: a request
            # that can wait longer must get a fetch of its own, not that timeout.
            if snapshot.rules is self.rules and not snapshot.cut_short:
                self._latest = snapshot

    async def _collect(self, timeout: float) -> Snapshot:
        try:
            return await self._fetch_and_translate(timeout)
        finally:
            # Every self-metric a fetch touches is now final: the next response renders them
            # afresh (see SelfMetrics), whatever the fetch came to.
            self.metrics.changed()

    async def _fetch_and_translate(self, timeout: float) -> Snapshot:
        attempts = await asyncio.gather(*(self._fetch_one(u, timeout) for u in self.upstreams))
        # Nothing below awaits, so no reload can interleave: the rules read now are the ones in
        # force when the snapshot is published, and a reload while the engine was being fetched
        # applies to this fetch instead of being overtaken by it.
        rules = self.rules
        outcomes = [self._read(attempt, rules) for attempt in attempts]
        results = tuple(result for result, _ in outcomes)
        translation = None
        loop = asyncio.get_running_loop()
        if any(result.ok for result in results):
            started = time.perf_counter()
            parts = [
                (upstream.label, exposition)
                for upstream, (result, exposition) in zip(self.upstreams, outcomes, strict=True)
                if result.ok
            ]
            outcome = translate_upstreams(
                parts,
                rules,
                self.state,
                now=loop.time(),
                server_info=self.server_info,
                caches=self.caches,
                relabel_cache=self.relabel_cache,
            )
            translation = outcome.translation
            self.state = translation.state
            self.metrics.translation_duration.observe(time.perf_counter() - started)
            self._account_merge(outcome.merge_drops)
            self._account(translation)
        else:
            # Nothing observed: idleness must be re-established, and no rate may span a gap in
            # which the engine could have restarted unseen. Nothing of the engine is served.
            self.state = SynthState()
            self._account_nothing_served(rules)
        self.metrics.idle_state(
            self.state.idle, translation.zeroed if translation else (), loop.time()
        )
        cut_short = timeout < self.settings.timeout_cap and any(
            result.reason == "timeout" for result in results
        )
        return Snapshot(
            loop.time(),
            results,
            translation,
            self.settings.gzip_level,
            rules,
            cut_short,
            self.caches,
        )

    def age(self) -> float | None:
        """Seconds since the latest fetch finished, or None before the first."""
        if self._latest is None:
            return None
        return asyncio.get_running_loop().time() - self._latest.finished_at

    async def _fetch_one(self, upstream: Upstream, timeout: float) -> Attempt:
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome: Fetched | UpstreamError
        try:
            outcome = await fetch(
                self.session, upstream, timeout=timeout, max_bytes=self.settings.max_bytes
            )
        except UpstreamError as exc:
            outcome = exc
        return Attempt(upstream, outcome, loop.time() - started)

    def _read(self, attempt: Attempt, rules: CompiledRules) -> tuple[UpstreamResult, Exposition]:
        """Read one fetched body and record what the attempt came to."""
        upstream, metrics = attempt.upstream, self.metrics
        try:
            exposition, size = _parse(attempt.outcome, rules, self.caches)
        except (UpstreamError, ExpositionError) as exc:
            reason = exc.reason if isinstance(exc, UpstreamError) else "malformed"
            metrics.upstream_duration.labels(upstream.label, "failed").observe(attempt.duration)
            metrics.upstream_failures.labels(upstream.label, reason).inc()
            metrics.upstream_up.labels(upstream.label).set(0)
            self._note_state(upstream, reason, f"{reason}: {exc}")
            failed = UpstreamResult(upstream, ok=False, reason=reason, message=str(exc))
            return failed, Exposition([], [], Format.TEXT)
        self._log_problems(upstream.label, f"upstream {upstream.label}", exposition.problems)
        metrics.upstream_duration.labels(upstream.label, "ok").observe(attempt.duration)
        metrics.exposition_problems.inc(len(exposition.problems))
        metrics.upstream_up.labels(upstream.label).set(1)
        metrics.upstream_bytes.labels(upstream.label).set(size)
        self._note_state(upstream, "", "")
        return UpstreamResult(upstream, ok=True, size=size), exposition

    def _log_problems(self, key: str, who: str, problems: Sequence[ExpositionError]) -> None:
        """Log each dropped family at warning when it is new, at debug while it repeats.

        Every one is counted in ``metricbridge_exposition_problems_total`` whatever its level;
        only the first ``_PROBLEMS_REMEMBERED`` are remembered, so a payload of a million bad
        families costs a bounded memory and, past that, one summary line.
        """
        texts = [str(problem) for problem in problems[:_PROBLEMS_REMEMBERED]]
        seen = self._problems_seen.get(key, frozenset())
        for text in texts:
            level = logging.DEBUG if text in seen else logging.WARNING
            log.log(level, "%s: dropped a family: %s", who, text)
        if len(problems) > _PROBLEMS_REMEMBERED:
            more = len(problems) - _PROBLEMS_REMEMBERED
            log.warning("%s: and %d more dropped families", who, more)
        self._problems_seen[key] = frozenset(texts)

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
            log.debug("upstream %s still failing: %s", upstream.label, detail)
        elif previous:
            log.warning(
                "upstream %s fetch failed: %s (was failing with %s)",
                upstream.label,
                detail,
                previous,
            )
        else:
            log.warning("upstream %s fetch failed: %s", upstream.label, detail)

    def _account_merge(self, drops: Sequence[MergeDrop]) -> None:
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

    def _account_nothing_served(self, rules: CompiledRules) -> None:
        metrics = self.metrics
        for direction in ("in", "out"):
            metrics.families.labels(direction).set(0)
            metrics.samples.labels(direction).set(0)
        metrics.warm_zero_series.set(0)
        rows = len(rules.rows)
        for state in RowState:
            metrics.contract_rows.labels(state.value).set(rows if state is RowState.MISSING else 0)

    def _account(self, translation: Translation) -> None:
        stats, metrics = translation.stats, self.metrics
        metrics.families.labels("in").set(stats.families_in)
        metrics.families.labels("out").set(stats.families_out)
        metrics.samples.labels("in").set(stats.samples_in)
        metrics.samples.labels("out").set(stats.samples_out)
        for reason, count in stats.dropped.items():
            if count:
                metrics.samples_dropped.labels(reason).inc(count)
        self._log_problems("translation", "translation", translation.problems)
        states = dict.fromkeys(RowState, 0)
        for status in translation.rows.values():
            states[status.state] += 1
        for state, count in states.items():
            metrics.contract_rows.labels(state.value).set(count)
        metrics.warm_zero_series.set(translation.warm_zero_series)


def _parse(
    outcome: Fetched | UpstreamError, rules: CompiledRules, caches: CodecCaches
) -> tuple[Exposition, int]:
    """The exposition of a fetched body and the body's size; raises what the fetch came to."""
    if isinstance(outcome, UpstreamError):
        raise outcome
    return read_payload(outcome.body, outcome.format, rules, caches=caches), len(outcome.body)
