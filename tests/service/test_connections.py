"""Client connections are bounded, and the bound locks no scrape out: a cap that idle and
silent connections give way to, a header-read timeout, a waiting room, a 503 when there is no
room at all, an idle timeout and a write deadline, each counted.

Real sockets against the capped listener the service runs (``cli.serve.listen_capped``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest
from aiohttp import web

from helpers.lockout import (
    closed_by_peer,
    concurrent_scrapes,
    scrape_status,
    scrapes_past_silent,
    silent_connections,
)
from helpers.service import FakeUpstream
from metricbridge.cli.serve import listen_capped
from metricbridge.config.load import load_config
from metricbridge.service.connections import ConnectionLimit
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import STATE, ServiceSettings, make_app
from metricbridge.service.snapshot import FetchSettings

GET = b"GET /metrics HTTP/1.1\r\nHost: bridge\r\n\r\n"


@asynccontextmanager
async def _bridge(
    upstream_body: bytes | None = None, upstream_delay: float = 0.0, **settings: float
) -> AsyncIterator[tuple[int, web.Application]]:
    """A bridge on a capped listener in front of a fake upstream; yields its port and app."""
    upstream = FakeUpstream(delay=upstream_delay)
    if upstream_body is not None:
        upstream.body = upstream_body
    upstream_runner = web.AppRunner(upstream.app())
    await upstream_runner.setup()
    site = web.TCPSite(upstream_runner, "127.0.0.1", 0)
    await site.start()
    service = ServiceSettings(
        (parse_upstream(f"127.0.0.1:{upstream_runner.addresses[0][1]}"),),
        None,
        FetchSettings(cache_ttl=0.0),
        server_info=False,
        **settings,  # type: ignore[arg-type]
    )
    app = make_app(service, load_config(None))
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=service.idle_timeout)
    await runner.setup()
    listener = await listen_capped(runner, "127.0.0.1", 0)
    try:
        yield listener.sockets[0].getsockname()[1], app
    finally:
        listener.close()
        await runner.cleanup()
        await upstream_runner.cleanup()


async def _scrape(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\n\r\n")
    body = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return body


async def _keep_alive_scrape(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A scrape on a connection kept open after its answer (read by Content-Length)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(GET)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return reader, writer


async def test_a_silent_connection_gives_way_to_a_scrape_at_the_cap() -> None:
    """The cap's worth of connections that never send a byte: the next scrape is answered,
    the oldest silent one is closed for it, and the eviction is counted."""
    async with _bridge(max_connections=3, header_timeout=4.0) as (port, app):
        async with silent_connections(port, 3) as silent:
            await asyncio.sleep(1.2)  # past the 1 s a connection gets before it can be evicted
            assert await scrape_status(port) == "200"
            assert await closed_by_peer(silent[0], 2)
            assert not await closed_by_peer(silent[1], 0.2)
        connections = app[STATE].metrics.connections
        assert connections.evicted == {"idle": 0, "reading_head": 1}
        assert connections.refused == 0


async def test_an_idle_keep_alive_connection_gives_way_before_one_sending_its_head() -> None:
    """At the cap, the connection idle between two requests is closed for the newcomer, not
    the one still sending its request head."""
    async with _bridge(max_connections=2, header_timeout=4.0) as (port, app):
        idle_reader, idle_writer = await _keep_alive_scrape(port)
        async with silent_connections(port, 1) as silent:
            await asyncio.sleep(1.2)
            assert await scrape_status(port) == "200"
            assert await closed_by_peer(idle_reader, 2)
            assert not await closed_by_peer(silent[0], 0.2)
        idle_writer.close()
        assert app[STATE].metrics.connections.evicted == {"idle": 1, "reading_head": 0}


async def test_a_request_head_not_sent_in_the_header_timeout_is_closed() -> None:
    """A silent connection and one dripping its head are closed at --web.read-header-timeout
    and counted; a keep-alive connection idle for longer than that is not (it is idle, not
    sending a head) and serves its next request."""
    async with _bridge(header_timeout=0.4) as (port, app):
        idle_reader, idle_writer = await _keep_alive_scrape(port)
        async with silent_connections(port, 1) as silent:
            drip_reader, drip_writer = await asyncio.open_connection("127.0.0.1", port)
            drip_writer.write(b"GET /metrics HTTP/1.1\r\n")
            for _ in range(4):
                await asyncio.sleep(0.1)
                drip_writer.write(b"X-Drip: 1\r\n")
            assert await closed_by_peer(silent[0], 2)
            assert await closed_by_peer(drip_reader, 2)
            drip_writer.close()
        connections = app[STATE].metrics.connections
        assert connections.header_timeouts == 2
        assert connections.open == 1  # their slots are free again: only the idle one is held
        idle_writer.write(b"GET /metrics HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\n\r\n")
        assert (await asyncio.wait_for(idle_reader.read(), 10)).startswith(b"HTTP/1.1 200")
        idle_writer.close()


async def test_when_every_slot_is_busy_a_newcomer_waits_for_one_and_is_served() -> None:
    """One slot, busy with a slow scrape: the next connection waits, unread and counted in
    metricbridge_connections_waiting, and is answered once the slot is free."""
    async with _bridge(max_connections=1, upstream_delay=0.6, header_timeout=5.0) as (port, app):
        first = asyncio.create_task(scrape_status(port))
        await asyncio.sleep(0.2)
        second = asyncio.create_task(scrape_status(port))
        await asyncio.sleep(0.2)
        connections = app[STATE].metrics.connections
        assert connections.waiting == 1
        assert await first == "200"
        assert await second == "200"
        assert connections.waiting == 0
        assert connections.refused == 0


async def test_with_no_room_to_wait_a_newcomer_is_answered_503_with_retry_after() -> None:
    """One slot busy and the one waiting place taken: the next connection gets a whole 503
    with Retry-After at once (not a reset), and the waiting one gets the same once the
    header timeout runs out; both counted as refused, logged once."""
    async with _bridge(max_connections=1, upstream_delay=1.5, header_timeout=0.6) as (port, app):
        busy = asyncio.create_task(scrape_status(port))
        await asyncio.sleep(0.2)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(GET)
        await asyncio.sleep(0.1)
        answer = await asyncio.wait_for(scrape_answer(port), 5)
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert b"\r\nRetry-After: 1\r\n" in answer
        assert answer.endswith(b"retry shortly\n")
        waited = await asyncio.wait_for(reader.read(), 5)
        assert waited.startswith(b"HTTP/1.1 503")
        writer.close()
        assert await busy == "200"
        assert app[STATE].metrics.connections.refused == 2


async def scrape_answer(port: int) -> bytes:
    """A whole answer to one scrape on a fresh connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\n\r\n")
    try:
        return await reader.read()
    finally:
        writer.close()


