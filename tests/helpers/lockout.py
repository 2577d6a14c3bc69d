"""Clients that try to lock a server's connections up, sized by the caller.

The same two attacks run small in the normal run (``tests/service/test_connections.py``, an
in-process bridge with a small cap) and at full strength in the hostile campaign (the real
process at its default cap): silent connections held open while scrapes come, and a burst of
concurrent scrapes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\n\r\n"


async def scrape_status(port: int, timeout: float = 30.0) -> str:
    """One scrape on a fresh connection: its HTTP status, ``closed`` or the error's class."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        try:
            writer.write(REQUEST)
            answer = await asyncio.wait_for(reader.read(), timeout)
        finally:
            writer.close()
    except (OSError, TimeoutError) as exc:
        return type(exc).__name__
    return answer[9:12].decode(errors="replace") or "closed"


@contextlib.asynccontextmanager
async def silent_connections(port: int, count: int) -> AsyncIterator[list[asyncio.StreamReader]]:
    """``count`` connections that send nothing, held open for the block; yields their readers."""
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(count):  # one at a time: the finally closes those opened so far
            held.append(await asyncio.open_connection("127.0.0.1", port))  # noqa: PERF401
        yield [reader for reader, _ in held]
    finally:
        for _, writer in held:
            writer.close()


async def scrapes_past_silent(port: int, silent: int, scrapes: int) -> Counter[str]:
    """Statuses of ``scrapes`` scrapes, one after the other, while ``silent`` connections wait."""
    async with silent_connections(port, silent):
        return Counter([await scrape_status(port) for _ in range(scrapes)])


async def concurrent_scrapes(port: int, count: int) -> Counter[str]:
    """Statuses of ``count`` scrapes started at once, each on its own connection."""
    return Counter(await asyncio.gather(*(scrape_status(port) for _ in range(count))))


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float) -> bool:
    """Whether the server closes the connection (EOF or reset) within ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(reader.read(), timeout) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
