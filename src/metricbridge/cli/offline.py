"""``metricbridge translate`` and ``metricbridge config check``: the offline tools."""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from metricbridge.cli.options import (
    PROFILE_HELP,
    add_env_option,
    config_path,
    describe_os_error,
    use_environment,
)
from metricbridge.cli.problems import print_config_error
from metricbridge.cli.sources import add_server_info_option, read_server_info
from metricbridge.config.load import load_config
from metricbridge.errors import ConfigError, ExpositionError, InputError, OutputError
from metricbridge.exposition.openmetrics_fit import openmetrics_misfit
from metricbridge.model.family import Format, Verify
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import detect_format, render, run_pipeline, stray_eof_line

EXIT_OK, EXIT_USAGE = 0, 2


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """The ``-c/--config`` option every command shares."""
    option = add_env_option(
        parser,
        "-c",
        "--config",
        variable="METRICBRIDGE_CONFIG",
        from_env=config_path,
        default=None,
        type=Path,
        metavar="FILE",
        help="rules file (default: the shipped contract, config/aliases.yaml; "
        "env METRICBRIDGE_CONFIG)",
    )
    use_environment(parser, [option])
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        dest="profiles",
        metavar="NAME",
        help=PROFILE_HELP,
    )


def add_translate_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``translate``."""
    parser = commands.add_parser(
        "translate",
        help="translate one exposition file offline",
        description="Translate an exposition with the rules, as the service does on every "
        "scrape. Exit 0 when written (a series repeated at one timestamp is reported and "
        "dropped, as Prometheus keeps its first sample); 2 when the input, the rules or the "
        "output file is unusable (each problem with its line), with nothing written.",
    )
    add_config_option(parser)
    parser.add_argument(
        "input", nargs="?", default="-", help="exposition file, or - for stdin (default)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="output file (default: stdout). Written atomically: a temporary file in FILE's "
        "directory is renamed over it, so a failure leaves FILE as it was. A new FILE gets "
        "mode 0666 minus the umask, an existing one keeps its mode; an existing FILE you may "
        "not write to (read-only) is refused, as cp and sort -o refuse it. A symlink is "
        "followed; a device or FIFO (/dev/stdout) is written in place",
    )
    parser.add_argument(
        "--validation",
        choices=[Verify.FULL.value, Verify.STRUCTURE.value],
        default=Verify.STRUCTURE.value,
        help="how the input is read, whatever the rules file's 'validation' says (the service "
        "follows that). structure (default): the service's fast path, which proves the bytes "
        "of the families no rule reads valid without parsing their lines; a family that fails "
        "the proof is parsed line by line, so every problem is reported with its line, as full "
        "reports it. full: every sample line is parsed",
    )
    parser.add_argument(
        "--format",
        choices=[f.value for f in Format],
        default=Format.TEXT.value,
        help="output format (default: text 0.0.4)",
    )
    parser.add_argument(
        "--input-format",
        choices=["auto", *[f.value for f in Format]],
        default="auto",
        help="input format (default: auto: OpenMetrics if a line is exactly '# EOF', else text)",
    )
    add_server_info_option(parser)
    parser.set_defaults(handler=run_translate)


def add_config_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``config check``."""
    parser = commands.add_parser("config", help="work with rules files")
    actions = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate a rules file and exit 0 (valid) or 2 (not)")
    check.add_argument(
        "file", nargs="?", type=Path, help="rules file (default: the shipped contract)"
    )
    check.add_argument(
        "--profile",
        action="append",
        default=[],
        dest="profiles",
        metavar="NAME",
        help="also layer this shipped profile over the file (repeatable; the file's own "
        "`profiles:` are always checked)",
    )
    check.set_defaults(handler=run_config_check)


def run_config_check(args: argparse.Namespace) -> int:
    """Validate a rules file, printing every issue."""
    try:
        config = load_config(args.file, args.profiles)
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_USAGE
    print(f"{config.source}: OK ({len(config.families)} families, {len(config.items)} other items)")
    return EXIT_OK


