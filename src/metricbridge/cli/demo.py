"""``metricbridge demo``: a simulated SGLang engine and the bridge in front of it, on loopback.

The engine's port defaults to one the system picks, not SGLang's 30000: the demo is often run
on a machine that also has a real engine, and must not take (or fail on) its port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from metricbridge.cli.logs import configure_logging
from metricbridge.cli.options import choice, port_number, positive_int, positive_seconds
from metricbridge.cli.problems import print_config_error
from metricbridge.cli.serve import format_address, listen
from metricbridge.cli.serve_options import LOG_LEVELS, listen_address
from metricbridge.config.load import load_config
from metricbridge.config.schema import Config
from metricbridge.errors import ConfigError, ListenError
from metricbridge.render.contract import missing_breakdown
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import STATE, ServiceSettings, make_app
from metricbridge.simulator.encoder import SimulatedEncoder
from metricbridge.simulator.engine import SimulatedEngine
from metricbridge.simulator.server import make_simulator_app
from metricbridge.translation.contract_index import ContractIndex
from metricbridge.translation.report import contract_report

EXIT_OK, EXIT_USAGE = 0, 2
_SHOWN = (
    "sglang:request_waiting_time_count",
    "sglang:engine_startup_time",
    "sglang:num_aborted_requests_total",
    "sglang:encoder_num_requests_total",
    "sglang:cached_tokens_total",
)


def add_demo_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``demo``."""
    parser = commands.add_parser(
        "demo",
        help="run a simulated SGLang engine with the bridge in front of it",
        description="Start a simulated SGLang server (LLM + EPD encoder endpoints) on loopback "
        "and the bridge in front of it, then print where to look and a few translated series "
        "every 5 s. Stop with Ctrl-C. Reads no METRICBRIDGE_* variable. Exit 0 when stopped; "
        "2 on a bad option or rules file, or an address it cannot listen on.",
    )
    parser.add_argument(
        "--web.listen-address",
        "--listen",
        type=listen_address,
        default=listen_address("127.0.0.1:9850"),
        dest="listen",
        metavar="[HOST]:PORT",
        help="bridge address (default 127.0.0.1:9850; --listen is its old name)",
    )
    parser.add_argument(
        "--engine-port",
        type=port_number,
        default=0,
        metavar="PORT",
        help="simulated engine port on 127.0.0.1 (default 0: a free port the system picks, "
        "printed at start; not SGLang's 30000, so a real engine on this machine is left alone)",
    )
    parser.add_argument(
        "--dp", type=positive_int, default=2, metavar="N", help="simulated DP ranks (default 2)"
    )
    parser.add_argument(
        "--duration",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="rules file (default: the shipped contract)",
    )
    parser.add_argument(
        "--log-level",
        type=choice(LOG_LEVELS),
        default="warning",
        metavar="{" + ",".join(LOG_LEVELS) + "}",
        help="log level (default warning)",
    )
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C or ``--duration``; exit 2 if it cannot start."""
    configure_logging(args.log_level, "text")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_USAGE
    try:
        asyncio.run(_demo(args, config))
    except ListenError as exc:
        print(f"metricbridge demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


async def _demo(args: argparse.Namespace, config: Config) -> None:
    engine = SimulatedEngine(dp_size=args.dp, seed=1)
    simulator = web.AppRunner(
        make_simulator_app(engine, encoder=SimulatedEncoder(seed=1)), access_log=None
    )
    runner: web.AppRunner | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before start-up: Ctrl-C then ends it cleanly
        loop.add_signal_handler(sig, stop.set)
    await simulator.setup()
    try:
        await listen(simulator, "127.0.0.1", args.engine_port)
        base = f"127.0.0.1:{simulator.addresses[0][1]}"  # with port 0, the one picked
        upstreams = (parse_upstream(f"{base}/metrics"), parse_upstream(f"{base}/encoder/metrics"))
        runner = web.AppRunner(make_app(ServiceSettings(upstreams), config), access_log=None)
        await runner.setup()
        await listen(runner, *args.listen)
        bridge = f"http://{format_address(args.listen[0], runner.addresses[0][1])}"
        print(f"simulated SGLang engine: http://{base}/metrics (+ /encoder/metrics, /server_info)")
        print(f"metricbridge:            {bridge}/metrics   contract report: {bridge}/contract")
        print(
            f"try: curl -s {bridge}/metrics "
            "| grep -E '^sglang:(request_waiting_time|engine_startup_time)'",
            flush=True,
        )
        await _show(bridge, runner.app, stop, args.duration)
    finally:
        if runner is not None:
            await runner.cleanup()
        await simulator.cleanup()


async def _show(
    bridge: str, app: web.Application, stop: asyncio.Event, duration: float | None
) -> None:
    """Print a few contract series and the coverage totals every few seconds."""
    loop = asyncio.get_running_loop()
    deadline = None if duration is None else loop.time() + duration
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            async with session.get(f"{bridge}/metrics") as response:
                body = (await response.read()).decode()
            lines = [line for line in body.splitlines() if line.startswith(_SHOWN)]
            print("\n".join(lines[:8]))
            print("\n".join(await _coverage(app)) + "\n", flush=True)
            wait = 5.0 if deadline is None else max(0.0, min(5.0, deadline - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            if deadline is not None and loop.time() >= deadline:
                return


async def _coverage(app: web.Application) -> list[str]:
    """The /contract totals, and why the missing rows are missing.

    Read from the bridge itself, not over HTTP: /contract's rows say why in words, while the
    translation's row states tell a rate waiting for its second fetch from a broken row.
    """
    state = app[STATE]
    if state.bridge is None:  # set at start-up, before anything is printed
        return []
    snapshot = await state.bridge.snapshot(state.settings.fetch.timeout_cap)
    translation = snapshot.translation
    totals = contract_report(state.config, translation)["totals"]
    index = ContractIndex(state.config.families, translation.rows if translation else {})
    return [
        f"contract rows: {json.dumps(totals)}",
        f"missing: {missing_breakdown(index.missing_classes())}",
    ]
