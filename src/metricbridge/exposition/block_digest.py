"""A block digested in one pass: for a block whose heads no cache can hold, the compiled proof.

``byte_scan.prove_block`` proves a block by splitting it into its lines' heads and values (two
objects per line), checking each head's skeleton and that no head repeats, and keeping the
heads so that the next scrape's block is compared with them in place. A block too big for the
heads cache (a family of 10^6 series is about 30 MB of heads) gains nothing from keeping them,
and its split costs two objects per line, several times the payload in memory at once. Its
digest says the same in one pass without them: how many lines, each line's head and value
apart (exactly one space, a newline at the end), no head twice, and only the distinct
skeletons (a head with each quoted label value cut out, as ``byte_scan.heads_proven`` makes
them) and the distinct value shapes (``model.numbers.VALUE_SHAPE``), which ``prove_block``
judges as it judges a split's.

``digest`` is the compiled pass (``_blockdigest.c``) when built, else None, and then
``prove_block`` splits as it always did. The compiled pass finds a repeated head by sorting the
heads' hashes, so it answers False, for ``prove_block`` to split the block and compare bytes,
where two heads share a hash: a series twice, nearly always, which the split refuses.
``digest_python`` is the specification the compiled pass agrees with, result for result
(False aside: then the specification refuses the block, or two heads collide in 64 bits):
``tests/exposition/test_block_digest.py`` holds them equal on real, random and mutated blocks,
and holds a digest's verdict to the split's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from metricbridge.exposition.native import compiled
from metricbridge.model.numbers import VALUE_SHAPE

# (lines, distinct skeletons, distinct value shapes), in no order.
Digest = tuple[int, list[bytes], list[bytes]]


def digest_python(payload: bytes, start: int, end: int) -> Digest | None:
    r"""The digest of ``payload[start:end]``; None: a line is not ``HEAD VALUE``, or repeats.

    A head that repeats is a series twice. A skeleton is
    ``b'"'.join((b"\\n" + head).split(b'"')[0::2])``: the newline before the line, then the
    head with each quoted run cut to its quotes; a head with an odd number of quotes refuses
    the block, as ``heads_proven`` refuses it.
    """
    if not 0 <= start < end <= len(payload):
        return None
    block = payload[start:end]
    if not block.endswith(b"\n"):
        return None
    heads: set[bytes] = set()
    skeletons: set[bytes] = set()
    shapes: set[bytes] = set()
    lines = 0
    for line in block.split(b"\n")[:-1]:
        head, space, value = line.partition(b" ")
        if not space or b" " in value or head in heads:
            return None
        heads.add(head)
        pieces = (b"\n" + head).split(b'"')
        if not len(pieces) & 1:
            return None
        skeletons.add(b'"'.join(pieces[0::2]))
        shapes.add(value.translate(VALUE_SHAPE))
        lines += 1
    return lines, list(skeletons), list(shapes)


_module = compiled("_blockdigest")
# The compiled digest; False: two heads hash alike, for the caller's split to judge.
Compiled = Callable[[bytes, int, int], "Digest | Literal[False] | None"]
digest: Compiled | None = _module.digest if _module else None
