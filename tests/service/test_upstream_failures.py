"""Every way an upstream can fail: the bridge answers 200 with its own metrics and says why."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.runtime import OWN_PREFIXES
from helpers.service import FakeUpstream, bridge_app


async def _hang(_: web.Request) -> web.StreamResponse:
    await asyncio.sleep(30)
    return web.Response(text="too late")


async def _truncated(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain; version=0.0.4", "Content-Length": "5000"}
    )
    await response.prepare(request)
    await response.write(b'# TYPE g gauge\ng{a="b"} 1\n')
    request.transport.close()  # type: ignore[union-attr]
    return response


async def _cut_mid_line(request: web.Request) -> web.StreamResponse:
    """A body cut inside its last line: the framing, not the missing newline, says so."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain; version=0.0.4", "Content-Length": "5000"}
    )
    await response.prepare(request)
    await response.write(b'# TYPE g gauge\ng{a="b"} 1\ng{a="c')
    request.transport.close()  # type: ignore[union-attr]
    return response


async def _trickle(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
    await response.prepare(request)
    for _ in range(100):
        await response.write(b"# a comment, one slow line at a time\n")
        await asyncio.sleep(0.1)
    return response


FAILURES = [
    pytest.param({"status": 500}, "http_status", id="http_500"),
    pytest.param({"status": 404}, "http_status", id="http_404"),
    pytest.param(
        {"content_type": "text/html; charset=utf-8", "body": b"<html>oops</html>\n"},
        "content_type",
        id="html_error_page",
    ),
    pytest.param({"body": b"# TYPE g gauge\r\ng 1\r\n"}, "malformed", id="crlf_body"),
    pytest.param({"behaviour": _hang}, "timeout", id="hang_no_bytes"),
    pytest.param({"behaviour": _trickle}, "timeout", id="slow_trickle"),
    pytest.param({"behaviour": _truncated}, "truncated", id="truncated_by_close"),
    pytest.param({"behaviour": _cut_mid_line}, "truncated", id="truncated_mid_line"),
    pytest.param({"body": b"# TYPE g gauge\n" + b"g 1\n" * 5000}, "oversize", id="over_size_cap"),
]


async def _scrape(client: Any) -> str:
    response = await client.get("/metrics")
    assert response.status == 200
    return await response.text()


@pytest.mark.parametrize(("upstream_kwargs", "reason"), FAILURES)
async def test_failing_upstream_yields_self_metrics_and_reason(
    aiohttp_server: Any,
    aiohttp_client: Any,
    caplog: pytest.LogCaptureFixture,
    upstream_kwargs: dict[str, Any],
    reason: str,
) -> None:
    """A failed fetch: 200, upstream_up 0, the reason counted and logged, no engine data."""
    server = await aiohttp_server(FakeUpstream(**upstream_kwargs).app())
    client = await aiohttp_client(
        bridge_app(str(server.make_url("/metrics")), timeout=0.5, max_bytes=10_000)
    )
    with caplog.at_level(logging.WARNING, logger="metricbridge"):
        text = await _scrape(client)
    families = {f.name: f for f in parse_text(text)}
    assert all(name.startswith(OWN_PREFIXES) for name in families)
    assert [s.value for s in families["metricbridge_upstream_up"].samples] == [0.0]
    failures = {
        s.labels["reason"]: s.value for s in families["metricbridge_upstream_failures"].samples
    }
    assert failures == {reason: 1.0}
    assert any(reason in record.getMessage() for record in caplog.records)
    durations = {
        (s.name.rsplit("_", 1)[1], s.labels["outcome"]): s.value
        for s in families["metricbridge_upstream_scrape_duration_seconds"].samples
        if not s.name.endswith("_bucket")
    }
    assert durations[("count", "failed")] == 1.0  # failed fetches take time too
    assert ("count", "ok") not in durations
    if reason == "timeout":
        assert durations[("sum", "failed")] >= 0.5


@pytest.mark.parametrize(
    ("body", "last"),
    [
        pytest.param(
            b'# HELP g A gauge.\n# TYPE g gauge\ng{a="b"} 1\ng{a="c"} 2',
            'g{a="c"} 2\n',
            id="labelled",
        ),
        # promparse_test.go TestPromNullByteHandling's first case: no final newline, no error.
        pytest.param(
            b'null_byte_metric{a="abc\x00"} 1', 'null_byte_metric{a="abc\x00"} 1\n', id="null_byte"
        ),
    ],
)
async def test_a_last_line_without_its_newline_is_served(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Any, body: bytes, last: str
) -> None:
    """Prometheus reads a text body without a final newline: the bridge serves it, up 1."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\n")
    server = await aiohttp_server(FakeUpstream(body=body).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics")), config=str(rules)))
    for _ in range(2):  # the second fetch reads with what the first taught the caches
        text = await _scrape(client)
        families = {f.name: f for f in parse_text(text)}
        assert [s.value for s in families["metricbridge_upstream_up"].samples] == [1.0]
        assert last in text
        assert "metricbridge_upstream_failures_total{" not in text


@pytest.mark.parametrize("validation", ["structure", "full"])
async def test_inputs_that_fail_a_prometheus_scrape_are_never_served(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Any, validation: str
) -> None:
    """A ``__name__`` label in the braces and a 20-digit timestamp are counted, not served."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"version: 1\nvalidation: {validation}\n")
    body = (
        b'# HELP ok A gauge.\n# TYPE ok gauge\nok{a="b"} 1\n'
        b'# HELP x A gauge.\n# TYPE x gauge\nx{__name__="evil"} 1\n'
        b'# HELP t A gauge.\n# TYPE t gauge\nt{a="b"} 1 100000000000000000000\n'
    )
    server = await aiohttp_server(FakeUpstream(body=body).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics")), config=str(rules)))
    for fetches in (1, 2):  # the second fetch reads with what the first taught the caches
        text = await _scrape(client)
        assert 'ok{a="b"} 1\n' in text
        assert "evil" not in text
        assert "100000000000000000000" not in text
        problems = [
            s.value
            for f in parse_text(text)
            if f.name == "metricbridge_exposition_problems"
            for s in f.samples
            if s.labels.get("reason") == "malformed"
        ]
        assert sum(problems) == 2 * fetches


async def test_refused_connection(aiohttp_client: Any) -> None:
    """Nothing listening: reason 'connect'."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = await aiohttp_client(bridge_app(f"http://127.0.0.1:{port}/metrics"))
    text = await _scrape(client)
    assert 'metricbridge_upstream_failures_total{reason="connect",upstream="127.0.0.1:' in text
    assert "sglang:" not in text


async def test_one_failing_upstream_never_hides_the_other(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """With two upstreams, the healthy one is served while the other reports up 0."""
    good = await aiohttp_server(FakeUpstream().app())
    bad = await aiohttp_server(FakeUpstream(status=500).app())
    client = await aiohttp_client(
        bridge_app(str(good.make_url("/metrics")), str(bad.make_url("/metrics")))
    )
    text = await _scrape(client)
    assert "sglang:request_waiting_time_count" in text
    ups = {
        s.labels["upstream"]: s.value
        for f in parse_text(text)
        if f.name == "metricbridge_upstream_up"
        for s in f.samples
    }
    assert sorted(ups.values()) == [0.0, 1.0]


async def test_recovery_after_failure_serves_fresh_data(
    aiohttp_server: Any, aiohttp_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Down then up: no stale data while down, engine data again once it answers."""
    upstream = FakeUpstream()
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    assert "sglang:request_waiting_time" in await _scrape(client)
    upstream.status = 500
    assert "sglang:" not in await _scrape(client)
    upstream.status = 200
    with caplog.at_level(logging.INFO, logger="metricbridge"):
        assert "sglang:request_waiting_time" in await _scrape(client)
    assert any("is back" in record.getMessage() for record in caplog.records)


async def test_malformed_family_is_dropped_and_counted(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """One unreadable family is dropped and counted; the rest of the payload is served."""
    body = b"# TYPE good gauge\ngood 1\n# TYPE bad gauge\nbad{a=1} 1\n"
    server = await aiohttp_server(FakeUpstream(body=body).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    text = await _scrape(client)
    assert "\ngood 1\n" in text
    assert "\nbad{" not in text
    assert 'metricbridge_exposition_problems_total{reason="malformed"} 1.0' in text


async def test_empty_body_is_an_upstream_with_no_families(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """A cold EPD encoder answers 200 with nothing; that is up, not an error."""
    server = await aiohttp_server(FakeUpstream(body=b"").app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    text = await _scrape(client)
    assert "metricbridge_upstream_up{upstream=" in text
    assert [
        s.value for f in parse_text(text) if f.name == "metricbridge_upstream_up" for s in f.samples
    ] == [1.0]


async def test_each_new_failure_reason_is_a_warning_and_repeats_are_debug(
    aiohttp_server: Any, aiohttp_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """http_status, again, content_type, malformed, again, up, http_status: every change of
    reason is logged at WARNING, a repeat of the same reason only at DEBUG."""
    upstream = FakeUpstream()
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    good = upstream.body
    steps: list[dict[str, Any]] = [
        {"status": 500},
        {"status": 500},
        {"status": 200, "content_type": "text/html"},
        {"content_type": "text/plain; version=0.0.4", "body": b"# TYPE g gauge\r\ng 1\r\n"},
        {},
        {"body": good},
        {"status": 500},
    ]
    with caplog.at_level(logging.DEBUG, logger="metricbridge.bridge"):
        for step in steps:
            for name, value in step.items():
                setattr(upstream, name, value)
            await _scrape(client)
    logged = [
        (record.levelname, record.getMessage().split(": ", 1)[1].split(":", 1)[0])
        for record in caplog.records
        if record.name == "metricbridge.bridge" and "fail" in record.getMessage()
    ]
    assert logged == [
        ("WARNING", "http_status"),
        ("DEBUG", "http_status"),
        ("WARNING", "content_type"),
        ("WARNING", "malformed"),
        ("DEBUG", "malformed"),
        ("WARNING", "http_status"),
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("malformed" in m and "(was failing with content_type)" in m for m in warnings)
