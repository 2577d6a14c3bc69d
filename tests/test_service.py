"""The sidecar over real sockets: formats, gzip, coalescing, name[] filters, /contract, reload."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from conftest import FIXTURES, TESTS
from service_helpers import FakeUpstream, bridge_app

PROM2_ACCEPT = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
PROM3_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
)


async def _start(
    aiohttp_server: Any, aiohttp_client: Any, upstream: FakeUpstream, **kwargs: Any
) -> Any:
    server = await aiohttp_server(upstream.app())
    return await aiohttp_client(bridge_app(str(server.make_url("/metrics")), **kwargs))


def _names(text: str, parse: Any = parse_text) -> set[str]:
    return {family.name for family in parse(text)}


async def test_text_scrape_serves_contract_and_self_metrics(aiohttp_server, aiohttp_client) -> None:
    """A plain scrape gets text 0.0.4 with contract aliases, community names and self-metrics."""
    upstream = FakeUpstream()
    client = await _start(aiohttp_server, aiohttp_client, upstream)
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = await response.text()
    names = _names(text)
    assert {
        "sglang:request_waiting_time",
        "sglang:queue_time_seconds",
        "sglang:engine_startup_time",
    } <= names
    assert 'metricbridge_upstream_up{upstream="127.0.0.1:' in text
    assert upstream.last_headers["Accept-Encoding"] == "identity"
    assert upstream.last_headers["Accept"].startswith("text/plain;version=0.0.4")


@pytest.mark.parametrize("accept", [PROM2_ACCEPT, PROM3_ACCEPT], ids=["prometheus2", "prometheus3"])
async def test_openmetrics_negotiated_for_prometheus(
    aiohttp_server, aiohttp_client, accept: str
) -> None:
    """Prometheus' Accept headers get OpenMetrics 1.0.0 with colons intact and a single # EOF."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream())
    response = await client.get("/metrics", headers={"Accept": accept})
    assert response.headers["Content-Type"] == (
        "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
    )
    text = await response.text()
    assert text.endswith("# EOF\n")
    assert text.count("# EOF") == 1
    names = _names(text, parse_openmetrics)
    assert "sglang:num_requests" in names  # OpenMetrics counter family name
    assert "metricbridge_upstream_up" in names
    assert "\nsglang_" not in text


async def test_gzip_response_is_one_valid_stream(aiohttp_server, aiohttp_client) -> None:
    """With Accept-Encoding: gzip the two-member gzip body decodes to the identity body."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream(), cache_ttl=60)
    plain = await (await client.get("/metrics", headers={"Accept-Encoding": "identity"})).read()
    response = await client.get(
        "/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False
    )
    assert response.headers["Content-Encoding"] == "gzip"
    zipped = await response.read()
    assert len(zipped) < len(plain) / 4
    decoded = gzip.decompress(zipped).decode()
    # Same engine part (one cached fetch); self-metrics differ only in counters that moved.
    assert (
        decoded.split("# HELP metricbridge_")[0] == plain.decode().split("# HELP metricbridge_")[0]
    )


async def test_concurrent_scrapes_share_one_upstream_fetch(aiohttp_server, aiohttp_client) -> None:
    """Fifty concurrent scrapes during one slow fetch cost one upstream request."""
    upstream = FakeUpstream(delay=0.3)
    client = await _start(aiohttp_server, aiohttp_client, upstream)
    responses = await asyncio.gather(*(client.get("/metrics") for _ in range(50)))
    bodies = [await r.text() for r in responses]
    assert all(r.status == 200 for r in responses)
    assert upstream.requests == 1
    assert all("sglang:request_waiting_time_count" in body for body in bodies)
    last = await (await client.get("/metrics")).text()
    assert 'metricbridge_coalesced_scrapes_total{how="joined"} 49.0' in last
    assert upstream.requests == 2  # cache_ttl 0: a later scrape fetches afresh


async def test_cache_ttl_reuses_a_finished_fetch(aiohttp_server, aiohttp_client) -> None:
    """Within cache_ttl a later scrape reuses the finished fetch instead of fetching again."""
    upstream = FakeUpstream()
    client = await _start(aiohttp_server, aiohttp_client, upstream, cache_ttl=30)
    for _ in range(3):
        assert (await client.get("/metrics")).status == 200
    assert upstream.requests == 1


async def test_name_filter_restricts_families(aiohttp_server, aiohttp_client) -> None:
    """name[] keeps only the named families, matched by family or sample name."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream())
    query = [
        ("name[]", "sglang:request_waiting_time_bucket"),
        ("name[]", "sglang:num_requests_total"),
        ("name[]", "metricbridge_upstream_up"),
    ]
    text = await (await client.get("/metrics", params=query)).text()
    assert _names(text) == {
        "sglang:request_waiting_time",
        "sglang:num_requests",
        "metricbridge_upstream_up",
    }


