"""A payload that takes seconds to translate: the loop keeps answering, scrapes keep their deadline.

The payload is the tp1 fixture with ``sglang:cached_tokens_total`` (a family the shipped rules
relabel, so the bridge parses and rewrites every series of it) grown to tens of thousands of
series, and as many more relabelled families as it takes, on this machine and this version of
the bridge, for the translation to hold the CPU for TRANSLATION_SECONDS (``calibrated``): the
bounds below mean something only while it does, and the bridge keeps getting faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.hostile import BridgeProcess, Helper
from helpers.paths import FIXTURES, TESTS
from helpers.ports import free_port
from helpers.service import FakeUpstream, bridge_app
from helpers.strength import full
from metricbridge.config.load import load_config
from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import STATE, ServiceSettings, make_app
from metricbridge.service.snapshot import FetchSettings
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import read_payload, translate_upstreams

# Their bounds are about latency under a translation of seconds: they run one after another, on
# one xdist worker, never beside each other.
pytestmark = pytest.mark.xdist_group("timing")

# A kubelet's default probe timeout in the campaign run (CI); more in the README's run, which
# may share its cores with other work (see test_hostile_campaign.HEALTH_BUDGET).
HEALTH_BUDGET = 1.0 if full() else 2.5
FAMILY = "sglang:cached_tokens_total"
SERIES = 60_000  # of FAMILY; the rest of the translation's length is in PART families
PART = "slow:part"  # PART0, PART1, ...: relabelled by the test's rules, PART_SERIES series each
PART_SERIES = 50_000
# What the translation must take, measured in this process before the bridge starts: longer
# than the 1 s budget of the campaign run and the 1 s scrape timeout below, on an idle machine.
TRANSLATION_SECONDS = 1.5
OM = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def payload(series: int) -> bytes:
    """tp1 with the relabelled family holding ``series`` series."""
    kept = [
        line
        for line in (FIXTURES / "tp1.prom").read_bytes().splitlines(keepends=True)
        if FAMILY.encode() not in line
    ]
    # An L3 family, whose storage_backend label the contract's relabel joins into cache_source.
    l3 = (
        b"# HELP sglang:prefetched_tokens_total Prefetched tokens.\n"
        b"# TYPE sglang:prefetched_tokens_total counter\n"
        b'sglang:prefetched_tokens_total{engine_type="unified",model_name="m",'
        b'storage_backend="mooncake"} 1.0\n'
    )
    header = l3 + f"# HELP {FAMILY} Cached prompt tokens.\n# TYPE {FAMILY} counter\n".encode()
    lines = (
        f'{FAMILY}{{cache_source="storage",engine_type="unified",model_name="m",i="{i}"}} 1.0\n'
        for i in range(series)
    )
    return b"".join(kept) + header + "".join(lines).encode()


def part(index: int, series: int) -> bytes:
    """A gauge family of ``series`` series, one label each that the test's rules relabel."""
    name = f"{PART}{index}"
    lines = (f'{name}{{shard="{i % 97}",i="{i}"}} {i}\n' for i in range(series))
    return (
        f"# HELP {name} Translated slowly.\n# TYPE {name} gauge\n".encode()
        + "".join(lines).encode()
    )


def slow_rules(path: Path, parts: int) -> Path:
    """The shipped rules plus a relabel row for each of ``parts`` PART families."""
    doc = yaml.safe_load((TESTS.parent / "config" / "aliases.yaml").read_text())
    for index in range(parts):
        doc["families"][f"{PART}{index}"] = {
            "disposition": "relabel",
            "type": "gauge",
            "relabel": [
                {
                    "source_labels": ["i"],
                    "regex": "(.*7)",
                    "target_label": "seven",
                    "replacement": "$1",
                }
            ],
        }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _seconds_to_translate(body: bytes, rules: Path) -> float:
    """CPU seconds of the bridge's own read and translation of ``body``, in this process."""
    compiled = compile_rules(load_config(rules))
    started = time.process_time()
    read = read_payload(body, Format.TEXT, compiled, caches=CodecCaches())
    translate_upstreams(
        [("", read)], compiled, caches=CodecCaches(), remembered=TranslationCaches()
    )
    return time.process_time() - started


