"""A hostile world around the real bridge process: an engine the test steers, bad scrapers, a prober.

- ``EngineWorld`` runs fake engines (``/metrics`` and ``/server_info``, each port its own) on
  an event loop in a thread of the test process, so module-scoped fixtures can hold them while
  each test runs on its own loop. What an engine answers is whatever callable the test set last.
- ``BridgeProcess`` is ``metricbridge serve`` as a child process: its RSS is its own
  (``/proc/PID/status``) and its log goes to a file the test measures and greps.
- Run as a script, this file is the prober (``probe URL``: GET every 100 ms, one JSON line per
  answer) or the hostile scrapers (``scrapers BASE``: clients that never read, malformed
  requests, a flood of ``POST /-/reload``), each in a process of its own so that what the test
  process does (promtool, parsing megabytes) cannot delay them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from aiohttp import web

SCRIPT = Path(__file__).resolve()
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# --- the engines --------------------------------------------------------------------------


@dataclass
class Engine:
    """One fake engine: ``metrics`` and ``server_info`` answer each request to those paths."""

    metrics: Handler
    server_info: Handler
    port: int = 0
    hits: Counter[str] = field(default_factory=Counter)  # requests by path

    def app(self) -> web.Application:
        """Routes every path to the handler set now (read per request, so a test can swap it)."""

        async def metrics(request: web.Request) -> web.StreamResponse:
            self.hits[request.path] += 1
            return await self.metrics(request)

        async def server_info(request: web.Request) -> web.StreamResponse:
            self.hits[request.path] += 1
            return await self.server_info(request)

        async def other(request: web.Request) -> web.StreamResponse:
            self.hits[request.path] += 1
            return web.Response(status=404, text="not found\n")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/server_info", server_info)
        app.router.add_get("/{tail:.*}", other)
        return app

    def url(self, path: str = "/metrics", userinfo: str = "", query: str = "") -> str:
        """This engine's URL, optionally with credentials and a query."""
        at = f"{userinfo}@" if userinfo else ""
        return f"http://{at}127.0.0.1:{self.port}{path}" + (f"?{query}" if query else "")


def body(data: bytes, content_type: str = TEXT_TYPE, status: int = 200) -> Handler:
    """A handler answering ``data`` every time."""

    async def handle(_: web.Request) -> web.StreamResponse:
        return web.Response(body=data, status=status, headers={"Content-Type": content_type})

    return handle


def per_request(make: Callable[[int], bytes]) -> Handler:
    """A handler answering ``make(n)`` for its n-th request (a payload that changes per scrape)."""
    count = 0

    async def handle(_: web.Request) -> web.StreamResponse:
        nonlocal count
        count += 1
        return web.Response(body=make(count), headers={"Content-Type": TEXT_TYPE})

    return handle


def redirect(location: str) -> Handler:
    """A 302 to ``location`` (another port: a trap that records whether it was followed)."""

    async def handle(_: web.Request) -> web.StreamResponse:
        return web.Response(status=302, headers={"Location": location})

    return handle


