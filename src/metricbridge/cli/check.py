"""``metricbridge check``, ``contract`` and ``diff``: gate dashboard and engine changes in CI.

Exit codes, for all three: 0 fine, 1 something needed is missing (``check``: a failing
finding; ``diff``: a served contract row lost or a dashboard broken), 2 unusable input (a
rules file, snapshot, upstream or dashboard that cannot be read, or output that cannot be
written), reported on stderr as ``error: ...`` (a rules file's issues as every command prints
them, ``cli.problems``) and never as a traceback; 3 a bug in metricbridge (``cli.main._run``),
so that CI never takes a crash for a finding.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metricbridge.analysis.check import DEFAULT_ASSUMED_LABELS, check_queries
from metricbridge.analysis.dashboards import LoadResult, load_queries
from metricbridge.analysis.findings import CheckReport
from metricbridge.analysis.served import Served, serve_payloads
from metricbridge.analysis.upgrade_diff import diff_upgrade
from metricbridge.cli.offline import add_config_option
from metricbridge.cli.problems import print_config_error
from metricbridge.cli.sources import (
    Sources,
    add_server_info_option,
    add_source_options,
    load_sources,
    read_server_info,
    read_snapshot,
)
from metricbridge.config.load import load_config
from metricbridge.config.schema import Config
from metricbridge.errors import ConfigError, InputError
from metricbridge.render.contract import render_contract
from metricbridge.render.diff import render_diff
from metricbridge.render.findings import render_check
from metricbridge.translation.compiled import CompiledRules, compile_rules
from metricbridge.translation.contract_index import ContractIndex
from metricbridge.translation.report import contract_report

__all__ = ["add_check_command", "add_contract_command", "add_diff_command"]

EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2
_FORMATS = ("text", "json", "markdown")


class _Unusable(Exception):  # noqa: N818 - internal control flow: "exit 2", already reported
    """Raised after an unusable input was reported; the command exits 2.

    Private to this module: the run_* handlers catch it, it never leaves them.
    """


def add_check_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``check``."""
    parser = commands.add_parser(
        "check",
        help="check dashboards and rules against what the bridge serves",
        description="Check that every family, label and label value the given Grafana "
        "dashboards, Prometheus rule files and PromQL files need is in the payload the bridge "
        "serves for the given upstream. Exit 0: all served; 1: something is missing "
        "(structural rows excepted); 2: unusable input; 3: a bug in metricbridge.",
    )
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE",
        help="Grafana dashboard JSON, Prometheus rule YAML or a .promql file; list them before "
        "--snapshot/--upstream (which take several values) or end those with --",
    )  # fmt: skip
    add_source_options(parser)
    _add_common_options(parser)
    parser.add_argument(
        "--strict", action="store_true", help="also fail (exit 1) when a query cannot be checked"
    )
    parser.set_defaults(handler=run_check)


def add_contract_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``contract``."""
    parser = commands.add_parser(
        "contract",
        help="print the contract coverage table for an upstream",
        description="Every contract row, its disposition, and whether the bridge serves it for "
        "the given upstream; the same data as the service's GET /contract.",
    )
    add_source_options(parser)
    add_config_option(parser)
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format")
    parser.set_defaults(handler=run_contract)


def add_diff_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``diff``."""
    parser = commands.add_parser(
        "diff",
        help="what an engine upgrade changes for dashboards",
        description="Translate both expositions and report families added and removed, type "
        "and label changes, contract rows that flip between served and missing, and new "
        "findings of the given dashboards. Exit 1 when a served row or a dashboard breaks.",
    )
    parser.add_argument(
        "old", type=Path, metavar="OLD_EXPOSITION",
        help="the engine's /metrics before the upgrade, saved (text format or OpenMetrics)",
    )  # fmt: skip
    parser.add_argument(
        "new", type=Path, metavar="NEW_EXPOSITION", help="the same after the upgrade"
    )
    parser.add_argument(
        "--dashboard", nargs="+", action="extend", type=Path, default=[], metavar="FILE",
        help="dashboards, rule files or PromQL files whose breakage fails the diff",
    )  # fmt: skip
    _add_common_options(parser)
    add_server_info_option(parser)
    parser.set_defaults(handler=run_diff)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format")
    parser.add_argument(
        "--assume-label", action="append", default=[], metavar="NAME[,NAME...]",
        help="a label the scraper adds (e.g. namespace, pod from Kubernetes relabeling), "
        f"counted as present; {' and '.join(DEFAULT_ASSUMED_LABELS)} always are",
    )  # fmt: skip