@dataclass(frozen=True)
class Slow:
    """A payload that takes TRANSLATION_SECONDS to translate with ``rules``."""

    payload: bytes
    rules: Path
    parts: int


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Slow:
    """FAMILY's SERIES series, then PART families until the translation is long enough."""
    tmp = tmp_path_factory.mktemp("slow")
    one_part = part(0, PART_SERIES)
    base = payload(SERIES)
    without = _seconds_to_translate(base, slow_rules(tmp / "base.yaml", 0))
    per_part = _seconds_to_translate(base + one_part, slow_rules(tmp / "one.yaml", 1)) - without
    parts = max(1, math.ceil((TRANSLATION_SECONDS - without) / max(per_part, 1e-3)))
    body = base + b"".join(part(index, PART_SERIES) for index in range(parts))
    return Slow(body, slow_rules(tmp / "aliases.yaml", parts), parts)


@pytest.fixture(scope="module")
def slow_payload(slow: Slow) -> bytes:
    return slow.payload


async def _served(aiohttp_server: Any, body: bytes, **settings: Any) -> tuple[Any, Any, str]:
    """A fake upstream serving ``body``, a bridge in front of it; both on real sockets."""
    upstream = FakeUpstream(body=body)
    up = await aiohttp_server(upstream.app())
    app = bridge_app(str(up.make_url("/metrics")), server_info=False, **settings)
    bridge = await aiohttp_server(app)
    return upstream, app, str(bridge.make_url("/"))


def _translation_seconds(text: str) -> float:
    """``metricbridge_translation_duration_seconds_sum`` in a served body."""
    (value,) = (
        line.split()[-1]
        for line in text.splitlines()
        if line.startswith("metricbridge_translation_duration_seconds_sum")
    )
    return float(value)


def _rules(slow: Slow) -> tuple[str, str]:
    return ("--config", str(slow.rules))


@contextlib.asynccontextmanager
async def _bridge_process(
    aiohttp_server: Any, body: bytes, tmp_path: Path, *flags: str
) -> AsyncIterator[tuple[FakeUpstream, BridgeProcess]]:
    """``metricbridge serve`` as a child process, in front of a fake upstream serving ``body``.

    The bridge's timing is a property of its process: its event loop and its worker, the CPU
    they share, the switch interval ``serve`` sets. In this test process the bridge would share
    the loop and the GIL with the upstream and the test's own client as well.
    """
    upstream = FakeUpstream(body=body)
    up = await aiohttp_server(upstream.app())
    bridge = BridgeProcess(
        free_port(),
        tmp_path / "bridge.log",
        "--upstream", str(up.make_url("/metrics")),
        "--no-server-info",
        "--upstream-timeout", "60",
        "--cache-ttl", "60",
        *flags,
    )  # fmt: skip
    try:
        await asyncio.to_thread(bridge.wait_ready)
        yield upstream, bridge
    finally:
        await asyncio.to_thread(bridge.stop)


@pytest.mark.slow
async def test_the_loop_answers_health_checks_while_a_large_payload_is_translated(
    aiohttp_server: Any, slow: Slow, tmp_path: Path
) -> None:
    """/-/healthy answers within HEALTH_BUDGET, every time, all through a translation of seconds.

    The prober is a process of its own, as a kubelet is.
    """
    async with _bridge_process(aiohttp_server, slow.payload, tmp_path, *_rules(slow)) as (
        _,
        bridge,
    ):
        prober = Helper("probe", bridge.base + "/-/healthy")
        try:
            await asyncio.to_thread(prober.wait_started)
            started = time.time()
            async with (
                aiohttp.ClientSession(base_url=bridge.base) as session,
                session.get("/metrics") as response,
            ):
                text = await response.text()
            ended = time.time()
        finally:
            await asyncio.to_thread(prober.stop)
    assert response.status == 200
    assert f'{FAMILY}{{cache_source="storage_mooncake"' in text  # translated, not cut
    # The translation really did hold the CPU for longer than the bound below.
    assert _translation_seconds(text) > 1.0, "translation got faster than calibrated"
    probes = [p for p in prober.lines if started <= p["t"] <= ended]
    assert len(probes) > 10
    slow = [p for p in probes if p["status"] != 200 or p["s"] >= HEALTH_BUDGET]
    assert not slow, f"{len(slow)} of {len(probes)} probes late or failed: {slow[:5]}"


