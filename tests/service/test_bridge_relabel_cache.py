"""The bridge owns a relabel cache: hit from the second fetch on, served, emptied on reload."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.service import FakeUpstream, bridge_app
from metricbridge.service.server import STATE, reload_config


async def test_relabel_results_are_remembered_served_and_reset(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """tp1's cached_tokens series are relabelled once; the next fetches hit; a reload empties."""
    server = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(server.make_url("/metrics")))  # no cache_ttl: every scrape fetches
    client = await aiohttp_client(app)
    first = await (await client.get("/metrics")).text()
    cache = app[STATE].bridge.translation_caches.relabel.lru
    misses = cache.misses
    assert misses > 0
    assert cache.entries > 0
    second = await (await client.get("/metrics")).text()
    assert cache.misses == misses  # the same label sets: every one a hit
    assert cache.hits >= misses
    assert [line for line in first.splitlines() if "cached_tokens" in line] == [
        line for line in second.splitlines() if "cached_tokens" in line
    ]
    served = {
        (sample.name, sample.labels.get("cache")): sample.value
        for family in parse_text(second)
        for sample in family.samples
    }
    assert served["metricbridge_cache_entries", "relabel_results"] == cache.entries
    assert served["metricbridge_cache_misses_total", "relabel_results"] == misses
    assert await reload_config(app) == []
    assert app[STATE].bridge.translation_caches.relabel.lru is cache  # the same cache, emptied
    assert (cache.entries, cache.bytes) == (0, 0)
    await client.get("/metrics")
    assert cache.misses == 2 * misses  # relabelled afresh with the reloaded rules
