"""``metricbridge demo``: a simulated SGLang engine and the bridge in front of it, on loopback."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from typing import Any

import aiohttp
from aiohttp import web

from metricbridge.cli_serve import parse_listen
from metricbridge.config import load_config
from metricbridge.errors import ConfigError
from metricbridge.logs import configure_logging
from metricbridge.scrape import parse_upstream
from metricbridge.server import ServiceSettings, make_app
from metricbridge.simulator import start_simulator
from metricbridge.simulator_encoder import SimulatedEncoder
from metricbridge.simulator_engine import SimulatedEngine

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
        "and the "
        "bridge in front of it, then print where to look. Stop with Ctrl-C.",
    )
    parser.add_argument(
        "--listen", default="127.0.0.1:9850", help="bridge address (default 127.0.0.1:9850)"
    )
    parser.add_argument(
        "--engine-port", type=int, default=30000, help="simulated engine port (default 30000)"
    )
    parser.add_argument("--dp", type=int, default=2, help="simulated DP ranks (default 2)")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument(
        "-c", "--config", default=None, help="rules file (default: the shipped contract)"
    )
    parser.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"]
    )
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C or ``--duration``."""
    configure_logging(args.log_level, "text")
    try:
        host, port = parse_listen(args.listen)
        config = load_config(args.config)
    except (ValueError, ConfigError) as exc:
        print(f"metricbridge demo: {exc}")
        return EXIT_USAGE
    asyncio.run(_demo(args, host, port, config))
    return EXIT_OK


async def _demo(args: argparse.Namespace, host: str, port: int, config: Any) -> None:  # noqa: ANN401
    engine = SimulatedEngine(dp_size=args.dp, seed=1)
    simulator = await start_simulator(
        "127.0.0.1", args.engine_port, engine=engine, encoder=SimulatedEncoder(seed=1)
    )
    base = f"127.0.0.1:{args.engine_port}"
    upstreams = (parse_upstream(f"{base}/metrics"), parse_upstream(f"{base}/encoder/metrics"))
    runner = web.AppRunner(make_app(ServiceSettings(upstreams), config), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bridge = f"http://{host}:{port}"
    print(f"simulated SGLang engine: http://{base}/metrics (+ /encoder/metrics, /server_info)")
    print(f"metricbridge:            {bridge}/metrics   contract report: {bridge}/contract")
    print(
        f"try: curl -s {bridge}/metrics "
        "| grep -E '^sglang:(request_waiting_time|engine_startup_time)'"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _show(bridge, stop, args.duration)
    finally:
        await runner.cleanup()
        await simulator.cleanup()


async def _show(bridge: str, stop: asyncio.Event, duration: float | None) -> None:
    """Print a few contract series and the coverage totals every few seconds."""
    loop = asyncio.get_running_loop()
    deadline = None if duration is None else loop.time() + duration
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            async with session.get(f"{bridge}/metrics") as response:
                body = (await response.read()).decode()
            async with session.get(f"{bridge}/contract") as response:
                totals = json.loads(await response.read())["totals"]
            lines = [line for line in body.splitlines() if line.startswith(_SHOWN)]
            print("\n".join(lines[:8]))
            print(f"contract rows: {json.dumps(totals)}\n", flush=True)
            wait = 5.0 if deadline is None else max(0.0, min(5.0, deadline - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            if deadline is not None and loop.time() >= deadline:
                return
