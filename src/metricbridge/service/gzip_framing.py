"""One gzip member per response from parts compressed at different times.

Several gzip members in a row are one valid stream (RFC 1952 §2.2), but ``curl --compressed``
stops after the first, without a word. So the engine part, compressed once per fetch, is left
open, and each response closes it with its own few bytes and the cached self-metrics.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from metricbridge.model.family import Body

# zlib's gzip header (no name, comment or extra field) and the CRC-32 + length trailer.
_GZIP_HEADER = 10
_GZIP_TRAILER = 8


@dataclass(frozen=True, slots=True)
class OpenGzip:
    """A gzip member left open: its header and deflate blocks up to a sync flush, no trailer.

    A sync flush leaves the deflate stream byte-aligned with no final block, so a response can
    append blocks of its own and close the member (``close_gzip``) without compressing these
    bytes again. ``crc`` and ``size`` are the CRC-32 and length (mod 2**32) of the bytes held,
    which the trailer has to cover together with whatever follows.
    """

    pieces: tuple[bytes, ...]
    crc: int
    size: int


def open_gzip(pieces: Iterable[Body], level: int) -> OpenGzip:
    """``pieces`` compressed as the start of one gzip member, one output piece per input piece."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = [packer.compress(piece) for piece in pieces]
    out.append(packer.flush(zlib.Z_SYNC_FLUSH))
    # zlib kept the CRC and length while compressing, and Python shows them only in a trailer:
    # finishing a copy costs microseconds, a second crc32 pass a sixth of the compression.
    crc, size = struct.unpack("<II", packer.copy().flush()[-_GZIP_TRAILER:])
    return OpenGzip(tuple(piece for piece in out if piece), crc, size)


def gzip_member(data: bytes, level: int) -> bytes:
    """``data`` as one complete gzip member, with the header layout ``close_gzip`` cuts off."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def close_gzip(
    opened: OpenGzip, fresh: bytes, last: bytes, last_member: bytes
) -> tuple[bytes | memoryview, ...]:
    """One gzip member holding ``opened``'s bytes, then ``fresh``, then ``last``.

    Nothing is compressed here. ``fresh`` (a few hundred bytes) goes in as stored blocks:
    setting up a compressor for it costs more than the response's other work together, and its
    setup time swings with the heap's state. ``last`` comes as the deflate blocks of
    ``last_member`` (``gzip_member(last, ...)``, rendered once for many responses), final block
    included: blocks from a compressor of their own never refer back past their own start, so
    they decode the same after any open, byte-aligned stream. The trailer is the one thing that
    must be new, covering all three.
    """
    crc = zlib.crc32(last, zlib.crc32(fresh, opened.crc))
    size = (opened.size + len(fresh) + len(last)) & 0xFFFFFFFF
    trailer = struct.pack("<II", crc, size)
    blocks = memoryview(last_member)[_GZIP_HEADER:-_GZIP_TRAILER]
    return (*opened.pieces, _stored_blocks(fresh), blocks, trailer)


_STORED_MAX = 0xFFFF  # a stored block's LEN field is 16 bits


def _stored_blocks(data: bytes) -> bytes:
    """``data`` as deflate stored blocks, none final (RFC 1951 §3.2.4), from a byte boundary."""
    out = bytearray()
    for start in range(0, len(data), _STORED_MAX):
        chunk = data[start : start + _STORED_MAX]
        # BFINAL 0 and BTYPE 00 in the first byte's low three bits, padding in the rest (the
        # header ends on a byte boundary), then LEN and its one's complement.
        out += struct.pack("<BHH", 0, len(chunk), len(chunk) ^ 0xFFFF)
        out += chunk
    return bytes(out)
