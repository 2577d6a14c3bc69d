"""A fake upstream whose behaviour each test sets, and a bridge app pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from helpers.paths import FIXTURES
from metricbridge.config.load import load_config
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import ServiceSettings, make_app
from metricbridge.service.snapshot import FetchSettings

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class FakeUpstream:
    """Serves ``body`` (or runs ``behaviour``), counting requests and remembering headers."""

    body: bytes = field(default_factory=(FIXTURES / "tp1.prom").read_bytes)
    content_type: str = TEXT_TYPE
    status: int = 200
    delay: float = 0.0
    behaviour: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None
    requests: int = 0
    last_headers: dict[str, str] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The upstream's /metrics handler."""
        self.requests += 1
        self.last_headers = dict(request.headers)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.behaviour is not None:
            return await self.behaviour(request)
        return web.Response(
            body=self.body, status=self.status, headers={"Content-Type": self.content_type}
        )

    def app(self) -> web.Application:
        """An app serving this upstream at /metrics."""
        app = web.Application()
        app.router.add_get("/metrics", self.handle)
        return app


def bridge_app(  # noqa: PLR0913 - one keyword per service setting the tests vary
    *upstream_urls: str,
    cache_ttl: float = 0.0,
    timeout: float = 2.0,
    max_bytes: int = 64 << 20,
    config: str | None = None,
    server_info: bool = True,
    enable_lifecycle: bool = True,
    reload_min_interval: float = 0.0,
    profiles: tuple[str, ...] = (),
) -> web.Application:
    """A bridge app for the given upstream URLs (no cache by default, so every scrape fetches).

    POST /-/reload is on and not rate-limited by default, for the tests that reload; the
    service's own defaults (off, once a second) have tests of their own.
    """
    from pathlib import Path  # noqa: PLC0415

    settings = ServiceSettings(
        tuple(parse_upstream(url) for url in upstream_urls),
        Path(config) if config else None,
        FetchSettings(timeout_cap=timeout, max_bytes=max_bytes, cache_ttl=cache_ttl),
        server_info=server_info,
        enable_lifecycle=enable_lifecycle,
        reload_min_interval=reload_min_interval,
        profiles=profiles,
    )
    return make_app(settings, load_config(settings.config_path, settings.profiles))


# The Accept headers Prometheus 2 and 3 send, copied from their scrape code.
PROM2_ACCEPT = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
PROM3_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
)
