"""metricbridge_* metrics about the bridge itself, on a registry of their own."""

from __future__ import annotations

import platform

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from metricbridge import __version__
from metricbridge.idle import IdleState
from metricbridge.model import Format

_FETCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class SelfMetrics:
    """The bridge's own metrics. Never the global REGISTRY: it would be shared with any embedder."""

    def __init__(self) -> None:
        # _created series would double the family count and no dashboard reads them.
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        registry = self.registry = CollectorRegistry(auto_describe=False)
        self._zeroed_shown: set[str] = set()
        self.upstream_up = Gauge(
            "metricbridge_upstream_up",
            "1 if the last fetch of the upstream succeeded.",
            ["upstream"],
            registry=registry,
        )
        self.upstream_duration = Histogram(
            "metricbridge_upstream_scrape_duration_seconds",
            "Duration of upstream fetches.",
            ["upstream"],
            buckets=_FETCH_BUCKETS,
            registry=registry,
        )
        self.upstream_bytes = Gauge(
            "metricbridge_upstream_response_bytes",
            "Body size of the last successful upstream fetch.",
            ["upstream"],
            registry=registry,
        )
        self.upstream_failures = Counter(
            "metricbridge_upstream_failures_total",
            "Failed upstream fetches by reason.",
            ["upstream", "reason"],
            registry=registry,
        )
        self.families = Gauge(
            "metricbridge_families",
            "Families in the last translation, by direction (in, out).",
            ["direction"],
            registry=registry,
        )
        self.samples = Gauge(
            "metricbridge_samples",
            "Samples in the last translation, by direction (in, out).",
            ["direction"],
            registry=registry,
        )
        self.samples_dropped = Counter(
            "metricbridge_samples_dropped_total",
            "Upstream samples not served, by reason.",
            ["reason"],
            registry=registry,
        )
        self.exposition_problems = Counter(
            "metricbridge_exposition_problems_total",
            "Upstream families dropped because they could not be read (see the log for the line).",
            registry=registry,
        )
        self.translation_duration = Histogram(
            "metricbridge_translation_duration_seconds",
            "Time to read and translate one upstream fetch.",
            buckets=_FETCH_BUCKETS,
            registry=registry,
        )
        self.scrapes = Counter(
            "metricbridge_scrapes_total",
            "Scrapes of the bridge's /metrics, by served format.",
            ["format"],
            registry=registry,
        )
        self.coalesced = Counter(
            "metricbridge_coalesced_scrapes_total",
            "Scrapes answered by joining a fetch already in flight or reusing a fresh one.",
            ["how"],
            registry=registry,
        )
        self.reload_success = Gauge(
            "metricbridge_config_last_reload_successful",
            "1 if the last config load succeeded.",
            registry=registry,
        )
        self.reload_timestamp = Gauge(
            "metricbridge_config_last_reload_success_timestamp_seconds",
            "Time of the last successful config load.",
            registry=registry,
        )
        self.contract_rows = Gauge(
            "metricbridge_contract_rows",
            "Contract rows by state in the last translation.",
            ["state"],
            registry=registry,
        )
        self.warm_zero_series = Gauge(
            "metricbridge_warm_zero_series",
            "Series served as warm-zero (synthetic 0) in the last translation.",
            registry=registry,
        )
        self.idle = Gauge(
            "metricbridge_idle",
            "1 while the engine is judged idle and gauges are zeroed.",
            registry=registry,
        )
        self.idle_since = Gauge(
            "metricbridge_idle_since_seconds",
            "How long the engine has been idle (0 when busy).",
            registry=registry,
        )
        self.idle_zeroed = Gauge(
            "metricbridge_idle_zeroed_family",
            "1 for each family currently served as 0 because the engine is idle.",
            ["family"],
            registry=registry,
        )
        self.server_info_up = Gauge(
            "metricbridge_server_info_up",
            "1 if the last fetch of the engine's /server_info succeeded.",
            registry=registry,
        )
        build = Gauge(
            "metricbridge_build_info",
            "Build information; the value is always 1.",
            ["version", "python"],
            registry=registry,
        )
        build.labels(__version__, platform.python_version()).set(1)

    def idle_state(self, state: IdleState, zeroed: tuple[str, ...], now: float) -> None:
        """Export what idle detection decided, so an alert author sees what was overridden."""
        self.idle.set(1 if state.idle else 0)
        self.idle_since.set(
            now - state.quiet_since if state.idle and state.quiet_since is not None else 0
        )
        for labels in list(self._zeroed_shown - set(zeroed)):
            self.idle_zeroed.remove(labels)
        for family in zeroed:
            self.idle_zeroed.labels(family).set(1)
        self._zeroed_shown = set(zeroed)

    def render(self, fmt: Format, names: set[str] | None = None) -> bytes:
        """The metrics in ``fmt`` (only ``names`` if given), without OpenMetrics' ``# EOF``."""
        registry = self.registry.restricted_registry(names) if names else self.registry
        if fmt is Format.OPENMETRICS:
            encoded: bytes = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
            return encoded.removesuffix(b"# EOF\n")
        return prometheus_client.generate_latest(registry)
