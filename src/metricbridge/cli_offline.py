"""``metricbridge translate`` and ``metricbridge config check``: the offline tools."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from metricbridge.config import load_config
from metricbridge.errors import ConfigError, ExpositionError
from metricbridge.model import Format
from metricbridge.pipeline import detect_format, render, run_pipeline
from metricbridge.rules import compile_rules

EXIT_OK, EXIT_USAGE = 0, 2


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """The ``-c/--config`` option every command shares."""
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=os.environ.get("METRICBRIDGE_CONFIG") or None,
        help="rules file (default: the shipped contract, config/aliases.yaml; "
        "env METRICBRIDGE_CONFIG)",
    )


def add_translate_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``translate``."""
    parser = commands.add_parser(
        "translate",
        help="translate one exposition file offline",
        description="Translate an exposition with the rules, as the service does on every scrape.",
    )
    add_config_option(parser)
    parser.add_argument(
        "input", nargs="?", default="-", help="exposition file, or - for stdin (default)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="output file (default: stdout); written atomically"
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
        help="input format (default: auto, by the '# EOF' marker)",
    )
    parser.set_defaults(handler=run_translate)


def add_config_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``config check``."""
    parser = commands.add_parser("config", help="work with rules files")
    actions = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate a rules file and exit 0 (valid) or 2 (not)")
    check.add_argument(
        "file", nargs="?", type=Path, help="rules file (default: the shipped contract)"
    )
    check.set_defaults(handler=run_config_check)


def run_config_check(args: argparse.Namespace) -> int:
    """Validate a rules file, printing every issue."""
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        for issue in exc.issues:
            print(issue, file=sys.stderr)
        print(f"{len(exc.issues)} issue(s) found", file=sys.stderr)
        return EXIT_USAGE
    print(f"{config.source}: OK ({len(config.families)} families, {len(config.items)} other items)")
    return EXIT_OK


def _read_input(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def _write_atomically(path: Path, data: bytes) -> None:
    """Write next to the target and rename, so a failure never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent or Path(), prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_translate(args: argparse.Namespace) -> int:
    """Translate one exposition; exit 2 with line-precise messages on bad input."""
    try:
        rules = compile_rules(load_config(args.config))
        payload = _read_input(args.input)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"{args.input}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    source = "<stdin>" if args.input == "-" else args.input
    in_format = detect_format(payload) if args.input_format == "auto" else Format(args.input_format)
    try:
        outcome = run_pipeline(payload, in_format, rules)
    except ExpositionError as exc:
        print(f"{source}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if outcome.problems:
        for problem in outcome.problems:
            print(f"{source}: {problem}", file=sys.stderr)
        print(f"{source}: {len(outcome.problems)} problem(s); nothing written", file=sys.stderr)
        return EXIT_USAGE
    data = render(outcome, Format(args.format))
    if args.output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        _write_atomically(args.output, data)
    return EXIT_OK