def run_check(args: argparse.Namespace) -> int:
    """Check files against the served payload."""
    try:
        config, rules = _rules(args.config)
        served = _serve(load_sources(args), rules)
    except _Unusable:
        return EXIT_USAGE
    except InputError as exc:
        return _unusable(exc)
    loads, unusable = _load_files(args.files)
    if not loads:
        return EXIT_USAGE
    report = _check(loads, served, config, args.assume_label)
    sys.stdout.write(render_check(report, args.format))
    if unusable:
        print(f"error: {unusable} file(s) could not be checked at all", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_MISSING if report.failing or (args.strict and report.not_checked) else EXIT_OK


def run_contract(args: argparse.Namespace) -> int:
    """Print the coverage table."""
    try:
        config, rules = _rules(args.config)
        served = _serve(load_sources(args), rules)
    except _Unusable:
        return EXIT_USAGE
    except InputError as exc:
        return _unusable(exc)
    sys.stdout.write(render_contract(contract_report(config, served.translation), args.format))
    return EXIT_OK


def run_diff(args: argparse.Namespace) -> int:
    """Compare two expositions after translation."""
    try:
        config, rules = _rules(args.config)
        info = read_server_info(args.server_info)
        old = _serve(Sources([read_snapshot(args.old)], info), rules)
        new = _serve(Sources([read_snapshot(args.new)], info), rules)
    except _Unusable:
        return EXIT_USAGE
    except InputError as exc:
        return _unusable(exc)
    loads, unusable = _load_files(args.dashboard)
    checks = None
    if loads:
        checks = (
            _check(loads, old, config, args.assume_label),
            _check(loads, new, config, args.assume_label),
        )
    diff = diff_upgrade(
        old.catalog, new.catalog, old.translation.rows, new.translation.rows, checks
    )
    sys.stdout.write(render_diff(diff, args.format))
    if unusable:
        print(f"error: {unusable} dashboard(s) could not be read", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_MISSING if diff.breaking else EXIT_OK


def _rules(path: Path | None) -> tuple[Config, CompiledRules]:
    try:
        config = load_config(path)
    except ConfigError as exc:
        print_config_error(exc)
        raise _Unusable from exc
    return config, compile_rules(config)


def _serve(sources: Sources, rules: CompiledRules) -> Served:
    served = serve_payloads(sources.payloads, rules, sources.server_info)
    for warning in served.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return served


def _unusable(exc: InputError) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def _load_files(paths: Sequence[Path]) -> tuple[list[tuple[str, LoadResult]], int]:
    """Load every file; report those that cannot be used and go on with the rest."""
    loads, unusable = [], 0
    for path in paths:
        try:
            loads.append((str(path), load_queries(path)))
        except InputError as exc:
            _unusable(exc)
            unusable += 1
    return loads, unusable


def _check(
    loads: Sequence[tuple[str, LoadResult]], served: Served, config: Config, extra: list[str]
) -> CheckReport:
    assumed = [
        *DEFAULT_ASSUMED_LABELS,
        *(n.strip() for v in extra for n in v.split(",") if n.strip()),
    ]
    contract = ContractIndex(config.families, served.translation.rows)
    return check_queries(loads, served.catalog, contract, assumed)
