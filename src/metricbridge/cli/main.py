"""Command line: `metricbridge [serve] --upstream ...` and the offline tools; returns exit codes."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence

from metricbridge import __version__
from metricbridge.cli.check import add_check_command, add_contract_command, add_diff_command
from metricbridge.cli.demo import add_demo_command
from metricbridge.cli.offline import add_config_command, add_translate_command
from metricbridge.cli.options import apply_environment
from metricbridge.cli.rules import add_rules_command
from metricbridge.cli.serve import SERVE_EPILOG, add_serve_command, add_service_options
from metricbridge.errors import EnvError

EXIT_OK, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 2, 3, 130
# What a shell reports for a process killed by SIGPIPE: not 1, which CI reads as "missing".
EXIT_BROKEN_PIPE = 128 + 13
Handler = Callable[[argparse.Namespace], int]
_USAGE = """\
%(prog)s [serve] --upstream HOST:PORT|URL [OPTIONS]   run the sidecar
       %(prog)s COMMAND [ARGS]                               a command below (COMMAND --help)"""
_DESCRIPTION = """\
Translate SGLang's Prometheus metrics into a stable metric contract.

Without a command (or with serve) it runs the sidecar: it scrapes the engine's /metrics,
translates it with the rules and serves the result on its own /metrics, e.g.
  metricbridge --upstream :30000          # SGLang on 127.0.0.1:30000, served on :9850/metrics"""


def build_parser() -> argparse.ArgumentParser:
    """The whole command-line interface."""
    parser = argparse.ArgumentParser(
        prog="metricbridge",
        usage=_USAGE,
        description=_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"metricbridge {__version__}")
    # prog: the custom usage above would otherwise prefix every command's usage line.
    commands = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", prog="metricbridge"
    )
    # `metricbridge --help` is what users of `metricbridge --upstream ...` read: it lists the
    # serve flags too (they are parsed by `serve`, see _with_default_command).
    serve_options = parser.add_argument_group(
        "serve options", "metricbridge [serve] ...: flags of the sidecar, with their variables"
    )
    add_service_options(parser, serve_options)
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


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, unset flags filled from the command's variables.

    Raises ``EnvError`` for a bad variable; a bad flag exits 2 as argparse does.
    """
    args = parser.parse_args(_with_default_command(list(argv), parser))
    apply_environment(args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Names and titles come from users' files; one lone surrogate must not end a report.
        sys.stdout.reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parse_command_line(parser, sys.argv[1:] if argv is None else argv)
    except EnvError as exc:
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return _run(handler, args)


def _run(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command; whatever escapes it becomes an exit status and one line, not a traceback."""
    try:
        return handler(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`metricbridge translate big.prom | head`): not our error to
        # report. Python would print a traceback when it flushes stdout at exit, so stdout is
        # pointed at /dev/null first (the recipe in the signal module's documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        # Writing the report failed (a full disk, /dev/full): not a finding, not a crash.
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the last line between a bug and a traceback
        # Exit 1 means "something is missing" to CI, 2 "unusable input": a bug is neither.
        print(
            f"metricbridge: internal error ({type(exc).__name__}: {exc}); please report it "
            "with the command line and input that caused it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
