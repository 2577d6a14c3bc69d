"""Background work of the service: the idle heartbeat, the /server_info poller, the start check.

None ever blocks /metrics: they run beside it and only update state the next scrape reads (the
start-up check of the upstreams only logs).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import aiohttp

from metricbridge.errors import UpstreamError
from metricbridge.service.bridge import Bridge
from metricbridge.service.scrape import Upstream, fetch, redact_url
from metricbridge.service.snapshot import FetchSettings

log = logging.getLogger("metricbridge.background")
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")  # the latter for older engines
SERVER_INFO_PERIOD = 60.0
# SGLang's answer is a few KiB of server arguments; anything near this is not one.
SERVER_INFO_MAX_BYTES = 1 << 20
_UNREACHABLE = frozenset({"http", "timeout"})  # failure reasons that mean the engine is away


def server_info_urls(upstream: Upstream) -> list[str]:
    """The engine's /server_info URLs, on the same origin as its /metrics."""
    parts = urlsplit(upstream.url)
    return [f"{parts.scheme}://{parts.netloc}{path}" for path in SERVER_INFO_PATHS]


async def fetch_server_info(
    session: aiohttp.ClientSession, urls: list[str], timeout: float
) -> dict[str, object]:
    """The first URL that answers 200 with a JSON object; raises ``UpstreamError`` otherwise."""
    info, _ = await fetch_server_info_sized(session, urls, timeout)
    return info


async def fetch_server_info_sized(
    session: aiohttp.ClientSession, urls: list[str], timeout: float
) -> tuple[dict[str, object], int]:
    """As ``fetch_server_info``, with the size of the body read, for the self-metrics.

    Fetched as carefully as /metrics (``scrape.fetch``): no redirects (a compromised engine
    must not make the bridge GET another host), a byte cap read incrementally, one deadline for
    the whole poll, and the JSON parsed off the event loop (a large or deeply nested answer
    must not stall scrapes, nor kill the poller with a RecursionError).
    """
    try:
        async with asyncio.timeout(timeout):
            for url in urls:
                body = await _get(session, url)
                if body is not None:
                    return await asyncio.to_thread(_parse_object, body), len(body)
    except TimeoutError:
        raise UpstreamError("timeout", f"no answer within {timeout:g} s") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError("http", redact_url(f"{type(exc).__name__}: {exc}")) from None
    raise UpstreamError("not_found", "HTTP 404 for every /server_info path")


async def _get(session: aiohttp.ClientSession, url: str) -> bytes | None:
    """The body of a 200 answer; None for 404 (try the next path)."""
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    async with session.get(url, headers=headers, allow_redirects=False) as response:
        if response.status == 404:
            return None
        if response.status != 200:
            raise UpstreamError("status", f"HTTP {response.status}")
        declared = response.content_length
        if declared is not None and declared > SERVER_INFO_MAX_BYTES:
            raise UpstreamError("too_large", f"Content-Length {declared} bytes")
        body = bytearray()
        async for chunk in response.content.iter_chunked(64 << 10):
            body += chunk
            if len(body) > SERVER_INFO_MAX_BYTES:
                raise UpstreamError("too_large", f"more than {SERVER_INFO_MAX_BYTES} bytes")
        return bytes(body)


def _parse_object(body: bytes) -> dict[str, object]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
        raise UpstreamError("malformed", f"not JSON: {detail}") from None
    if not isinstance(data, dict):
        raise UpstreamError("malformed", f"a JSON {type(data).__name__}, not an object")
    return data


async def poll_server_info(
    bridge: Bridge, urls: list[str], period: float = SERVER_INFO_PERIOD
) -> None:
    """Refresh ``bridge.server_info`` at start and every ``period``; keep the last good answer.

    Every failure is counted; only a change of state (up, or a new reason) is logged above
    debug, so an engine without the endpoint does not fill the log.
    """
    shown = redact_url(urls[0]) if urls else ""
    previous: str | None = None  # None before the first poll, "" while up, else the reason
    bridge.metrics.server_info_max_bytes.set(SERVER_INFO_MAX_BYTES)
    while True:
        timeout = min(5.0, bridge.settings.timeout_cap)
        try:
            info, size = await fetch_server_info_sized(bridge.session, urls, timeout)
        except UpstreamError as exc:
            bridge.metrics.server_info_polled(ok=False, reason=exc.reason)
            # An unreachable engine is already logged by the /metrics fetch; what only this
            # endpoint can get wrong is logged when it starts, at warning.
            news = exc.reason != previous and exc.reason not in _UNREACHABLE
            level = logging.WARNING if news else logging.DEBUG
            log.log(level, "server_info %s: %s (%s)", shown, exc, exc.reason)
            previous = exc.reason
        else:
            bridge.metrics.server_info_polled(ok=True, size=size)
            if previous != "":
                log.info(
                    "server_info: max_running_requests=%.80r", info.get("max_running_requests")
                )
            bridge.server_info = info
            previous = ""
        await asyncio.sleep(period)


async def heartbeat(bridge: Bridge) -> None:
    """While idle zeroing is on, fetch every heartbeat period even when nobody scrapes."""
    while True:
        period = bridge.rules.idle.heartbeat_seconds
        await asyncio.sleep(period)
        if not bridge.rules.idle.enabled:
            continue
        age = bridge.age()
        if age is None or age >= period:
            try:
                await bridge.snapshot(bridge.settings.timeout_cap)
            except Exception:  # a heartbeat must never die: the next tick tries again
                log.exception("heartbeat fetch failed")


async def check_upstreams(
    session: aiohttp.ClientSession, upstreams: Sequence[Upstream], settings: FetchSettings
) -> None:
    """Fetch each upstream once, at start-up, and log whether it answers.

    A wrong ``--upstream`` is said at start rather than at Prometheus' first scrape. Nothing
    waits for it: readiness never depends on the engine (a loading engine must not hold the pod
    back), and the bridge's own fetches, self-metrics and state are left alone.
    """

    async def check(upstream: Upstream) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            fetched = await fetch(
                session, upstream, timeout=settings.timeout_cap, max_bytes=settings.max_bytes
            )
        except UpstreamError as exc:
            log.warning(
                "upstream %s does not answer at start-up: %s (%s); its families are not served "
                "and metricbridge_upstream_up is 0 while this lasts",
                upstream.shown,
                exc,
                exc.reason,
            )
        else:
            log.info(
                "upstream %s answers: %d bytes of %s in %.3f s",
                upstream.shown,
                len(fetched.body),
                fetched.format.value,
                loop.time() - started,
            )

    await asyncio.gather(*(check(upstream) for upstream in upstreams))
