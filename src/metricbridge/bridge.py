"""The running bridge: fetch every upstream once per scrape wave, translate once, share the result.

Concurrent scrapes join the fetch already in flight (single flight), and a finished fetch is
reused for ``cache_ttl`` seconds, so fifty scrapers cost one upstream request. Nothing older
than the latest completed fetch is ever served; when every upstream fails, the engine part of
the response is empty and ``metricbridge_upstream_up`` says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from metricbridge.errors import ExpositionError, UpstreamError
from metricbridge.exposition_reader import Exposition, read_exposition
from metricbridge.exposition_writer import write_pieces
from metricbridge.model import AnyFamily, Format
from metricbridge.rules import CompiledRules
from metricbridge.scrape import Upstream, fetch
from metricbridge.selfmetrics import SelfMetrics
from metricbridge.translate import RowState, SynthState, Translation, sample_count, translate

log = logging.getLogger("metricbridge.bridge")


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How upstreams are fetched and results shared."""

    timeout_cap: float = 10.0
    max_bytes: int = 64 << 20
    cache_ttl: float = 1.0
    gzip_level: int = 1


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    """What one upstream fetch came to."""

    upstream: Upstream
    ok: bool
    reason: str = ""
    message: str = ""
    size: int = 0


@dataclass(slots=True)
class Snapshot:
    """One wave of fetches, translated; the engine part is rendered on demand and memoised."""

    finished_at: float
    results: tuple[UpstreamResult, ...]
    translation: Translation | None
    gzip_level: int
    _renders: dict[tuple[Format, bool], tuple[bytes, ...]] = field(default_factory=dict)

    def engine_part(self, fmt: Format, *, compressed: bool) -> tuple[bytes, ...]:
        """The translated families (no ``# EOF``) in pieces, rendered once per format and encoding.

        Only the encodings asked for are kept: Prometheus asks for gzip, and memoising the
        plain render on the way would hold a second copy of the payload for nobody. Pieces,
        not one buffer: see ``write_pieces``.
        """
        key = (fmt, compressed)
        part = self._renders.get(key)
        if part is None:
            families = self.translation.families if self.translation else ()
            pieces = write_pieces(families, fmt)
            if compressed:
                # One gzip member across the pieces (wbits 31: the gzip container).
                packer = zlib.compressobj(self.gzip_level, zlib.DEFLATED, 31)
                pieces = [packer.compress(piece) for piece in pieces]
                pieces.append(packer.flush())
            part = self._renders[key] = tuple(piece for piece in pieces if piece)
        return part


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
        self._was_up: dict[str, bool] = {}
        self.state = SynthState()  # rates and idleness carried from fetch to fetch
        self.server_info: dict[str, object] | None = None  # kept fresh by a background poller

    def replace_rules(self, rules: CompiledRules) -> None:
        """Swap the rules; the next scrape fetches afresh so it is translated with them."""
        self.rules = rules
        self._latest = None
        self.state = SynthState()

    async def snapshot(self, timeout: float) -> Snapshot:
        """The latest snapshot if fresh, else the one being fetched, else a new fetch."""
        loop = asyncio.get_running_loop()
        latest = self._latest
        if latest is not None and loop.time() - latest.finished_at <= self.settings.cache_ttl:
            self.metrics.coalesced.inc("cached")
            return latest
        if self._inflight is None:
            # The stale snapshot will never be served again; let its renders go before the new
            # payload arrives, so a 10 MB engine is not held twice.
            self._latest = None
            self._inflight = loop.create_task(self._collect(timeout))
            self._inflight.add_done_callback(self._clear_inflight)
        else:
            self.metrics.coalesced.inc("joined")
        # shield: a scraper that gives up must not cancel the fetch other scrapers share.
        return await asyncio.shield(self._inflight)

    def _clear_inflight(self, task: asyncio.Task[Snapshot]) -> None:
        self._inflight = None
        if not task.cancelled() and task.exception() is None:
            self._latest = task.result()

    async def _collect(self, timeout: float) -> Snapshot:
        try:
            return await self._fetch_and_translate(timeout)
        finally:
            # Every self-metric a fetch touches is now final: the next response renders them
            # afresh (see SelfMetrics), whatever the fetch came to.
            self.metrics.changed()

    async def _fetch_and_translate(self, timeout: float) -> Snapshot:
        rules = self.rules
        fetches = [self._fetch_one(upstream, timeout) for upstream in self.upstreams]
        outcomes = await asyncio.gather(*fetches)
        results = tuple(result for result, _ in outcomes)
        translation = None
        loop = asyncio.get_running_loop()
        if any(result.ok for result in results):
            started = time.perf_counter()
            merged = self._merge([families for _, families in outcomes])
            translation = translate(
                merged, rules, self.state, now=loop.time(), server_info=self.server_info
            )
            self.state = translation.state
            self.metrics.translation_duration.observe(time.perf_counter() - started)
            self._account(translation)
        else:
            # Nothing observed: idleness must be re-established, and no rate may span a gap in
            # which the engine could have restarted unseen. Nothing of the engine is served.
            self.state = SynthState()
            self._account_nothing_served()
        self.metrics.idle_state(
            self.state.idle, translation.zeroed if translation else (), loop.time()
        )
        return Snapshot(loop.time(), results, translation, self.settings.gzip_level)

    def age(self) -> float | None:
        """Seconds since the latest fetch finished, or None before the first."""
        if self._latest is None:
            return None
        return asyncio.get_running_loop().time() - self._latest.finished_at

    async def _fetch_one(
        self, upstream: Upstream, timeout: float
    ) -> tuple[UpstreamResult, list[AnyFamily]]:
        metrics = self.metrics
        try:
            fetched = await fetch(
                self.session, upstream, timeout=timeout, max_bytes=self.settings.max_bytes
            )
            metrics.upstream_duration.labels(upstream.label).observe(fetched.duration)
            # A server with no metric families yet (a cold EPD encoder) answers 200 with no body.
            exposition = (
                read_exposition(fetched.body, fetched.format, self.rules.validation)
                if fetched.body
                else Exposition([], [], fetched.format)
            )
        except (UpstreamError, ExpositionError) as exc:
            reason = exc.reason if isinstance(exc, UpstreamError) else "malformed"
            metrics.upstream_failures.labels(upstream.label, reason).inc()
            metrics.upstream_up.labels(upstream.label).set(0)
            self._note_state(upstream, up=False, detail=f"{reason}: {exc}")
            return UpstreamResult(upstream, ok=False, reason=reason, message=str(exc)), []
        for problem in exposition.problems:
            log.warning("upstream %s: dropped a family: %s", upstream.label, problem)
        metrics.exposition_problems.inc(len(exposition.problems))
        metrics.upstream_up.labels(upstream.label).set(1)
        metrics.upstream_bytes.labels(upstream.label).set(len(fetched.body))
        self._note_state(upstream, up=True, detail="")
        return UpstreamResult(upstream, ok=True, size=len(fetched.body)), exposition.families

    def _note_state(self, upstream: Upstream, *, up: bool, detail: str) -> None:
        """Log transitions loudly and repeats quietly, so a dead engine does not flood the log."""
        was = self._was_up.get(upstream.label)
        self._was_up[upstream.label] = up
        if up and was is False:
            log.info("upstream %s is back", upstream.label)
        elif not up:
            level = logging.WARNING if was is not False else logging.DEBUG
            log.log(level, "upstream %s fetch failed: %s", upstream.label, detail)

    def _merge(self, per_upstream: list[list[AnyFamily]]) -> list[AnyFamily]:
        """Concatenate upstream families; a name served by two upstreams keeps the first."""
        seen: dict[str, str] = {}
        merged: list[AnyFamily] = []
        for upstream, families in zip(self.upstreams, per_upstream, strict=True):
            for family in families:
                if family.name.startswith("metricbridge_"):
                    # Another bridge upstream: its self-metrics would clash with ours.
                    self.metrics.samples_dropped.labels("reserved_name").inc(sample_count(family))
                    continue
                if family.name in seen:
                    log.warning(
                        "family %s from %s duplicates %s's; dropped",
                        family.name,
                        upstream.label,
                        seen[family.name],
                    )
                    self.metrics.samples_dropped.labels("duplicate_family").inc(
                        sample_count(family)
                    )
                    continue
                seen[family.name] = upstream.label
                merged.append(family)
        return merged

    def _account_nothing_served(self) -> None:
        metrics = self.metrics
        for direction in ("in", "out"):
            metrics.families.labels(direction).set(0)
            metrics.samples.labels(direction).set(0)
        metrics.warm_zero_series.set(0)
        rows = len(self.rules.rows)
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
        for problem in translation.problems:
            log.warning("translation dropped a family: %s", problem)
        states = dict.fromkeys(RowState, 0)
        for status in translation.rows.values():
            states[status.state] += 1
        for state, count in states.items():
            metrics.contract_rows.labels(state.value).set(count)
        metrics.warm_zero_series.set(translation.warm_zero_series)
