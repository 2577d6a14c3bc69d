"""C-speed scans over exposition bytes: where comments are, and which blocks can be vouched for.

The scans are one part of the reader's fast path; what they prove, and what the other parts
must add for a block to be served unparsed, is the invariant in ``exposition.reader``.
"""

from __future__ import annotations

from metricbridge.exposition.caches import CodecCaches

_ALL_BUT_SHAPE = bytes(b for b in range(256) if b not in b'",} \n')
_ALL_BUT_SHAPE_AND_HASH = bytes(b for b in range(256) if b not in b'#",} \n')
_ALL_BUT_PLAIN = bytes(b for b in range(256) if b not in b"#} \n")
_LABELLED_LINE = b"} \n"


def vouch(payload: bytes, block: bytes, start: int, end: int, needles: tuple[bytes, ...]) -> int:
    """The block's line count if every line is a labelled sample of the family, else -1.

    ``block`` is ``payload[start:end]`` and starts a line (``start > 0``); ``needles`` are the
    family's newline + sample name + ``{`` prefixes. Deleting every byte but quotes, commas,
    '}', spaces and newlines leaves, quotes and commas aside, ``}``, space, newline per line when
    each line closes its label set once, right before its only space (so no timestamp,
    exemplar, or brace or space in a label value), and ends; ``,}`` would be a trailing comma,
    which OpenMetrics does not allow. The needle counts then prove every line starts with one
    of the family's own sample names. Why this is enough: the invariant in
    ``exposition.reader``'s docstring.
    """
    if not needles:
        return -1
    shape = block.translate(None, _ALL_BUT_SHAPE)
    plain = shape.translate(None, b'",')
    lines = len(plain) // 3
    if plain != _LABELLED_LINE * lines or b",}" in shape:
        return -1
    if count_prefixes(payload, start, end, needles) != lines:
        return -1
    return lines


def count_prefixes(payload: bytes, start: int, end: int, needles: tuple[bytes, ...]) -> int:
    """How many lines of ``payload[start:end]`` start with one of ``needles`` (see ``vouch``)."""
    count = 0
    for needle in needles:
        count += payload.count(needle, start - 1, end)
    return count


def shapes_match(
    payload: bytes, blocks: list[tuple[int, int, int]], *, caches: CodecCaches | None = None
) -> bool:
    """Whether every ``(start, end, lines)`` block passes ``vouch``'s shape test, in one pass.

    ``lines`` is the block's needle count (``count_prefixes``). One translation of the whole
    payload replaces one per block: the blocks' expected shape, with the shape of the bytes
    between them, must equal the payload's. Every region after a block starts with a comment
    line, so it starts with '#' and a block holds none (the '#' counts agree): the regions line
    up one by one, each block has exactly ``lines`` lines, all of them starting with a needle.
    A trailing comma anywhere, even in a HELP text, sends the caller to the per-block test.
    Why this is enough: the invariant in ``exposition.reader``'s docstring.

    With ``caches``, a shape proven before for the same expected shape needs no second look:
    values hold none of the shape's characters, so an engine serving the same series yields
    the same shape every scrape (``caches.proven_shapes``: about 1/8 of a payload each).
    """
    shape = shape_of(payload)
    parts: list[bytes] = []
    previous = 0
    for start, end, lines in blocks:
        parts.append(payload[previous:start].translate(None, _ALL_BUT_PLAIN))
        parts.append(_LABELLED_LINE * lines)
        previous = end
    parts.append(payload[previous:].translate(None, _ALL_BUT_PLAIN))
    expected = b"".join(parts)
    proven = caches.proven_shapes if caches is not None else None
    if proven is not None and proven.get(shape) == expected:  # a hash and a memcmp
        return True
    if b",}" in shape or shape.translate(None, b'",') != expected:
        return False
    if proven is not None:
        proven.put(shape, expected, len(shape) + len(expected))
    return True


def shape_of(payload: bytes) -> bytes:
    """The payload with every byte but ``#",} `` and newline deleted: one C pass."""
    return payload.translate(None, _ALL_BUT_SHAPE_AND_HASH)


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