# The lock-out attacks, small here; the hostile campaign runs them at full strength against the
# real process at its default cap (test_hostile_campaign.py).
LOCKOUT_SIZES = [pytest.param(8, 10, 15, id="cap8-silent10-concurrent15")]


@pytest.mark.parametrize(("cap", "silent", "concurrent"), LOCKOUT_SIZES)
async def test_silent_connections_and_a_burst_of_scrapes_lock_no_scrape_out(
    cap: int, silent: int, concurrent: int
) -> None:
    """More silent connections than the cap, then scrapes: every one answered 200; then
    nearly twice the cap of concurrent scrapes (the cap and its waiting room): every one
    answered 200 too."""
    async with _bridge(max_connections=cap, header_timeout=4.0) as (port, app):
        assert await scrapes_past_silent(port, silent, scrapes=5) == {"200": 5}
        assert await concurrent_scrapes(port, concurrent) == {"200": concurrent}
        assert app[STATE].metrics.connections.refused == 0


async def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() -> None:
    """A connection that sends nothing more is closed by the bridge, freeing its descriptor."""
    async with _bridge(idle_timeout=0.3) as (port, _app):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(GET)
        await asyncio.sleep(0.1)
        # The response arrives; then, with nothing more asked, the connection ends.
        data = await asyncio.wait_for(_read_until_closed(reader), 5)
        assert data.startswith(b"HTTP/1.1 200")
        writer.close()


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while chunk := await reader.read(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


async def test_a_client_that_stops_reading_is_abandoned_at_the_write_deadline() -> None:
    """A scraper that sends a request and never reads releases the response after the
    deadline: the connection is aborted and the abandonment counted."""
    # 16 MB: more than loopback's socket buffers take in, whatever the kernel's autotuning.
    series = "".join(f'sglang:x{{i="{i:07d}"}} 1\n' for i in range(600_000))
    body = f"# HELP sglang:x x\n# TYPE sglang:x gauge\n{series}".encode()
    async with _bridge(upstream_body=body, write_timeout=0.5) as (port, app):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(GET)
        connections = app[STATE].metrics.connections
        # Reading a 16 MB family first proves its 600,000 label sets (about a second), then
        # the response stalls and the 0.5 s deadline runs: wait for it, up to 10 s.
        for _ in range(100):
            await asyncio.sleep(0.1)
            if connections.write_timeouts:
                break
        assert connections.write_timeouts == 1
        assert connections.open == 0
        sock.close()
        served = await _scrape(port)
        assert b"metricbridge_responses_abandoned_total 1.0" in served


async def test_unparsable_requests_are_counted_by_kind_and_logged_once_at_debug(caplog) -> None:
    """Garbage on the port: a 400 each, no error or traceback in the log, a count per kind."""
    import logging  # noqa: PLC0415

    garbage = [
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
        b"\x16\x03\x01 TLS on the HTTP port\r\n\r\n",
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\n\r\n",
    ]
    async with _bridge() as (port, _app):
        with caplog.at_level(logging.DEBUG):
            for request in garbage * 20:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(request)
                assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.0 400")
                writer.close()
        served = await _scrape(port)
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert loud == []
    notes = [r for r in caplog.records if "unparsable client request" in r.getMessage()]
    assert len(notes) == 3  # once per kind
    counts = [line for line in served.decode().splitlines() if "bad_requests_total{" in line]
    assert sorted(float(line.rsplit(" ", 1)[1]) for line in counts) == [20.0, 20.0, 20.0]


class _FakeTransport(asyncio.Transport):
    """Just enough transport for a ClientConnection that is admitted or refused."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def test_a_client_churning_at_the_cap_cannot_flood_the_log(caplog) -> None:
    """One connection in, one refused, one out, a thousand times: each turn is a new spell of
    refusals, and the log gets one warning and one info line, not two thousand of each."""
    from metricbridge.service.client_connection import ClientConnection  # noqa: PLC0415
    from metricbridge.service.connections import ConnectionLimit  # noqa: PLC0415

    limit = ConnectionLimit(cap=2)
    limit.waiting_cap = 0

    def connect() -> ClientConnection:
        conn = ClientConnection(limit, asyncio.Protocol)
        conn.connection_made(_FakeTransport())
        conn.dispatched()
        return conn

    with caplog.at_level(logging.DEBUG, logger="metricbridge.server"):
        connect()
        for _ in range(1000):
            served, refused = connect(), connect()
            assert refused.transport is not None
            assert refused.transport.written.startswith(b"HTTP/1.1 503")  # type: ignore[attr-defined]
            refused.connection_lost(None)
            served.connection_lost(None)
    assert limit.refused == 1000
    assert limit.open == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "metricbridge.server"]
    assert len(lines) == 2, lines[:4]
    assert "answering 503" in lines[0]
    assert "below the cap again" in lines[1]


class _LeftBeforeTheAnswer(web.Response):
    """An answer whose client has gone: writing it fails as aiohttp fails on a closing transport."""

    async def prepare(self, _: web.BaseRequest) -> None:  # type: ignore[override]
        raise ConnectionResetError("Cannot write to closing transport")


class _Connection:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def dispatched(self) -> None:
        self.calls.append("dispatched")

    def answered(self) -> None:
        self.calls.append("answered")


async def test_a_client_gone_before_its_answer_is_written_costs_no_traceback(caplog) -> None:
    """A probe that gave up (or a connection evicted) before /-/healthy's answer was out: the
    connection is marked answered and nothing above debug is logged, as for /metrics."""
    limit = ConnectionLimit()
    transport, conn = object(), _Connection()
    limit._by_transport[transport] = conn  # type: ignore[index]
    request = SimpleNamespace(transport=transport)

    async def handler(_: object) -> web.StreamResponse:
        return _LeftBeforeTheAnswer(text="metricbridge is healthy.\n")

    with caplog.at_level(logging.DEBUG, logger="metricbridge"):
        response = await limit.middleware(request, handler)  # type: ignore[arg-type]
    assert isinstance(response, _LeftBeforeTheAnswer)
    assert conn.calls == ["dispatched", "answered"]
    assert [r.levelno for r in caplog.records if r.levelno > logging.DEBUG] == []
    assert any("disconnected" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
def test_connection_figures_are_written_again_only_once_one_moved(fmt: str) -> None:
    """Every response asks for them: the same figures give the very bytes of the last render,
    a figure that moved (a refusal, an eviction) a new text that shows it."""
    from metricbridge.model.family import Format  # noqa: PLC0415
    from metricbridge.service.connections import ConnectionLimit  # noqa: PLC0415

    wire = Format(fmt)
    limit = ConnectionLimit(cap=4)
    first = limit.render(wire)
    assert limit.render(wire) is first
    limit.refused += 1
    moved = limit.render(wire)
    assert moved is not first
    assert b"metricbridge_connections_refused_total 1.0\n" in moved
    state = next(iter(limit.evicted))
    limit.evicted[state] += 1
    evicted = limit.render(wire)
    assert evicted is not moved
    assert f'state="{state}"}} 1.0\n'.encode() in evicted
    assert limit.render(wire) is evicted
