"""Background work of the service: the idle heartbeat and the /server_info poller.

Neither ever blocks /metrics: they run beside it and only update state the next scrape reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import urlsplit

import aiohttp

from metricbridge.service.bridge import Bridge
from metricbridge.service.scrape import Upstream

log = logging.getLogger("metricbridge.background")
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")  # the latter for older engines
SERVER_INFO_PERIOD = 60.0


def server_info_urls(upstream: Upstream) -> list[str]:
    """The engine's /server_info URLs, on the same origin as its /metrics."""
    parts = urlsplit(upstream.url)
    return [f"{parts.scheme}://{parts.netloc}{path}" for path in SERVER_INFO_PATHS]


async def fetch_server_info(
    session: aiohttp.ClientSession, urls: list[str], timeout: float
) -> dict[str, object] | None:
    """The first URL that answers 200 with a JSON object; None (and a debug log) otherwise."""
    for url in urls:
        try:
            async with (
                asyncio.timeout(timeout),
                session.get(url, headers={"Accept": "application/json"}) as response,
            ):
                if response.status == 404:
                    continue
                if response.status != 200:
                    log.debug("server_info %s: HTTP %d", url, response.status)
                    return None
                data = json.loads(await response.read())
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            log.debug("server_info %s: %s", url, exc)
            return None
        return data if isinstance(data, dict) else None
    return None


async def poll_server_info(
    bridge: Bridge, urls: list[str], period: float = SERVER_INFO_PERIOD
) -> None:
    """Refresh ``bridge.server_info`` at start and every ``period``; keep the last good answer."""
    while True:
        info = await fetch_server_info(
            bridge.session, urls, timeout=min(5.0, bridge.settings.timeout_cap)
        )
        bridge.metrics.server_info_polled(ok=info is not None)
        if info is not None:
            if bridge.server_info is None:
                log.info("server_info: max_running_requests=%s", info.get("max_running_requests"))
            bridge.server_info = info
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
