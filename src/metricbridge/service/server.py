"""The HTTP face of the bridge: /metrics, /contract, health, readiness and reload."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from metricbridge import __version__
from metricbridge.config.load import load_config
from metricbridge.config.schema import Config
from metricbridge.errors import ConfigError
from metricbridge.exposition.writer import PIECE_SIZE
from metricbridge.model.family import Format
from metricbridge.model.names import Escaping, shortened
from metricbridge.service.background import heartbeat, poll_server_info, server_info_urls
from metricbridge.service.bridge import Bridge, ServedFetch
from metricbridge.service.descriptor_room import waiting_room
from metricbridge.service.negotiation import (
    accepts_gzip,
    content_type,
    negotiate,
    scrape_timeout,
)
from metricbridge.service.response_body import Part, engine_body, filtered_body, spelled_body
from metricbridge.service.scrape import Upstream
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.snapshot import FetchSettings
from metricbridge.service.tracebacks import release_frames
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.report import contract_report

log = logging.getLogger("metricbridge.server")


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """Everything the service needs besides the rules."""

    upstreams: tuple[Upstream, ...]
    config_path: Path | None = None
    fetch: FetchSettings = FetchSettings()
    timeout_offset: float = 0.5
    server_info: bool = True  # poll the first upstream's /server_info for derived rows
    # POST /-/reload is off unless asked for, as Prometheus' --web.enable-lifecycle: it changes
    # state and has no authentication. SIGHUP needs the right to signal the process.
    enable_lifecycle: bool = False
    # Reloads reset derived-rate state and the caches: an HTTP reload sooner than this after the
    # previous one is refused (429), so a client in a loop cannot keep the rates blank.
    reload_min_interval: float = 1.0
    # Client connections (Prometheus' --web.max-connections default), keep-alive idle seconds,
    # how long a request head may take (Go's ReadHeaderTimeout), and how long a response may
    # wait for a client that reads nothing before it is abandoned.
    max_connections: int = 512
    idle_timeout: float = 300.0
    header_timeout: float = 10.0
    write_timeout: float = 30.0
    profiles: tuple[str, ...] = ()  # shipped profiles layered over the rules file (--profile)


@dataclass(slots=True)
class ServiceState:
    """Mutable service state: the loaded config and the lock that serialises reloads."""

    settings: ServiceSettings
    config: Config
    metrics: SelfMetrics
    reload_lock: asyncio.Lock
    bridge: Bridge | None = None
    last_reload: float = float("-inf")  # event-loop time of the last reload attempt
    # Set at cleanup when the bridge's worker was still translating: see Worker.wait_closed.
    worker_left_running: bool = False


STATE = web.AppKey("state", ServiceState)


async def _bridge_ctx(app: web.Application) -> AsyncIterator[None]:
    """One ClientSession per app, closed on shutdown (aiohttp: never a session per request)."""
    state = app[STATE]
    connector = aiohttp.TCPConnector(limit=16, limit_per_host=4)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        bridge = state.bridge = Bridge(
            state.settings.upstreams,
            compile_rules(state.config),
            session,
            state.metrics,
            state.settings.fetch,
        )
        tasks = [asyncio.create_task(heartbeat(bridge))]
        bad_requests = state.metrics.connections.log_filter()
        aiohttp_server_log = logging.getLogger("aiohttp.server")
        aiohttp_server_log.addFilter(bad_requests)
        if state.settings.server_info:
            urls = server_info_urls(state.settings.upstreams[0])
            tasks.append(asyncio.create_task(poll_server_info(bridge, urls)))
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        aiohttp_server_log.removeFilter(bad_requests)
        state.worker_left_running = not await bridge.close()
        state.bridge = None


def _load_and_compile(
    path: Path | None, profiles: tuple[str, ...] = ()
) -> tuple[Config, CompiledRules]:
    config = with_idle_switch(load_config(path, profiles))
    return config, compile_rules(config)


def with_idle_switch(config: Config) -> Config:
    """The contract's switch: SGLANG_IDLE_METRIC_HEARTBEAT=1 turns idle zeroing on."""
    if os.environ.get("SGLANG_IDLE_METRIC_HEARTBEAT", "").strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
    ):
        return dataclasses.replace(config, idle=dataclasses.replace(config.idle, enabled=True))
    return config


def _bridge(request: web.Request) -> Bridge:
    bridge = request.app[STATE].bridge
    if bridge is None:
        raise web.HTTPServiceUnavailable(text="starting up\n")
    return bridge


