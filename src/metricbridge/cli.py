"""Command line: ``metricbridge [serve] --upstream ...`` and the offline tools. ``main`` returns the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from metricbridge import __version__
from metricbridge.cli_offline import add_config_command, add_translate_command

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The whole command-line interface."""
    parser = argparse.ArgumentParser(
        prog="metricbridge",
        description="Translate SGLang's Prometheus metrics into a stable metric contract.",
    )
    parser.add_argument("--version", action="version", version=f"metricbridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_translate_command(commands)
    add_config_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return handler(args)