def _read_input(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def _check_output(path: Path) -> None:
    """Refuse an output that cannot be written, before any work; raise ``OutputError``."""
    if path.is_dir():
        raise OutputError("is a directory")
    if path.exists():
        # os.access asks what cp and sort -o effectively ask: root may replace a read-only file.
        if not os.access(path, os.W_OK):
            raise OutputError("permission denied (the file is read-only; left as it was)")
        return
    parent = path.resolve().parent
    if not parent.is_dir():
        kind = "not a directory" if parent.exists() else "no such directory"
        raise OutputError(f"{kind}: {parent}")


def _write_output(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a whole or not at all; raise ``OutputError``."""
    try:
        _check_output(path)
        try:
            existing = path.stat()
        except FileNotFoundError:
            mode = None
        else:
            if not stat.S_ISREG(existing.st_mode):
                # Renaming over /dev/stdout or a FIFO would replace it, not write to it.
                path.write_bytes(data)
                return
            mode = stat.S_IMODE(existing.st_mode)
        # Through a symlink, as cp writes, rather than replacing the link with a file.
        _replace(path.resolve(), data, mode)
    except OSError as exc:
        raise OutputError(describe_os_error(exc)) from exc


def _replace(target: Path, data: bytes, mode: int | None) -> None:
    """Write a temporary file next to ``target``, then rename it over ``target``.

    Not tempfile.mkstemp: it creates files 0600 whatever the umask. os.open with 0666 gets
    what a plain open() would, and an existing target's mode is copied onto it instead.
    """
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def run_translate(args: argparse.Namespace) -> int:
    """Translate one exposition; exit 2 with line-precise messages on bad input."""
    try:
        data = _translated(args)
        if args.output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            _write_output(args.output, data)
    except OutputError as exc:
        print(f"{args.output}: cannot write: {exc}; nothing written", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_USAGE
    except _UnusableInputError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


class _UnusableInputError(Exception):
    """The input or the rules cannot be used; the message is every line to print.

    Private to ``translate``'s control flow: raised by ``_translated``, caught by
    ``run_translate``, never outside this module.
    """


def _translated(args: argparse.Namespace) -> bytes:
    """The rendered translation.

    Raises ``ConfigError`` for the rules, ``_UnusableInputError`` for the input and
    ``OutputError`` for ``-o``.
    """
    config = load_config(args.config, args.profiles)
    rules = compile_rules(dataclasses.replace(config, validation=Verify(args.validation)))
    try:
        server_info = read_server_info(args.server_info)
    except InputError as exc:
        raise _UnusableInputError(str(exc)) from exc
    if args.output is not None:
        _check_output(args.output)  # before reading a stdin that may take long to arrive
    try:
        payload = _read_input(args.input)
    except OSError as exc:
        raise _UnusableInputError(f"{args.input}: cannot read: {exc.strerror or exc}") from exc
    source = "<stdin>" if args.input == "-" else args.input
    in_format = detect_format(payload) if args.input_format == "auto" else Format(args.input_format)
    stray = stray_eof_line(payload) if args.input_format == "auto" else None
    if stray is not None:
        print(
            f"{source}: line {stray}: '# EOF' with more lines after it: read as the text format, "
            "where it is a comment (--input-format openmetrics if this is OpenMetrics)",
            file=sys.stderr,
        )
    try:
        outcome = run_pipeline(payload, in_format, rules, server_info=server_info)
    except ExpositionError as exc:
        raise _UnusableInputError(f"{source}: {exc}") from exc
    # A repeated series is dropped and its family written, as Prometheus keeps the first
    # sample of a series repeated at one timestamp; said on stderr, and the exit is 0.
    fatal = [problem for problem in outcome.problems if not problem.family_kept]
    # In the order of the input's lines, whichever pass found each (problems of no line last).
    in_order = sorted(outcome.problems, key=lambda problem: (problem.line is None, problem.line))
    lines = [f"{source}: {problem}" for problem in in_order]
    if fatal:
        lines.append(f"{source}: {len(outcome.problems)} problem(s); nothing written")
        raise _UnusableInputError("\n".join(lines))
    for line in lines:
        print(line, file=sys.stderr)
    fmt = Format(args.format)
    misfit = openmetrics_misfit(outcome.translation.families)
    if fmt is Format.OPENMETRICS and misfit is not None:
        print(
            f"{source}: OpenMetrics cannot carry every family ({misfit.value}); written as "
            "asked, where the service answers text 0.0.4 (--format text)",
            file=sys.stderr,
        )
    return render(outcome, fmt)