async def handle_metrics(request: web.Request) -> web.StreamResponse:
    """Serve the translated engine metrics plus the bridge's own, in the negotiated format."""
    state = request.app[STATE]
    bridge = _bridge(request)
    asked = negotiate(request.headers.get("Accept"))
    timeout = scrape_timeout(
        request.headers.get("X-Prometheus-Scrape-Timeout-Seconds"),
        cap=state.settings.fetch.timeout_cap,
        offset=state.settings.timeout_offset,
    )
    names = set(request.query.getall("name[]", []))
    level = state.settings.fetch.gzip_level
    gzip_level = level if accepts_gzip(request.headers.get("Accept-Encoding")) else None
    # The engine part is rendered in the bridge's worker, within the scrape's deadline.
    render = None if names else (asked.format, gzip_level is not None)
    snapshot = await bridge.snapshot(timeout, render)
    if not names:  # a name[] answer is part of a fetch, not what a scrape of /metrics saw
        bridge.last_served = ServedFetch.of(snapshot)
    # Text when OpenMetrics cannot carry every family of the snapshot (its misfit): Prometheus
    # reads text whatever it asked first, and no family is dropped or loses its type.
    fmt = snapshot.served_format(asked.format)
    if fmt is not asked.format and snapshot.misfit is not None:
        state.metrics.format_fallbacks.inc(snapshot.misfit.value)
    state.metrics.scrapes.inc(fmt.value)
    if names:
        parts = await filtered_body(
            snapshot, state.metrics, fmt, names, gzip_level=gzip_level, escaping=asked.escaping
        )
    elif asked.escaping is not Escaping.UNDERSCORES and snapshot.spelled:
        parts = await spelled_body(
            snapshot, state.metrics, fmt, gzip_level=gzip_level, escaping=asked.escaping
        )
    else:
        parts = engine_body(snapshot, state.metrics, fmt, gzip_level)
    # A client that reads slowly, or not at all until --web.write-timeout, pins only the bytes
    # it is sent, not the snapshot's translation: the families a rule read are Python objects,
    # many times the size of their text.
    del snapshot
    compressed = gzip_level is not None
    return await _send(request, fmt, parts, compressed=compressed, escaping=asked.escaping)


