"""metricbridge_* metrics about the bridge itself, on a registry of their own.

Two kinds, because every /metrics response carries them and rendering the whole registry costs
0.17 ms (0.27-0.51 ms with prometheus_client's encoders), close to serving a cached 1 MB response:

- Per-scrape counters (``metricbridge_scrapes_total``, ``metricbridge_coalesced_scrapes_total``,
  ``metricbridge_format_fallbacks_total``)
  change on every request. They are ``ScrapeCounter``s, written by hand in microseconds for
  each response, so they always include the scrape that is being answered.
- Everything else describes the latest upstream fetch, the config or the /server_info poller
  (or counts the rare requests that gave up waiting for a fetch), and changes only when one of
  those happens. It is rendered once per ``generation``: whoever updates these metrics calls
  ``changed()`` afterwards (the bridge at the end of each fetch and when a request gives up, the
  reloader, the poller), and the next response renders them afresh.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry

from metricbridge import __version__
from metricbridge.exposition import line_match
from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format
from metricbridge.service.connections import ConnectionLimit
from metricbridge.service.gzip_framing import gzip_member
from metricbridge.service.metric_collectors import (
    CacheMetrics,
    ScrapeCounter,
    TextHistogram,
    Written,
    generate_families,
)
from metricbridge.service.runtime_metrics import RuntimeMetrics
from metricbridge.service.settled_metrics import MirroredRegistry, TrackedCounter, TrackedGauge
from metricbridge.translation.idle import IdleState

_FETCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_EOF = b"# EOF\n"


class SelfMetrics:
    """The bridge's own metrics. Never the global REGISTRY: it would be shared with any embedder.

    ``registry`` holds every family (for ``name[]`` filtering and tests); the responses use
    ``render_scrape_counters`` per scrape and ``render_settled`` once per ``generation``.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        # Its own caches for writing these families, apart from the bridge's: few and stable.
        self._codec = CodecCaches()
        # Every family but the per-scrape counters: what render_settled caches. Each metric
        # below is registered in both.
        registry = self._settled = MirroredRegistry(self.registry)
        self._zeroed_shown: set[str] = set()
        self._server_info_ok: bool | None = None
        self._server_info_size: int | None = None  # body bytes of the last good poll
        self.generation = 0
        self._rendered: dict[tuple[Format, bool], bytes] = {}
        # Each family's samples and text as last written, per format: most families do not
        # change from one fetch to the next, and writing them was half of render_settled.
        self._written: dict[tuple[Format, str], tuple[Written, str]] = {}
        self.scrapes = ScrapeCounter(
            "metricbridge_scrapes_total",
            "Scrapes of the bridge's /metrics, by served format.",
            "format",
        )
        self.coalesced = ScrapeCounter(
            "metricbridge_coalesced_scrapes_total",
            "Scrapes answered by joining a fetch already in flight or reusing a fresh one.",
            "how",
        )
        self.format_fallbacks = ScrapeCounter(
            "metricbridge_format_fallbacks_total",
            "Scrapes that asked for OpenMetrics answered in text 0.0.4, which can carry every "
            "family of the fetch, by the reason OpenMetrics cannot.",
            "reason",
        )
        for counter in (self.scrapes, self.coalesced, self.format_fallbacks):
            self.registry.register(counter)
        # Open, refused and abandoned client connections: they move between fetches, so they
        # are written per response with the per-scrape counters.
        self.connections = ConnectionLimit()
        self.registry.register(self.connections)
        # process_*, python_info, python_gc_*: they move between scrapes too.
        self.runtime = RuntimeMetrics(self.registry)
        self.gave_up = TrackedCounter(
            "metricbridge_scrapes_gave_up_total",
            "Requests answered without engine data because their own timeout ran out, by the "
            "stage the fetch was at (fetch: waiting on upstreams; translation: reading, "
            "translating or rendering their answer).",
            ["stage"],
            registry=registry,
        )
        for stage in ("fetch", "translation"):
            self.gave_up.labels(stage)
        self.upstream_up = TrackedGauge(
            "metricbridge_upstream_up",
            "1 if the last fetch of the upstream succeeded.",
            ["upstream"],
            registry=registry,
        )
        self.upstream_duration = TextHistogram(
            "metricbridge_upstream_scrape_duration_seconds",
            "Duration of every upstream fetch, by outcome (ok, or failed for any failure reason).",
            ["upstream", "outcome"],
            buckets=_FETCH_BUCKETS,
            registry=registry,
        )
        self.upstream_bytes = TrackedGauge(
            "metricbridge_upstream_response_bytes",
            "Body size of the last successful upstream fetch.",
            ["upstream"],
            registry=registry,
        )
        self.largest_family = TrackedGauge(
            "metricbridge_largest_family_samples",
            "Samples in the largest family a rule reads, in the upstream's last payload read.",
            ["upstream"],
            registry=registry,
        )
        self.family_sample_limit = TrackedGauge(
            "metricbridge_family_sample_limit",
            "The most samples a family a rule reads may hold; a larger one is dropped "
            "(samples_dropped_total reason sample_limit). 0: no limit.",
            registry=registry,
        )
        # The bounds those figures are held to, so a dashboard can show how close they come.
        self.upstream_max_bytes = TrackedGauge(
            "metricbridge_upstream_max_bytes",
            "The largest upstream body accepted (--upstream-max-bytes); a larger one fails "
            "with reason oversize.",
            registry=registry,
        )
        self.upstream_timeout = TrackedGauge(
            "metricbridge_upstream_timeout_seconds",
            "The cap on one upstream fetch (--upstream-timeout).",
            registry=registry,
        )
        self.upstream_failures = TrackedCounter(
            "metricbridge_upstream_failures_total",
            "Failed upstream fetches by reason.",
            ["upstream", "reason"],
            registry=registry,
        )
        self.families = TrackedGauge(
            "metricbridge_families",
            "Families in the last translation, by direction (in, out).",
            ["direction"],
            registry=registry,
        )
        self.samples = TrackedGauge(
            "metricbridge_samples",
            "Samples in the last translation, by direction (in, out).",
            ["direction"],
            registry=registry,
        )
        self.samples_dropped = TrackedCounter(
            "metricbridge_samples_dropped_total",
            "Upstream samples not served, by reason.",
            ["reason"],
            registry=registry,
        )
        self.exposition_problems = TrackedCounter(
            "metricbridge_exposition_problems_total",
            "Upstream families dropped because they could not be read or broke their type's "
            "rules, by reason (see the log for the line).",
            ["reason"],
            registry=registry,
        )
        self.exposition_problems.labels("malformed")  # shown at 0 from start-up
        self.translation_duration = TextHistogram(
            "metricbridge_translation_duration_seconds",
            "Time to read and translate one upstream fetch.",
            buckets=_FETCH_BUCKETS,
            registry=registry,
        )
        self.reload_success = TrackedGauge(
            "metricbridge_config_last_reload_successful",
            "1 if the last config load succeeded.",
            registry=registry,
        )
        self._reloads_refused = TrackedCounter(
            "metricbridge_reloads_refused",
            "POST /-/reload requests refused, by reason (lifecycle_disabled: started without "
            "--web.enable-lifecycle; too_frequent: sooner than a second after the last reload).",
            ["reason"],
            registry=registry,
        )
        self.reload_timestamp = TrackedGauge(
            "metricbridge_config_last_reload_success_timestamp_seconds",
            "Time of the last successful config load.",
            registry=registry,
        )
        self.contract_rows = TrackedGauge(
            "metricbridge_contract_rows",
            "Contract rows by state in the last translation.",
            ["state"],
            registry=registry,
        )
        self.warm_zero_series = TrackedGauge(
            "metricbridge_warm_zero_series",
            "Series served as warm-zero (synthetic 0) in the last translation.",
            registry=registry,
        )
        self.idle = TrackedGauge(
            "metricbridge_idle",
            "1 while the engine is judged idle and gauges are zeroed.",
            registry=registry,
        )
        self.idle_since = TrackedGauge(
            "metricbridge_idle_since_seconds",
            "How long the engine has been idle (0 when busy).",
            registry=registry,
        )
        self.idle_zeroed = TrackedGauge(
            "metricbridge_idle_zeroed_family",
            "1 for each family currently served as 0 because the engine is idle.",
            ["family"],
            registry=registry,
        )
        # Registered by the first poll: with polling off (--no-server-info), a 0 here would
        # read as a failing engine, and before the first poll ends there is nothing to say.
        self.server_info_up = TrackedGauge(
            "metricbridge_server_info_up",
            "1 if the last fetch of the engine's /server_info succeeded.",
            registry=None,
        )
        self._server_info_failures = TrackedCounter(
            "metricbridge_server_info_failures",
            "Failed polls of the engine's /server_info, by reason (timeout, http, status, "
            "not_found, too_large, malformed).",
            ["reason"],
            registry=None,
        )
        self._server_info_bytes = TrackedGauge(
            "metricbridge_server_info_response_bytes",
            "Body size of the last successful /server_info poll (0 before one).",
            registry=None,
        )
        self.server_info_max_bytes = TrackedGauge(
            "metricbridge_server_info_max_bytes",
            "The largest /server_info body read; a larger one fails with reason too_large.",
            registry=None,
        )
        build = TrackedGauge(
            "metricbridge_build_info",
            "Build information; the value is always 1. reader: compiled when the C line pass "
            "was built at install time, python when the slower pure-Python reader is in use.",
            ["version", "python", "reader"],
            registry=registry,
        )
        reader = "compiled" if line_match.COMPILED else "python"
        build.labels(__version__, platform.python_version(), reader).set(1)
        self.cache_metrics = CacheMetrics()
        registry.register(self.cache_metrics)

    def track_caches(self, caches: Iterable[ByteLRU[Any, Any]]) -> None:
        """Serve ``metricbridge_cache_*`` for these caches (the bridge's), instead of any before."""
        self.cache_metrics.caches = tuple(caches)
        self.changed()

    def changed(self) -> None:
        """Call after updating any metric but the per-scrape counters: the cached render is old."""
        self.generation += 1
        self._rendered.clear()
        self.cache_metrics.settle()

    def reload_refused(self, reason: str) -> None:
        """Count a refused POST /-/reload."""
        self._reloads_refused.labels(reason).inc()
        self.changed()

    def config_loaded(self, *, ok: bool, at: float | None = None) -> None:
        """Record a config load: its outcome, and when it last succeeded."""
        self.reload_success.set(1 if ok else 0)
        if ok and at is not None:
            self.reload_timestamp.set(at)
        self.changed()

    def server_info_polled(self, *, ok: bool, reason: str = "", size: int | None = None) -> None:
        """Record a /server_info poll; a poll that changes nothing keeps the cached render.

        ``size``: the bytes of its body, when it succeeded.
        """
        if not ok:
            self._server_info_failures.labels(reason).inc()
        resized = size is not None and size != self._server_info_size
        if ok is not self._server_info_ok or not ok or resized:
            if self._server_info_ok is None:
                for metric in (self.server_info_up, self._server_info_failures):
                    self._settled.register(metric)
                for metric in (self._server_info_bytes, self.server_info_max_bytes):
                    self._settled.register(metric)
            self._server_info_ok = ok
            self.server_info_up.set(1 if ok else 0)
            if size is not None:
                self._server_info_size = size
                self._server_info_bytes.set(size)
            self.changed()

    def idle_state(self, state: IdleState, zeroed: tuple[str, ...], now: float) -> None:
        """Export what idle detection decided, so an alert author sees what was overridden.

        Part of a fetch: the bridge calls ``changed()`` once the whole fetch is accounted for.
        """
        self.idle.set(1 if state.idle else 0)
        self.idle_since.set(
            now - state.quiet_since if state.idle and state.quiet_since is not None else 0
        )
        for labels in list(self._zeroed_shown - set(zeroed)):
            self.idle_zeroed.remove(labels)
        for family in zeroed:
            self.idle_zeroed.labels(family).set(1)
        self._zeroed_shown = set(zeroed)

    def render_scrape_counters(self, fmt: Format) -> bytes:
        """The per-scrape counters in ``fmt``, as of now (microseconds, not prometheus_client)."""
        per_scrape = (self.scrapes, self.coalesced, self.format_fallbacks)
        counters = "".join(counter.render(fmt) for counter in per_scrape).encode()
        return counters + self.connections.render(fmt) + self.runtime.render(fmt)

    def render_settled(self, fmt: Format, *, gzip_level: int | None = None) -> bytes:
        """Every family but the per-scrape counters, ending a response (OpenMetrics: ``# EOF``).

        Rendered once per format, encoding and ``generation``; ``gzip_level`` makes it a gzip
        member whose deflate blocks end every gzip response (``close_gzip``), so they are
        compressed once per generation, not once per response.
        """
        key = (fmt, gzip_level is not None)
        rendered = self._rendered.get(key)
        if rendered is None:
            if gzip_level is not None:
                # From the plain render, which a gzip response carries beside it (close_gzip):
                # generating the registry twice cost as much as reading a 1 MB engine payload.
                rendered = gzip_member(self.render_settled(fmt), gzip_level)
            else:
                rendered = self._settled.render(fmt, self._codec, self._written)
                rendered += _EOF if fmt is Format.OPENMETRICS else b""
            self._rendered[key] = rendered
        return rendered

    def render(self, fmt: Format, names: set[str] | None = None) -> bytes:
        """Every family in ``fmt`` (only ``names`` if given), without OpenMetrics' ``# EOF``.

        The slow, uncached path: ``name[]`` requests and tests.
        """
        registry = self.registry.restricted_registry(names) if names else self.registry
        return generate_families(registry, fmt, self._codec)
