"""Synthesis inside the running service: /server_info polling, idle heartbeat, nothing while down."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from helpers.paths import FIXTURES
from helpers.service import FakeUpstream, bridge_app

IDLE_CONFIG = """
version: 1
idle:
  after_seconds: 0.4
  heartbeat_seconds: 0.1
  when_zero: [sglang:num_running_reqs]
  when_flat: [sglang:num_requests_total]
  zero: [sglang:cache_hit_rate]
"""


def _with_server_info(upstream: FakeUpstream, info: dict[str, object]) -> web.Application:
    app = upstream.app()

    async def server_info(_: web.Request) -> web.Response:
        return web.json_response(info)

    app.router.add_get("/server_info", server_info)
    return app


async def test_server_info_poller_feeds_derived_rows(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """The engine's /server_info becomes num_max_batchs without blocking any scrape."""
    upstream = FakeUpstream(body=(FIXTURES / "dp8.prom").read_bytes())
    server = await aiohttp_server(
        _with_server_info(
            upstream, {"max_running_requests": 512, "dp_size": 8, "enable_dp_attention": True}
        )
    )
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    for _ in range(50):
        text = await (await client.get("/metrics")).text()
        if "sglang:num_max_batchs{" in text:
            break
        await asyncio.sleep(0.05)
    assert (
        'sglang:num_max_batchs{engine_type="unified",model_name="Qwen/Qwen3-30B-A3B"} 512.0' in text
    )
    assert "metricbridge_server_info_up 1.0" in text


async def test_missing_server_info_is_tolerated(aiohttp_server: Any, aiohttp_client: Any) -> None:
    """An engine without /server_info (404 on both paths): scrapes work, the row is missing."""
    server = await aiohttp_server(FakeUpstream().app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    await asyncio.sleep(0.1)
    text = await (await client.get("/metrics")).text()
    assert "sglang:num_max_batchs{" not in text
    assert "metricbridge_server_info_up 0.0" in text
    rows = {row["family"]: row for row in (await (await client.get("/contract")).json())["rows"]}
    assert rows["sglang:num_max_batchs"]["state"] == "missing"


async def test_heartbeat_turns_idle_on_without_scrapes(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGLANG_IDLE_METRIC_HEARTBEAT=1: the heartbeat polls an idle engine; the next scrape sees 0."""
    monkeypatch.setenv("SGLANG_IDLE_METRIC_HEARTBEAT", "1")
    config = tmp_path / "idle.yaml"
    config.write_text(IDLE_CONFIG)
    upstream = FakeUpstream(body=(FIXTURES / "tp1-idle.prom").read_bytes())
    server = await aiohttp_server(upstream.app())
    app = bridge_app(str(server.make_url("/metrics")), config=str(config))
    from metricbridge.service.server import STATE, with_idle_switch  # noqa: PLC0415

    app[STATE].config = with_idle_switch(app[STATE].config)
    client = await aiohttp_client(app)
    await asyncio.sleep(0.9)
    assert upstream.requests >= 4  # heartbeats, nobody scraped
    text = await (await client.get("/metrics")).text()
    assert "metricbridge_idle 1.0" in text
    assert 'metricbridge_idle_zeroed_family{family="sglang:cache_hit_rate"} 1.0' in text
    assert (
        'sglang:cache_hit_rate{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0'
        in text
    )
    upstream.body = (FIXTURES / "tp1.prom").read_bytes()  # traffic again
    text = await (await client.get("/metrics")).text()
    assert "metricbridge_idle 0.0" in text
    assert "sglang:cache_hit_rate{" in text
    assert "0.1915277151870212" in text


async def test_no_synthetic_series_while_the_engine_is_down(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """Warm-zero would claim the engine is alive: with every upstream down there is none."""
    server = await aiohttp_server(FakeUpstream(status=503).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    text = await (await client.get("/metrics")).text()
    assert "sglang:" not in text
    assert "metricbridge_warm_zero_series 0.0" in text
