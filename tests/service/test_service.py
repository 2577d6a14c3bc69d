"""The sidecar over real sockets: formats, gzip, coalescing, name[] filters, /contract, reload."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES, TESTS
from helpers.service import PROM2_ACCEPT, PROM3_ACCEPT, FakeUpstream, bridge_app
from metricbridge.config.load import load_config
from metricbridge.service.negotiation import scrape_timeout
from metricbridge.service.server import STATE
from metricbridge.translation.compiler import compile_rules

TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"


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
    # No Accept header: client_golang's default escaping, echoed as it echoes it.
    assert response.headers["Content-Type"] == (
        "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
    )
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
    """Prometheus' Accept headers get OpenMetrics 1.0.0 with colons intact and a single # EOF.

    The Content-Type echoes the escaping asked for (Prometheus 3: allow-utf-8; Prometheus 2
    asks none: underscores), as client_golang echoes it.
    """
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream())
    response = await client.get("/metrics", headers={"Accept": accept})
    escaping = "allow-utf-8" if accept == PROM3_ACCEPT else "underscores"
    assert response.headers["Content-Type"] == (
        f"application/openmetrics-text; version=1.0.0; charset=utf-8; escaping={escaping}"
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
    assert (await client.get("/metrics")).status == 200  # /contract explains this scrape
    report = await (await client.get("/contract")).json()
    rows = {row["family"]: row for row in report["rows"]}
    assert rows["sglang:request_waiting_time"]["state"] == "translated"
    assert rows["sglang:num_aborted_requests_total"]["state"] == "native"  # tp1 saw aborts
    assert rows["sglang:generation_time"]["state"] == "missing"
    assert rows["sglang:generation_time"]["reason"] == (
        "needs instrumentation inside the engine; an approximation is served with --profile "
        "approximations"
    )
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


@pytest.mark.parametrize(
    ("header", "cap", "expected"),
    [
        (None, 2.0, 2.0),  # no header: the cap itself, as --help says
        ("10", 30.0, 9.5),  # the margin is at most 0.5 s
        ("10", 2.0, 2.0),
        ("1", 10.0, 0.75),  # and at most a quarter of the scraper's timeout
        ("0.3", 10.0, 0.225),
        ("abc", 3.0, 3.0),
        ("0", 3.0, 3.0),
        ("-1", 3.0, 3.0),
        ("nan", 3.0, 3.0),
        ("inf", 3.0, 3.0),
    ],
)
def test_scrape_timeout_keeps_a_margin_below_the_scrapers(
    header: str | None, cap: float, expected: float
) -> None:
    """The wait is the scraper's timeout less min(0.5 s, a quarter of it), at most the cap."""
    assert scrape_timeout(header, cap=cap) == pytest.approx(expected)


async def test_without_the_header_a_scrape_waits_the_whole_cap(
    aiohttp_server, aiohttp_client
) -> None:
    """No X-Prometheus-Scrape-Timeout-Seconds: a fetch slower than cap - 0.5 s still succeeds."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream(delay=0.6), timeout=1.0)
    text = await (await client.get("/metrics")).text()
    assert "sglang:request_waiting_time_count" in text


async def test_the_header_bounds_a_new_fetch(aiohttp_server, aiohttp_client) -> None:
    """With a 3 s scrape timeout the fetch gives up at 2.5 s: answered in time, reason timeout.

    Seconds rather than fractions of one, so that a busy machine's late wake-ups stay well
    inside the margins: the answer comes after the 2.5 s the bridge waits and before the
    scraper's own 3 s, and not after the engine's 6 s."""
    client = await _start(aiohttp_server, aiohttp_client, FakeUpstream(delay=6.0), timeout=10.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await client.get("/metrics", headers={TIMEOUT_HEADER: "3"})
    text = await response.text()
    assert 2.4 < loop.time() - started < 3.0
    assert response.status == 200
    assert 'reason="timeout"' in text
    assert "sglang:" not in text


async def test_a_short_deadline_does_not_fail_the_fetch_for_a_longer_one(
    aiohttp_server, aiohttp_client
) -> None:
    """A scraper with a tiny timeout starts the fetch; one that can wait joins it.

    The fetch times out at the first one's deadline, which is its own business: the second
    fetches again with the time it has and gets the engine's data, and the timeout is not
    cached for a third either (cache_ttl 5 s).
    """
    upstream = FakeUpstream(delay=0.2)
    client = await _start(aiohttp_server, aiohttp_client, upstream, timeout=5.0, cache_ttl=5.0)
    impatient = asyncio.create_task(client.get("/metrics", headers={TIMEOUT_HEADER: "0.05"}))
    await asyncio.sleep(0.01)
    patient = await client.get("/metrics", headers={TIMEOUT_HEADER: "10"})
    text = await patient.text()
    assert "sglang:" in text
    assert re.search(r"^metricbridge_upstream_up\{[^}]*\} 1\.0$", text, re.MULTILINE)
    impatient_text = await (await impatient).text()
    assert 'reason="timeout"' in impatient_text  # its own deadline: told so, in time
    assert "sglang:" not in impatient_text
    assert upstream.requests == 2
    third = await (await client.get("/metrics")).text()
    assert "sglang:" in third
    assert upstream.requests == 2  # the patient fetch is the one cached


async def test_a_fetch_cut_short_by_its_own_scraper_is_not_cached(
    aiohttp_server, aiohttp_client
) -> None:
    """Alone, the impatient scraper's timeout is not what the next scraper gets."""
    # The scraper's time is long enough for its fetch to reach the engine on a busy machine
    # (else the engine never counts it), and shorter than the engine takes to answer.
    upstream = FakeUpstream(delay=1.5)
    client = await _start(aiohttp_server, aiohttp_client, upstream, timeout=5.0, cache_ttl=5.0)
    text = await (await client.get("/metrics", headers={TIMEOUT_HEADER: "0.5"})).text()
    assert 'reason="timeout"' in text
    assert "sglang:" in await (await client.get("/metrics")).text()
    assert upstream.requests == 2


