"""A built-in simulated SGLang 0.5.23 upstream: deterministic engine models and an HTTP server.

``SimulatedEngine`` renders what SGLang 0.5.23's ``/metrics`` serves (text format 0.0.4,
byte-compatible layout; see ``simulator_exposition``), ``SimulatedEncoder`` what an EPD encoder
server serves. ``make_simulator_app`` wraps them in an aiohttp app whose background task
advances the engine along a ``LoadScript`` so counters visibly grow and idle periods show.

Modules: ``simulator_families`` (family table copied from the fixtures), ``simulator_exposition``
(series storage and writer), ``simulator_scheduler`` and ``simulator_tokenizer`` (the two SGLang
process roles), ``simulator_engine`` and ``simulator_encoder`` (the servers), this one (HTTP).

Payload sizes, measured with seed 0 (identity encoding; gzip level 9 in brackets):

=======================  ===================  ================================================
engine                   bytes                traffic before the scrape
=======================  ===================  ================================================
tp1, cold                17,371               none; the same 82 series as ``tp1-cold.prom``
tp1                      108,996 (8,132)      60 s at 8 req/s (``tp1.prom``: 99,630)
dp8 x tp2 (16 ranks)     894,975 (30,306)     30 s at 24 req/s
dp64 x tp2 (128 ranks)   6,859,898            30 s at 192 req/s (4 running per rank)
dp64 x tp2, saturated    7,265,330 (198,002)  30 s at 1280 req/s, max_running 16384
=======================  ===================  ================================================

A rank that has served traffic carries 53-57 KB (``dp8.prom``: 54 KB per rank with a shorter
model name); a saturated rank adds the eviction and retraction families. So 10 MB takes about
176 scheduler processes: ``dp_size=88, tp_size=2`` renders 9,435,632 bytes after 30 s at
264 req/s. dp64 x tp2 stays near 7 MB however busy it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from metricbridge.simulator.encoder import SimulatedEncoder
from metricbridge.simulator.engine import SimulatedEngine

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = [
    "ENCODER",
    "ENGINE",
    "REQUEST_COUNTS",
    "TEXT_CONTENT_TYPE",
    "LoadScript",
    "RequestCounts",
    "SimulatedEncoder",
    "SimulatedEngine",
    "make_simulator_app",
    "run_simulator",
    "start_simulator",
]

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class LoadScript:
    """A repeating traffic cycle: ``busy_seconds`` of load with bursts, then ``idle_seconds``.

    Within the busy part, the last ``burst_seconds`` of every ``burst_every_seconds`` run at
    ``burst_rate`` instead of ``rate``. The encoder, if any, gets ``encoder_share`` of the rate.
    """

    busy_seconds: float = 20.0
    idle_seconds: float = 10.0
    rate: float = 8.0
    burst_every_seconds: float = 10.0
    burst_seconds: float = 2.0
    burst_rate: float = 40.0
    encoder_share: float = 0.5

    def __post_init__(self) -> None:
        """Reject cycles that cannot run."""
        if min(self.busy_seconds, self.idle_seconds, self.rate, self.burst_rate) < 0:
            raise ValueError("LoadScript durations and rates must not be negative")
        if self.busy_seconds + self.idle_seconds <= 0:
            raise ValueError("LoadScript needs a cycle longer than zero seconds")

    def rate_at(self, seconds: float) -> float:
        """Return the arrival rate (requests per second) ``seconds`` into the script."""
        phase = seconds % (self.busy_seconds + self.idle_seconds)
        if phase >= self.busy_seconds:
            return 0.0
        if self.burst_every_seconds > 0:
            into_window = phase % self.burst_every_seconds
            if into_window >= self.burst_every_seconds - self.burst_seconds:
                return self.burst_rate
        return self.rate


@dataclass(slots=True)
class RequestCounts:
    """How many requests each endpoint served; tests read it to prove scrape coalescing."""

    metrics: int = 0
    encoder_metrics: int = 0
    server_info: int = 0
    health: int = 0


@dataclass(frozen=True, slots=True)
class _Driver:
    tick_seconds: float
    script: LoadScript


ENGINE = web.AppKey("engine", SimulatedEngine)
ENCODER = web.AppKey("encoder", SimulatedEncoder)
REQUEST_COUNTS = web.AppKey("request_counts", RequestCounts)
_DRIVER = web.AppKey("driver", _Driver)


def make_simulator_app(
    engine: SimulatedEngine,
    *,
    encoder: SimulatedEncoder | None = None,
    tick_seconds: float = 1.0,
    script: LoadScript | None = None,
) -> web.Application:
    """Build the app: /metrics, /server_info, /get_server_info, /health, /encoder/metrics."""
    if tick_seconds <= 0:
        raise ValueError("tick_seconds must be positive")
    app = web.Application()
    app[ENGINE] = engine
    app[REQUEST_COUNTS] = RequestCounts()
    app[_DRIVER] = _Driver(tick_seconds, script or LoadScript())
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/server_info", _server_info)
    app.router.add_get("/get_server_info", _server_info)
    app.router.add_get("/health", _health)
    if encoder is not None:
        app[ENCODER] = encoder
        app.router.add_get("/encoder/metrics", _encoder_metrics)
    app.cleanup_ctx.append(_drive)
    return app


async def start_simulator(  # noqa: PLR0913 - mirrors make_simulator_app plus the address
    host: str = "127.0.0.1",
    port: int = 30000,
    *,
    engine: SimulatedEngine | None = None,
    encoder: SimulatedEncoder | None = None,
    tick_seconds: float = 1.0,
    script: LoadScript | None = None,
) -> web.AppRunner:
    """Serve a simulator on ``host:port`` (0 picks a port; see ``runner.addresses``)."""
    app = make_simulator_app(
        engine or SimulatedEngine(), encoder=encoder, tick_seconds=tick_seconds, script=script
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def run_simulator(  # noqa: PLR0913 - mirrors start_simulator plus the stop event
    host: str = "127.0.0.1",
    port: int = 30000,
    *,
    engine: SimulatedEngine | None = None,
    encoder: SimulatedEncoder | None = None,
    tick_seconds: float = 1.0,
    script: LoadScript | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve a simulator until ``stop`` is set (or the task is cancelled), then clean up."""
    runner = await start_simulator(
        host, port, engine=engine, encoder=encoder, tick_seconds=tick_seconds, script=script
    )
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()


