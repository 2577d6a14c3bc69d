"""``metricbridge check``, ``contract`` and ``diff``: gate dashboard and engine changes in CI.

Exit codes, for all three: 0 fine, 1 something needed is missing (``check``: a failing
finding; ``diff``: a served contract row lost or a dashboard broken), 2 unusable input (a
rules file, snapshot, upstream or dashboard that cannot be read, or output that cannot be
written), reported on stderr as ``error: ...`` (a rules file's issues as every command prints
them, ``cli.problems``) and never as a traceback; 3 a bug in metricbridge (``cli.main._run``),
so that CI never takes a crash for a finding.

``check`` and ``contract`` explain what the payload lacks with an engine release's catalogue
(``cli.engine``); ``diff --engine-from A --engine-to B`` compares two releases' catalogues.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metricbridge.analysis.check import DEFAULT_ASSUMED_LABELS, check_queries
from metricbridge.analysis.dashboards import LoadResult, load_queries
from metricbridge.analysis.engine_notes import EngineView, explain_missing_rows
from metricbridge.analysis.findings import CheckReport
from metricbridge.analysis.served import Served, serve_fetches
from metricbridge.analysis.upgrade_diff import diff_upgrade
from metricbridge.cli.engine import (
    add_engine_option,
    chosen_release,
    engine_version_error,
    run_engine_diff,
)
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
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
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
    add_engine_option(parser)
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
    add_engine_option(parser)
    parser.set_defaults(handler=run_contract)


_DIFF_USAGE = """\
%(prog)s OLD_EXPOSITION NEW_EXPOSITION [--dashboard FILE ...] [options]
       %(prog)s --engine-from VERSION --engine-to VERSION [FILE ...] [options]"""


def add_diff_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``diff``."""
    parser = commands.add_parser(
        "diff",
        help="what an engine upgrade changes for dashboards",
        usage=_DIFF_USAGE,
        description="Translate both expositions and report families added and removed, type "
        "and label changes, contract rows that flip between served and missing, and new "
        "findings of the given dashboards. Exit 1 when a served row or a dashboard breaks. "
        "With --engine-from and --engine-to, compare two SGLang releases' catalogues instead, "
        "no engine needed: families added, removed, renamed, re-typed, relabelled and "
        "re-documented, and the queries of the given files that break, with the contract rule "
        "that bridges each. Exit 1 when a query of a given file breaks.",
    )
    parser.add_argument(
        "old", type=Path, nargs="?", metavar="OLD_EXPOSITION",
        help="the engine's /metrics before the upgrade, saved (text format or OpenMetrics); "
        "with --engine-from, the first FILE",
    )  # fmt: skip
    parser.add_argument(
        "new", type=Path, nargs="?", metavar="NEW_EXPOSITION", help="the same after the upgrade"
    )
    parser.add_argument(
        "files", type=Path, nargs="*", metavar="FILE",
        help="with --engine-from/--engine-to: dashboards, rule files or PromQL files",
    )  # fmt: skip
    parser.add_argument(
        "--dashboard", nargs="+", action="extend", type=Path, default=[], metavar="FILE",
        help="dashboards, rule files or PromQL files whose breakage fails the diff",
    )  # fmt: skip
    _add_common_options(parser)
    add_server_info_option(parser)
    parser.add_argument(
        "--engine-from", metavar="VERSION", help="compare the catalogue of this SGLang release..."
    )
    parser.add_argument("--engine-to", metavar="VERSION", help="...with this one's")
    parser.set_defaults(handler=run_diff, diff_parser=parser)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format")
    parser.add_argument(
        "--assume-label", action="append", default=[], metavar="NAME[,NAME...]",
        help="a label the scraper adds (e.g. namespace, pod from Kubernetes relabeling), "
        f"counted as present; {' and '.join(DEFAULT_ASSUMED_LABELS)} always are",
    )  # fmt: skip


def _load_served(args: argparse.Namespace) -> tuple[Config, Served, Sources] | int:
    """The rules, what the bridge would serve and its sources; or a reported usage error's exit."""
    try:
        _check_release("--engine", args.engine)
        config, rules = _rules(args.config, args.profiles)
        sources = load_sources(args)
        served = _serve(sources, rules)
    except _Unusable:
        return EXIT_USAGE
    except InputError as exc:
        return _unusable(exc)
    return config, served, sources


