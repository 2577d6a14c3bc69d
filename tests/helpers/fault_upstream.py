"""A fault-injecting upstream on a raw asyncio socket, for the reliability campaign.

aiohttp's own server frames every response correctly, which is exactly what a fault campaign must
not do: this one writes bytes by hand, so it can cut a body mid-line against its Content-Length,
stop a chunked body without its last chunk, trickle, hang, stream 100 MB without holding it, or
stop listening altogether (refused connections) and listen again on the same port.

Every answer carries ``Connection: close``, so the bridge never reuses a pooled connection
across faults and each fetch meets the fault that is current when it connects.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Fault = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
_GONE = (ConnectionError, OSError)  # the bridge hung up: what a fault that outlives it expects


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join([*lines, "Connection: close", "", ""])).encode()


def respond(
    body: bytes,
    *,
    status: str = "200 OK",
    content_type: str = TEXT_TYPE,
    extra: dict[str, str] | None = None,
) -> Fault:
    """A complete, correctly framed response."""
    headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **(extra or {})}

    async def fault(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_head(status, headers) + body)
        await writer.drain()

    return fault


def cut(body: bytes, at: int, *, framing: str) -> Fault:
    """Send ``body[:at]`` and close: ``length`` promises all of it, ``close`` delimits by EOF,
    ``chunked`` sends one chunk and never the terminating one."""
    part = body[:at]
    headers = {"Content-Type": TEXT_TYPE}
    if framing == "length":
        headers["Content-Length"] = str(len(body))
        payload = part
    elif framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
        payload = f"{len(part):x}\r\n".encode() + part + b"\r\n"
    else:
        payload = part

    async def fault(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_head("200 OK", headers) + payload)
        await writer.drain()

    return fault


async def hang(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
    """Accept, read the request, never answer; return when the bridge gives up and hangs up."""
    with contextlib.suppress(TimeoutError, *_GONE):
        await asyncio.wait_for(reader.read(), 30)


def trickle(line: bytes = b"# one slow comment line at a time\n", every: float = 0.02) -> Fault:
    """Headers at once, then one line every ``every`` seconds for up to 30 s."""

    async def fault(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_head("200 OK", {"Content-Type": TEXT_TYPE}))
        for _ in range(int(30 / every)):
            writer.write(line)
            await writer.drain()
            await asyncio.sleep(every)

    return fault


def stream(total: int, *, declare_length: bool, chunk: int = 1 << 20) -> Fault:
    """``total`` bytes of valid exposition lines, written from one reused ``chunk``-sized buffer.

    Without ``declare_length`` the body is delimited by EOF, so only counting while reading can
    stop it; with it, the bridge can refuse before reading a byte.
    """
    line = b'sglang:big_gauge{pad="' + b"x" * 100 + b'"} 1\n'
    block = b"# TYPE sglang:big_gauge gauge\n" + line * ((chunk - 30) // len(line))
    headers = {"Content-Type": TEXT_TYPE}
    if declare_length:
        headers["Content-Length"] = str(total)

    async def fault(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_head("200 OK", headers))
        sent = 0
        while sent < total:
            writer.write(block)
            await writer.drain()
            sent += len(block)

    return fault


async def reset(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, then close without a byte of response."""
    writer.close()


@dataclass
class FaultUpstream:
    """Serves ``/metrics`` with ``fault`` (404 elsewhere); ``refuse()`` stops listening."""

    fault: Fault = field(default_factory=lambda: respond(b""))
    requests: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    @property
    def url(self) -> str:
        """The /metrics URL the bridge is pointed at."""
        return f"http://127.0.0.1:{self.port}/metrics"

    @property
    def listening(self) -> bool:
        """Whether connections are accepted (False after ``refuse()``)."""
        return self._server is not None

    async def listen(self) -> None:
        """Listen on 127.0.0.1 (port 0 the first time, the same port afterwards)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def refuse(self) -> None:
        """Stop listening: connections are refused until ``listen()``."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def close(self) -> None:
        """Stop listening and end every connection still open."""
        await self.refuse()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            if path == b"/metrics":
                self.requests += 1
                await self.fault(reader, writer)
            else:
                await respond(b"not found\n", status="404 Not Found")(reader, writer)
        except (TimeoutError, asyncio.IncompleteReadError, *_GONE):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(*_GONE):
                await writer.wait_closed()
