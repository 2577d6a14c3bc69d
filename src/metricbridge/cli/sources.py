"""Where ``check`` and ``contract`` get upstream payloads: snapshot files or live upstreams.

Like the service, a live run also asks the first upstream for its /server_info (derived rows
read it) and goes on without it if the engine does not answer; with snapshots, a saved answer
can be given with ``--server-info``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from metricbridge.analysis.served import Payload
from metricbridge.cli.options import positive_seconds
from metricbridge.errors import InputError, UpstreamError
from metricbridge.service.background import fetch_server_info, server_info_urls
from metricbridge.service.scrape import Upstream, fetch, parse_upstream
from metricbridge.translation.pipeline import detect_format, stray_eof_line

__all__ = [
    "Sources",
    "add_server_info_option",
    "add_source_options",
    "load_sources",
    "read_server_info",
    "read_snapshot",
]

_MAX_BYTES = 64 << 20
_SERVER_INFO_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Sources:
    """The payloads to translate and the engine's /server_info answer, if any."""

    payloads: list[Payload]
    server_info: dict[str, object] | None


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
        "--upstream-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="cap on each upstream fetch (default 10)",
    )
    add_server_info_option(parser)


def add_server_info_option(parser: argparse.ArgumentParser) -> None:
    """``--server-info FILE``: a saved /server_info answer, for rows derived from it."""
    parser.add_argument(
        "--server-info",
        type=Path,
        metavar="JSON",
        help="the engine's saved /server_info answer (with --upstream it is fetched)",
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
    if args.snapshot:
        return Sources([read_snapshot(path) for path in args.snapshot], saved)
    upstreams = []
    for spec in args.upstream:
        try:
            upstreams.append(parse_upstream(spec))
        except ValueError as exc:
            raise InputError(spec, str(exc)) from exc
    return asyncio.run(_fetch_all(upstreams, args.upstream_timeout, saved))


async def _fetch_all(
    upstreams: Sequence[Upstream], fetch_timeout: float, saved: dict[str, object] | None
) -> Sources:
    """Fetch one after another: a failure then leaves no request in flight behind it."""
    payloads = []
    async with aiohttp.ClientSession() as session:
        for upstream in upstreams:
            try:
                fetched = await fetch(
                    session, upstream, timeout=fetch_timeout, max_bytes=_MAX_BYTES
                )
            except UpstreamError as exc:
                raise InputError(
                    upstream.shown, f"upstream unusable ({exc.reason}): {exc}"
                ) from exc
            payloads.append(Payload(upstream.shown, fetched.body, fetched.format))
        info = saved
        if info is None:
            urls = server_info_urls(upstreams[0])
            try:
                info = await fetch_server_info(
                    session, urls, min(_SERVER_INFO_TIMEOUT, fetch_timeout)
                )
            except UpstreamError:
                info = None  # rows derived from it are reported as needing it
    return Sources(payloads, info)
