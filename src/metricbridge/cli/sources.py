"""Where ``check`` and ``contract`` get upstream payloads: snapshot files or live upstreams.

Like the service, a live run also asks the first upstream for its /server_info (derived rows
read it) and goes on without it if the engine does not answer; with snapshots, a saved answer
can be given with ``--server-info``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from metricbridge.analysis.served import Payload
from metricbridge.cli.options import positive_seconds
from metricbridge.errors import InputError
from metricbridge.translation.pipeline import detect_format, stray_eof_line

__all__ = [
    "Sources",
    "add_server_info_option",
    "add_source_options",
    "load_sources",
    "read_server_info",
    "read_snapshot",
]


@dataclass(frozen=True, slots=True)
class Sources:
    """The payloads to translate and the engine's /server_info answer, if any."""

    payloads: list[Payload]
    server_info: dict[str, object] | None
    # Later fetches of the same upstreams, in order (``--then``), each merged like payloads;
    # rate rows are computed between one fetch and the next, the report is the last one's.
    later: tuple[list[Payload], ...] = ()
    interval: float = 15.0  # seconds between two fetches (idleness reads the clock)


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """``--upstream URL...`` or ``--snapshot FILE...`` (one is required), and a fetch timeout."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--upstream",
        nargs="+",
        action="extend",
        metavar="URL",
        help="engine /metrics to scrape now (':30000', HOST:PORT or a URL); several are merged "
        "as the service merges them: the first occurrence of a family wins",
    )
    group.add_argument(
        "--snapshot",
        nargs="+",
        action="extend",
        type=Path,
        metavar="EXPOSITION",
        help="saved /metrics responses (text format or OpenMetrics), merged like upstreams",
    )
    parser.add_argument(
        "--then",
        nargs="+",
        action="append",
        type=Path,
        default=[],
        metavar="EXPOSITION",
        help="with --snapshot: the same upstreams' responses at the next fetch (repeat for each "
        "later one, in order); rows derived between two fetches (rates) are computed from "
        "consecutive ones, and the report is the last fetch's",
    )
    parser.add_argument(
        "--interval",
        type=positive_seconds,
        default=15.0,
        metavar="SECONDS",
        help="with --then: seconds between two fetches (default 15)",
    )
    parser.add_argument(
        "--upstream-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="cap on each upstream fetch (default 10)",
    )
    add_server_info_option(parser, with_upstream=True)


def add_server_info_option(parser: argparse.ArgumentParser, *, with_upstream: bool = False) -> None:
    """``--server-info FILE``: a saved /server_info answer, for rows derived from it.

    ``with_upstream``: the command also has ``--upstream``, which fetches it instead.
    """
    fetched = " (with --upstream it is fetched)" if with_upstream else ""
    parser.add_argument(
        "--server-info",
        type=Path,
        metavar="JSON",
        help=f"the engine's saved /server_info answer, for rows derived from it{fetched}",
    )


def read_server_info(path: Path | None) -> dict[str, object] | None:
    """A saved /server_info answer; raises ``InputError`` unless it is a JSON object."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise InputError(str(path), f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(str(path), "expected a JSON object")
    return data


_GZIP_MAGIC = b"\x1f\x8b"


def read_snapshot(path: Path) -> Payload:
    """A snapshot file as a payload; raises ``InputError`` if it cannot be read."""
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if not body:
        raise InputError(str(path), "empty exposition (0 bytes)")
    if body.startswith(_GZIP_MAGIC):
        # A scrape saved with `curl --compressed -o` is plain; one saved without it is gzip.
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(str(path), f"gzip-compressed but unreadable: {exc}") from exc
    stray = stray_eof_line(body)
    if stray is not None:
        print(
            f"{path}: line {stray}: '# EOF' with more lines after it: read as the text format, "
            "where it is a comment",
            file=sys.stderr,
        )
    return Payload(str(path), body, detect_format(body))


def load_sources(args: argparse.Namespace) -> Sources:
    """The payloads the options name; raises ``InputError`` for any that cannot be had."""
    saved = read_server_info(args.server_info)
    if args.then and not args.snapshot:
        raise InputError("--then", "follows --snapshot: a live upstream is fetched once")
    if args.snapshot:
        later = tuple([read_snapshot(path) for path in fetch] for fetch in args.then)
        first = [read_snapshot(path) for path in args.snapshot]
        return Sources(first, saved, later, args.interval)
    # Only live upstreams need the HTTP client: `check --snapshot` does not import it.
    from metricbridge.cli.live import fetch_upstreams  # noqa: PLC0415

    return Sources(*fetch_upstreams(args.upstream, args.upstream_timeout, saved))
