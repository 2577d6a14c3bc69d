"""The bridge's own metrics in /metrics responses: cached per change, always current, valid.

Responses reuse a render of the self-metrics until one of them changes (a fetch, a reload, a
/server_info poll) and write the per-scrape counters by hand; these tests hold both to what
prometheus_client itself would write at that moment.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import logging
import platform
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES, TESTS
from helpers.promtool import promtool_check_metrics
from helpers.runtime import mask_runtime_values
from helpers.service import FakeUpstream, bridge_app
from metricbridge import __version__
from metricbridge.exposition import line_match
from metricbridge.model.family import Format
from metricbridge.service.selfmetrics import ScrapeCounter, SelfMetrics
from metricbridge.service.server import STATE

OM_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
FIRST_OWN = b"# HELP metricbridge_scrapes_total "  # the self-metrics follow the engine part
FIRST_OWN_OM = b"# HELP metricbridge_scrapes "


RUNTIME = re.compile(rb"^(?:# (?:HELP|TYPE) )?(?:process|python)_.*\n", re.MULTILINE)


def _own(body: bytes, fmt: Format) -> bytes:
    """The self-metrics part of a response body (without OpenMetrics' # EOF).

    Less the process's own families, which move between the response and any later render
    (CPU seconds, memory, GC counts); test_runtime_families_* check those.
    """
    marker = FIRST_OWN_OM if fmt is Format.OPENMETRICS else FIRST_OWN
    assert body.count(marker) == 1
    return RUNTIME.sub(b"", body[body.index(marker) :].removesuffix(b"# EOF\n"))


def _fresh(app: Any, fmt: Format) -> bytes:
    """What prometheus_client renders for the self-metrics registry right now (as ``_own``)."""
    return RUNTIME.sub(b"", app[STATE].metrics.render(fmt))


async def _client(aiohttp_server: Any, aiohttp_client: Any, **kwargs: Any) -> tuple[Any, Any]:
    server = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(server.make_url("/metrics")), **kwargs)
    return app, await aiohttp_client(app)


@pytest.fixture
def without_created_series() -> Iterator[None]:
    """prometheus_client without _created series (the bridge's own counters have none), for
    this test only: the switch is process-wide, and other tests render with the default."""
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        prometheus_client.enable_created_metrics()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("labels", [(), ("text", "openmetrics", "text"), ('a"b\\c\nd',)])
@pytest.mark.usefixtures("without_created_series")
def test_scrape_counter_writes_what_prometheus_client_writes(labels: tuple[str, ...]) -> None:
    """Byte for byte, both formats, with no samples yet and with escaping."""
    registry = CollectorRegistry(auto_describe=False)
    doc = 'Scrapes "served", by\\format.'
    reference = Counter("x_scrapes_total", doc, ["format"], registry=registry)
    ours = ScrapeCounter("x_scrapes_total", doc, "format")
    for label in labels:
        reference.labels(label).inc()
        ours.inc(label)
    assert ours.render(Format.TEXT).encode() == prometheus_client.generate_latest(registry)
    assert ours.render(Format.OPENMETRICS).encode() + b"# EOF\n" == generate_openmetrics(registry)  # type: ignore[no-untyped-call]


def test_settled_render_is_reused_until_something_changes() -> None:
    """One prometheus_client render per generation; changed() makes the next one fresh."""
    metrics = SelfMetrics()
    first = metrics.render_settled(Format.TEXT)
    assert metrics.render_settled(Format.TEXT) is first
    metrics.upstream_up.labels("u").set(1)
    assert metrics.render_settled(Format.TEXT) is first  # not announced yet
    metrics.changed()
    second = metrics.render_settled(Format.TEXT)
    assert b'metricbridge_upstream_up{upstream="u"} 1.0' in second
    assert gzip.decompress(metrics.render_settled(Format.TEXT, gzip_level=1)) == second
    assert metrics.render_settled(Format.OPENMETRICS).endswith(b"\n# EOF\n")


@pytest.mark.parametrize("fmt", [Format.TEXT, Format.OPENMETRICS])
async def test_cached_responses_carry_current_self_metrics(
    aiohttp_server, aiohttp_client, tmp_path: Path, fmt: Format
) -> None:
    """Each response's self-metrics equal a fresh render: after a fetch, a cached reuse, a
    rejected reload and a /server_info poll, with the scrape counters counting this scrape."""
    config = tmp_path / "aliases.yaml"
    shutil.copy(TESTS / "golden" / "alias-keeps-source-histogram" / "aliases.yaml", config)
    app, client = await _client(aiohttp_server, aiohttp_client, cache_ttl=60, config=str(config))
    headers = {"Accept": OM_ACCEPT if fmt is Format.OPENMETRICS else "text/plain"}

    async def scrape() -> bytes:
        response = await client.get("/metrics", headers=headers)
        assert response.status == 200
        return await response.read()

    first = await scrape()  # a fetch
    assert _own(first, fmt) == _fresh(app, fmt)
    second = await scrape()  # the same snapshot, reused
    assert _own(second, fmt) == _fresh(app, fmt)
    assert b'how="cached"} 1.0' in second
    shutil.copy(TESTS / "config_invalid" / "bad_regex.yaml", config)
    assert (await client.post("/-/reload")).status == 500
    third = await scrape()
    assert b"metricbridge_config_last_reload_successful 0.0" in third
    assert _own(third, fmt) == _fresh(app, fmt)
    app[STATE].metrics.server_info_polled(ok=True)
    fourth = await scrape()
    assert b"metricbridge_server_info_up 1.0" in fourth
    assert _own(fourth, fmt) == _fresh(app, fmt)
    assert (
        first[: first.index(b"# HELP metricbridge_")]
        == fourth[: fourth.index(b"# HELP metricbridge_")]
    )


@pytest.mark.parametrize("accept", ["text/plain", OM_ACCEPT])
async def test_every_response_is_one_valid_exposition(
    aiohttp_server, aiohttp_client, accept: str
) -> None:
    """Fetched or reused, plain or gzip: parses, no family twice, one # EOF last, promtool-clean."""
    _, client = await _client(aiohttp_server, aiohttp_client, cache_ttl=60)
    om = accept == OM_ACCEPT
    for encoding in ("identity", "gzip", "identity", "gzip"):
        response = await client.get(
            "/metrics",
            headers={"Accept": accept, "Accept-Encoding": encoding},
            auto_decompress=False,
        )
        raw = await response.read()
        assert response.content_length == len(raw)
        body = gzip.decompress(raw) if encoding == "gzip" else raw
        names = [family.name for family in (parse_om if om else parse_text)(body.decode())]
        assert len(names) == len(set(names))
        assert "metricbridge_scrapes" in names or "metricbridge_scrapes_total" in names
        assert body.count(b"# EOF") == (1 if om else 0)
        assert body.endswith(b"# EOF\n") is om
        if not om:
            promtool_check_metrics(body)


async def test_head_sends_the_length_and_no_body(aiohttp_server, aiohttp_client) -> None:
    """HEAD /metrics answers like GET, Content-Length included, without the body."""
    _, client = await _client(aiohttp_server, aiohttp_client, cache_ttl=60)
    identity = {"Accept-Encoding": "identity"}
    for _ in range(2):  # a fetch, then a reuse: every counter line exists from here on
        await (await client.get("/metrics", headers=identity)).read()
    # The process's own figures (CPU seconds, RSS, GC counts) can move between the HEAD and the
    # GET on a busy machine and change the length by a few bytes: a wrong HEAD (no length, the
    # engine part's only) is wrong on every try, a moved figure only on some.
    lengths = []
    for _ in range(5):
        head = await client.head("/metrics", headers=identity)
        assert head.status == 200
        assert await head.read() == b""
        body = await (await client.get("/metrics", headers=identity)).read()
        lengths.append((head.content_length, len(body)))
        if head.content_length == len(body):  # counters 3.0 and 4.0 are as long
            break
    else:
        raise AssertionError(f"HEAD and GET lengths differ on every try: {lengths}")


async def test_scraper_leaving_mid_response_is_not_an_error(
    aiohttp_server, caplog: pytest.LogCaptureFixture
) -> None:
    """A scraper that gives up mid-body (its timeout) costs nothing and logs no error."""
    body = (FIXTURES / "tp1.prom").read_bytes()
    filler = b"".join(
        b'sglang_filler_gauge{i="%d"} 1.0\n' % i for i in range(300_000)
    )  # ~9 MB: more than the socket buffers hold, so the bridge is still writing when we leave
    upstream = FakeUpstream(body=body + b"# TYPE sglang_filler_gauge gauge\n" + filler)
    up = await aiohttp_server(upstream.app())
    bridge = await aiohttp_server(bridge_app(str(up.make_url("/metrics")), cache_ttl=60))
    for _ in range(2):  # the first fetches, the second is served from the snapshot
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the body cannot hide here
        sock.connect((bridge.host, bridge.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n")
        assert (await reader.read(100)).startswith(b"HTTP/1.1 200")
        writer.transport.abort()  # reset, with most of the body unread
        await asyncio.sleep(0.2)
    session = aiohttp.ClientSession()
    async with session, session.get(bridge.make_url("/metrics")) as response:
        assert response.status == 200
        assert b"filler_gauge" in await response.read()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_self_metrics_are_written_byte_for_byte_as_prometheus_client_writes_them() -> None:
    """Every kind of family the bridge has (gauges, counters, histograms, labels that need
    escaping), in both formats, against prometheus_client's own encoders."""
    metrics = SelfMetrics()
    upstream = 'http://h:1/metrics?a="b"\\c'
    metrics.upstream_up.labels(upstream).set(1)
    metrics.upstream_duration.labels(upstream, "ok").observe(0.0123)
    metrics.upstream_duration.labels(upstream, "failed").observe(2.0)
    metrics.server_info_polled(ok=False)
    metrics.upstream_failures.labels(upstream, "timeout").inc()
    metrics.translation_duration.observe(0.002)
    metrics.samples_dropped.labels("malformed").inc(3)
    metrics.config_loaded(ok=True, at=1700000000.5)
    metrics.scrapes.inc("text")
    registry = metrics.registry
    assert mask_runtime_values(metrics.render(Format.TEXT)) == mask_runtime_values(
        prometheus_client.generate_latest(registry)
    )
    expected = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
    served = metrics.render(Format.OPENMETRICS) + b"# EOF\n"
    assert mask_runtime_values(served) == mask_runtime_values(expected)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text response, keyed by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parse_text(text)
        for sample in family.samples
    }


def _engine_counts(text: str) -> tuple[int, int]:
    """Families and sample lines of the engine part of a text exposition."""
    engine = text.split("# HELP metricbridge_", 1)[0].splitlines()
    return (
        sum(line.startswith("# TYPE ") for line in engine),
        sum(bool(line) and not line.startswith("#") for line in engine),
    )


async def test_fetch_describing_self_metrics_follow_every_fetch(
    aiohttp_server, aiohttp_client
) -> None:
    """Build info, body size, fetch durations by outcome, and family and sample counts: served,
    and updated by each fetch, a failed one included."""
    upstream = FakeUpstream()
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    label = (("upstream", f"{server.host}:{server.port}/metrics"),)

    async def scrape() -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
        text = await (await client.get("/metrics")).text()
        return text, _samples(text)

    def fetches(samples: dict[Any, float], outcome: str) -> float:
        key = (
            "metricbridge_upstream_scrape_duration_seconds_count",
            (("outcome", outcome), *label),
        )
        return samples.get(key, 0.0)

    text, samples = await scrape()
    reader = "compiled" if line_match.COMPILED else "python"
    build = (("python", platform.python_version()), ("reader", reader), ("version", __version__))
    assert samples[("metricbridge_build_info", build)] == 1.0
    assert samples[("metricbridge_upstream_response_bytes", label)] == len(upstream.body)
    assert fetches(samples, "ok") == 1.0
    assert fetches(samples, "failed") == 0.0
    families_in, samples_in = _engine_counts(upstream.body.decode())
    families_out, samples_out = _engine_counts(text)
    assert samples[("metricbridge_families", (("direction", "in"),))] == families_in
    assert samples[("metricbridge_samples", (("direction", "in"),))] == samples_in
    assert samples[("metricbridge_families", (("direction", "out"),))] == families_out
    assert samples[("metricbridge_samples", (("direction", "out"),))] == samples_out

    upstream.body = b"# TYPE g gauge\ng 1\n# TYPE h_total counter\nh_total 2\n"
    _, samples = await scrape()
    assert samples[("metricbridge_upstream_response_bytes", label)] == len(upstream.body)
    assert fetches(samples, "ok") == 2.0
    assert samples[("metricbridge_families", (("direction", "in"),))] == 2
    assert samples[("metricbridge_samples", (("direction", "in"),))] == 2

    upstream.status = 500
    _, samples = await scrape()
    assert fetches(samples, "ok") == 2.0
    assert fetches(samples, "failed") == 1.0
    assert samples[("metricbridge_families", (("direction", "in"),))] == 0
    assert samples[("metricbridge_upstream_response_bytes", label)] == len(upstream.body)


async def test_reload_success_timestamp_is_served_and_moves(
    aiohttp_server, aiohttp_client, tmp_path: Path
) -> None:
    """The start-up load sets the timestamp, a good reload moves it, a rejected one does not."""
    config = tmp_path / "aliases.yaml"
    shutil.copy(TESTS / "golden" / "alias-keeps-source-histogram" / "aliases.yaml", config)
    before = time.time()
    _, client = await _client(aiohttp_server, aiohttp_client, config=str(config))
    key = ("metricbridge_config_last_reload_success_timestamp_seconds", ())

    async def stamp() -> float:
        return _samples(await (await client.get("/metrics")).text())[key]

    started = await stamp()
    assert before <= started <= time.time()
    await asyncio.sleep(0.05)
    before_reload = time.time()
    assert (await client.post("/-/reload")).status == 200
    reloaded = await stamp()
    assert before_reload <= reloaded <= time.time()
    shutil.copy(TESTS / "config_invalid" / "bad_regex.yaml", config)
    assert (await client.post("/-/reload")).status == 500
    assert await stamp() == reloaded


async def test_server_info_up_is_absent_when_polling_is_off(aiohttp_server, aiohttp_client) -> None:
    """--no-server-info: no metricbridge_server_info_up at all (a 0 would read as a failure)."""
    server = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(server.make_url("/metrics")), server_info=False)
    client = await aiohttp_client(app)
    await asyncio.sleep(0.1)
    for _ in range(2):
        text = await (await client.get("/metrics")).text()
        assert "metricbridge_server_info_up" not in text
        assert "metricbridge_upstream_up{" in text
    assert app[STATE].metrics.registry.get_sample_value("metricbridge_server_info_up") is None


async def test_the_upstream_bounds_are_served_beside_the_figures_they_bound(
    aiohttp_server, aiohttp_client
) -> None:
    """--upstream-max-bytes and --upstream-timeout as gauges, so a dashboard can put
    metricbridge_upstream_response_bytes and the fetch durations against them."""
    _, client = await _client(aiohttp_server, aiohttp_client, max_bytes=5 << 20, timeout=3.5)
    text = await (await client.get("/metrics")).text()
    families = {f.name: f for f in parse_text(text)}
    assert families["metricbridge_upstream_max_bytes"].samples[0].value == 5 << 20
    assert families["metricbridge_upstream_timeout_seconds"].samples[0].value == 3.5
    (served,) = families["metricbridge_upstream_response_bytes"].samples
    assert 0 < served.value < 5 << 20


def test_every_self_metric_family_is_documented() -> None:
    """docs/self-metrics.md lists every metricbridge_* family the bridge can serve."""

    from metricbridge.exposition.caches import CodecCaches  # noqa: PLC0415

    metrics = SelfMetrics()
    metrics.track_caches(CodecCaches())
    metrics.server_info_polled(ok=True, size=1)
    doc = (TESTS.parent / "docs" / "self-metrics.md").read_text()
    names = {family.name for family in metrics.registry.collect()}
    assert len(names) > 30
    missing = sorted(n for n in names if not re.search(rf"`{n}(_total)?[`{{]", doc))
    assert not missing


RUNTIME_SAMPLES = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
    "python_info",
    "python_gc_collections_total",
    "python_gc_objects_collected_total",
)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process_* needs /proc")
@pytest.mark.parametrize("fmt", [Format.TEXT, Format.OPENMETRICS])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
async def test_runtime_families_are_served_current_and_valid(
    aiohttp_server, aiohttp_client, fmt: Format, compressed: bool
) -> None:
    """process_*, python_info and python_gc_* as every Python exporter names them, in every
    response, with this process's figures, and the whole body still parses."""
    _, client = await _client(aiohttp_server, aiohttp_client, cache_ttl=60)
    headers = {
        "Accept": OM_ACCEPT if fmt is Format.OPENMETRICS else "text/plain",
        "Accept-Encoding": "gzip" if compressed else "identity",
    }

    async def scrape() -> dict[str, float]:
        response = await client.get("/metrics", headers=headers)
        body = (await response.read()).decode()
        parse = parse_om if fmt is Format.OPENMETRICS else parse_text
        return {
            sample.name: sample.value  # the GC's: generation 2, the last listed
            for family in parse(body)
            for sample in family.samples
            if sample.name.startswith(("process_", "python_"))
        }

    first = await scrape()
    assert set(RUNTIME_SAMPLES) <= set(first), set(RUNTIME_SAMPLES) - set(first)
    assert abs(first["process_start_time_seconds"] - time.time()) < 3600
    assert first["process_resident_memory_bytes"] > 1 << 20
    assert first["process_open_fds"] >= 3  # stdin, stdout, stderr at least
    # The next response, from the same cached fetch, has spent CPU and collected garbage:
    # its figures are read afresh, not kept with the cached render.
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        [object() for _ in range(1000)]
    gc.collect()
    second = await scrape()
    assert second["process_cpu_seconds_total"] > first["process_cpu_seconds_total"]
    assert second["python_gc_collections_total"] > first["python_gc_collections_total"]


async def test_runtime_families_answer_name_filters(aiohttp_server, aiohttp_client) -> None:
    """name[]=process_resident_memory_bytes serves that family alone of the bridge's own."""
    _, client = await _client(aiohttp_server, aiohttp_client)
    response = await client.get("/metrics", params={"name[]": "process_resident_memory_bytes"})
    names = {family.name for family in parse_text(await response.text())}
    assert names == {"process_resident_memory_bytes"}


async def test_an_upstreams_own_process_families_give_way_to_the_bridges(
    aiohttp_server, aiohttp_client
) -> None:
    """An engine serving process_* would make two families of one name: the bridge's stay,
    the engine's are counted as dropped (reserved_name), and the body is one valid exposition."""
    engine = (FIXTURES / "tp1.prom").read_bytes() + (
        b"# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
        b"# TYPE process_resident_memory_bytes gauge\n"
        b"process_resident_memory_bytes 1.0\n"
        b"# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
        b"# TYPE process_cpu_seconds_total counter\n"
        b"process_cpu_seconds_total 2.0\n"
    )
    server = await aiohttp_server(FakeUpstream(body=engine).app())
    app = bridge_app(str(server.make_url("/metrics")))
    client = await aiohttp_client(app)
    body = await (await client.get("/metrics")).text()
    families = [family.name for family in parse_text(body)]
    assert families.count("process_resident_memory_bytes") == 1
    assert families.count("process_cpu_seconds") == 1
    samples = {s.name: s.value for f in parse_text(body) for s in f.samples}
    assert samples["process_resident_memory_bytes"] > 1.0
    dropped = app[STATE].metrics.registry.get_sample_value(
        "metricbridge_samples_dropped_total", {"reason": "reserved_name"}
    )
    assert dropped == 2
