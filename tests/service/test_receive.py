"""The upstream body as received: written in place into one buffer, the same bytes as sent."""

from __future__ import annotations

import ctypes
import random
import subprocess
import sys
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from metricbridge.errors import UpstreamError
from metricbridge.service.allocator import payload_buffer
from metricbridge.service.scrape import fetch, parse_upstream

GLIBC = hasattr(ctypes.CDLL(None), "gnu_get_libc_version")
TEXT = "text/plain; version=0.0.4; charset=utf-8"


def _body(size: int, seed: int) -> bytes:
    """``size`` bytes of exposition-like lines that differ with ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    line = b'sglang:x{dp_rank="%d"} %d\n'
    out = bytearray()
    while len(out) < size:
        out += line % (rng.randrange(100), rng.randrange(10**9))
    return bytes(out[: size - 1]) + b"\n"


async def _serve(aiohttp_raw_server: Any, handler: Any) -> str:
    server = await aiohttp_raw_server(handler)
    return f"http://127.0.0.1:{server.port}/metrics"


@pytest.mark.parametrize("size", [1, 1000, 300_000, 5 << 20])
@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
async def test_fetched_body_is_the_sent_bytes(
    aiohttp_raw_server: Any, size: int, *, chunked: bool
) -> None:
    """With or without a Content-Length, small and mapped-size bodies come back byte for byte."""
    bodies = [_body(size, seed) for seed in range(3)]
    served = iter(bodies)

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        body = next(served)
        response = web.StreamResponse(headers={"Content-Type": TEXT})
        if chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(body)
        await response.prepare(request)
        for start in range(0, len(body), 100_000):  # several writes, so several received blocks
            await response.write(body[start : start + 100_000])
        await response.write_eof()
        return response

    upstream = parse_upstream(await _serve(aiohttp_raw_server, handler))
    async with aiohttp.ClientSession() as session:
        for body in bodies:  # one after another, as successive scrapes
            fetched = await fetch(session, upstream, timeout=10, max_bytes=64 << 20)
            assert type(fetched.body) is bytes
            assert fetched.body == body
            assert hash(fetched.body) == hash(bytes(body))


async def test_body_cut_short_of_its_content_length_is_truncated(aiohttp_raw_server: Any) -> None:
    """A connection closed before Content-Length bytes arrived is refused, never half served."""

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": TEXT})
        response.content_length = 1 << 20
        await response.prepare(request)
        await response.write(b"g 1\n" * 1000)
        request.transport.close()  # type: ignore[union-attr]
        return response

    upstream = parse_upstream(await _serve(aiohttp_raw_server, handler))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(UpstreamError) as caught:
            await fetch(session, upstream, timeout=10, max_bytes=64 << 20)
    assert caught.value.reason == "truncated"


async def test_chunked_body_over_the_cap_is_refused(aiohttp_raw_server: Any) -> None:
    """Without a Content-Length the cap is checked as the blocks arrive."""

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": TEXT})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(10):
            await response.write(b"g 1\n" * 1000)
        await response.write_eof()
        return response

    upstream = parse_upstream(await _serve(aiohttp_raw_server, handler))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(UpstreamError) as caught:
            await fetch(session, upstream, timeout=10, max_bytes=20_000)
    assert caught.value.reason == "oversize"


def test_payload_buffer_is_a_new_bytes_object_filled_in_place() -> None:
    """What is written through the view is the bytes object's content; each buffer is new."""
    first, second = payload_buffer(5), payload_buffer(5)
    first.view[:] = b"hello"
    second.view[:] = b"world"
    assert (first.data, second.data) == (b"hello", b"world")
    assert first.data is not second.data
    with pytest.raises(ValueError, match="at least one byte"):
        payload_buffer(0)


# Serves a 10 MB body at /metrics on a port it prints, until killed.
SERVER = """
import asyncio, sys
from aiohttp import web
BODY = b"sglang:x 1\\n" * (10_000_000 // 11)
async def main():
    async def metrics(_):
        return web.Response(body=BODY, content_type="text/plain")
    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

# Fetches that body 30 times, keeping the last result only, as the bridge does; prints the
# minor page faults per fetch and how far RSS grew from the 5th fetch to the last, in MiB.
PROBE = """
import asyncio, os, resource, sys
import aiohttp
from metricbridge.service.allocator import tune_malloc
from metricbridge.service.scrape import fetch, parse_upstream
tune_malloc({})
BODY = b"sglang:x 1\\n" * (10_000_000 // 11)
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
async def main():
    upstream = parse_upstream(f"127.0.0.1:{sys.argv[1]}/metrics")
    kept = None
    async with aiohttp.ClientSession() as session:
        for i in range(30):
            if i == 5:
                early = rss()
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            kept = None  # the bridge drops the stale snapshot before fetching anew
            kept = await fetch(session, upstream, timeout=10, max_bytes=64 << 20)
            assert kept.body == BODY
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(faults / 25, (rss() - early) / (1 << 20))
asyncio.run(main())
"""


@pytest.mark.skipif(not GLIBC, reason="the mapping behaviour measured is glibc's")
def test_repeated_large_fetches_keep_rss_flat_and_faults_few() -> None:
    """30 fetches of 10 MB: RSS does not grow, and the body is not faulted in 4 KiB at a time.

    In 4 KiB pages the body alone is 2,400 faults per fetch; received blocks piled up on the
    heap and handed back after a join were as many again.
    """
    server = subprocess.Popen(  # noqa: S603 - our interpreter, our server
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        port = server.stdout.readline().strip()  # type: ignore[union-attr]
        out = subprocess.run(  # noqa: S603 - our interpreter, our probe
            [sys.executable, "-c", PROBE, port],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    finally:
        server.kill()
        server.wait()
        server.stdout.close()  # type: ignore[union-attr]
    faults, growth = map(float, out.stdout.split())
    assert growth < 5, f"RSS grew {growth:.1f} MiB"
    assert faults < 2400, f"{faults:.0f} minor faults per fetch"
