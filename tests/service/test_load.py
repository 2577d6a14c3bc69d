"""Load, the fast version: a burst of concurrent scrapes against a ~1 MB upstream.

The long version with latency percentiles and RSS is ``bench/load_scrapes.py``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om

from helpers.service import TEXT_TYPE, FakeUpstream, bridge_app
from metricbridge.service.server import STATE
from metricbridge.simulator.engine import SimulatedEngine

SCRAPERS = 200
OM_GZIP = {
    "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    "Accept-Encoding": "gzip",
}


@pytest.fixture(scope="module")
def one_megabyte() -> bytes:
    """A simulated dp8 x tp2 engine after 30 s of traffic: about 0.9 MB of exposition."""
    engine = SimulatedEngine(dp_size=8, tp_size=2, seed=7)
    engine.advance(30.0, arrivals_per_second=48.0)
    return engine.render()


async def _bridge_session(aiohttp_server: Any, app: web.Application) -> aiohttp.ClientSession:
    """A session to the bridge ``app`` that opens a connection per scraper (aiohttp's test
    client stops at 100 connections, which would split a burst in two)."""
    server = await aiohttp_server(app)
    connector = aiohttp.TCPConnector(limit=SCRAPERS)
    return aiohttp.ClientSession(base_url=str(server.make_url("/")), connector=connector)


def _counter(text: str, how: str) -> float:
    match = re.search(rf'metricbridge_coalesced_scrapes_total\{{how="{how}"\}} (\S+)', text)
    return float(match.group(1)) if match else 0.0


async def test_concurrent_scrapes_share_one_upstream_fetch(
    aiohttp_server: Any, one_megabyte: bytes
) -> None:
    """200 concurrent scrapes: all 200 OK, the same engine bytes, one upstream request."""
    assert len(one_megabyte) > 800_000
    release = asyncio.Event()

    async def held(_: web.Request) -> web.Response:
        await release.wait()  # the fetch stays in flight until every scrape has joined it
        return web.Response(body=one_megabyte, headers={"Content-Type": TEXT_TYPE})

    upstream = FakeUpstream(behaviour=held)
    server = await aiohttp_server(upstream.app())
    app = bridge_app(str(server.make_url("/metrics")), timeout=30.0)
    registry = app[STATE].metrics.registry

    async def scrape(session: aiohttp.ClientSession) -> str:
        async with session.get("/metrics", headers=OM_GZIP) as response:
            assert response.status == 200
            assert response.headers["Content-Encoding"] == "gzip"
            return await response.text()

    async with await _bridge_session(aiohttp_server, app) as session:
        burst = asyncio.gather(*(scrape(session) for _ in range(SCRAPERS)))
        for _ in range(600):
            joined = registry.get_sample_value(
                "metricbridge_coalesced_scrapes_total", {"how": "joined"}
            )
            if joined == SCRAPERS - 1:
                break
            await asyncio.sleep(0.05)
        release.set()
        bodies = await asyncio.wait_for(burst, 60)
    assert upstream.requests == 1
    engine_parts = {body.split("# HELP metricbridge_", 1)[0] for body in bodies}
    assert len(engine_parts) == 1, "every scrape got the same translation"
    assert "sglang:num_running_reqs{" in bodies[0]
    list(parse_om(bodies[0]))
    assert all(_counter(body, "joined") == SCRAPERS - 1 for body in bodies)


async def test_waves_of_scrapes_cost_one_fetch_per_ttl(
    aiohttp_server: Any, one_megabyte: bytes
) -> None:
    """Five waves of 200 scrapes within one cache TTL: still a single upstream request."""
    upstream = FakeUpstream(body=one_megabyte)
    server = await aiohttp_server(upstream.app())

    async def scrape(session: aiohttp.ClientSession) -> int:
        async with session.get("/metrics", headers=OM_GZIP) as response:
            await response.read()
            return response.status

    app = bridge_app(str(server.make_url("/metrics")), cache_ttl=30.0)
    async with await _bridge_session(aiohttp_server, app) as session:
        for _ in range(5):
            wave = asyncio.gather(*(scrape(session) for _ in range(SCRAPERS)))
            assert await asyncio.wait_for(wave, 60) == [200] * SCRAPERS
    assert upstream.requests == 1
