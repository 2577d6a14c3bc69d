"""What one wave of upstream fetches came to: the settings, each upstream's result, the snapshot.

A ``Snapshot`` is what every scrape arriving while it is fresh is answered from: the translation
and its renders, made once per format and encoding. ``bridge.Bridge`` makes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from metricbridge.errors import UpstreamError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.openmetrics_fit import Misfit
from metricbridge.exposition.writer import write_chunks, write_pieces
from metricbridge.model.family import AnyFamily, Body, Family, Format
from metricbridge.service.gzip_framing import OpenGzip, open_gzip
from metricbridge.service.name_filter import FilteredRenders
from metricbridge.service.scrape import Fetched, Upstream
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.translate import Translation


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How upstreams are fetched and results shared."""

    timeout_cap: float = 10.0
    max_bytes: int = 64 << 20
    cache_ttl: float = 1.0
    gzip_level: int = 1
    # Samples a family a rule reads may hold; a larger one is dropped before translation.
    # 0: no limit.
    family_sample_limit: int = 100_000


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    """What one upstream fetch came to (for /contract)."""

    upstream: Upstream
    ok: bool
    reason: str = ""
    message: str = ""
    size: int = 0


@dataclass(frozen=True, slots=True)
class Attempt:
    """One upstream's HTTP fetch, not yet read: reading needs the rules in force at the end."""

    upstream: Upstream
    outcome: Fetched | UpstreamError
    duration: float


@dataclass(slots=True)
class Snapshot:
    """One wave of fetches, translated; the engine part is rendered on demand and memoised."""

    finished_at: float
    results: tuple[UpstreamResult, ...]
    translation: Translation | None
    gzip_level: int
    rules: CompiledRules  # the rules it was translated with: a reload makes it unservable
    # Timed out at a deadline shorter than --upstream-timeout: one request's deadline, not a
    # verdict on the engine for requests that can wait longer (see Bridge.snapshot).
    cut_short: bool = False
    caches: CodecCaches | None = None  # the bridge's, for writing the engine part
    # Why OpenMetrics cannot carry the translation faithfully (exposition.openmetrics_fit):
    # then every answer of this snapshot is text 0.0.4, which can.
    misfit: Misfit | None = None
    filtered: FilteredRenders = field(default_factory=FilteredRenders)  # name[] renders
    _renders: dict[tuple[Format, bool], tuple[Body, ...] | OpenGzip] = field(default_factory=dict)
    _spelled: bool | None = None

    @property
    def spelled(self) -> bool:
        """Whether a family was read with UTF-8 names (``exposition.name_spelling``).

        An escaping but ``underscores`` then spells them otherwise than this snapshot's renders.
        """
        if self._spelled is None:
            families = self.translation.families if self.translation else ()
            self._spelled = any(
                isinstance(family, Family) and family.meta.spellings is not None
                for family in families
            )
        return self._spelled

    def served_format(self, fmt: Format) -> Format:
        """The format an answer negotiated as ``fmt`` is served in.

        Text 0.0.4 when OpenMetrics cannot carry every family of this snapshot: text can.
        """
        return Format.TEXT if self.misfit is not None else fmt

    def rendered(self, fmt: Format, *, compressed: bool) -> bool:
        """Whether the engine part in this format and encoding is rendered already."""
        return (self.served_format(fmt), compressed) in self._renders

    def render(self, fmt: Format, *, compressed: bool) -> None:
        """Render the engine part in this format and encoding, if not yet (the bridge's worker).

        ``engine_part`` then returns it at once: rendering a large payload takes a share of a
        second that the event loop must not spend.
        """
        fmt = self.served_format(fmt)
        key = (fmt, compressed)
        if key not in self._renders:
            families = self.translation.families if self.translation else ()
            self._renders[key] = render_part(
                families, fmt, compressed=compressed, level=self.gzip_level, caches=self.caches
            )

    def keep(self, fmt: Format, *, compressed: bool, part: tuple[Body, ...] | OpenGzip) -> None:
        """Keep a render of this snapshot's families made before it existed (``render_part``).

        ``fmt`` is the format asked for; the render was made in ``served_format(fmt)``.
        """
        self._renders[(self.served_format(fmt), compressed)] = part

    @overload
    def engine_part(self, fmt: Format, *, compressed: Literal[False]) -> tuple[Body, ...]: ...
    @overload
    def engine_part(self, fmt: Format, *, compressed: Literal[True]) -> OpenGzip: ...
    def engine_part(self, fmt: Format, *, compressed: bool) -> tuple[Body, ...] | OpenGzip:
        """The translated families (no ``# EOF``) in pieces, rendered once per format and encoding.

        Compressed, it is the start of a gzip member that each response closes with its own
        self-metrics (``close_gzip``): one member per response, as ``curl --compressed`` needs,
        while the bulk is still compressed once per fetch. Only the encodings asked for are
        kept: Prometheus asks for gzip, and memoising the plain render on the way would hold a
        second copy of the payload for nobody. Pieces, not one buffer: see ``write_pieces``.
        """
        self.render(fmt, compressed=compressed)
        return self._renders[(self.served_format(fmt), compressed)]


def render_part(
    families: Sequence[AnyFamily],
    fmt: Format,
    *,
    compressed: bool,
    level: int,
    caches: CodecCaches | None,
) -> tuple[Body, ...] | OpenGzip:
    """The engine part of a response: ``families`` in ``fmt``, as ``Snapshot.engine_part``."""
    if compressed:
        # Compressed straight from the families' views: cutting them into pieces first would
        # copy the whole render for the compressor to read once (a 10 MB engine).
        return open_gzip(write_chunks(families, fmt, caches=caches), level)
    return tuple(write_pieces(families, fmt, caches=caches))