async def test_contract_report_matches_the_fixture(aiohttp_server, aiohttp_client) -> None:
    """/contract says which rows the tp1 fixture serves, how, and which need the engine."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream())
    report = await (await client.get("/contract")).json()
    rows = {row["family"]: row for row in report["rows"]}
    assert rows["sglang:request_waiting_time"]["state"] == "translated"
    assert rows["sglang:num_aborted_requests_total"]["state"] == "native"  # tp1 saw aborts
    assert rows["sglang:generation_time"]["state"] == "missing"
    assert rows["sglang:generation_time"]["reason"] == "needs instrumentation inside the engine"
    assert (
        rows["sglang:kvcache_transfer_time"]["reason"]
        == "source sglang:kv_transfer_latency_ms is absent upstream"
    )
    assert rows["sglang:num_running_reqs_offline_batch"]["state"] == "structural"
    assert report["upstreams"][0]["up"] is True
    assert sum(report["totals"].values()) == len(rows)
    assert {item["item"] for item in report["items"]} >= {
        "log_schema",
        "idle_zeroing_and_heartbeat",
    }


async def test_two_upstreams_are_merged(aiohttp_server, aiohttp_client) -> None:
    """An LLM server and an EPD encoder server are served as one exposition."""
    llm = await aiohttp_server(FakeUpstream().app())
    encoder = await aiohttp_server(
        FakeUpstream(body=(FIXTURES / "epd-encoder.prom").read_bytes()).app()
    )
    client = await aiohttp_client(
        bridge_app(str(llm.make_url("/metrics")), str(encoder.make_url("/metrics")))
    )
    text = await (await client.get("/metrics")).text()
    names = _names(text)
    assert {
        "sglang:request_waiting_time",
        "sglang:epd_transfer_total_seconds",
        "sglang:encoder_cache_used_bytes",
    } <= names
    assert text.count("metricbridge_upstream_up{") == 2


async def test_reload_good_then_bad_keeps_the_good_config(
    aiohttp_server, aiohttp_client, tmp_path: Path
) -> None:
    """POST /-/reload swaps in a valid config and refuses a broken one, which changes nothing."""
    config = tmp_path / "aliases.yaml"
    config.write_text(
        (TESTS / "golden" / "alias-keeps-source-histogram" / "aliases.yaml").read_text()
    )
    server = await aiohttp_server(FakeUpstream().app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics")), config=str(config)))
    assert "sglang:engine_startup_time" not in _names(await (await client.get("/metrics")).text())
    shutil.copy(TESTS / "golden" / "select-drops-selecting-label" / "aliases.yaml", config)
    response = await client.post("/-/reload")
    assert response.status == 200
    text = await (await client.get("/metrics")).text()
    assert "sglang:engine_startup_time" in _names(text)
    assert "metricbridge_config_last_reload_successful 1.0" in text
    shutil.copy(TESTS / "config_invalid" / "bad_regex.yaml", config)
    response = await client.post("/-/reload")
    assert response.status == 500
    assert "cannot compile 'storage(['" in await response.text()
    text = await (await client.get("/metrics")).text()
    assert "sglang:engine_startup_time" in _names(text)
    assert "metricbridge_config_last_reload_successful 0.0" in text
    assert (await client.get("/-/reload")).status == 405


async def test_health_and_readiness(aiohttp_server, aiohttp_client) -> None:
    """Both probes answer 200 once the app runs, whatever the upstream's state."""
    upstream = FakeUpstream(status=503)
    client = await _start(aiohttp_server, aiohttp_client, upstream)
    assert (await client.get("/-/healthy")).status == 200
    assert (await client.get("/-/ready")).status == 200
    assert upstream.requests == 0  # probes never touch the engine


async def test_contract_json_is_stable_json(aiohttp_server, aiohttp_client) -> None:
    """The report is plain JSON whose row order follows the config."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream())
    first = json.loads(await (await client.get("/contract")).text())
    assert [row["family"] for row in first["rows"]][:2] == [
        "sglang:all_gather_latency_us",
        "sglang:decode_bs_util",
    ]
