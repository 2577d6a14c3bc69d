"""Client connections are bounded: a cap, an idle timeout and a write deadline, each counted.

Real sockets against the capped listener the service runs (``cli.serve.listen_capped``).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from helpers.service import FakeUpstream
from metricbridge.cli.serve import listen_capped
from metricbridge.config.load import load_config
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import STATE, ServiceSettings, make_app
from metricbridge.service.snapshot import FetchSettings

GET = b"GET /metrics HTTP/1.1\r\nHost: bridge\r\n\r\n"


@asynccontextmanager
async def _bridge(
    upstream_body: bytes | None = None, **settings: float
) -> AsyncIterator[tuple[int, web.Application]]:
    """A bridge on a capped listener in front of a fake upstream; yields its port and app."""
    upstream = FakeUpstream() if upstream_body is None else FakeUpstream(body=upstream_body)
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


async def test_connections_over_the_cap_are_closed_on_arrival_and_counted() -> None:
    """With the cap's worth of idle connections open, the next is closed; once one goes, a
    scrape is served again and the refusal shows in the self-metrics."""
    async with _bridge(max_connections=3) as (port, _app):
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(GET)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing served
        writer.close()
        idle.pop()[1].close()
        await asyncio.sleep(0.05)
        body = await _scrape(port)
        assert b"HTTP/1.1 200" in body
        assert b"metricbridge_connections_refused_total 1.0" in body
        assert b"metricbridge_connections_max 3.0" in body
        assert b"metricbridge_connections_open 3.0" in body  # two idle ones and this scrape
        for _, w in idle:
            w.close()


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


def test_a_client_churning_at_the_cap_cannot_flood_the_log(caplog) -> None:
    """One connection in, one refused, one out, a thousand times: each turn is a new spell of
    refusals, and the log gets one warning and one info line, not two thousand of each."""
    import logging  # noqa: PLC0415

    from metricbridge.service.connections import ConnectionLimit  # noqa: PLC0415

    limit = ConnectionLimit(cap=2)
    with caplog.at_level(logging.DEBUG, logger="metricbridge.server"):
        assert limit._admit()
        for _ in range(1000):
            assert limit._admit()
            assert not limit._admit()
            limit._release()
    assert limit.refused == 1000
    lines = [r.getMessage() for r in caplog.records if r.name == "metricbridge.server"]
    assert len(lines) == 2, lines[:4]
    assert "refusing new ones" in lines[0]
    assert "below the cap again" in lines[1]
