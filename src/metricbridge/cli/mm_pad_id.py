"""``metricbridge mm-pad-id``: the contract's pad id of one image, video or EPD item.

The reference a rebased engine's padded ``input_ids`` are checked against (``docs/contract.md``,
"Multimodal pad ids"). Exit 0 with the id (or a JSON object) on stdout; 2 with one line on
stderr when the input cannot give an id.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from metricbridge.engines.mm_pad_id import (
    hashed_text,
    md5_hex,
    pad_id_from_hash,
    pad_id_from_task_id,
)
from metricbridge.errors import CommandLineError

__all__ = ["add_mm_pad_id_command", "run_mm_pad_id"]

EXIT_OK, EXIT_USAGE = 0, 2
_FORMATS = ("text", "json")
# A plain decimal, as Python prints a float (repr): 30, 29.97, .5, 1e-05. ASCII only: float()
# also reads "nan", "inf", "1_0" and other scripts' digits, none of which is an engine's fps.
_DECIMAL = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def add_mm_pad_id_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``mm-pad-id``."""
    parser = commands.add_parser(
        "mm-pad-id",
        help="print the contract's pad id of a multimodal item (to check a rebased engine)",
        description="Print the token id the metric contract says the engine pads a multimodal "
        "item with: 1_000_000 + h % 2**30, h = md5(model_id + url) for an image, "
        'md5(model_id + url + f"{fps:.2f}") for a video, the task id\'s hexadecimal value on '
        "the EPD path. Exit 0: printed; 2: the input cannot give an id.",
    )
    parser.add_argument(
        "--model-id", metavar="M", help="the model id, exactly as the engine has it"
    )
    parser.add_argument("--url", metavar="U", help="the item's url, exactly as the request sent it")
    parser.add_argument(
        "--fps", metavar="F", help="a video's frame rate, a number >= 0 (with --url; not an image)"
    )
    parser.add_argument(
        "--task-id", metavar="HEX", help="the EPD task id, in hexadecimal (instead of --url)"
    )
    parser.add_argument(
        "--format",
        default="text",
        choices=_FORMATS,
        help="text: the id alone (default); json: the inputs, the md5 hex digest and the id",
    )
    parser.set_defaults(handler=run_mm_pad_id)


def run_mm_pad_id(args: argparse.Namespace) -> int:
    """Print the pad id; exit 2 with one line when the arguments cannot give one."""
    try:
        report = _report(args)
    except CommandLineError as exc:
        print(f"metricbridge mm-pad-id: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(f"{report['pad_id']}\n")
    return EXIT_OK


def _report(args: argparse.Namespace) -> dict[str, object]:
    """The inputs, the md5 hex digest (None for a task id) and the id; raises CommandLineError."""
    by_url = _url_flags_given(args)
    if args.task_id is not None:
        if by_url:
            raise CommandLineError(
                f"--task-id and {'/'.join(by_url)} are two ways to name an item: give one"
            )
        return _task_report(args.task_id)
    if args.url is None:
        if args.model_id is None and args.fps is None:
            raise CommandLineError(
                "give --model-id M --url U (and --fps F for a video), or --task-id HEX"
            )
        raise CommandLineError(f"{by_url[0]} needs --url")
    if args.model_id is None:
        raise CommandLineError("--url needs --model-id")
    return _url_report(args.model_id, args.url, None if args.fps is None else _fps(args.fps))


def _url_flags_given(args: argparse.Namespace) -> list[str]:
    """Which of --model-id, --url and --fps the command line gave, in that order."""
    given = (("--model-id", args.model_id), ("--url", args.url), ("--fps", args.fps))
    return [flag for flag, value in given if value is not None]


def _fps(text: str) -> float:
    """``--fps``'s value: a finite decimal >= 0; raises CommandLineError."""
    if _DECIMAL.fullmatch(text) is None:
        raise CommandLineError(f"invalid --fps {text!r}: expected a number >= 0, such as 29.97")
    value = float(text)
    if value == float("inf"):  # a decimal too long for a float: 1e999
        raise CommandLineError(f"invalid --fps {text!r}: too large for a float")
    return value


def _url_report(model_id: str, url: str, fps: float | None) -> dict[str, object]:
    try:
        text = hashed_text(model_id, url, fps=fps)
        digest = md5_hex(model_id, url, fps=fps)
    except ValueError as exc:
        raise CommandLineError(str(exc)) from None
    return {
        "kind": "image" if fps is None else "video",
        "model_id": model_id,
        "url": url,
        "fps": fps,
        "hashed_text": text,
        "md5": digest,
        "pad_id": pad_id_from_hash(int(digest, 16)),
    }


def _task_report(task_id: str) -> dict[str, object]:
    try:
        value = pad_id_from_task_id(task_id)
    except ValueError as exc:
        raise CommandLineError(str(exc)) from None
    return {"kind": "epd", "task_id": task_id, "md5": None, "pad_id": value}
