"""One upstream GET: text format 0.0.4, no compression, bounded in time and size."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from metricbridge.errors import UpstreamError
from metricbridge.model.family import Format
from metricbridge.model.names import quoted
from metricbridge.service.allocator import payload_buffer

# Ask for the classic text format explicitly: prometheus_client's OpenMetrics encoder mangles
# `sglang:` into `sglang_` under escaping=underscores (client_python#1177). And ask for identity:
# prometheus_client gzips at level 9 inside the engine process, costing the engine more CPU than
# our whole translation.
REQUEST_HEADERS = {
    "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
    "Accept-Encoding": "identity",
    "User-Agent": "metricbridge",
}


# What stands for a secret wherever an upstream is shown: Go's url.URL.Redacted(), which
# Prometheus uses for the URLs it shows, writes the same.
REDACTED = "xxxxx"


@dataclass(frozen=True, slots=True)
class Upstream:
    """A scrape target: ``url`` is fetched, ``label`` and ``shown`` are all anyone else sees.

    ``label`` (host:port/path) names it in self-metrics and logs; ``shown`` is the URL with its
    password and query values redacted, for ``/`` and start-up logs. Neither ever holds the
    user info's password or a query value: an upstream URL may carry credentials
    (``http://user:pass@host/metrics?token=...``) and the bridge's pages are not protected.
    """

    label: str
    url: str

    @property
    def shown(self) -> str:
        """The URL as anyone may see it."""
        return redact_url(self.url)


def parse_upstream(spec: str) -> Upstream:
    """``:30000``, ``host:port``, ``host:port/path`` or a full URL; path defaults to /metrics."""
    text = spec.strip()
    if not text:
        raise ValueError("empty upstream")
    if "://" not in text:
        text = "http://" + (f"127.0.0.1{text}" if text.startswith(":") else text)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"cannot use upstream {redact_url(spec)!r}: expected HOST:PORT or an http(s) URL"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"cannot use upstream {redact_url(spec)!r}: {exc}") from None
    if port is None and not spec.strip().startswith(("http://", "https://")):
        raise ValueError(f"cannot use upstream {redact_url(spec)!r}: no port given")
    if port == 0:
        raise ValueError(f"cannot use upstream {redact_url(spec)!r}: port 0 is no server's port")
    path = parts.path or "/metrics"
    query = f"?{parts.query}" if parts.query else ""
    url = f"{parts.scheme}://{parts.netloc}{path}{query}"
    host = parts.netloc.rpartition("@")[2]
    return Upstream(label=f"{host}{path}", url=url)


def redact_url(text: str) -> str:
    """``text`` with every URL's user-info password and query values replaced by ``REDACTED``.

    Works on what a user typed (``user:pw@host:1/metrics?token=t``) as on a full URL, and
    leaves text without secrets unchanged, so messages still quote what was given.
    """
    return _QUERY_VALUE.sub(rf"\g<1>{REDACTED}", _PASSWORD.sub(rf"\g<1>{REDACTED}@", text))


_PASSWORD = re.compile(r"((?:^|//)[^/@:\s]*:)[^/@\s]*@")
_QUERY_VALUE = re.compile(r"([?&][^=&#\s]*=)[^&#\s]*")


@dataclass(frozen=True, slots=True)
class Fetched:
    """A successful fetch (the caller times it: failures take time too)."""

    body: bytes
    format: Format


def _format_of(content_type: str) -> Format:
    media = content_type.split(";", 1)[0].strip().lower()
    if media in ("text/plain", ""):
        return Format.TEXT
    if media == "application/openmetrics-text":
        return Format.OPENMETRICS
    raise UpstreamError("content_type", f"unexpected Content-Type {quoted(content_type)}")


async def fetch(
    session: aiohttp.ClientSession, upstream: Upstream, *, timeout: float, max_bytes: int
) -> Fetched:
    """GET the upstream's exposition; raise ``UpstreamError`` with a reason label on any failure."""
    try:
        async with asyncio.timeout(timeout):
            async with session.get(
                upstream.url, headers=REQUEST_HEADERS, allow_redirects=False, auto_decompress=False
            ) as response:
                if response.status != 200:
                    raise UpstreamError(
                        "http_status", f"HTTP {response.status} {response.reason or ''}".strip()
                    )
                if response.headers.get("Content-Encoding", "identity").lower() not in (
                    "identity",
                    "",
                ):
                    raise UpstreamError(
                        "content_encoding",
                        "unrequested Content-Encoding "
                        + quoted(response.headers["Content-Encoding"]),
                    )
                fmt = _format_of(response.headers.get("Content-Type", ""))
                declared = response.content_length
                if declared is not None and declared > max_bytes:
                    raise UpstreamError(
                        "oversize", f"body of {declared} bytes exceeds the {max_bytes}-byte cap"
                    )
                body = await _read_capped(response, max_bytes)
    except TimeoutError:
        raise UpstreamError("timeout", f"no complete response within {timeout:.3g}s") from None
    except aiohttp.ClientConnectorError as exc:
        detail = _scrub(str(exc.os_error or exc), upstream)
        raise UpstreamError("connect", f"cannot connect: {detail}") from None
    except aiohttp.ClientPayloadError as exc:
        raise UpstreamError(
            "truncated", f"body ended early: {_scrub(str(exc), upstream)}"
        ) from None
    except aiohttp.ClientError as exc:
        detail = _scrub(str(exc), upstream)
        raise UpstreamError("http", f"{type(exc).__name__}: {detail}") from None
    return Fetched(body, fmt)


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body, refused as soon as it passes ``max_bytes``.

    ``iter_any`` hands over the blocks as the connection received them; ``iter_chunked`` would
    re-slice them into fixed sizes, copying the whole body once more in Python-sized steps.
    With a Content-Length each block goes straight into the body (``_read_declared``);
    without one, they are kept and joined at the end.
    """
    declared = response.content_length
    if declared:
        return await _read_declared(response, declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > max_bytes:
            raise UpstreamError("oversize", f"body exceeds the {max_bytes}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_declared(response: aiohttp.ClientResponse, declared: int) -> bytes:
    """A body of ``declared`` bytes (already checked against the cap), written in place.

    Each received block is copied into the body and freed at once, so the blocks of a 10 MB
    body never pile up on the heap to be joined: the heap keeps reusing the same few blocks'
    memory, where a list of them grew it by the payload's size and glibc handed that back to
    the kernel after the join, to fault it in again on the next fetch (2,300 page faults per
    10 MB scrape, and one copy of the body fewer). The body itself is a huge-page mapping
    (``allocator.payload_buffer``).
    """
    buffer = payload_buffer(declared)
    view, filled = buffer.view, 0
    try:
        async for chunk in response.content.iter_any():
            end = filled + len(chunk)
            if end > declared:  # aiohttp stops at Content-Length; a guard, not a path
                raise UpstreamError("oversize", f"body exceeds its Content-Length of {declared}")
            view[filled:end] = chunk
            filled = end
    finally:
        view.release()
    if filled != declared:  # aiohttp raises ClientPayloadError first; never serve a gap
        raise UpstreamError("truncated", f"body ended after {filled} of {declared} bytes")
    return buffer.data


def _scrub(message: str, upstream: Upstream) -> str:
    """An aiohttp message with the upstream's URL (which may hold credentials) as it is shown."""
    return redact_url(message.replace(upstream.url, upstream.shown))
