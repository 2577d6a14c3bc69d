"""``metricbridge [serve]``: run the sidecar; every flag is also an environment variable."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from metricbridge.allocator import MMAP_THRESHOLD, tune_malloc
from metricbridge.bridge import FetchSettings
from metricbridge.config import load_config
from metricbridge.errors import ConfigError
from metricbridge.logs import configure_logging
from metricbridge.scrape import parse_upstream
from metricbridge.server import ServiceSettings, make_app, reload_config, with_idle_switch

DEFAULT_LISTEN = ":9850"
EXIT_OK, EXIT_USAGE = 0, 2
log = logging.getLogger("metricbridge")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"METRICBRIDGE_{name}", default)


def _number(kind: Callable[[str], Any], text: str | None) -> Any:  # noqa: ANN401 - int or float
    return kind(text) if text is not None else None


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``serve`` and ``demo``; each defaults to its METRICBRIDGE_* variable."""
    upstreams = [u for u in (_env("UPSTREAM") or "").split(",") if u.strip()]
    parser.add_argument(
        "-u",
        "--upstream",
        action="append",
        default=None,
        metavar="HOST:PORT|URL",
        help="engine /metrics to scrape; ':30000' means 127.0.0.1:30000/metrics; repeat for an EPD "
        "encoder server (env METRICBRIDGE_UPSTREAM, comma-separated)",
    )
    parser.set_defaults(env_upstreams=upstreams)
    parser.add_argument(
        "--listen",
        default=_env("LISTEN", DEFAULT_LISTEN),
        metavar="[HOST]:PORT",
        help=f"address to serve on; no host means every interface (default {DEFAULT_LISTEN}; "
        "env METRICBRIDGE_LISTEN)",
    )
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=_env("CONFIG"),
        help="rules file (default: the shipped contract; env METRICBRIDGE_CONFIG)",
    )
    parser.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="log level (default info; env METRICBRIDGE_LOG_LEVEL)",
    )
    parser.add_argument(
        "--log-format",
        default=_env("LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="log format (default text; env METRICBRIDGE_LOG_FORMAT)",
    )
    parser.add_argument(
        "--upstream-timeout",
        type=float,
        default=_number(float, _env("UPSTREAM_TIMEOUT", "10")),
        help="cap on one upstream fetch, seconds; Prometheus' own scrape timeout minus 0.5 s "
        "is used when smaller (default 10; env METRICBRIDGE_UPSTREAM_TIMEOUT)",
    )
    parser.add_argument(
        "--upstream-max-bytes",
        type=int,
        default=_number(int, _env("UPSTREAM_MAX_BYTES", str(64 << 20))),
        help="largest upstream body accepted (default 64 MiB; env METRICBRIDGE_UPSTREAM_MAX_BYTES)",
    )
    parser.add_argument(
        "--no-server-info",
        action="store_true",
        default=_env("NO_SERVER_INFO") == "1",
        help="do not poll the engine's /server_info (rows derived from it are then reported "
        "missing; env METRICBRIDGE_NO_SERVER_INFO=1)",
    )
    parser.add_argument(
        "--cache-ttl",
        type=float,
        default=_number(float, _env("CACHE_TTL", "1")),
        help="seconds a finished fetch is reused by later scrapes (default 1; 0 = only "
        "scrapes arriving during a fetch share it; env METRICBRIDGE_CACHE_TTL)",
    )


def add_serve_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``serve`` (also the default command)."""
    parser = commands.add_parser(
        "serve",
        help="run the sidecar (the default command)",
        description="Scrape the engine, translate to the contract, and serve it on /metrics.",
    )
    add_service_options(parser)
    parser.set_defaults(handler=run_serve)


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` to a (host, port) pair; no host means every interface."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"cannot listen on {text!r}: expected [HOST]:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a sidecar is scraped via the pod IP


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """Settings from parsed flags; raises ValueError on unusable values."""
    specs = args.upstream or args.env_upstreams
    if not specs:
        raise ValueError(
            "no upstream given: pass --upstream HOST:PORT (or set METRICBRIDGE_UPSTREAM)"
        )
    upstreams = tuple(parse_upstream(spec) for spec in specs)
    if len({u.url for u in upstreams}) != len(upstreams):
        raise ValueError("the same upstream is given twice")
    if args.upstream_timeout <= 0 or args.upstream_max_bytes <= 0 or args.cache_ttl < 0:
        raise ValueError(
            "--upstream-timeout and --upstream-max-bytes must be positive, --cache-ttl not negative"
        )
    fetch = FetchSettings(args.upstream_timeout, args.upstream_max_bytes, args.cache_ttl)
    return ServiceSettings(upstreams, args.config, fetch, server_info=not args.no_server_info)


def run_serve(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM/SIGINT; exit 0 after draining, 2 on bad flags or config."""
    configure_logging(args.log_level, args.log_format)
    try:
        settings = service_settings(args)
        host, port = parse_listen(args.listen)
        config = with_idle_switch(load_config(settings.config_path))
    except ValueError as exc:
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"metricbridge: cannot start with this config:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    if tune_malloc():
        log.debug("glibc mmap threshold fixed at %d bytes", MMAP_THRESHOLD)
    app = make_app(settings, config)
    app.on_startup.append(_install_sighup)
    log.info(
        "serving on %s:%d, upstreams: %s", host, port, ", ".join(u.url for u in settings.upstreams)
    )
    # run_app turns SIGTERM into a graceful shutdown: the listener closes, requests in flight end.
    web.run_app(app, host=host, port=port, access_log=None, print=None, shutdown_timeout=15)
    log.info("stopped")
    return EXIT_OK


async def _install_sighup(app: web.Application) -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(reload_config(app)))
