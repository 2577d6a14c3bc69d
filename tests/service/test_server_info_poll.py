"""/server_info is fetched with the discipline of /metrics: no redirects, a byte cap, off-loop
parsing, every failure counted and logged once per change, and no answer breaks a scrape."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from helpers.paths import FIXTURES
from helpers.service import FakeUpstream, bridge_app
from metricbridge.errors import UpstreamError
from metricbridge.model.family import Format
from metricbridge.service import background
from metricbridge.service.background import fetch_server_info, poll_server_info
from metricbridge.service.selfmetrics import SelfMetrics


def _engine(handler: Any) -> web.Application:
    app = FakeUpstream(body=(FIXTURES / "dp8.prom").read_bytes()).app()
    app.router.add_get("/server_info", handler)
    return app


async def _fetch(aiohttp_server: Any, handler: Any) -> dict[str, object]:
    server = await aiohttp_server(_engine(handler))
    async with aiohttp.ClientSession() as session:
        return await fetch_server_info(session, [str(server.make_url("/server_info"))], 2.0)


async def test_a_redirect_is_not_followed(aiohttp_server) -> None:
    """A compromised engine cannot make the bridge GET another host through /server_info."""
    elsewhere = []

    async def target(request: web.Request) -> web.Response:
        elsewhere.append(request.path)
        return web.json_response({"max_running_requests": 1})

    other = web.Application()
    other.router.add_get("/", target)
    other_server = await aiohttp_server(other)

    async def redirect(_: web.Request) -> web.Response:
        raise web.HTTPFound(str(other_server.make_url("/")))

    with pytest.raises(UpstreamError) as caught:
        await _fetch(aiohttp_server, redirect)
    assert caught.value.reason == "status"
    assert elsewhere == []


async def test_an_oversized_answer_is_refused_while_it_streams(aiohttp_server) -> None:
    """More than the cap is refused, whether or not Content-Length announces it."""

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b" " * (256 << 10)
        for _ in range(16):  # 4 MiB of JSON whitespace, no Content-Length
            await response.write(chunk)
        await response.write_eof()
        return response

    with pytest.raises(UpstreamError) as caught:
        await _fetch(aiohttp_server, huge)
    assert caught.value.reason == "too_large"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        (b"{nope", "not JSON"),
        (b"[1]", "list"),
    ],
    ids=["deeply_nested", "not_json", "not_an_object"],
)
async def test_an_unreadable_answer_is_malformed(aiohttp_server, body: bytes, detail: str) -> None:
    """Deep nesting (a RecursionError in json) and non-objects are 'malformed', nothing else."""

    async def answer(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    with pytest.raises(UpstreamError) as caught:
        await _fetch(aiohttp_server, answer)
    assert caught.value.reason == "malformed"
    assert detail in str(caught.value)


async def test_the_poller_survives_failures_counts_them_and_logs_each_change_once(
    aiohttp_server, caplog
) -> None:
    """Failures are counted by reason; a repeat is logged at debug; recovery is logged."""
    answers = [b"[" * 200_000, b"[" * 200_000, b'{"max_running_requests": 8}']

    async def answer(_: web.Request) -> web.Response:
        body = answers.pop(0) if len(answers) > 1 else answers[0]
        return web.Response(body=body, content_type="application/json")

    server = await aiohttp_server(_engine(answer))
    metrics = SelfMetrics()
    async with aiohttp.ClientSession() as session:
        bridge = SimpleNamespace(
            session=session,
            settings=SimpleNamespace(timeout_cap=2.0),
            metrics=metrics,
            server_info=None,
        )
        urls = [str(server.make_url("/server_info"))]
        with caplog.at_level(logging.DEBUG, logger="metricbridge.background"):
            task = asyncio.create_task(poll_server_info(bridge, urls, period=0.01))  # type: ignore[arg-type]
            for _ in range(200):
                if bridge.server_info is not None:
                    break
                await asyncio.sleep(0.01)
            task.cancel()
    assert bridge.server_info == {"max_running_requests": 8}
    text = metrics.render(Format.TEXT).decode()
    assert 'metricbridge_server_info_failures_total{reason="malformed"} 2.0' in text
    assert "metricbridge_server_info_up 1.0" in text
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "malformed" in warnings[0].getMessage()
    assert any("max_running_requests=8" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), 10**400], ids=["nan", "inf", "huge_int"]
)
async def test_no_server_info_value_turns_a_scrape_into_an_error(
    aiohttp_server, aiohttp_client, value: object
) -> None:
    """max_running_requests NaN, 1e999 or beyond a float, with DP attention on: still 200 and a
    valid body; the row it feeds is simply not served."""
    info = {"max_running_requests": value, "dp_size": 8, "enable_dp_attention": True}
    # json.dumps writes NaN/Infinity and huge integers, as a broken engine might.
    body = json.dumps(info).encode()

    async def answer(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    server = await aiohttp_server(_engine(answer))
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    for _ in range(50):
        response = await client.get("/metrics")
        assert response.status == 200
        text = await response.text()
        if "metricbridge_server_info_up" in text:
            break
        await asyncio.sleep(0.05)
    assert "metricbridge_server_info_up 1.0" in text
    assert "sglang:num_max_batchs{" not in text
    list(text_string_to_metric_families(text))  # parses
    assert (await client.get("/contract")).status == 200


def test_the_byte_cap_is_far_above_a_real_answer() -> None:
    """SGLang's /server_info is a few KiB; the cap leaves room without inviting a flood."""
    assert background.SERVER_INFO_MAX_BYTES == 1 << 20


async def test_the_poll_shows_its_body_size_against_the_cap(aiohttp_server) -> None:
    """metricbridge_server_info_response_bytes is the last good answer's size, beside the cap
    (metricbridge_server_info_max_bytes); a refused answer keeps the last good size."""
    good = json.dumps({"max_running_requests": 8, "padding": "x" * 5000}).encode()
    answers = [good, b"x" * (background.SERVER_INFO_MAX_BYTES + 1)]

    async def answer(_: web.Request) -> web.Response:
        body = answers.pop(0) if len(answers) > 1 else answers[0]
        return web.Response(body=body, content_type="application/json")

    server = await aiohttp_server(_engine(answer))
    metrics = SelfMetrics()
    async with aiohttp.ClientSession() as session:
        bridge = SimpleNamespace(
            session=session, settings=SimpleNamespace(timeout_cap=2.0), metrics=metrics
        )
        urls = [str(server.make_url("/server_info"))]
        task = asyncio.create_task(poll_server_info(bridge, urls, period=0.01))  # type: ignore[arg-type]
        for _ in range(200):
            if 'reason="too_large"' in metrics.render(Format.TEXT).decode():
                break
            await asyncio.sleep(0.01)
        task.cancel()
    families = {
        f.name: f for f in text_string_to_metric_families(metrics.render(Format.TEXT).decode())
    }
    assert families["metricbridge_server_info_response_bytes"].samples[0].value == len(good)
    assert families["metricbridge_server_info_max_bytes"].samples[0].value == 1 << 20
    assert families["metricbridge_server_info_up"].samples[0].value == 0


def test_the_size_figures_are_absent_until_the_first_poll() -> None:
    """With polling off (--no-server-info) none of the /server_info families is served."""
    text = SelfMetrics().render(Format.TEXT).decode()
    assert "metricbridge_server_info_" not in text
