"""Command line: `metricbridge [serve] --upstream ...` and the offline tools; returns exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from metricbridge import __version__
from metricbridge.cli_check import add_check_command, add_contract_command, add_diff_command
from metricbridge.cli_demo import add_demo_command
from metricbridge.cli_offline import add_config_command, add_translate_command
from metricbridge.cli_rules import add_rules_command
from metricbridge.cli_serve import add_serve_command

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The whole command-line interface."""
    parser = argparse.ArgumentParser(
        prog="metricbridge",
        description="Translate SGLang's Prometheus metrics into a stable metric contract. "
        "Without a command, runs the sidecar: metricbridge --upstream :30000",
    )
    parser.add_argument("--version", action="version", version=f"metricbridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve_command(commands)
    add_demo_command(commands)
    add_translate_command(commands)
    add_config_command(commands)
    add_rules_command(commands)
    add_check_command(commands)
    add_contract_command(commands)
    add_diff_command(commands)
    return parser


def _with_default_command(args: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``metricbridge --upstream :30000`` means ``metricbridge serve --upstream :30000``."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    if args and (args[0] in commands.choices or args[0] in ("-h", "--help", "--version")):
        return args
    if args or os.environ.get("METRICBRIDGE_UPSTREAM"):
        return ["serve", *args]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(_with_default_command(args_list, parser))
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return handler(args)
