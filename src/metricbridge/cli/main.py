"""Command line: `metricbridge [serve] --upstream ...` and the offline tools; returns exit codes.

A command's module, and what it imports, is loaded only when that command runs (``--help``
loads them all, to list them): ``metricbridge --version`` and ``config check`` never import
aiohttp, the PromQL parser or prometheus_client.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from metricbridge.cli.options import MISSING_UPSTREAM, apply_environment
from metricbridge.cli.version import VersionAction
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
# Each command: the module defining it and the function registering it, in --help's order.
_COMMANDS = {
    "serve": ("metricbridge.cli.serve", "add_serve_command"),
    "demo": ("metricbridge.cli.demo", "add_demo_command"),
    "translate": ("metricbridge.cli.offline", "add_translate_command"),
    "config": ("metricbridge.cli.offline", "add_config_command"),
    "rules": ("metricbridge.cli.rules", "add_rules_command"),
    "check": ("metricbridge.cli.check", "add_check_command"),
    "contract": ("metricbridge.cli.check", "add_contract_command"),
    "diff": ("metricbridge.cli.check", "add_diff_command"),
    "mm-pad-id": ("metricbridge.cli.mm_pad_id", "add_mm_pad_id_command"),
    "profiles": ("metricbridge.cli.profiles", "add_profiles_command"),
    "engines": ("metricbridge.cli.engines", "add_engines_command"),
}
_ROOT_FLAGS = ("-h", "--help", "--version")


class CommandParser(argparse.ArgumentParser):
    """A command's parser: when a list option took the positionals, its error says so.

    ``--snapshot``, ``--upstream`` and ``--dashboard`` take every value after them, so
    ``check --snapshot engine.txt my.promql`` reads the dashboard as a second snapshot and
    FILE is missing. The error then shows that command line with ``--`` ending the list. The
    value is not moved silently instead: which values were meant as FILE can only be guessed
    (a snapshot may have any name, and ``--snapshot a.prom b.prom`` lists two), and a guess
    that reads a dashboard as an exposition, or the reverse, is worse than a precise error.
    """

    _arguments: tuple[str, ...] = ()

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - typeshed's overloads, passed on
        """Keep the arguments, for ``error``'s hint."""
        given = args[0] if args else kwargs.get("args")
        self._arguments = tuple(sys.argv[1:] if given is None else given)
        return super().parse_known_args(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Exit 2 with usage and ``message``, and how to end the list that took a positional."""
        hint = _end_the_list(self, list(self._arguments), message)
        super().error(f"{message}{hint}" if hint else message)


def _end_the_list(parser: argparse.ArgumentParser, arguments: list[str], message: str) -> str:
    """`` (--snapshot took every value after it)`` and the command line with ``--``, or ""."""
    prefix = "the following arguments are required: "
    if not message.startswith(prefix) or "--" in arguments:
        return ""
    actions = parser._actions  # noqa: SLF001 - argparse lists its actions nowhere public
    positionals = {action.metavar or action.dest for action in actions if not action.option_strings}
    missing = message.removeprefix(prefix).split(", ")
    if not set(missing) <= positionals:
        return ""  # a required option is missing, not a positional
    lists = {flag for a in actions if a.nargs in ("+", "*") for flag in a.option_strings}
    given = [flag for flag in arguments if flag in lists]
    if not given:
        return ""
    start = len(arguments)
    while start > 0 and (arguments[start - 1] == "-" or not arguments[start - 1].startswith("-")):
        start -= 1
    # Each positional takes one value at least; the list keeps one at least.
    if start == 0 or arguments[start - 1] not in lists or len(arguments) - start <= len(missing):
        return f" ({given[-1]} takes every value after it: end them with --)"
    cut = len(arguments) - len(missing)
    fixed = shlex.join([*parser.prog.split(), *arguments[:cut], "--", *arguments[cut:]])
    return f" ({arguments[start - 1]} took every value after it)\n  did you mean: {fixed}"


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The command-line interface: every command, or only ``commands`` with their arguments.

    The others are then registered by name alone, so that running one command does not import
    the modules of the rest. ``--help`` needs the whole interface (the default).
    """
    whole = commands is None
    wanted = set(_COMMANDS) if commands is None else set(commands)
    parser = argparse.ArgumentParser(
        prog="metricbridge",
        usage=_USAGE,
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, default=argparse.SUPPRESS)
    # prog: the custom usage above would otherwise prefix every command's usage line.
    subparsers = parser.add_subparsers(
        title="commands",
        dest="command",
        metavar="COMMAND",
        prog="metricbridge",
        parser_class=CommandParser,
    )
    if whole:
        # `metricbridge --help` is what users of `metricbridge --upstream ...` read: it lists
        # the serve flags too (they are parsed by `serve`, see _with_default_command).
        serve = importlib.import_module(_COMMANDS["serve"][0])
        parser.epilog = serve.SERVE_EPILOG
        serve_options = parser.add_argument_group(
            "serve options", "metricbridge [serve] ...: flags of the sidecar, with their variables"
        )
        serve.add_service_options(parser, serve_options)
    for name, (module, register) in _COMMANDS.items():
        if name in wanted:
            getattr(importlib.import_module(module), register)(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def _with_default_command(args: list[str]) -> list[str]:
    """``metricbridge --upstream :30000`` means ``metricbridge serve --upstream :30000``."""
    if args and (args[0] in _COMMANDS or args[0] in _ROOT_FLAGS):
        return args
    if args or os.environ.get("METRICBRIDGE_UPSTREAM"):
        return ["serve", *args]
    return args


def _commands_needed(args: Sequence[str]) -> tuple[str, ...] | None:
    """The command ``args`` run (None: every one, for ``--help``)."""
    if args and args[0] in _COMMANDS:
        return (args[0],)
    return None if args and args[0] in ("-h", "--help") else ()


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, unset flags filled from the command's variables.

    Raises ``EnvError`` for a bad variable; a bad flag exits 2 as argparse does.
    """
    args = parser.parse_args(_with_default_command(list(argv)))
    apply_environment(args)
    return args


def _say_what_is_missing() -> int:
    """A bare ``metricbridge``: what it needs first, then the short usage, not all of --help."""
    print(f"metricbridge: error: {MISSING_UPSTREAM}", file=sys.stderr)
    print(f"usage: {_USAGE % {'prog': 'metricbridge'}}", file=sys.stderr)
    print(
        f"commands: {', '.join(_COMMANDS)}; 'metricbridge --help' lists every option",
        file=sys.stderr,
    )
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Names and titles come from users' files; one lone surrogate must not end a report.
        sys.stdout.reconfigure(errors="backslashreplace")
    arguments = _with_default_command(list(sys.argv[1:] if argv is None else argv))
    if not arguments:
        return _say_what_is_missing()
    try:
        args = parse_command_line(build_parser(_commands_needed(arguments)), arguments)
    except EnvError as exc:
        print(f"metricbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:  # unreachable: every command sets one
        return _say_what_is_missing()
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