@pytest.mark.slow
async def test_a_scrape_past_its_deadline_gets_self_metrics_in_time_and_the_work_is_kept(
    aiohttp_server: Any, slow: Slow, tmp_path: Path
) -> None:
    """A 1 s Prometheus timeout: a valid 200 within it, no engine data, the reason counted;
    the translation goes on, and the next scrape is given it without another fetch."""
    headers = {"Accept": OM, "X-Prometheus-Scrape-Timeout-Seconds": "1"}
    async with (
        _bridge_process(aiohttp_server, slow.payload, tmp_path, *_rules(slow)) as (
            upstream,
            bridge,
        ),
        aiohttp.ClientSession(base_url=bridge.base) as session,
    ):
        async with asyncio.timeout(10):  # the start-up check of the upstream comes first
            while upstream.requests < 1:  # noqa: ASYNC110 - another process's request
                await asyncio.sleep(0.05)
        started = time.perf_counter()
        async with session.get("/metrics", headers=headers) as response:
            text = await response.text()
        waited = time.perf_counter() - started
        assert response.status == 200
        assert waited < 1.0, f"answered after {waited:.2f} s"
        families = {family.name: family for family in parse_om(text)}
        assert not [name for name in families if name.startswith("sglang")]
        gave_up = {
            sample.labels["stage"]: sample.value
            for sample in families["metricbridge_scrapes_gave_up"].samples
        }
        assert gave_up == {"fetch": 0.0, "translation": 1.0}
        assert _translation_seconds(text) == 0.0, "translation got faster than calibrated"
        # The translation goes on; a scrape that can wait is given it, and the engine was
        # fetched once.
        async with session.get("/metrics", headers={"Accept": OM}) as response:
            text = await response.text()
        assert f'{FAMILY}{{cache_source="storage_mooncake"' in text
        assert upstream.requests == 2  # the start-up check, then the one fetch both scrapes had
        log = bridge.log()
    assert "still being translated" in log


async def test_a_scrape_after_a_reload_is_not_given_the_translation_the_reload_overtook(
    aiohttp_server: Any, slow_payload: bytes, tmp_path: Path
) -> None:
    """A reload while a fetch is being translated with the old rules: a scrape arriving after
    the reload answered does not join that translation, it gets one with the new rules."""
    config = tmp_path / "aliases.yaml"
    shutil.copy(TESTS.parent / "config" / "aliases.yaml", config)  # relabels the family
    _, app, base = await _served(
        aiohttp_server, slow_payload, timeout=60.0, cache_ttl=60.0, config=str(config)
    )
    async with aiohttp.ClientSession(base_url=base) as session:
        first = asyncio.create_task(session.get("/metrics"))
        bridge = app[STATE].bridge
        for _ in range(600):
            if bridge is not None and bridge._stage() == "translation":
                break
            await asyncio.sleep(0.01)
        assert bridge._inflight is not None, "the translation ended before the reload"
        shutil.copy(TESTS / "golden" / "select-drops-selecting-label" / "aliases.yaml", config)
        assert (await session.post("/-/reload")).status == 200
        async with session.get("/metrics") as response:
            text = await response.text()
        (await first).release()
    assert "storage_mooncake" not in text  # the old rules' relabelling
    assert "sglang:engine_startup_time" in text  # the new rules' select


def _bridge_with_limit(upstream_url: str, limit: int) -> Any:
    settings = ServiceSettings(
        (parse_upstream(upstream_url),),
        fetch=FetchSettings(timeout_cap=5.0, cache_ttl=0.0, family_sample_limit=limit),
        server_info=False,
    )
    return make_app(settings, load_config(None))


