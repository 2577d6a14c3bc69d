"""One upstream's memory of its payload's layout, for the next payload to be walked in one pass.

An engine's payload keeps its layout from one scrape to the next: the same families in the
same order, the same header bytes, the same label sets; only values move. After a payload is
read in full and nothing in it was refused, its layout is kept here: per family, its HELP and
TYPE lines as they came, what the reader derived from them (``caches.KnownHeader``) and its
block's proven heads (or None for a family the exact path read). The next payload is compared
with it in one pass (``layout_walk``): where it matches, the reader builds its families from
the memory instead of finding, looking up and proving them one by one.

One ``ScrapeMemory`` belongs to one upstream, as Prometheus keeps one scrape cache per target:
the bridge owns one per upstream for its life and resets it on every rules reload; an offline
command makes one for its input. Its layout is held in a byte-bounded ``ByteLRU`` (one entry
per wire format), so its size, hits and misses are what the self-metrics show. The heads it
holds are its own copies: no other cache holds the same list.

A layout is kept only from a payload read in full, and a walk only answers when the payload
matches it in every byte but the values, which are proven again as the full read proves them:
the memory changes speed, never a result (``tests/exposition/test_layout_walk.py``).

``walk`` holds a payload against a layout: each family's header bytes compared in place, then
its block's heads as ``byte_scan.prove_block`` compares heads it proved before; one ``(end,
simple, values)`` per family (``simple`` None: other heads, for the caller to prove as the full
read proves them, so a new series costs one family's proof, not a full read), or None where
a header differs. ``_linescan.walk_layout`` does
it in one C call when built; ``walk_python`` is the specification it must agree with, result
for result (the tests hold them equal on real, random and mutated payloads, cut anywhere).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from metricbridge.exposition import line_match
from metricbridge.exposition.byte_scan import next_comment
from metricbridge.exposition.caches import CodecCaches, KnownHeader
from metricbridge.exposition.family_state import Exposition
from metricbridge.exposition.raw_rules import CHECKED_TYPES
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format, RawFamily

# A 10 MB engine's layout (its heads, about the payload's size less the values) fits.
DEFAULT_BUDGET = 16 << 20
# Per family held, beyond the len() of its header and heads: the segment, its list slots.
SEGMENT_OVERHEAD = 200
HEAD_OVERHEAD = 48

# Per family of a walk: where its block ends, whether its values are all simple (None: its
# heads are not the remembered ones), its values (None when all simple and not wanted).
Walked = list[tuple[int, bool | None, list[bytes] | None]]


@dataclass(frozen=True, slots=True)
class Segment:
    """One family of a remembered layout: its header as it came and its block's proven heads."""

    header: bytes  # its HELP and TYPE lines, each with its newline
    known: KnownHeader
    heads: list[bytes] | None  # None: the exact path read it, and reads it again
    checked: bool  # a histogram or summary: its values are kept for ``raw_rules``


@dataclass(frozen=True, slots=True)
class PayloadLayout:
    """A payload's families, in order, and what follows the last one (``# EOF``, or nothing)."""

    fmt: Format
    segments: tuple[Segment, ...]
    tail: bytes
    # The walk's arguments, made once: each segment's header, heads and whether values are kept.
    headers: list[bytes]
    heads: list[list[bytes] | None]
    wanted: list[bool]
    created: bool  # a family's name ends in ``_created``: the text reader may fold it in
    # What ``size`` answers, worked out once: a layout is remembered again whenever a block's
    # heads change, and summing a 10 MB engine's heads took as long as walking them.
    held: int

    @classmethod
    def of(  # noqa: PLR0913 - the fields but the two worked out here
        cls,
        fmt: Format,
        segments: tuple[Segment, ...],
        tail: bytes,
        *,
        headers: list[bytes],
        heads: list[list[bytes] | None],
        wanted: list[bool],
    ) -> PayloadLayout:
        """A layout of these segments, with its size and ``created`` worked out."""
        created = any(segment.known.meta.name.endswith("_created") for segment in segments)
        held = sum(map(_segment_size, segments)) + len(tail)
        return cls(fmt, segments, tail, headers, heads, wanted, created, held)

    def size(self) -> int:
        """The len() of what it holds, with overheads, for the cache's estimate."""
        return self.held

    def with_heads(self, changed: list[tuple[int, list[bytes]]]) -> PayloadLayout:
        """The same layout with new proven heads for some families (by index)."""
        segments = list(self.segments)
        heads = list(self.heads)
        held = self.held
        for index, proven in changed:
            held += _heads_size(proven) - _heads_size(segments[index].heads)
            segments[index] = dataclasses.replace(segments[index], heads=proven)
            heads[index] = proven
        return dataclasses.replace(self, segments=tuple(segments), heads=heads, held=held)


def _heads_size(heads: list[bytes] | None) -> int:
    return 0 if heads is None else sum(map(len, heads)) + HEAD_OVERHEAD * len(heads)


def _segment_size(segment: Segment) -> int:
    own = SEGMENT_OVERHEAD + 2 * len(segment.header) + segment.known.size()
    return own + _heads_size(segment.heads)


class ScrapeMemory:
    """One upstream's remembered layout, one per wire format, bounded in bytes."""

    __slots__ = ("layouts",)

    def __init__(self, name: str = "scrape_layout", budget: int = DEFAULT_BUDGET) -> None:
        self.layouts: ByteLRU[Format, PayloadLayout] = ByteLRU(name, budget)

    def layout(self, fmt: Format) -> PayloadLayout | None:
        """The layout of the last payload of this format read in full, if it was kept."""
        return self.layouts.get(fmt)

    def unmatched(self) -> None:
        """Count the last lookup a miss: its layout was found but the payload was not it."""
        self.layouts.hits -= 1
        self.layouts.misses += 1

    def remember(self, layout: PayloadLayout) -> None:
        """Keep the layout for the next payload of its format."""
        self.layouts.put(layout.fmt, layout, layout.size())

    def reset(self) -> None:
        """Forget the layouts (the rules changed); the counters keep counting."""
        self.layouts.reset()