def run_check(args: argparse.Namespace) -> int:
    """Check files against the served payload."""
    loaded = _load_served(args)
    if isinstance(loaded, int):
        return loaded
    config, served, sources = loaded
    loads, unusable = _load_files(args.files)
    if not loads:
        return EXIT_USAGE
    engine = EngineView(chosen_release(args.engine, sources.server_info), served.upstream)
    report = _check(loads, served, config, args.assume_label, engine)
    sys.stdout.write(render_check(report, args.format))
    if unusable:
        print(f"error: {unusable} file(s) could not be checked at all", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_MISSING if report.failing or (args.strict and report.not_checked) else EXIT_OK


def run_contract(args: argparse.Namespace) -> int:
    """Print the coverage table."""
    loaded = _load_served(args)
    if isinstance(loaded, int):
        return loaded
    config, served, sources = loaded
    engine = EngineView(chosen_release(args.engine, sources.server_info), served.upstream)
    index = ContractIndex(config.families, served.translation.rows)
    report = contract_report(config, served.translation)
    notes = explain_missing_rows(index, engine)
    sys.stdout.write(render_contract(report, args.format, notes))
    return EXIT_OK


def run_diff(args: argparse.Namespace) -> int:
    """Compare two expositions after translation, or two releases' catalogues."""
    if args.engine_from is not None or args.engine_to is not None:
        return _run_engine_diff(args)
    parser: argparse.ArgumentParser = args.diff_parser
    if args.old is None or args.new is None:
        missing = ["OLD_EXPOSITION", "NEW_EXPOSITION"][1 if args.old is not None else 0 :]
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    if args.files:
        parser.error(f"unrecognized arguments: {' '.join(str(f) for f in args.files)}")
    try:
        config, rules = _rules(args.config, args.profiles)
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


def _run_engine_diff(args: argparse.Namespace) -> int:
    """``diff --engine-from A --engine-to B [FILE ...]``: every positional is a FILE."""
    parser: argparse.ArgumentParser = args.diff_parser
    if args.engine_from is None or args.engine_to is None:
        parser.error("--engine-from and --engine-to go together")
    if args.server_info is not None:
        parser.error("--server-info is for two expositions, not --engine-from/--engine-to")
    try:
        _check_release("--engine-from", args.engine_from)
        _check_release("--engine-to", args.engine_to)
        config, _ = _rules(args.config, args.profiles)
    except _Unusable:
        return EXIT_USAGE
    paths = [p for p in (args.old, args.new) if p is not None] + args.files + args.dashboard
    loads, unusable = _load_files(paths)
    if unusable and not loads:
        return EXIT_USAGE
    return run_engine_diff(args, config.families, loads, unusable)


def _check_release(option: str, version: str | None) -> None:
    """Raise ``_Unusable`` after a one-line error when ``version`` is not catalogued."""
    message = None if version is None else engine_version_error(option, version)
    if message is not None:
        print(message, file=sys.stderr)
        raise _Unusable


def _rules(path: Path | None, profiles: Sequence[str] = ()) -> tuple[Config, CompiledRules]:
    try:
        config = load_config(path, profiles)
    except ConfigError as exc:
        print_config_error(exc)
        raise _Unusable from exc
    return config, compile_rules(config)


def _serve(sources: Sources, rules: CompiledRules) -> Served:
    fetches = [sources.payloads, *sources.later]
    served = serve_fetches(fetches, rules, sources.server_info, sources.interval)
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
    loads: Sequence[tuple[str, LoadResult]],
    served: Served,
    config: Config,
    extra: list[str],
    engine: EngineView | None = None,
) -> CheckReport:
    assumed = [
        *DEFAULT_ASSUMED_LABELS,
        *(n.strip() for v in extra for n in v.split(",") if n.strip()),
    ]
    contract = ContractIndex(config.families, served.translation.rows)
    return check_queries(loads, served.catalog, contract, assumed, engine)