async def _send(
    request: web.Request,
    fmt: Format,
    parts: tuple[Part, ...],
    *,
    compressed: bool,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> web.StreamResponse:
    """Write ``parts`` one after the other behind a Content-Length.

    Not ``web.Response(body=b"".join(parts))``: the join copies the whole body on every scrape,
    and aiohttp keeps a returned Response, body included, until the connection's next request,
    which pins one more copy of a 10 MB body per idle keep-alive connection.
    """
    headers = {"Content-Type": content_type(fmt, escaping), "Vary": "Accept, Accept-Encoding"}
    if compressed:
        headers["Content-Encoding"] = "gzip"
    response = web.StreamResponse(headers=headers)
    response.content_length = sum(len(part) for part in parts)
    state = request.app[STATE]
    try:
        # One deadline for the whole write: a client that stops reading would otherwise hold
        # the response, and the snapshot it is a view of, for as long as it keeps the socket.
        async with asyncio.timeout(state.settings.write_timeout):
            await response.prepare(request)
            if request.method != "HEAD":  # HEAD: the headers, Content-Length included, no body
                for part in parts:
                    view = memoryview(part)
                    # Slices, so aiohttp drains between them: one 10 MB write would be copied
                    # whole into the transport's buffer, a fresh 10 MB allocation every scrape.
                    for offset in range(0, len(view), PIECE_SIZE):
                        await response.write(view[offset : offset + PIECE_SIZE])
            await response.write_eof()
    except TimeoutError as exc:
        release_frames(exc)
        state.metrics.connections.write_timeouts += 1
        log.debug("scraper read nothing for %g s: response abandoned", state.settings.write_timeout)
        if request.transport is not None:
            request.transport.abort()
    except ConnectionError as exc:
        # The scraper left: nobody is left to answer, and it is not the bridge's error. The
        # exception's traceback is in a cycle holding the answer's parts (service.tracebacks).
        release_frames(exc)
        log.debug("scraper disconnected during the response")
    return response


async def handle_healthy(_: web.Request) -> web.Response:
    """Liveness: the process answers."""
    return web.Response(text="metricbridge is healthy.\n")


async def handle_ready(request: web.Request) -> web.Response:
    """Readiness: rules loaded and the HTTP client running; upstream health is not required."""
    if request.app[STATE].bridge is None:
        return web.Response(status=503, text="metricbridge is starting.\n")
    return web.Response(text="metricbridge is ready.\n")


async def reload_config(app: web.Application) -> list[str]:
    """Load and compile the config, then swap it in; on failure keep the old one. Returns issues."""
    state = app[STATE]
    async with state.reload_lock:
        state.last_reload = asyncio.get_running_loop().time()
        try:
            # Off the event loop: a large rules file takes seconds to read and compile, and
            # scrapes must go on meanwhile (the old rules serve until the swap below).
            settings = state.settings
            config, rules = await asyncio.to_thread(
                _load_and_compile, settings.config_path, settings.profiles
            )
        except ConfigError as exc:
            issues = [str(issue) for issue in exc.issues]
        else:
            issues = []
        if issues:
            state.metrics.config_loaded(ok=False)
            for issue in issues:
                log.error("config reload rejected, old config kept: %s", shortened(issue))
            return issues
        state.config = config
        if state.bridge is not None:
            state.bridge.replace_rules(rules)
        state.metrics.config_loaded(ok=True, at=time.time())
        log.info("config reloaded from %s (%d families)", config.source, len(config.families))
        return []


async def handle_reload(request: web.Request) -> web.Response:
    """POST /-/reload: 200 when the new config is in force, 500 with its issues otherwise.

    403 unless the lifecycle API is enabled, 429 when the previous reload was too recent; both
    are counted in ``metricbridge_reloads_refused_total``.
    """
    state = request.app[STATE]
    if not state.settings.enable_lifecycle:
        state.metrics.reload_refused("lifecycle_disabled")
        return web.Response(
            status=403, text="lifecycle API is not enabled (start with --web.enable-lifecycle)\n"
        )
    wait = state.last_reload + state.settings.reload_min_interval
    wait -= asyncio.get_running_loop().time()
    if wait > 0:
        state.metrics.reload_refused("too_frequent")
        return web.Response(
            status=429,
            headers={"Retry-After": str(math.ceil(wait))},
            text=f"reloaded less than {state.settings.reload_min_interval:g} s ago; try again\n",
        )
    issues = await reload_config(request.app)
    if issues:
        return web.Response(
            status=500, text="failed to reload config:\n" + "\n".join(issues) + "\n"
        )
    return web.Response(text="config reloaded\n")


async def handle_contract(request: web.Request) -> web.Response:
    """GET /contract: each contract row and how the fetch /metrics last served served it.

    It never fetches: with ``--cache-ttl 0`` its own fetch would be another one than the scrape
    it should explain, and a rate between two fetches would read missing right after /metrics
    served it. Before the first scrape every row reads "no upstream data".
    """
    state = request.app[STATE]
    served = _bridge(request).last_served
    snapshot = served if served is not None else ServedFetch(None, ())
    report = contract_report(state.config, snapshot.rows)
    report["upstreams"] = [
        {
            "upstream": r.upstream.label,
            "up": r.ok,
            "reason": r.reason or None,
            "message": r.message or None,
        }
        for r in snapshot.results
    ]
    return web.json_response(report, dumps=lambda obj: json.dumps(obj, indent=2) + "\n")


async def handle_index(request: web.Request) -> web.Response:
    """A plain page pointing at the endpoints."""
    upstreams = ", ".join(u.shown for u in request.app[STATE].settings.upstreams)
    return web.Response(
        text=f"metricbridge {__version__}\nupstreams: {upstreams}\n\n"
        "/metrics   translated engine metrics and metricbridge_* self-metrics\n"
        "/contract  contract coverage of the latest fetch (JSON)\n"
        "/-/healthy /-/ready  probes\n"
        + (
            "POST /-/reload  re-reads the config\n"
            if request.app[STATE].settings.enable_lifecycle
            else "POST /-/reload  disabled (--web.enable-lifecycle); SIGHUP re-reads the config\n"
        )
    )


def make_app(settings: ServiceSettings, config: Config) -> web.Application:
    """The aiohttp application; the caller has already loaded ``config`` (fail fast at start)."""
    metrics = SelfMetrics()
    connections = metrics.connections
    # First of the middlewares: a connection is busy from its request's first step to its
    # answer's last byte, whatever answers it.
    middlewares = [connections.middleware]
    app = web.Application(client_max_size=1024, middlewares=middlewares)  # no request bodies
    metrics.config_loaded(ok=True, at=time.time())
    connections.cap = settings.max_connections
    connections.waiting_cap = waiting_room(settings.max_connections)
    connections.header_timeout = settings.header_timeout
    metrics.upstream_max_bytes.set(settings.fetch.max_bytes)
    metrics.upstream_timeout.set(settings.fetch.timeout_cap)
    app[STATE] = ServiceState(settings, config, metrics, asyncio.Lock())
    app.cleanup_ctx.append(_bridge_ctx)
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/contract", handle_contract)
    app.router.add_get("/-/healthy", handle_healthy)
    app.router.add_get("/-/ready", handle_ready)
    app.router.add_post("/-/reload", handle_reload)
    app.router.add_get("/", handle_index)
    return app
