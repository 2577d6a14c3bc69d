"""The body of a /metrics response: the engine part of a fetch, then the bridge's own metrics.

Each comes in parts written one after the other (``server._send``), none joined or copied per
scrape: the engine part is rendered once per fetch (``Snapshot``), the settled self-metrics
once per change of theirs, and only the per-scrape counters for each response.
"""

from __future__ import annotations

from metricbridge.model.family import Format
from metricbridge.model.names import Escaping
from metricbridge.service.gzip_framing import OpenGzip, close_gzip, gzip_member
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.snapshot import Snapshot

Part = bytes | memoryview  # a response part; memoryviews spare copying renders to trim them


def engine_body(
    snapshot: Snapshot, metrics: SelfMetrics, fmt: Format, gzip_level: int | None
) -> tuple[Part, ...]:
    """The whole response in three parts, none of them copied or joined per scrape.

    The engine part is rendered once per fetch and the bridge's settled self-metrics once per
    change of theirs; only the per-scrape counters are written for this response. With gzip the
    three are still one gzip member: several members in a row are valid (RFC 1952 §2.2), but
    ``curl --compressed`` stops after the first one, without a word.
    """
    counters = metrics.render_scrape_counters(fmt)
    settled = metrics.render_settled(fmt)  # ends with # EOF in OpenMetrics
    if gzip_level is None:
        return (*snapshot.engine_part(fmt, compressed=False), counters, settled)
    return close_gzip(
        snapshot.engine_part(fmt, compressed=True),
        counters,
        settled,
        metrics.render_settled(fmt, gzip_level=gzip_level),
    )


async def spelled_body(
    snapshot: Snapshot,
    metrics: SelfMetrics,
    fmt: Format,
    *,
    gzip_level: int | None,
    escaping: Escaping,
) -> tuple[Part, ...]:
    """``engine_body`` with UTF-8 names spelled for ``escaping``.

    Rendered off the event loop, once per fetch, format, encoding and escaping
    (``FilteredRenders``), when a request first asks for it, not with the fetch: only a
    payload with UTF-8 names has such a render at all.
    """
    families = snapshot.translation.families if snapshot.translation else ()
    engine = await snapshot.filtered.get(families, None, fmt, gzip_level, escaping)
    counters = metrics.render_scrape_counters(fmt)
    settled = metrics.render_settled(fmt)
    if isinstance(engine, OpenGzip) and gzip_level is not None:
        return close_gzip(
            engine, counters, settled, metrics.render_settled(fmt, gzip_level=gzip_level)
        )
    if isinstance(engine, OpenGzip):
        raise TypeError("a compressed render for an uncompressed request")
    return (*engine, counters, settled)


async def filtered_body(  # noqa: PLR0913 - one request's settings, keyword-only
    snapshot: Snapshot,
    metrics: SelfMetrics,
    fmt: Format,
    names: set[str],
    *,
    gzip_level: int | None,
    escaping: Escaping,
) -> tuple[Part, ...]:
    """A ``name[]`` response: cut from the fetch's families, shared by requests for the same names.

    The filtering runs off the event loop (cutting a family of 10^6 series by name takes a
    pass over its bytes) and once per fetch, names, format and encoding: concurrent requests
    wait for the same render and are answered from it without a copy.
    """
    families = snapshot.translation.families if snapshot.translation else ()
    engine = await snapshot.filtered.get(families, frozenset(names), fmt, gzip_level, escaping)
    own = metrics.render(fmt, names)  # prometheus_client's RestrictedRegistry: the same rule
    eof = b"# EOF\n" if fmt is Format.OPENMETRICS else b""
    if isinstance(engine, OpenGzip) and gzip_level is not None:  # the key holds the level
        return close_gzip(engine, own + eof, b"", gzip_member(b"", gzip_level))
    if isinstance(engine, OpenGzip):
        raise TypeError("a compressed name[] render for an uncompressed request")
    return (*engine, own + eof)