async def _metrics(request: web.Request) -> web.Response:
    request.app[REQUEST_COUNTS].metrics += 1
    return await _exposition(request, request.app[ENGINE].render())


async def _encoder_metrics(request: web.Request) -> web.Response:
    request.app[REQUEST_COUNTS].encoder_metrics += 1
    return await _exposition(request, request.app[ENCODER].render())


async def _exposition(request: web.Request, body: bytes) -> web.Response:
    """Answer like prometheus_client: gzip (level 9) whenever Accept-Encoding mentions it."""
    headers = {"Content-Type": TEXT_CONTENT_TYPE}
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        # zlib releases the GIL, so a multi-MB body does not stall the event loop.
        body = await asyncio.to_thread(gzip.compress, body)
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


async def _server_info(request: web.Request) -> web.Response:
    request.app[REQUEST_COUNTS].server_info += 1
    engine = request.app[ENGINE]
    engine.note_http_request(request.path)
    return web.json_response(engine.server_info())


async def _health(request: web.Request) -> web.Response:
    request.app[REQUEST_COUNTS].health += 1
    request.app[ENGINE].note_http_request("/health")
    return web.Response()


async def _drive(app: web.Application) -> AsyncIterator[None]:
    """Run the load script in the background for as long as the app runs."""
    task = asyncio.create_task(_tick(app[ENGINE], app.get(ENCODER), app[_DRIVER]))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _tick(engine: SimulatedEngine, encoder: SimulatedEncoder | None, driver: _Driver) -> None:
    elapsed = 0.0
    while True:
        await asyncio.sleep(driver.tick_seconds)
        rate = driver.script.rate_at(elapsed)
        engine.advance(driver.tick_seconds, arrivals_per_second=rate)
        if encoder is not None:
            share = rate * driver.script.encoder_share
            encoder.advance(driver.tick_seconds, arrivals_per_second=share)
        elapsed += driver.tick_seconds