def walk_python(
    payload: bytes,
    headers: list[bytes],
    heads: list[list[bytes] | None],
    wanted: list[bool],
) -> Walked | None:
    """The walk in Python: what ``_linescan.walk_layout`` answers, for every payload."""
    out: Walked = []
    pos, size = 0, len(payload)
    for header, block_heads, want in zip(headers, heads, wanted, strict=True):
        if not payload.startswith(header, pos):
            return None
        pos += len(header)
        end = next_comment(payload, pos, size)
        if block_heads is None:
            out.append((end, False, None))
            pos = end
            continue
        if pos >= size or payload[pos] in b"#\n":
            return None
        parts = payload[pos:end].replace(b"\n", b" \n").split(b" ")
        lines = len(block_heads)
        if len(parts) != 2 * lines + 1 or parts[-1] != b"\n" or parts[0:-1:2] != block_heads:
            out.append((end, None, None))  # other heads: the caller proves the block afresh
            pos = end
            continue
        values = parts[1::2]
        simple = all(map(line_match.SIMPLE_VALUE.fullmatch, values))
        out.append((end, simple, values if want or not simple else None))
        pos = end
    return out


def walk(payload: bytes, layout: PayloadLayout) -> Walked | None:
    """The payload's families against the layout: compiled when built, else in Python."""
    if line_match.walk_layout is not None:
        return line_match.walk_layout(payload, layout.headers, layout.heads, layout.wanted)
    return walk_python(payload, layout.headers, layout.heads, layout.wanted)


def layout_of(  # noqa: PLR0911 - each return is a reason the walk cannot repeat the payload
    payload: bytes, exposition: Exposition, caches: CodecCaches, budget: int | None = None
) -> PayloadLayout | None:
    """The layout of a payload read in full with nothing refused, if the walk can repeat it.

    None too when it would not fit in ``budget`` bytes, which is known before its heads are
    copied: at least the needle each head starts with, and the overheads, per line.

    It can when the payload is its families one after the other, each a HELP and a TYPE line
    the reader remembered (``caches.read_headers``) and a block: proven heads if the read kept
    the block as it came, else one the exact path reads again. Anything else (a free comment,
    a blank line, a family without its pair, a family whose block the read did not keep whole)
    is read in full every time, as it is today.
    """
    fmt, size = exposition.format, len(payload)
    if exposition.problems or exposition.renamed_samples:
        return None
    segments: list[Segment] = []
    pos, line, held = 0, 1, 0
    for family in exposition.families:
        end = _header_end(payload, pos)
        if end < 0:
            return None
        known = caches.read_headers.get((fmt, payload[pos:end]))
        if known is None or known.meta != family.meta:
            return None
        start = end + 1
        stop = next_comment(payload, start, size)
        if start == stop:
            return None
        lines = payload.count(b"\n", start, stop)
        heads = None
        if (
            isinstance(family, RawFamily)
            and family.first_line == line + 2
            and family.sample_count == lines
            and len(family.body) == stop - start
        ):
            shortest = min(map(len, known.needles), default=1) - 1
            held += SEGMENT_OVERHEAD + 2 * (start - pos) + lines * (HEAD_OVERHEAD + shortest)
            if budget is not None and held > budget:
                return None  # a family of 10^6 series: its heads alone are over the budget
            heads = _proven_heads(payload, start, stop, known, fmt, caches)
        checked = heads is not None and known.meta.type in CHECKED_TYPES
        segments.append(Segment(payload[pos:start], known, heads, checked))
        line += 2 + lines
        pos = stop
    tail = payload[pos:]
    if tail not in ((b"# EOF\n", b"# EOF") if fmt is Format.OPENMETRICS else (b"",)):
        return None
    layout = PayloadLayout.of(
        fmt,
        tuple(segments),
        tail,
        headers=[segment.header for segment in segments],
        heads=[segment.heads for segment in segments],
        wanted=[segment.checked for segment in segments],
    )
    # The heads were taken from what the read proved; the walk confirms they are these bytes'.
    return layout if walk(payload, layout) is not None else None


def _header_end(payload: bytes, pos: int) -> int:
    """Where a HELP line and the TYPE line after it, starting at ``pos``, end; -1: they do not."""
    if not payload.startswith(b"# HELP ", pos):
        return -1
    eol = payload.find(b"\n", pos)
    end = payload.find(b"\n", eol + 1) if eol >= 0 else -1
    return end if end >= 0 and payload.startswith(b"# TYPE ", eol + 1) else -1


def _proven_heads(  # noqa: PLR0913, PLR0917 - the block's place in its payload, its family
    payload: bytes, start: int, stop: int, known: KnownHeader, fmt: Format, caches: CodecCaches
) -> list[bytes] | None:
    """A copy of the heads the read proved for ``payload[start:stop]`` (``byte_scan``)."""
    if not known.needles:
        return None
    space, newline = payload.find(b" ", start, stop), payload.find(b"\n", start, stop)
    first = payload[start : space if 0 <= space < newline else newline]
    proven = caches.proven_heads.get((fmt, known.needles, first))
    if proven is None:
        # Nothing kept (a budget of 0, or evicted): split the block as prove_block does.
        parts = payload[start:stop].replace(b"\n", b" \n").split(b" ")
        return parts[0:-1:2]
    return list(proven.heads)  # its own list: no two caches hold one mutable object
