"""What the bridge says at start: which reader runs, and whether each upstream answers."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from aiohttp import web

from helpers.service import FakeUpstream
from metricbridge.cli.serve import log_what_runs
from metricbridge.exposition import line_match
from metricbridge.service.background import check_upstreams
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.snapshot import FetchSettings


def test_start_line_names_the_reader(caplog: pytest.LogCaptureFixture) -> None:
    """One info line with the version, the reader and Python; no warning when compiled."""
    caplog.set_level(logging.INFO, "metricbridge")
    log_what_runs()
    (record,) = caplog.records
    reader = "compiled" if line_match.COMPILED else "python"
    assert record.levelno == logging.INFO
    assert f"starting: reader {reader} (" in record.getMessage()


def test_a_missing_compiled_pass_is_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the C pass (and not asked for the pure-Python one) the start says so, loud."""
    monkeypatch.setattr(line_match, "COMPILED", False)
    monkeypatch.delenv("METRICBRIDGE_PURE_PYTHON", raising=False)
    caplog.set_level(logging.INFO, "metricbridge")
    log_what_runs()
    start, warning = caplog.records
    assert "reader python (the C line pass was not built at install time" in start.getMessage()
    assert warning.levelno == logging.WARNING
    assert "the compiled line pass is missing" in warning.getMessage()


def test_the_pure_python_reader_asked_for_is_no_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """METRICBRIDGE_PURE_PYTHON is a choice: said, not warned about."""
    monkeypatch.setattr(line_match, "COMPILED", False)
    monkeypatch.setenv("METRICBRIDGE_PURE_PYTHON", "1")
    caplog.set_level(logging.INFO, "metricbridge")
    log_what_runs()
    assert [r.levelno for r in caplog.records] == [logging.INFO]


async def test_each_upstream_is_checked_and_logged(
    aiohttp_server, unused_tcp_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """An answering upstream is logged at info with its size; a wrong one at warning, at once."""
    answering = await aiohttp_server(FakeUpstream().app())
    upstreams = [
        parse_upstream(str(answering.make_url("/metrics"))),
        parse_upstream(f"127.0.0.1:{unused_tcp_port}"),  # nothing listens there
    ]
    caplog.set_level(logging.INFO, "metricbridge")
    async with aiohttp.ClientSession() as session:
        await asyncio.wait_for(check_upstreams(session, upstreams, FetchSettings()), 10)
    by_level = {r.levelno: r.getMessage() for r in caplog.records}
    assert by_level[logging.INFO].startswith(f"upstream {upstreams[0].shown} answers: ")
    assert " bytes of text in " in by_level[logging.INFO]
    warning = by_level[logging.WARNING]
    assert warning.startswith(f"upstream {upstreams[1].shown} does not answer at start-up: ")
    assert "(connect)" in warning


async def test_a_slow_upstream_is_given_up_on_at_the_fetch_timeout(
    aiohttp_server, caplog: pytest.LogCaptureFixture
) -> None:
    """The check is bounded by --upstream-timeout, as every fetch is."""

    async def silent(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response()

    server = await aiohttp_server(FakeUpstream(behaviour=silent).app())
    upstream = parse_upstream(str(server.make_url("/metrics")))
    caplog.set_level(logging.INFO, "metricbridge")
    async with aiohttp.ClientSession() as session:
        await asyncio.wait_for(
            check_upstreams(session, [upstream], FetchSettings(timeout_cap=0.2)), 10
        )
    (record,) = caplog.records
    assert "(timeout)" in record.getMessage()
