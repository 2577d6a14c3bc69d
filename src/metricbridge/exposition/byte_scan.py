"""C-speed proofs over exposition bytes: where comments are, which blocks can be served unparsed.

The proofs are one part of the reader's fast path; what they prove, and what the other parts
must add for a block to be served unparsed, is the invariant in ``exposition.reader``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from metricbridge.exposition.block_digest import Digest, digest
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.line_match import match_heads
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format
from metricbridge.model.numbers import VALUE_SHAPE, canonical_shape

_LABEL_NAME = re.compile(rb"[a-zA-Z_][a-zA-Z0-9_]*")
# Per head held by ``proven_heads``, beyond its len(): the bytes object and its list slot; and
# per skeleton, its tuple, pieces and the two dict slots that hold it.
HEAD_OVERHEAD = 48
# The first bytes of the proven values a counter, histogram or summary may not have.
_SIGNED = frozenset(b"+-NI")
SKELETON_OVERHEAD = 400

Skeleton = tuple[bytes, ...]
Series = tuple[bytes, frozenset[bytes]]


@dataclass(slots=True)
class ProvenHeads:
    """A block's heads as proven, and the skeletons (``heads_proven``) they were proven with."""

    heads: list[bytes]
    skeletons: dict[Skeleton, Series]  # each valid skeleton -> its name and label names

    def size(self) -> int:
        """The len() of what it holds, with overheads, for the cache's estimate."""
        pieces = sum(len(piece) for skeleton in self.skeletons for piece in skeleton)
        heads = sum(map(len, self.heads)) + HEAD_OVERHEAD * len(self.heads)
        return heads + pieces + SKELETON_OVERHEAD * len(self.skeletons)


@dataclass(frozen=True, slots=True)
class BlockProof:
    """What ``prove_block`` found a block to be: its lines, its heads and its values."""

    lines: int
    # The proven heads (the list ``proven_heads`` holds, when it holds them); None for a block
    # proven by its digest (``block_digest``), whose heads no one keeps.
    heads: list[bytes] | None
    # None only when ``settled`` and not asked for; a digested block's distinct value shapes,
    # which every judge of values (``values_proven``, ``any_signed``) reads as it reads values.
    values: list[bytes] | None
    # Every value is proven already (``line_match.SIMPLE_VALUE``: canonical, unsigned), so
    # the caller need not prove them, nor search them for negative, NaN or infinite counts.
    settled: bool


def prove_block(  # noqa: PLR0913, PLR0917 - the block's place in its payload, what judges it
    payload: bytes,
    start: int,
    end: int,
    needles: tuple[bytes, ...],
    fmt: Format,
    caches: CodecCaches | None,
    *,
    keep_values: bool = False,
) -> BlockProof | None:
    """The block's heads and values if it can be served as it is, else None (the exact path).

    The block, ``payload[start:end]``, starts a line and ends with a newline; ``needles`` are
    the family's newline + sample name + ``{`` prefixes (``family_names.fast_needles``). The
    heads are proven here; the values, unless ``settled``, are left to the caller to prove in
    bulk (``values_proven``) with every other block's: one set of C calls per payload, not per
    block. ``keep_values``: the values are wanted even when settled (``raw_rules`` checks a
    histogram's).

    Heads equal to those proven for this block before (``caches.proven_heads``) are proven:
    compared in one compiled pass when ``line_match`` is built, else in Python. Putting a space
    before every newline and splitting at spaces gives each line's head (its name and label
    set, the newline before it included) and its value, alternately, in two C calls: exactly
    so when every line is ``HEAD VALUE``, and with some piece out of place otherwise. New heads
    are proven now (``heads_proven``), only the new ones one by one when some are known. Why
    this is enough: the invariant in ``exposition.reader``'s docstring.
    """
    prefixes = tuple(needle[1:] for needle in needles)
    if not needles or not payload.startswith(prefixes, start, end):
        return None  # not even the first line is one of the family's labelled samples
    cache = caches.proven_heads if caches is not None else None
    if digest is not None and not keep_values and (cache is None or end - start > cache.budget):
        # No cache would hold its heads: proven in one pass, without them (``block_digest``),
        # unless two heads hash alike, which their bytes decide.
        found = digest(payload, start, end)
        if found is not False:
            return _digested(found, needles)
    return _split_proof(payload, start, end, needles, fmt, cache, keep_values=keep_values)


