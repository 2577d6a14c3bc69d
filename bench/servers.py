"""Processes for the service benchmarks: a payload upstream, a pass-through proxy, the bridge.

    python bench/servers.py upstream --port P (--payload 1MB|10MB [--evolve] | --file PATH...)
    python bench/servers.py proxy --port P --upstream URL [--buffered]

Each runs in its own process so the GIL and the RSS of the bridge are its own. The upstream
counts its /metrics requests (GET /count). ``--evolve`` serves successive scrapes of a simulated
engine, one per answer, so every scrape sees new values (a real engine never serves the same
bytes twice, and the bridge caches parses of small repeated families); otherwise the bytes are
fixed. The scrapes are rendered at start-up and served in rotation: rendering one per request
took 8 ms (1 MB) to 70 ms (10 MB) in this process, and its jitter swamped the 1-2 ms a proxy
adds. A rotation of 16 or more is safe: the bridge keeps nothing of a payload beyond the next.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from payloads import SHAPES

from metricbridge.simulator.engine import SimulatedEngine

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BENCH = Path(__file__).resolve().parent
COUNT = web.AppKey("count", dict)


# --- the roles ----------------------------------------------------------------------------


def upstream_app(payload: str | None, files: list[Path], *, evolve: bool) -> web.Application:
    """Serve one payload: files' bytes in rotation, or successive scrapes of a simulated engine."""
    app = web.Application()
    app[COUNT] = {"metrics": 0}
    if files:
        bodies = [file.read_bytes() for file in files]
    else:
        dp, tp = SHAPES[payload or "1MB"]
        engine = SimulatedEngine(dp_size=dp, tp_size=tp, seed=7)
        engine.advance(30.0, arrivals_per_second=3.0 * dp * tp)
        bodies = [engine.render()]
        if evolve:
            rotation = max(16, 64 * 16 // (dp * tp))  # 64 at 1 MB, 16 at 10 MB
            bodies += [_next(engine) for _ in range(rotation - 1)]

    async def metrics(_: web.Request) -> web.Response:
        served = app[COUNT]["metrics"]
        app[COUNT]["metrics"] += 1
        body = bodies[served % len(bodies)]
        return web.Response(body=body, headers={"Content-Type": TEXT_TYPE})

    async def count(_: web.Request) -> web.Response:
        return web.json_response(app[COUNT])

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/count", count)
    return app


def _next(engine: SimulatedEngine) -> bytes:
    engine.advance(1.0, arrivals_per_second=3.0 * engine.dp_size * engine.tp_size)
    return engine.render()


def proxy_app(upstream: str, *, buffered: bool) -> web.Application:
    """A plain pass-through proxy for /metrics: one shared session, bytes copied as they come."""
    app = web.Application()
    sessions: list[aiohttp.ClientSession] = []

    async def session_ctx(_: web.Application):  # noqa: ANN202 - aiohttp cleanup context
        sessions.append(aiohttp.ClientSession(auto_decompress=False))
        yield
        await sessions[0].close()

    async def metrics(request: web.Request) -> web.StreamResponse:
        headers = {"Accept-Encoding": "identity"}
        async with sessions[0].get(upstream, headers=headers) as response:
            out_headers = {"Content-Type": response.headers.get("Content-Type", TEXT_TYPE)}
            if buffered:
                body = await response.read()
                return web.Response(body=body, status=response.status, headers=out_headers)
            out = web.StreamResponse(status=response.status, headers=out_headers)
            if response.content_length is not None:
                out.content_length = response.content_length
            await out.prepare(request)
            async for chunk in response.content.iter_chunked(1 << 16):
                await out.write(chunk)
            await out.write_eof()
            return out

    app.cleanup_ctx.append(session_ctx)
    app.router.add_get("/metrics", metrics)
    return app


# --- process helpers (used by the benchmark scripts) --------------------------------------


def free_port() -> int:
    """A port free on 127.0.0.1 right now, for a child that binds it a moment later.

    Drawn below Linux's ephemeral range (32768-60999): a port the kernel handed out (bind to 0)
    can be handed out again, to an outgoing connection of the benchmark itself, before the child
    binds it ("address already in use").
    """
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Process:
    """A child process serving HTTP on 127.0.0.1:``port``; always killed on exit."""

    def __init__(
        self, name: str, args: list[str], port: int, env: dict[str, str] | None = None
    ) -> None:
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.popen = subprocess.Popen(
            [sys.executable, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )

    @classmethod
    def upstream(
        cls,
        payload: str | None = None,
        *,
        evolve: bool = False,
        file: Path | None = None,
        files: list[Path] | None = None,
    ) -> Process:
        """A payload upstream: a simulated engine, or ``file`` (or ``files`` in rotation)."""
        port = free_port()
        args = [str(BENCH / "servers.py"), "upstream", "--port", str(port)]
        served = [file] if file else (files or [])
        for path in served:
            args += ["--file", str(path)]
        if not served:
            args += ["--payload", payload or "1MB"]
        return cls("upstream", [*args, *(["--evolve"] if evolve else [])], port)

    @classmethod
    def proxy(cls, upstream: str, *, buffered: bool = False) -> Process:
        """A pass-through proxy in front of ``upstream``."""
        port = free_port()
        args = [str(BENCH / "servers.py"), "proxy", "--port", str(port), "--upstream", upstream]
        return cls("proxy", [*args, *(["--buffered"] if buffered else [])], port)

    @classmethod
    def bridge(
        cls, upstream: str, *, cache_ttl: float, env: dict[str, str] | None = None
    ) -> Process:
        """``metricbridge serve`` in front of ``upstream``."""
        port = free_port()
        args = ["-m", "metricbridge", "--upstream", upstream, "--listen", f"127.0.0.1:{port}"]
        args += ["--cache-ttl", str(cache_ttl), "--no-server-info", "--log-level", "warning"]
        return cls("bridge", args, port, env)

    async def ready(self, path: str, timeout: float = 120.0) -> None:
        """Wait until ``path`` answers (payload rendering can take a while at 10 MB)."""
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.popen.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: {self.popen.stderr.read().decode()}")  # type: ignore[union-attr]
                try:
                    async with session.get(self.url + path) as response:
                        if response.status < 500:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start within {timeout} s")

    def rss_kib(self) -> int:
        """Current resident set size (VmRSS)."""
        return _status_kib(self.popen.pid, "VmRSS")

    def peak_rss_kib(self) -> int:
        """Peak resident set size so far (VmHWM)."""
        return _status_kib(self.popen.pid, "VmHWM")

    def cpu(self) -> Usage:
        """CPU seconds (user, system) and minor page faults so far, every thread included."""
        return process_usage(self.popen.pid)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if self.popen.stderr is not None:
            self.popen.stderr.close()


@dataclass(frozen=True, slots=True)
class Usage:
    """A process's CPU seconds and minor page faults, from /proc/<pid>/stat."""

    user: float
    system: float
    faults: int

    @property
    def total(self) -> float:
        """User plus system seconds."""
        return self.user + self.system

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.user - other.user, self.system - other.system, self.faults - other.faults)


_TICK = os.sysconf("SC_CLK_TCK")


def process_usage(pid: int) -> Usage:
    """``pid``'s utime, stime and minflt: fields 14, 15 and 10 of /proc/<pid>/stat.

    The process's figures, not a thread's: they include every thread, finished ones too.
    """
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces; fields from 3
    return Usage(int(fields[11]) / _TICK, int(fields[12]) / _TICK, int(fields[7]))


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


async def upstream_count(upstream: Process) -> int:
    """/metrics requests the upstream has answered."""
    async with aiohttp.ClientSession() as session, session.get(upstream.url + "/count") as response:
        return int(json.loads(await response.read())["metrics"])


def main() -> None:
    """Run one role until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    roles = parser.add_subparsers(dest="role", required=True)
    up = roles.add_parser("upstream")
    up.add_argument("--port", type=int, required=True)
    up.add_argument("--payload", choices=sorted(SHAPES))
    up.add_argument("--file", type=Path, action="append", default=[], help="again to rotate")
    up.add_argument("--evolve", action="store_true")
    proxy = roles.add_parser("proxy")
    proxy.add_argument("--port", type=int, required=True)
    proxy.add_argument("--upstream", required=True)
    proxy.add_argument("--buffered", action="store_true")
    args = parser.parse_args()
    if args.role == "upstream":
        app = upstream_app(args.payload, args.file, evolve=args.evolve)
    else:
        app = proxy_app(args.upstream, buffered=args.buffered)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
