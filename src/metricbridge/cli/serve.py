"""``metricbridge [serve]``: run the sidecar; every flag is also an environment variable.

Exit status: 0 after SIGTERM/SIGINT and draining; 2 when it cannot start (a bad flag, variable
or rules file, or an address it cannot listen on), before anything is served.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import signal
import ssl
import sys
from typing import Any

from aiohttp import web

from metricbridge import __version__
from metricbridge.cli.logs import configure_logging
from metricbridge.cli.options import (
    MISSING_UPSTREAM,
    describe_os_error,
)
from metricbridge.cli.problems import print_config_error
from metricbridge.cli.serve_options import (
    SERVE_EPILOG,
    SHUTDOWN_SECONDS,
    add_service_options,
    usage_with_upstream_required,
)
from metricbridge.cli.version import reader_mode
from metricbridge.config.load import load_config
from metricbridge.errors import ConfigError, ListenError
from metricbridge.service.allocator import MMAP_THRESHOLD, tune_malloc
from metricbridge.service.background import check_upstreams
from metricbridge.service.descriptor_room import fitted_cap
from metricbridge.service.scrape import Upstream
from metricbridge.service.server import (
    STATE,
    ServiceSettings,
    make_app,
    reload_config,
    with_idle_switch,
)
from metricbridge.service.snapshot import FetchSettings
from metricbridge.service.web_guard import GUARD, HANDSHAKE_TIMEOUT, WebGuard
from metricbridge.service.worker import SWITCH_INTERVAL, share_one_cpu

EXIT_OK, EXIT_USAGE = 0, 2
log = logging.getLogger("metricbridge")


def add_serve_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``serve`` (also the default command)."""
    parser = commands.add_parser(
        "serve",
        help="run the sidecar (the default command: metricbridge --upstream :30000)",
        description="Scrape the engine, translate to the contract, and serve it on /metrics.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_service_options(parser)
    parser.usage = usage_with_upstream_required(parser)
    parser.set_defaults(handler=run_serve)


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """Settings from parsed flags (each value already checked); raises ValueError if unusable."""
    upstreams: tuple[Upstream, ...] = tuple(args.upstream)
    if not upstreams:
        raise ValueError(MISSING_UPSTREAM)
    if len({u.url for u in upstreams}) != len(upstreams):
        raise ValueError("the same upstream is given twice")
    fetch = FetchSettings(
        args.upstream_timeout,
        args.upstream_max_bytes,
        args.cache_ttl,
        family_sample_limit=args.family_sample_limit,
    )
    return ServiceSettings(
        upstreams,
        args.config,
        fetch,
        server_info=not args.no_server_info,
        enable_lifecycle=args.enable_lifecycle,
        max_connections=fitted_cap(args.max_connections),
        idle_timeout=args.idle_timeout,
        header_timeout=args.header_timeout,
        write_timeout=args.write_timeout,
        profiles=tuple(args.profiles),
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM/SIGINT; exit 0 after draining, 2 if it cannot start."""
    configure_logging(args.log_level, args.log_format)
    try:
        settings = service_settings(args)
        config = with_idle_switch(load_config(settings.config_path, settings.profiles))
        # Read before anything starts: a bad web config stops start-up as a bad rules file does.
        guard = WebGuard(args.web_config_file) if args.web_config_file is not None else None
    except ValueError as exc:
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_USAGE
    log_what_runs()  # once what it runs with is known to be usable
    if guard is not None:
        log.info("web config %s: %s", args.web_config_file, guard.describe())
    if tune_malloc():
        log.debug("glibc mmap threshold fixed at %d bytes", MMAP_THRESHOLD)
    # The event loop shares the GIL with the translation worker, and takes it back after every
    # socket call only when the worker yields it: at most once per switch interval. Python's
    # 5 ms made one /-/healthy answer wait up to 0.75 s while a 50,000-series family a rule
    # reads was translated; 1 ms halves that. The interval matters only while both threads run.
    sys.setswitchinterval(SWITCH_INTERVAL)
    # Before any thread starts: the loop's thread and the worker it starts share one CPU, so
    # neither waits on another core for the GIL (service.worker.share_one_cpu says why).
    if not args.no_cpu_pinning and (cpu := share_one_cpu()) is not None:
        log.debug("the event loop and the translation worker share CPU %d", cpu)
    app = make_app(settings, config)
    if guard is not None:
        guard.install(app)
    app.on_startup.append(_install_sighup)
    try:
        asyncio.run(_serve(app, args.listen, settings.upstreams))
    except ListenError as exc:
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if app[STATE].worker_left_running:
        log.warning("stopped with a translation still running; it is abandoned")
        # A translation outlived the stop: exit now, as the process would have had to wait
        # for it, rather than let the interpreter's finalisation abort its thread (exit 134).
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)
    log.info("stopped")
    return EXIT_OK


def log_what_runs() -> None:
    """One line naming the version, the reader and Python; a warning when the C pass is missing.

    Without a compiler, ``pip install`` builds the pure-Python reader and says so only with
    ``pip -v``: this is where an operator learns that reading is slower than it should be.
    """
    mode, why = reader_mode()
    log.info(
        "metricbridge %s starting: reader %s (%s), Python %s",
        __version__,
        mode,
        why,
        platform.python_version(),
    )
    if mode == "python" and not os.environ.get("METRICBRIDGE_PURE_PYTHON"):
        log.warning(
            "the compiled line pass is missing: the pure-Python reader is in use, and translating "
            "takes about 1.5 times the CPU; reinstall metricbridge where a C "
            "compiler is at hand (METRICBRIDGE_REQUIRE_COMPILED=1 makes the install fail "
            "without one)"
        )


async def _serve(
    app: web.Application, address: tuple[str, int], upstreams: tuple[Upstream, ...]
) -> None:
    """Serve until SIGTERM/SIGINT, then close the listener and let requests in flight end.

    Not ``web.run_app``: it binds only after the app has started and raises the bind's bare
    OSError, so "serving on" could only be logged before knowing the address was usable.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before start-up: a signal then ends it cleanly
        loop.add_signal_handler(sig, stop.set)
    settings = app[STATE].settings
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=SHUTDOWN_SECONDS,
        keepalive_timeout=settings.idle_timeout,
    )
    await runner.setup()
    listener: asyncio.Server | None = None
    checked: asyncio.Task[None] | None = None
    try:
        guard = app.get(GUARD)
        tls = guard.listener_context if guard is not None else None
        listener = await listen_capped(runner, *address, tls=tls)
        log.info(
            "serving on %s, upstreams: %s",
            format_address(*address),
            ", ".join(u.shown for u in upstreams),
        )
        if (bridge := app[STATE].bridge) is not None:
            # Beside serving, never before it: readiness does not wait for the engine.
            checked = asyncio.create_task(
                check_upstreams(bridge.session, upstreams, settings.fetch)
            )
        await stop.wait()
        # Scrapes in flight may finish for most of the grace period; one still waiting on a
        # slow engine then gets its answer (no engine data) in time for aiohttp's own deadline.
        loop.call_later(SHUTDOWN_SECONDS - 1, _give_up_fetching, app)
    finally:
        if checked is not None:
            checked.cancel()
            await asyncio.gather(checked, return_exceptions=True)
        if listener is not None:
            listener.close()  # stop accepting; connections open go on until cleanup ends them
        await runner.cleanup()


def _give_up_fetching(app: web.Application) -> None:
    bridge = app[STATE].bridge
    if bridge is not None:
        bridge.stop()


async def listen(runner: web.BaseRunner, host: str, port: int) -> web.TCPSite:
    """Start serving ``runner`` on ``host:port``; raise ``ListenError`` if it cannot be bound."""
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        reason = describe_os_error(exc)
        raise ListenError(f"cannot listen on {format_address(host, port)}: {reason}") from exc
    return site


async def listen_capped(
    runner: web.BaseRunner, host: str, port: int, *, tls: ssl.SSLContext | None = None
) -> asyncio.Server:
    """Like ``listen``, with the app's connection cap in front of aiohttp's protocol.

    ``tls``: serve HTTPS with this context (``--web.config.file``'s).

    ``runner.server`` is aiohttp's public low-level protocol factory; serving it through
    ``loop.create_server`` lets the cap see each connection before aiohttp does.
    """
    server = runner.server
    if server is None:
        raise RuntimeError("the runner is not set up")
    limit = runner.app[STATE].metrics.connections if isinstance(runner, web.AppRunner) else None
    factory = limit.protocol_factory(server) if limit is not None else server
    loop = asyncio.get_running_loop()
    try:
        if tls is None:
            return await loop.create_server(factory, host or None, port, reuse_address=True)
        return await loop.create_server(
            factory,
            host or None,
            port,
            reuse_address=True,
            ssl=tls,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT,
        )
    except OSError as exc:
        reason = describe_os_error(exc)
        raise ListenError(f"cannot listen on {format_address(host, port)}: {reason}") from exc


def format_address(host: str, port: int) -> str:
    """``HOST:PORT``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _install_sighup(app: web.Application) -> None:
    loop = asyncio.get_running_loop()
    guard = app.get(GUARD)
    running: set[asyncio.Task[list[str]]] = set()  # the loop keeps only weak references

    def reload() -> None:
        if guard is not None:
            guard.reload()  # a few small files: read at once, before the rules
        task = loop.create_task(reload_config(app))
        running.add(task)
        task.add_done_callback(running.discard)

    loop.add_signal_handler(signal.SIGHUP, reload)
