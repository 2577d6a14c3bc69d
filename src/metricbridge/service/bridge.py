"""The running bridge: fetch every upstream once per scrape wave, translate once, share the result.

Concurrent scrapes join the fetch already in flight (single flight), and a finished fetch is
reused for ``cache_ttl`` seconds, so fifty scrapers cost one upstream request. Nothing older
than the latest completed fetch is ever served; when every upstream fails, the engine part of
the response is empty and ``metricbridge_upstream_up`` says why. Each caller waits at most its
own timeout: one whose time runs out while the shared fetch goes on gets no engine data.

Reading, translating and rendering run in the bridge's worker thread (``service.worker``), so
the event loop goes on answering while a large payload is translated; a request whose time runs
out meanwhile is answered without engine data, and the translation finishes for the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import aiohttp

from metricbridge.errors import UpstreamError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.scrape_memory import ScrapeMemory
from metricbridge.model.family import Format
from metricbridge.service.accounting import Accounting
from metricbridge.service.allocator import release_free_memory, trim_size
from metricbridge.service.scrape import Fetched, Upstream, fetch
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.snapshot import Attempt, FetchSettings, Snapshot, UpstreamResult
from metricbridge.service.translation_job import Work, failed, read_one, translate_wave
from metricbridge.service.worker import Worker
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.translate import RowStatus, SynthState

log = logging.getLogger("metricbridge.bridge")
# Below this much time left, a request takes the cut-short fetch it joined instead of another.
_WORTH_RETRYING = 0.05
Render = tuple[Format, bool]  # a response's format, and whether it is gzipped


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
        # Done once the fetch in flight has its upstreams' answers and is being translated.
        self._translating: asyncio.Future[None] | None = None
        self._inflight_since = self._inflight_timeout = 0.0
        self._fetches = 0  # numbers the fetches, so one left behind is warned about once
        self._warned_fetch = 0
        self._accounting = Accounting(metrics, settings.family_sample_limit)
        self.state = SynthState()  # rates and idleness carried from fetch to fetch
        # What GET /contract describes: the row states and upstream results of the fetch
        # /metrics last served (never a fetch of its own: a rate row would read missing there).
        self.last_served: ServedFetch | None = None
        self.server_info: dict[str, object] | None = None  # kept fresh by a background poller
        # What reading and writing remember from one fetch to the next. Used by the worker
        # only: its one thread is the only one that reads, translates or renders with them (a
        # name[] response, written in another thread, goes without).
        self.caches = CodecCaches()
        self.worker = Worker()
        # Translation's: scrape plans, served names, what relabel steps made of each label set.
        self.translation_caches = TranslationCaches()
        # Each upstream's payload layout, for its next payload to be walked in one pass.
        self.memories = {u.label: ScrapeMemory(f"scrape_layout:{u.label}") for u in self.upstreams}
        self.trim_after = trim_size()  # fetched bytes after which the heap is trimmed; 0: never
        memories = (memory.layouts for memory in self.memories.values())
        metrics.track_caches((*self.caches, *self.translation_caches, *memories))
        metrics.family_sample_limit.set(settings.family_sample_limit)

    def replace_rules(self, rules: CompiledRules) -> None:
        """Swap the rules; the next scrape fetches afresh so it is translated with them.

        The caches start empty too: what they hold was read, parsed and written for the old
        rules (their HELP texts, the families they parse). A translation still running in the
        worker has them: they are emptied after it, before the next one.
        """
        self.rules = rules
        self._latest = None
        self.last_served = None
        self.state = SynthState()
        memories = (memory.reset for memory in self.memories.values())
        resets = (self.caches.reset, self.translation_caches.reset, *memories)
        for reset in resets:
            if self.worker.idle:
                reset()
            else:
                self.worker.submit(reset)

    async def snapshot(self, timeout: float, render: Render | None = None) -> Snapshot:
        """The latest snapshot if fresh, else the one being fetched, else a new fetch.

        The caller waits at most ``timeout`` seconds. A new fetch is bounded by it, but a fetch
        in flight may have been started with a longer one (the heartbeat, /contract, a scraper
        with a longer timeout): a caller whose time runs out first gets a snapshot with no
        engine data, and the fetch goes on for the others. Nor does a shorter deadline speak
        for a longer one: a fetch that timed out at its starter's deadline is neither cached
        nor taken by a caller with time to spare, who fetches again. ``render`` (a response's
        format and encoding) is rendered in the worker within the same deadline.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        rules = self.rules  # a caller after a reload is answered with the new rules
        while True:
            latest = self._latest
            if latest is not None and loop.time() - latest.finished_at <= self.settings.cache_ttl:
                self.metrics.coalesced.inc("cached")
                return await self._rendered(latest, render, deadline, timeout)
            inflight = self._inflight
            if inflight is None:
                inflight = await self._start(deadline, render)
            else:
                self.metrics.coalesced.inc("joined")
                # asyncio.wait, unlike wait_for, never cancels what it waits for: others share it.
                await asyncio.wait((inflight,), timeout=deadline - loop.time())
            if not inflight.done():
                return self._left_behind(timeout, self._stage())
            if inflight.cancelled():
                return self._stopped()
            snapshot = inflight.result()
            # A fetch cut short by a shorter deadline than ours (a scraper with a tiny
            # X-Prometheus-Scrape-Timeout-Seconds) says nothing of what we can get, nor does one
            # translated with the rules a reload replaced before we came: try again with the
            # time we have left. It was not cached, so this starts a fetch or joins one.
            retry = snapshot.cut_short or snapshot.rules is not rules
            if not retry or deadline - loop.time() < _WORTH_RETRYING:
                return await self._rendered(snapshot, render, deadline, timeout)

    async def _start(self, deadline: float, render: Render | None) -> asyncio.Task[Snapshot]:
        """Start a fetch bounded by ``deadline``; return it once translated or past the deadline.

        The fetch bounds itself: its starter waits for it to end, and waits for the translation
        after it only until the deadline (the translation goes on for later requests).
        """
        loop = asyncio.get_running_loop()
        # The stale snapshot will never be served again; let its renders go before the new
        # payload arrives, so a 10 MB engine is not held twice.
        self._latest = None
        timeout = deadline - loop.time()
        translating = self._translating = loop.create_future()
        inflight = self._inflight = loop.create_task(self._collect(timeout, translating, render))
        inflight.add_done_callback(self._clear_inflight)
        self._fetches += 1
        self._inflight_since, self._inflight_timeout = loop.time(), timeout
        # asyncio.wait, not a plain await: a scraper that disconnects (its handler cancelled)
        # must not cancel the fetch others have joined.
        await asyncio.wait((inflight, translating), return_when=asyncio.FIRST_COMPLETED)
        if not inflight.done():
            await asyncio.wait((inflight,), timeout=max(0.0, deadline - loop.time()))
        return inflight

    def _stage(self) -> str:
        """Where the fetch in flight is: ``fetch`` (waiting on upstreams) or ``translation``."""
        translating = self._translating
        return "translation" if translating is not None and translating.done() else "fetch"

    async def _rendered(
        self, snapshot: Snapshot, render: Render | None, deadline: float, timeout: float
    ) -> Snapshot:
        """``snapshot`` with ``render`` made in the worker, or no engine data past the deadline.

        A render cut off by the deadline goes on and is kept: the next request has it.
        """
        if render is None or snapshot.translation is None:
            return snapshot
        fmt, compressed = render
        if snapshot.rendered(fmt, compressed=compressed):
            return snapshot
        job = self.worker.run(lambda: snapshot.render(fmt, compressed=compressed))
        job.add_done_callback(_retrieve)
        await asyncio.wait((job,), timeout=deadline - asyncio.get_running_loop().time())
        if not job.done():
            return self._left_behind(timeout, "translation")
        job.result()
        return snapshot

    def stop(self) -> None:
        """Give up the fetch in flight: shutting down, its waiters are answered at once.

        A translation running in the worker cannot be stopped; its thread does not hold the
        process at exit.
        """
        if self._inflight is not None:
            self._inflight.cancel()

    async def close(self, timeout: float = 1.0) -> bool:
        """Let the worker's thread end once its jobs are done (the app's cleanup).

        Waits up to ``timeout`` s for a translation still running; whether the thread ended.
        """
        self.worker.close()
        return await self.worker.wait_closed(timeout)

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

    def _left_behind(self, timeout: float, stage: str) -> Snapshot:
        """For a caller whose time ran out before the fetch or its translation: no engine data.

        The previous snapshot is no answer: it was dropped as stale when this fetch began.
        """
        loop = asyncio.get_running_loop()
        self.metrics.gave_up.labels(stage).inc()
        self.metrics.changed()  # the response about to be rendered must count itself
        # One warning per fetch left behind; fifty scrapers giving up on it are one event.
        level = logging.DEBUG if self._warned_fetch == self._fetches else logging.WARNING
        self._warned_fetch = self._fetches
        if stage == "fetch":
            log.log(
                level,
                "answered without engine data: the request's %.3gs wait ran out while the "
                "upstream fetch it joined was still running (%.3gs so far, its own timeout %.3gs)",
                timeout,
                loop.time() - self._inflight_since,
                self._inflight_timeout,
            )
            message = f"the fetch in flight did not finish within this request's {timeout:.3g}s"
        else:
            log.log(
                level,
                "answered without engine data: the request's %.3gs wait ran out while the "
                "upstreams' answer was still being translated (%.3gs since the fetch began); "
                "the translation goes on for the next request",
                timeout,
                loop.time() - self._inflight_since,
            )
            message = f"the translation did not finish within this request's {timeout:.3g}s"
        return self._without_engine("gave_up", message)

    def _clear_inflight(self, task: asyncio.Task[Snapshot]) -> None:
        self._inflight = self._translating = None
        if not task.cancelled() and task.exception() is None:
            snapshot = task.result()
            # A reload can run between the fetch's last step and this callback; a snapshot of
            # the old rules must not be reused for cache_ttl after the reload said it was done.
            # A fetch cut short by its starter's deadline is not reused either: a request
            # that can wait longer must get a fetch of its own, not that timeout.
            if snapshot.rules is self.rules and not snapshot.cut_short:
                self._latest = snapshot

    async def _collect(
        self, timeout: float, translating: asyncio.Future[None], render: Render | None
    ) -> Snapshot:
        try:
            return await self._fetch_and_translate(timeout, translating, render)
        finally:
            # Every self-metric a fetch touches is now final: the next response renders them
            # afresh (see SelfMetrics), whatever the fetch came to.
            self.metrics.changed()

    async def _fetch_and_translate(
        self, timeout: float, translating: asyncio.Future[None], render: Render | None
    ) -> Snapshot:
        attempts = await asyncio.gather(*(self._fetch_one(u, timeout) for u in self.upstreams))
        # The rules read now are the ones the fetch is translated with: a reload while the
        # engine was being fetched applies to this fetch instead of being overtaken by it. A
        # reload during the translation below makes the snapshot unservable (_clear_inflight).
        rules, state = self.rules, self.state
        translating.set_result(None)
        loop = asyncio.get_running_loop()
        now, server_info, caches = loop.time(), self.server_info, self.caches
        limit = self.settings.family_sample_limit
        if all(failed(a) for a in attempts):  # nothing to read
            work = Work(tuple(read_one(a.outcome, rules, caches, limit) for a in attempts))
            # (a failed fetch is read as its failure: no memory is used)
        else:  # in the worker: reading and translating take time in proportion to the payload
            level = self.settings.gzip_level
            wanted = None if render is None else (*render, level)
            fetched = sum(len(a.outcome.body) for a in attempts if isinstance(a.outcome, Fetched))

            def job() -> Work:
                done = translate_wave(
                    attempts,
                    rules,
                    state,
                    now,
                    server_info,
                    caches,
                    limit,
                    wanted,
                    remembered=self.translation_caches,
                    memories=self.memories,
                )
                if 0 < self.trim_after <= fetched:  # what it freed goes back (allocator)
                    release_free_memory()
                return done

            work = await self.worker.run(job)
        outcomes = [
            self._accounting.record(a, read) for a, read in zip(attempts, work.reads, strict=True)
        ]
        results = tuple(result for result, _ in outcomes)
        translation = work.outcome.translation if work.outcome else None
        current = rules is self.rules  # else the reload has set state afresh: keep that
        if work.outcome is not None and translation is not None:
            if current:
                self.state = translation.state
                if any(not isinstance(a.outcome, Fetched) for a in attempts):
                    # A family of the upstream that failed was absent, not uncreated: when it
                    # is back, its counters must not count from 0.
                    self.state = replace(self.state, read=frozenset())
            self.metrics.translation_duration.observe(work.seconds)
            self._accounting.merge(work.outcome.merge_drops)
            self._accounting.translation(translation)
        else:
            # Nothing observed: idleness must be re-established, and no rate may span a gap in
            # which the engine could have restarted unseen. Nothing of the engine is served.
            if current:
                self.state = SynthState()
            self._accounting.nothing_served(rules)
        self.metrics.idle_state(
            self.state.idle, translation.zeroed if translation else (), loop.time()
        )
        cut_short = timeout < self.settings.timeout_cap and any(
            result.reason == "timeout" for result in results
        )
        snapshot = Snapshot(
            loop.time(),
            results,
            translation,
            self.settings.gzip_level,
            rules,
            cut_short,
            self.caches,
            work.misfit,
        )
        if render is not None and work.part is not None:
            snapshot.keep(render[0], compressed=render[1], part=work.part)
        return snapshot

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


@dataclass(frozen=True, slots=True)
class ServedFetch:
    """The little /contract needs of a served snapshot: row states and upstream results."""

    rows: Mapping[str, RowStatus] | None
    results: tuple[UpstreamResult, ...]

    @classmethod
    def of(cls, snapshot: Snapshot) -> ServedFetch:
        """Keep the row states, not the snapshot (its families and renders are megabytes)."""
        translation = snapshot.translation
        return cls(translation.rows if translation is not None else None, snapshot.results)


def _retrieve(job: asyncio.Future[None]) -> None:
    """Take a cut-off render's outcome, so an error in it is raised once, by its next request."""
    if not job.cancelled():
        job.exception()