def _split_proof(  # noqa: PLR0913, PLR0917 - prove_block's arguments, handed on
    payload: bytes,
    start: int,
    end: int,
    needles: tuple[bytes, ...],
    fmt: Format,
    cache: ByteLRU[tuple[Format, tuple[bytes, ...], bytes], Any] | None,
    *,
    keep_values: bool,
) -> BlockProof | None:
    """``prove_block`` by the block's heads: matched in place with those proven before, or split."""
    known = None
    if cache is not None:
        # The first head as the split below makes it: up to the first space or newline.
        space, newline = payload.find(b" ", start, end), payload.find(b"\n", start, end)
        key = (fmt, needles, payload[start : space if 0 <= space < newline else newline])
        known = cache.get(key)
        if known is not None and match_heads is not None:
            # Read in place: the block is copied out only for the Python split below.
            matched = match_heads(payload, start, end, known.heads, keep_values)
            if matched is not None:
                settled, values = matched
                return BlockProof(len(known.heads), known.heads, values, settled)
            grown = _grown_proof(payload, start, end, needles, fmt, cache, known, keep_values)
            if grown is not None:
                return grown
    block = payload[start:end]
    parts = block.replace(b"\n", b" \n").split(b" ")
    lines = len(parts) // 2
    if lines == 0 or len(parts) != 2 * lines + 1 or parts[-1] != b"\n":
        return None
    heads = parts[0:-1:2]
    if known is None or known.heads != heads:
        proven = heads_proven(heads, needles, known)
        if proven is None and known is not None:
            # A skeleton only the old heads had may have clashed: judge as if seen first.
            proven = heads_proven(heads, needles)
        if proven is None:
            return None
        if cache is not None:
            cache.put((fmt, needles, heads[0]), proven, proven.size())
    else:
        # The equal list the cache holds: a layout kept of these heads (raw_rules) then shares
        # its bytes instead of holding a second copy of every head.
        heads = known.heads
    return BlockProof(lines, heads, parts[1::2], settled=False)


def _grown_proof(  # noqa: PLR0913, PLR0917 - the block, what judges it and what it was before
    payload: bytes,
    start: int,
    end: int,
    needles: tuple[bytes, ...],
    fmt: Format,
    cache: ByteLRU[tuple[Format, tuple[bytes, ...], bytes], Any],
    known: ProvenHeads,
    keep_values: bool,
) -> BlockProof | None:
    """The block as ``known``'s lines then new ones, with only the new ones split; None: not so.

    prometheus_client appends a new series after the others, so a block whose heads changed is
    nearly always the heads proven before and a tail: a histogram of 16,000 lines that gained a
    series was split whole to prove one series' lines. The known lines end at the line of the
    last known head (heads are unique, and a head with the newline before it can only be found
    at a line's start); they are matched in place, the tail split and proven with them as the
    full split would prove it. None sends the block to the full split, which decides.
    """
    assert match_heads is not None  # noqa: S101 - the caller checked
    heads = known.heads
    last = heads[-1]
    if len(heads) == 1:  # the first head has no newline before it
        at = start if payload.startswith(last + b" ", start, end) else -1
    else:
        at = payload.find(last + b" ", start, end)
    newline = payload.find(b"\n", at + len(last), end) if at >= 0 else -1
    if newline < 0 or newline + 1 >= end:
        return None
    matched = match_heads(payload, start, newline + 1, heads, keep_values)
    if matched is None:
        return None
    tail = payload[newline + 1 : end].replace(b"\n", b" \n").split(b" ")
    lines = len(tail) // 2
    if lines == 0 or len(tail) != 2 * lines + 1 or tail[-1] != b"\n":
        return None
    fresh = tail[0:-1:2]
    fresh[0] = b"\n" + fresh[0]  # as the full split makes every head after the first
    grown = heads + fresh
    proven = heads_proven(grown, needles, known)
    if proven is None:
        return None
    cache.put((fmt, needles, grown[0]), proven, proven.size())
    _, values = matched
    # The known lines' values are kept if wanted or not all simple; a simple one needs no proof.
    tail_values = tail[1::2]
    every = tail_values if values is None else values + tail_values
    return BlockProof(len(grown), grown, every, settled=False)


def _digested(found: Digest | None, needles: tuple[bytes, ...]) -> BlockProof | None:
    """``prove_block``'s verdict from the block's digest: its skeletons judged as the split's."""
    if found is None:
        return None
    lines, skeletons, shapes = found
    series: dict[Series, Skeleton] = {}
    for text in skeletons:
        skeleton = tuple(text.split(b'"'))
        named = _skeleton_series(skeleton, needles)
        # The same label names in another order name the same series: the exact path judges.
        if named is None or series.setdefault(named, skeleton) != skeleton:
            return None
    return BlockProof(lines, None, shapes, settled=False)


def values_proven(values: Iterable[bytes], caches: CodecCaches | None) -> bool:
    """Whether every value is a number both wire formats and every reader accept as written.

    The distinct spellings (a twelfth of an engine's values at 1 MB, a twentieth at 10 MB),
    each translated to its shape (``value_shapes``), give the distinct shapes: a few dozen,
    each judged once (``canonical_shape``) and remembered (``caches.proven_values``). Joining
    every value, translating and splitting the whole took three times as long.
    """
    cache = caches.proven_values if caches is not None else None
    for shape in value_shapes(values):
        if cache is not None and cache.get(shape) is not None:
            continue
        if not canonical_shape(shape):
            return False
        if cache is not None:
            cache.put(shape, True, len(shape))  # noqa: FBT003 - the value: "proven"
    return True


