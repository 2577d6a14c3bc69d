"""Scrapers that hang up mid-answer, and a payload large enough to be caught mid-write."""

from __future__ import annotations

import asyncio

from helpers.tp1_payloads import TP1


def padded(megabytes: float) -> bytes:
    """tp1 plus a family no rule reads, about ``megabytes`` MB in all."""
    count = int(megabytes * 1e6 / 100)
    lines = ["# TYPE hostile:pad gauge"]
    lines += [f'hostile:pad{{i="{i:08d}",pad="{"x" * 60}"}} {i}' for i in range(count)]
    return TP1 + ("\n".join(lines) + "\n").encode()


async def hang_up(port: int, read_bytes: int, delay: float = 0.0) -> int:
    """After ``delay`` s, ask for /metrics, read ``read_bytes`` slowly, then reset; bytes read.

    Slowly, so that the bridge waits on its drain when the reset comes: the exception then set
    on aiohttp's drain future is the one whose traceback held the answer in a cycle.
    """
    await asyncio.sleep(delay)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /metrics HTTP/1.1\r\nHost: bridge\r\nAccept-Encoding: identity\r\n"
        b"Connection: close\r\n\r\n"
    )
    got = 0
    while got < read_bytes and (chunk := await reader.read(1 << 16)):
        got += len(chunk)
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # the bridge fills the socket's buffers again and waits
    writer.transport.abort()  # a reset, not a close: unread bytes were pending
    return got
