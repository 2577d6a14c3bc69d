"""The bridge owns its codec caches: serves their figures, empties them on reload, flips no global."""

from __future__ import annotations

from typing import Any

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.runtime import mask_runtime_values
from helpers.service import FakeUpstream, bridge_app
from metricbridge.exposition.caches import DEFAULT_BUDGETS, CodecCaches
from metricbridge.model.family import Format
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.server import STATE, reload_config
from metricbridge.translation.caches import DEFAULT_BUDGETS as TRANSLATION_BUDGETS

OM_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
FAMILIES = ("entries", "bytes", "budget_bytes", "hits", "misses", "evictions")


def _cache_samples(families: Any) -> dict[tuple[str, str], float]:
    """(sample name, cache) -> value for every metricbridge_cache_* sample."""
    return {
        (sample.name, sample.labels["cache"]): sample.value
        for family in families
        if family.name.startswith("metricbridge_cache_")
        for sample in family.samples
    }


async def _client(aiohttp_server: Any, aiohttp_client: Any) -> tuple[Any, Any]:
    server = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(server.make_url("/metrics")))  # no cache_ttl: every scrape fetches
    return app, await aiohttp_client(app)


async def test_every_cache_is_served_with_its_figures(aiohttp_server, aiohttp_client) -> None:
    """Both formats parse with prometheus_client; each cache has all six families."""
    app, client = await _client(aiohttp_server, aiohttp_client)
    await client.get("/metrics")
    text = await (await client.get("/metrics")).text()
    om = await (await client.get("/metrics", headers={"Accept": OM_ACCEPT})).text()
    served = _cache_samples(parse_text(text))
    # the codec's, translation's own, and the one upstream's scrape memory
    memory = f"scrape_layout:{app[STATE].bridge.upstreams[0].label}"
    names = {*DEFAULT_BUDGETS, *TRANSLATION_BUDGETS, memory}
    for family in FAMILIES:
        suffix = "_total" if family in ("hits", "misses", "evictions") else ""
        assert {
            cache for name, cache in served if name == f"metricbridge_cache_{family}{suffix}"
        } == names
    for cache, budget in {**DEFAULT_BUDGETS, **TRANSLATION_BUDGETS}.items():
        assert served["metricbridge_cache_budget_bytes", cache] == budget
        assert served["metricbridge_cache_bytes", cache] <= budget
    # The second fetch found the first one's header pairs and heads: tp1 is the same bytes.
    assert served["metricbridge_cache_hits_total", "read_headers"] > 0
    assert served["metricbridge_cache_hits_total", "proven_heads"] > 0
    assert served["metricbridge_cache_entries", "read_headers"] > 0
    # The second fetch was walked by the first one's layout: the same bytes, one pass.
    assert served["metricbridge_cache_hits_total", memory] > 0
    assert served["metricbridge_cache_entries", memory] == 1
    # ... and the layout's scrape plan: the second translation reused the first one's.
    assert served["metricbridge_cache_hits_total", "translation_plans"] > 0
    assert served["metricbridge_cache_entries", "translation_plans"] == 1
    types = {family.name: family.type for family in parse_om(om)}
    assert types["metricbridge_cache_hits"] == "counter"
    assert types["metricbridge_cache_bytes"] == "gauge"
    bridge = app[STATE].bridge
    assert (
        bridge.caches.read_headers.hits >= served["metricbridge_cache_hits_total", "read_headers"]
    )


async def test_a_reload_empties_the_caches_and_keeps_their_counters(
    aiohttp_server, aiohttp_client
) -> None:
    app, client = await _client(aiohttp_server, aiohttp_client)
    for _ in range(2):
        await client.get("/metrics")
    caches = app[STATE].bridge.caches
    hits = caches.read_headers.hits
    assert caches.bytes > 0
    assert await reload_config(app) == []
    assert caches is app[STATE].bridge.caches  # the same caches, emptied
    assert [(cache.entries, cache.bytes) for cache in caches] == [(0, 0)] * len(DEFAULT_BUDGETS)
    assert caches.read_headers.hits == hits
    served = _cache_samples(parse_text(app[STATE].metrics.render(Format.TEXT).decode()))
    assert served["metricbridge_cache_entries", "read_headers"] == 0  # the reload settled them
    assert served["metricbridge_cache_hits_total", "read_headers"] == hits
    await client.get("/metrics")  # the first fetch after the reload refills them
    assert caches.read_headers.entries > 0


@pytest.fixture
def created_series_on():
    """prometheus_client's process-wide switch on, as a fresh process has it; restored after."""
    before = prometheus_client.metrics._use_created
    prometheus_client.enable_created_metrics()  # type: ignore[no-untyped-call]
    yield
    prometheus_client.metrics._use_created = before


@pytest.mark.usefixtures("created_series_on")
def test_self_metrics_leave_prometheus_clients_global_switch_alone() -> None:
    """No _created series in the bridge's families, and the embedder's registries keep theirs."""
    metrics = SelfMetrics()
    metrics.upstream_failures.labels("u", "timeout").inc()
    metrics.upstream_duration.labels("u", "ok").observe(0.1)
    assert prometheus_client.metrics._use_created
    other = CollectorRegistry()
    Counter("embedder_events", "An embedder's counter.", registry=other).inc()
    assert b"embedder_events_created" in prometheus_client.generate_latest(other)
    for fmt in Format:
        assert b"_created" not in metrics.render(fmt)


@pytest.mark.usefixtures("created_series_on")
def test_self_metrics_with_caches_are_written_as_prometheus_client_writes_them() -> None:
    metrics = SelfMetrics()
    caches = CodecCaches()
    caches.read_headers.get((Format.TEXT, b"x"))
    metrics.track_caches(caches)
    metrics.upstream_failures.labels("u", "timeout").inc()
    caches.read_headers.get((Format.TEXT, b"y"))  # not shown before the next changed()
    registry = metrics.registry
    assert mask_runtime_values(metrics.render(Format.TEXT)) == mask_runtime_values(
        prometheus_client.generate_latest(registry)
    )
    expected = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
    served = metrics.render(Format.OPENMETRICS) + b"# EOF\n"
    assert mask_runtime_values(served) == mask_runtime_values(expected)
    served = _cache_samples(parse_text(metrics.render(Format.TEXT).decode()))
    assert served["metricbridge_cache_misses_total", "read_headers"] == 1
    metrics.changed()
    served = _cache_samples(parse_text(metrics.render(Format.TEXT).decode()))
    assert served["metricbridge_cache_misses_total", "read_headers"] == 2
