"""The approximations profile through the service: two scrapes of a fake upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.paths import FIXTURES
from helpers.service import FakeUpstream, bridge_app
from helpers.tp1_payloads import TP1, scaled

RANK = (
    'engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",'
    'moe_ep_rank="0",pp_rank="0",tp_rank="0"'
)


async def test_rows_served_and_marked_approximated(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path
) -> None:
    """tp1 then every counter x1.5: run_batch_time = 2.658806828 / 203 per forward pass."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        (FIXTURES.parents[2] / "config" / "aliases.yaml").read_text()
        + "profiles: [approximations]\n"
    )
    upstream = FakeUpstream(body=TP1)
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics")), config=str(rules)))
    first = await (await client.get("/metrics")).text()
    assert "sglang:run_batch_time{" not in first
    upstream.body = scaled(1.5)
    text = await (await client.get("/metrics")).text()
    assert f"sglang:run_batch_time{{{RANK}}} 0.01309757058128" in text
    assert "# HELP sglang:run_batch_time Approximation: mean run_batch seconds" in text
    assert "sglang:all_gather_latency_us{" not in text  # the sync wait never moved
    upstream.body = scaled(2.0)  # /contract fetches too: the counters move again
    report = await (await client.get("/contract")).json()
    assert report["profiles"] == ["approximations"]
    states = {row["family"]: row["state"] for row in report["rows"]}
    assert states["sglang:run_batch_time"] == "approximated"
    assert states["sglang:all_gather_latency_us"] == "missing"


async def test_without_the_profile_nothing_changes(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    upstream = FakeUpstream(body=TP1)
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    await client.get("/metrics")
    upstream.body = scaled(1.5)
    text = await (await client.get("/metrics")).text()
    assert "sglang:run_batch_time" not in text
    report = await (await client.get("/contract")).json()
    assert report["profiles"] == []
    assert report["totals"]["approximated"] == 0