async def test_a_joining_scrape_answers_within_its_own_timeout(
    aiohttp_server, aiohttp_client, caplog: pytest.LogCaptureFixture
) -> None:
    """A scrape joining a longer fetch (here a scrape allowed the cap) leaves when its own time
    is up: 200 with self-metrics, no engine data, counted and logged; the fetch goes on."""
    upstream = FakeUpstream(delay=3.0)
    client = await _start(aiohttp_server, aiohttp_client, upstream, timeout=10.0)
    assert "sglang:" in await (await client.get("/metrics")).text()  # a previous snapshot exists
    loop = asyncio.get_running_loop()
    patient = asyncio.create_task(client.get("/metrics", headers={TIMEOUT_HEADER: "10"}))
    await asyncio.sleep(0.1)
    started = loop.time()
    with caplog.at_level(logging.WARNING, logger="metricbridge"):
        response = await client.get("/metrics", headers={TIMEOUT_HEADER: "1.6"})
        text = await response.text()
    assert loop.time() - started < 2.4  # waited 1.2 s, not the fetch's remaining 2.9 s
    assert response.status == 200
    assert "sglang:" not in text  # the old snapshot is not served as fresh
    assert "metricbridge_build_info{" in text
    assert 'metricbridge_scrapes_gave_up_total{stage="fetch"} 1.0' in text
    assert 'metricbridge_coalesced_scrapes_total{how="joined"} 1.0' in text
    assert any("answered without engine data" in r.getMessage() for r in caplog.records)
    # the shared fetch was not cancelled
    assert "sglang:" in await (await patient).text()
    assert upstream.requests == 2


async def test_a_fetch_in_flight_during_a_reload_is_translated_with_the_new_rules(
    aiohttp_server, aiohttp_client, tmp_path: Path
) -> None:
    """A reload while the engine is being fetched: neither that scrape nor the cached snapshot
    (cache_ttl 5) is served with the old rules."""
    config = tmp_path / "aliases.yaml"
    shutil.copy(TESTS / "golden" / "alias-keeps-source-histogram" / "aliases.yaml", config)
    upstream = FakeUpstream(delay=0.5)
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(
        bridge_app(str(server.make_url("/metrics")), cache_ttl=5, config=str(config))
    )
    scrape = asyncio.create_task(client.get("/metrics"))
    await asyncio.sleep(0.2)
    shutil.copy(TESTS / "golden" / "select-drops-selecting-label" / "aliases.yaml", config)
    assert (await client.post("/-/reload")).status == 200
    assert "sglang:engine_startup_time" in _names(await (await scrape).text())
    assert "sglang:engine_startup_time" in _names(await (await client.get("/metrics")).text())
    assert upstream.requests == 1


async def test_a_snapshot_of_replaced_rules_is_not_reused(
    aiohttp_server, aiohttp_client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload landing between a fetch's end and its publication: the snapshot is not cached."""
    upstream = FakeUpstream()
    server = await aiohttp_server(upstream.app())
    app = bridge_app(str(server.make_url("/metrics")), cache_ttl=60, server_info=False)
    await aiohttp_client(app)
    bridge = app[STATE].bridge
    new_rules = compile_rules(load_config(None))
    loop = asyncio.get_running_loop()
    changed = bridge.metrics.changed

    def changed_then_reload() -> None:
        # Called in the fetch's last step: the reload runs before the task's done callbacks.
        changed()
        monkeypatch.setattr(bridge.metrics, "changed", changed)
        loop.call_soon(bridge.replace_rules, new_rules)

    monkeypatch.setattr(bridge.metrics, "changed", changed_then_reload)
    first = await bridge.snapshot(2.0)
    assert bridge.rules is new_rules
    assert first.rules is not new_rules
    second = await bridge.snapshot(2.0)
    assert second.rules is new_rules
    assert upstream.requests == 2