async def test_a_family_over_the_sample_limit_is_dropped_counted_and_logged_once(
    aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A rule-read family over --family-sample-limit is not served (nor translated); its samples
    count as dropped, the gauges show how close to the limit the largest family is, the rest
    of the payload is served, and the drop is logged at warning once, not on every fetch."""
    upstream = FakeUpstream(body=payload(2_000))
    up = await aiohttp_server(upstream.app())
    bridge = await aiohttp_server(_bridge_with_limit(str(up.make_url("/metrics")), 1_000))
    async with aiohttp.ClientSession(base_url=str(bridge.make_url("/"))) as session:
        with caplog.at_level(logging.DEBUG, logger="metricbridge"):
            texts = [await (await session.get("/metrics")).text() for _ in range(2)]
    families = {family.name: family for family in parse_text(texts[1])}
    assert "sglang:cached_tokens" not in families
    assert "sglang:num_running_reqs" in families  # the rest is served
    dropped = {
        sample.labels["reason"]: sample.value
        for sample in families["metricbridge_samples_dropped"].samples
    }
    assert dropped["sample_limit"] == 4_000  # two fetches of 2,000
    (largest,) = families["metricbridge_largest_family_samples"].samples
    assert largest.value == 2_000
    assert families["metricbridge_family_sample_limit"].samples[0].value == 1_000
    drops = [r for r in caplog.records if "over --family-sample-limit" in r.getMessage()]
    assert [r.levelno for r in drops] == [logging.WARNING, logging.DEBUG]
    assert "sglang:cached_tokens_total: 2000 samples" in drops[0].getMessage()


async def test_a_family_within_the_sample_limit_is_served(aiohttp_server: Any) -> None:
    """At the limit, nothing is dropped; the gauge shows the family's size."""
    upstream = FakeUpstream(body=payload(1_000))
    up = await aiohttp_server(upstream.app())
    bridge = await aiohttp_server(_bridge_with_limit(str(up.make_url("/metrics")), 1_000))
    async with aiohttp.ClientSession(base_url=str(bridge.make_url("/"))) as session:
        text = await (await session.get("/metrics")).text()
    assert text.count(f'{FAMILY}{{cache_source="storage_mooncake"') == 1_000
    assert 'reason="sample_limit"' not in text
    assert "metricbridge_largest_family_samples{" in text


@pytest.mark.slow
async def test_sigterm_during_a_translation_exits_zero(aiohttp_server: Any, slow: Slow) -> None:
    """SIGTERM while a translation of seconds runs with nobody waiting for it: the process says
    so and exits 0 within the grace period. Left to the interpreter's finalisation, a thread
    stopped inside RE2's matcher ends in std::terminate (exit 134): often, not every time.

    The payload is measured to take TRANSLATION_SECONDS on this machine (``slow``), and the
    request gives up after a fraction of that, so that the signal lands while it runs."""
    upstream = FakeUpstream(body=slow.payload)
    up = await aiohttp_server(upstream.app())
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "metricbridge",
        "--upstream",
        str(up.make_url("/metrics")),
        "--listen",
        f"127.0.0.1:{port}",
        "--no-server-info",
        "--config",
        str(slow.rules),
        stderr=asyncio.subprocess.PIPE,
    )
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": "0.5"}
    async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as session:
        for _ in range(100):
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with session.get("/-/ready") as response:
                    if response.status == 200:
                        break
            await asyncio.sleep(0.1)
        async with session.get("/metrics", headers=headers) as response:
            text = await response.text()
    assert 'metricbridge_scrapes_gave_up_total{stage="translation"} 1.0' in text
    process.send_signal(signal.SIGTERM)
    started = time.perf_counter()
    assert await asyncio.wait_for(process.wait(), 20) == 0
    assert time.perf_counter() - started < 15
    stderr = (await process.stderr.read()).decode()  # type: ignore[union-attr]
    assert "stopped with a translation still running" in stderr
    assert "terminate called" not in stderr
    assert "Traceback" not in stderr
