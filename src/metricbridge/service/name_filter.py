"""``?name[]=`` filtering of a fetch's translated families, with prometheus_client's semantics.

A ``name[]`` answer is cut from what the fetch already read, never parsed again: a raw
family's lines were proven valid by the reader (its invariant, in ``exposition.reader``), each
starting with its sample name then ``{`` or a space, so a family whose every possible sample
name is asked for is served whole, as the same bytes, and any other is cut line by line by
that name, in C. Parsed families (those a rule rewrote) are filtered by their samples' names.
Requests asking for the same names of the same fetch share one filtering and its render
(``FilteredRenders``): eight at once cost one pass, and hold one render between them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from metricbridge.exposition.writer import write_pieces
from metricbridge.model.family import (
    TYPE_SUFFIXES,
    AnyFamily,
    Body,
    Family,
    Format,
    MetricType,
    RawFamily,
    sample_base,
)
from metricbridge.model.family_names import served_names
from metricbridge.model.names import Escaping
from metricbridge.service.gzip_framing import OpenGzip, open_gzip

# Filtered renders one fetch keeps for later requests with the same names; one being made is
# kept whatever the count, held by the requests waiting for it anyway.
KEPT_RENDERS = 8


def select_samples(
    families: Iterable[AnyFamily], names: set[str] | frozenset[str]
) -> list[AnyFamily]:
    """The samples whose sample names are in ``names``, in their families; none left, no family.

    ``name[]`` lists sample names, as in prometheus_client (its ``RestrictedRegistry``): so
    ``x_count`` is a histogram's counts alone, and ``x`` itself selects nothing.
    """
    selected: list[AnyFamily] = []
    for family in families:
        if isinstance(family, Family):
            samples = tuple(sample for sample in family.samples if sample.name in names)
            if samples:
                selected.append(Family(family.meta, samples))
            continue
        wanted = served_names(family.meta.name, family.meta.type) & names
        if not wanted:
            continue  # its body is never looked at
        if raw_sample_names(family) <= wanted:
            selected.append(family)  # every line is asked for: the same bytes, no copy
            continue
        picked = _picked(family, wanted)
        if picked is not None:
            selected.append(picked)
    return selected


def raw_sample_names(family: RawFamily) -> frozenset[str]:
    """Every sample name a raw family's lines can start with (never ``_created``: not raw)."""
    meta = family.meta
    if meta.type is MetricType.COUNTER and not meta.name.endswith("_total"):
        return frozenset((meta.name,))  # a text counter declared without _total
    base = sample_base(meta.name, meta.type)
    return frozenset(base + suffix for suffix in TYPE_SUFFIXES[meta.type] if suffix != "_created")


def _picked(family: RawFamily, wanted: frozenset[str]) -> RawFamily | None:
    """The family with only the lines named in ``wanted``, or None when there is none.

    A line is its sample name, then ``{`` or one space, then the rest up to its newline (the
    reader proved it), so a name in ``wanted`` followed by one of those two at a line's start
    picks exactly its lines: ``x`` never picks ``x_sum``, nor a label set passed as a name.
    """
    alternatives = b"|".join(re.escape(name.encode()) for name in sorted(wanted))
    lines = re.findall(b"^(?:" + alternatives + rb")[{ ][^\n]*\n", family.body, re.MULTILINE)
    if not lines:
        return None
    body = b"".join(lines)
    return RawFamily(family.meta, body, family.source_format, family.first_line, len(lines))


Rendered = tuple[Body, ...] | OpenGzip
# None for names: every family, in an escaping other than the fetch's own render's.
RenderKey = tuple[frozenset[str] | None, Format, int | None, Escaping]


def render_selected(
    families: Sequence[AnyFamily],
    names: frozenset[str] | None,
    fmt: Format,
    gzip_level: int | None,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> Rendered:
    """The families named (all without ``names``) in ``fmt``, names spelled for ``escaping``.

    Pieces, or an open gzip member; no ``# EOF``. Large raw bodies stay views of the fetch's
    payload (``write_pieces``); no caches: this runs in a thread, and the bridge's caches
    belong to the event loop.
    """
    selected = families if names is None else select_samples(families, names)
    pieces = write_pieces(selected, fmt, escaping=escaping)
    return tuple(pieces) if gzip_level is None else open_gzip(pieces, gzip_level)


@dataclass(slots=True)
class FilteredRenders:
    """One fetch's ``name[]`` and escaping renders, by names, format, gzip level and escaping.

    Shared while the fetch lasts: a render in an escaping but ``underscores`` is one of every
    family, made here too, off the event loop. Owned by the fetch's ``Snapshot``, so a new
    fetch starts afresh and an old one's renders go with it. Used on the event loop only; the
    filtering itself runs in a thread.
    """

    renders: dict[RenderKey, asyncio.Future[Rendered]] = field(default_factory=dict)
    made: int = 0  # filterings started: requests that found theirs made or being made add none

    async def get(
        self,
        families: Sequence[AnyFamily],
        names: frozenset[str] | None,
        fmt: Format,
        gzip_level: int | None,
        escaping: Escaping = Escaping.UNDERSCORES,
    ) -> Rendered:
        """The render for these names, made once for every request that asks for it."""
        key = (names, fmt, gzip_level, escaping)
        future = self.renders.get(key)
        if future is None:
            self._make_room()
            self.made += 1
            future = asyncio.ensure_future(
                asyncio.to_thread(render_selected, families, names, fmt, gzip_level, escaping)
            )
            future.add_done_callback(lambda done: self._forget_failed(key, done))
            self.renders[key] = future
        # Shielded: a request that goes away must not cancel the render others wait for.
        return await asyncio.shield(future)

    def _make_room(self) -> None:
        finished = [key for key, future in self.renders.items() if future.done()]
        for key in finished[: max(0, len(self.renders) - KEPT_RENDERS + 1)]:
            del self.renders[key]

    def _forget_failed(self, key: RenderKey, done: asyncio.Future[Rendered]) -> None:
        if (done.cancelled() or done.exception() is not None) and self.renders.get(key) is done:
            del self.renders[key]