def value_shapes(values: Iterable[bytes]) -> set[bytes]:
    """The distinct shapes (``model.numbers.VALUE_SHAPE``) of these values."""
    return {value.translate(VALUE_SHAPE) for value in set(values)}


def any_signed(shapes: Iterable[bytes]) -> bool:
    """Whether a proven value of these shapes may be negative, NaN or infinite.

    A proven value is one of those exactly when it starts with a sign, ``N`` or ``I``
    (``model.numbers``' canonical shapes): what ``semantics.screen_raw`` searches bodies for.
    """
    return any(not shape or shape[0] in _SIGNED for shape in shapes)


def heads_proven(
    heads: list[bytes], needles: tuple[bytes, ...], before: ProvenHeads | None = None
) -> ProvenHeads | None:
    """The heads as proven if they are labelled samples of the family, each series once.

    ``heads[0]`` is the first line's head; every other starts with the newline before it, and
    none holds a space or another newline (the split in ``prove_block`` made them so). Split at
    its quotes, a head alternates between its skeleton (name, ``{``, label names with ``=``,
    commas, ``}``) and its label values; values hold no quote, and no backslash or NUL in a
    payload the fast path reads. Heads of one sample name nearly always share one skeleton, so
    each distinct skeleton is checked once (``_skeleton_series``). A series repeats exactly when
    two heads are equal bytes, or when two skeletons order the same label names differently
    (then the exact path decides). ``before``, the same block's heads proven earlier (same
    first head), spares the heads it holds: only new ones are split.
    """
    if heads[0][:1] == b"\n":
        return None
    first = b"\n" + heads[0]
    rest = heads[1:]
    distinct = set(rest)
    if len(distinct) != len(rest) or first in distinct:
        return None
    if before is None:
        skeletons: dict[Skeleton, Series] = {}
        fresh: set[bytes] | list[bytes] = [first, *rest]
    else:
        skeletons = dict(before.skeletons)
        known = len(before.heads)
        # prometheus_client appends a new series after the others: then only the tail is new.
        grown = len(heads) > known and heads[:known] == before.heads
        fresh = heads[known:] if grown else distinct.difference(before.heads)
    series = {named: skeleton for skeleton, named in skeletons.items()}
    for head in fresh:
        pieces = head.split(b'"')
        if not len(pieces) & 1:  # an odd number of quotes: one is not a value's
            return None
        skeleton = tuple(pieces[0::2])
        if skeleton in skeletons:
            continue
        named = _skeleton_series(skeleton, needles)
        # The same label names in another order name the same series: the exact path judges.
        if named is None or series.setdefault(named, skeleton) != skeleton:
            return None
        skeletons[skeleton] = named
    return ProvenHeads(heads, skeletons)


def _skeleton_series(skeleton: Skeleton, needles: tuple[bytes, ...]) -> Series | None:
    r"""``(b"\nNAME{a=", b",b=", b"}")`` -> (NAME, {a, b}): a needle, then labels named once."""
    if len(skeleton) < 2:  # a head without quotes: no labels, or none quoted
        return None
    opening, *middle, closing = skeleton
    if closing != b"}" or not opening.startswith(needles) or not opening.endswith(b"="):
        return None
    brace = opening.index(b"{")
    names = [opening[brace + 1 : -1]]
    for piece in middle:
        if piece[:1] != b"," or piece[-1:] != b"=":
            return None
        names.append(piece[1:-1])
    if not all(_LABEL_NAME.fullmatch(name) for name in names) or len(set(names)) != len(names):
        return None
    if b"__name__" in names:  # the exact path refuses it (``sample_line._read_labels``)
        return None
    return opening[1:brace], frozenset(names)


def needs_exact_parser(block: bytes) -> bool:
    """A block with escapes, NUL bytes or invalid UTF-8 is parsed line by line."""
    return b"\\" in block or b"\x00" in block or not is_utf8(block)


def is_utf8(payload: bytes) -> bool:
    """Whether the bytes decode as UTF-8 (one pass in C)."""
    if payload.isascii():  # reads a word at a time: several times faster than decoding
        return True
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def next_comment(payload: bytes, pos: int, size: int) -> int:
    """Offset of the next line that starts with '#', or ``size``."""
    # A one-byte search runs at memchr speed, unlike a search for b"\n#" whose first byte recurs
    # on every line; a '#' inside a label value just sends us on to the next one.
    while True:
        hit = payload.find(b"#", pos, size)
        if hit < 0:
            return size
        if payload[hit - 1] == 0x0A:
            return hit
        pos = hit + 1