def endless(line: bytes, content_type: str = TEXT_TYPE) -> Handler:
    """A body with no Content-Length that never ends: only counting while reading stops it."""
    block = line * max(1, (256 << 10) // len(line))

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(4096):  # 1 GiB at most, should the reader never hang up
                await response.write(block)
        return response

    return handle


class EngineWorld:
    """Fake engines on an event loop in a thread of their own, started and stopped as one."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runners: list[web.AppRunner] = []
        self._thread.start()

    def engine(self, metrics: Handler, server_info: Handler) -> Engine:
        """A new engine listening on a port of its own on 127.0.0.1."""
        engine = Engine(metrics, server_info)

        async def start() -> None:
            runner = web.AppRunner(engine.app(), access_log=None, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            engine.port = runner.addresses[0][1]
            self._runners.append(runner)

        asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return engine

    def close(self) -> None:
        """Stop every engine and the loop."""

        async def stop() -> None:
            for runner in self._runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


# --- the bridge as a process --------------------------------------------------------------


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


class BridgeProcess:
    """``metricbridge serve`` on ``port`` with ``args``; its log (stderr) goes to ``log_path``."""

    def __init__(self, port: int, log_path: Path, *args: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.popen = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "metricbridge", "serve", "--listen", f"127.0.0.1:{port}", *args],
            stdout=self._log,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until ``/-/ready`` answers 200 (or fail with the log)."""
        import urllib.request  # noqa: PLC0415 - only the start-up waits this way

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError("bridge exited: " + self.log_path.read_text()[-2000:])
            ready = self.base + "/-/ready"
            with contextlib.suppress(OSError), urllib.request.urlopen(ready, timeout=1) as answer:  # noqa: S310
                if answer.status == 200:
                    return
            time.sleep(0.1)
        raise AssertionError("bridge not ready: " + self.log_path.read_text()[-2000:])

    def rss_kib(self) -> int:
        """Resident set size now (VmRSS)."""
        return _status_kib(self.popen.pid, "VmRSS")

    def peak_rss_kib(self) -> int:
        """Highest resident set size so far (VmHWM)."""
        return _status_kib(self.popen.pid, "VmHWM")

    def log(self) -> str:
        """Everything logged so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM and wait; the exit code (killed after 20 s: a test failure of its own)."""
        terminate(self.popen)
        self._log.close()
        return self.popen.returncode


def terminate(popen: subprocess.Popen[Any]) -> None:
    """SIGTERM and wait; killed after 20 s (the caller's checks then fail on its exit code)."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
    try:
        popen.wait(20)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


class Helper:
    """This file run as a child process (``probe`` or ``scrapers``); its stdout lines collected."""

    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, str(SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                self.lines.append(json.loads(line))

    def wait_started(self, timeout: float = 30.0) -> None:
        """Block until the child printed its first line (it runs from then on)."""
        deadline = time.monotonic() + timeout
        while not self.lines:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.popen.args} did not start")
            time.sleep(0.05)

    def stop(self) -> str:
        """SIGTERM; wait for its last lines. Returns its stderr (empty unless it broke)."""
        if self.popen.stderr is None or self.popen.stderr.closed:
            return ""  # stopped already
        terminate(self.popen)
        self._reader.join(10)  # stdout is the reader thread's alone: it gets the last line
        assert self.popen.stderr is not None
        err = self.popen.stderr.read()
        self.popen.stderr.close()
        return err.decode(errors="replace")


# --- the prober (child process) -----------------------------------------------------------


def probe(urls: list[str], every: float = 0.1) -> None:
    """GET each URL every ``every`` seconds on a fresh connection; print one JSON line per try.

    A line: ``t`` (wall clock when sent), ``url`` (index), ``s`` (seconds to the whole answer)
    and ``status`` (the HTTP status, or the error's class when there was none within 5 s).
    """
    import http.client  # noqa: PLC0415 - the child needs only the standard library
    from urllib.parse import urlsplit  # noqa: PLC0415

    targets = [urlsplit(url) for url in urls]
    while True:
        for index, target in enumerate(targets):
            sent, started = time.time(), time.monotonic()
            status: int | str
            try:
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=5)
                conn.request("GET", target.path, headers={"Connection": "close"})
                answer = conn.getresponse()
                answer.read()
                status = answer.status
                conn.close()
            except OSError as exc:
                status = type(exc).__name__
            elapsed = time.monotonic() - started
            line = {"t": sent, "url": index, "s": elapsed, "status": status}
            print(json.dumps(line), flush=True)  # noqa: T201 - the child's output is its report
        time.sleep(every)


# --- the hostile scrapers (child process) -------------------------------------------------

MALFORMED = (
    b"GARBAGE\x00\x01\x02 / HTTP/1.1\r\n\r\n",  # not a method
    b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n",  # no such version
    b"GET /metrics HTTP/1.1\r\nHost x\r\nnot a header\r\n\r\n",  # a header without a colon
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n\r\n",  # too big
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",  # a negative length
    b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",  # a path that is not UTF-8
)


# Requests a client that never reads sends at once (HTTP/1.1 pipelining): together their answers
# are more than loopback's socket buffers take (up to 4 MiB), so the bridge's write stalls for
# sure, whatever the size of one answer.
PIPELINED = 48


async def _never_reading(host: str, port: int, hold: float, counts: Counter[str]) -> None:
    """Ask for /metrics and never read a byte; reconnect after ``hold`` seconds, for ever."""
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n" * PIPELINED
    while True:
        sock = socket.socket()
        # A tiny receive window: the kernel holds little, the bridge's write stalls early.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)  # noqa: FBT003 - the socket API's own positional flag
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            await asyncio.get_running_loop().sock_sendall(sock, request)
            counts["never_reading_sent"] += 1
            await asyncio.sleep(hold)
        except OSError as exc:
            counts[f"never_reading_{type(exc).__name__}"] += 1
            await asyncio.sleep(0.2)
        finally:
            sock.close()


async def _malformed(
    host: str, port: int, every: float, counts: Counter[str], stop: asyncio.Event
) -> None:
    """Send each malformed request in turn on a new connection, read what comes back."""
    index = 0
    while not stop.is_set():
        payload = MALFORMED[index % len(MALFORMED)]
        index += 1
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            writer.write(payload)
            await writer.drain()
            head = await asyncio.wait_for(reader.read(64), 5)
            counts["malformed_" + (head[9:12].decode(errors="replace") or "closed")] += 1
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        except (OSError, TimeoutError) as exc:
            counts[f"malformed_{type(exc).__name__}"] += 1
        await asyncio.sleep(every)


async def _reload_flood(
    host: str, port: int, every: float, counts: Counter[str], stop: asyncio.Event
) -> None:
    """POST /-/reload every ``every`` seconds; count the statuses."""
    request = (
        b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    while not stop.is_set():
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            writer.write(request)
            await writer.drain()
            head = await asyncio.wait_for(reader.read(), 30)
            counts["reload_" + (head[9:12].decode(errors="replace") or "closed")] += 1
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        except (OSError, TimeoutError) as exc:
            counts[f"reload_{type(exc).__name__}"] += 1
        await asyncio.sleep(every)


async def scrapers(base: str, never_reading: int, hold: float, every: float) -> None:
    """Run the hostile clients until SIGTERM, then print their counts as one JSON line."""
    from urllib.parse import urlsplit  # noqa: PLC0415

    target = urlsplit(base)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    counts: Counter[str] = Counter()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    holding = [
        asyncio.create_task(_never_reading(host, port, hold, counts)) for _ in range(never_reading)
    ]
    counting = [asyncio.create_task(_malformed(host, port, every, counts, stop))]
    # Four at once: a reload that goes through takes a while, and the flood must go on.
    counting += [
        asyncio.create_task(_reload_flood(host, port, every, counts, stop)) for _ in range(4)
    ]
    print(json.dumps({"started": True}), flush=True)  # noqa: T201 - the child's report
    await stop.wait()
    # The counting clients finish the request they are in, so that their counts and the
    # bridge's agree exactly; the others are simply dropped.
    await asyncio.wait(counting, timeout=30)
    for task in holding + counting:
        task.cancel()
    await asyncio.gather(*holding, *counting, return_exceptions=True)
    print(json.dumps(dict(counts)), flush=True)  # noqa: T201 - the child's report


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "probe":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        probe(rest)
    else:
        never, hold, every = int(rest[1]), float(rest[2]), float(rest[3])
        asyncio.run(scrapers(rest[0], never, hold, every))
