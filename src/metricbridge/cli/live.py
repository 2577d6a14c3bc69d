"""``--upstream``: fetch the engines' /metrics (and the first one's /server_info) now.

Apart from ``sources`` so that only a live run imports the HTTP client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp

from metricbridge.analysis.served import Payload
from metricbridge.errors import InputError, UpstreamError
from metricbridge.service.background import fetch_server_info, server_info_urls
from metricbridge.service.scrape import Upstream, fetch, parse_upstream

__all__ = ["fetch_upstreams"]

_MAX_BYTES = 64 << 20
_SERVER_INFO_TIMEOUT = 5.0


def fetch_upstreams(
    specs: Sequence[str], fetch_timeout: float, saved: dict[str, object] | None
) -> tuple[list[Payload], dict[str, object] | None]:
    """Each upstream's payload, and ``saved`` or else the fetched /server_info answer.

    Raises ``InputError`` for an upstream that cannot be used.
    """
    upstreams = []
    for spec in specs:
        try:
            upstreams.append(parse_upstream(spec))
        except ValueError as exc:
            raise InputError(spec, str(exc)) from exc
    return asyncio.run(_fetch_all(upstreams, fetch_timeout, saved))


async def _fetch_all(
    upstreams: Sequence[Upstream], fetch_timeout: float, saved: dict[str, object] | None
) -> tuple[list[Payload], dict[str, object] | None]:
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
    return payloads, info
