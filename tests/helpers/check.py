"""Shared helpers for the check, contract and diff tests: paths, a CLI runner, a fake upstream."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from helpers.paths import FIXTURES, TESTS
from metricbridge.analysis.check import check_queries
from metricbridge.analysis.dashboards import load_queries
from metricbridge.analysis.engine_notes import EngineView
from metricbridge.analysis.findings import CheckReport, Finding
from metricbridge.analysis.served import Payload, Served, serve_payloads
from metricbridge.cli.main import main
from metricbridge.config.load import load_config
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.contract_index import ContractIndex
from metricbridge.translation.pipeline import detect_format

CHECK = TESTS / "dashboards" / "check"
DIFF = TESTS / "fixtures" / "diff"
__all__ = ["CHECK", "DIFF", "FIXTURES"]


def snapshot(name: str) -> Path:
    """A real SGLang 0.5.23 scrape by its name (``tp1``, ``hicache`` ...)."""
    return FIXTURES / f"{name}.prom"


def served(*names: str, profiles: Sequence[str] = ()) -> Served:
    """What the bridge serves for these snapshots with the default contract (and ``profiles``)."""
    rules = compile_rules(load_config(None, profiles))
    payloads = []
    for name in names:
        body = snapshot(name).read_bytes()
        payloads.append(Payload(name, body, detect_format(body)))
    return serve_payloads(payloads, rules)


def check(
    files: list[Path],
    *snapshots: str,
    assumed: tuple[str, ...] = ("instance", "job"),
    engine: str | None = None,
    profiles: Sequence[str] = (),
) -> CheckReport:
    """Check files against snapshots through the pure API (no CLI).

    ``engine``: the SGLang release whose catalogue explains what the snapshots lack (None: no
    engine knowledge, as ``check_queries`` without one).
    """
    result = served(*snapshots, profiles=profiles)
    config = load_config(None, profiles)
    loads = [(str(path), load_queries(path)) for path in files]
    contract = ContractIndex(config.families, result.translation.rows)
    view = None if engine is None else EngineView(engine, result.upstream)
    return check_queries(loads, result.catalog, contract, assumed, view)


def at(report: CheckReport, where: str) -> list[Finding]:
    """The findings whose location contains ``where`` (a panel title, a rule name)."""
    return [f for f in report.findings if where in f.location]


@dataclass
class Run:
    """One CLI run: exit code and captured output."""

    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Run:
    """Run ``metricbridge ARGS`` in-process, returning exit code, stdout and stderr."""
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


async def run_cli_in_thread(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Run:
    """As ``run_cli``, in a worker thread: the CLI runs its own event loop (``asyncio.run``)."""
    code = await asyncio.to_thread(main, [str(arg) for arg in args])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def metrics_app(*names: str) -> web.Application:
    """An app serving a fixture at /metrics (several: one path each, /metrics/NAME)."""
    app = web.Application()
    for name in names:
        body = snapshot(name).read_bytes()

        async def handle(_: web.Request, body: bytes = body) -> web.Response:
            return web.Response(body=body, content_type="text/plain", charset="utf-8")

        app.router.add_get("/metrics" if len(names) == 1 else f"/metrics/{name}", handle)
    return app


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` and return the path."""
    path.write_text(text)
    return path
