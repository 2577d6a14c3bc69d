"""One gzip member per response from parts compressed at different times, with ISA-L.

Several gzip members in a row are one valid stream (RFC 1952 §2.2), but ``curl --compressed``
stops after the first, without a word. So the engine part, compressed once per fetch, is left
open, and each response closes it with its own few bytes and the cached self-metrics.

The deflate streams come from Intel's ISA-L (``isal``), not zlib: Prometheus asks for gzip, and
zlib's level 1 was a third of the bridge's CPU per scrape of a 10 MB engine. ISA-L's level 1
compresses the same answers 4-6x as fast to the same size (bench/bench_service.py's gzip part
and a run on its own: 10 MB in 4.6-5.0 ms against 18.0-28.9 ms, about 28:1 both). Its output
is plain deflate, which any gzip decoder reads. The members are framed here (header, raw
deflate, CRC-32 and length), so their layout does not depend on what a library chooses to put
in a header.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from isal import isal_zlib

from metricbridge.model.family import Body

# RFC 1952's header without a name, comment, extra field or time: ID1 ID2, CM 8 (deflate),
# FLG 0, MTIME 0, XFL 0, OS 3 (Unix, as zlib writes it).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
_GZIP_TRAILER = 8
_RAW_DEFLATE = -15  # wbits: a deflate stream with no zlib or gzip framing of its own
# ISA-L's levels are 0-3; the bridge compresses at 1, which is as small as 2 and 3 here.
LEVELS = range(isal_zlib.ISAL_BEST_SPEED, isal_zlib.ISAL_BEST_COMPRESSION + 1)


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


def _packer(level: int) -> isal_zlib.Compress:
    if level not in LEVELS:
        first, last = LEVELS[0], LEVELS[-1]
        raise ValueError(f"gzip level {level} is not one of ISA-L's, {first} to {last}")
    return isal_zlib.compressobj(level, isal_zlib.DEFLATED, _RAW_DEFLATE)


def open_gzip(pieces: Iterable[Body], level: int) -> OpenGzip:
    """``pieces`` compressed as the start of one gzip member, one output piece per input piece."""
    packer = _packer(level)
    out, crc, size = [GZIP_HEADER], 0, 0
    for piece in pieces:
        out.append(packer.compress(piece))
        # ISA-L's CRC-32 (carry-less multiplication) took 1.5 ms over 10 MB where zlib's took
        # 4.6: a pass of its own costs less than zlib's compressor computing it on the way.
        crc = isal_zlib.crc32(piece, crc)
        size += len(piece)
    out.append(packer.flush(isal_zlib.Z_SYNC_FLUSH))
    return OpenGzip(tuple(piece for piece in out if piece), crc, size & 0xFFFFFFFF)


def gzip_member(data: bytes, level: int) -> bytes:
    """``data`` as one complete gzip member, with the header layout ``close_gzip`` cuts off."""
    packer = _packer(level)
    deflated = packer.compress(data) + packer.flush(isal_zlib.Z_FINISH)
    trailer = struct.pack("<II", isal_zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return GZIP_HEADER + deflated + trailer


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
    crc = isal_zlib.crc32(last, isal_zlib.crc32(fresh, opened.crc))
    size = (opened.size + len(fresh) + len(last)) & 0xFFFFFFFF
    trailer = struct.pack("<II", crc, size)
    blocks = memoryview(last_member)[len(GZIP_HEADER) : -_GZIP_TRAILER]
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
