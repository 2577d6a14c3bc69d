"""A block's digest: the compiled pass equals its Python specification, and proves what the
split proves.

``byte_scan.prove_block`` digests a block whose heads no cache can hold (``block_digest``)
instead of splitting it. The digest must say what the split says, for every block: the same
verdict, the same line count, the same value shapes. Blocks come from SGLang's own output,
from random lines over the bytes that matter to the grammar, and from real blocks with bytes
broken.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.paths import FIXTURES, OM_FIXTURES, TEXT_FIXTURES
from helpers.strength import examples
from metricbridge.exposition import byte_scan
from metricbridge.exposition.block_digest import digest, digest_python
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format, MetricType, Verify
from metricbridge.model.family_names import fast_needles

COMPILED = pytest.mark.skipif(digest is None, reason="the compiled digest is not built")


def _blocks(payload: bytes) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """Each family's block of sample lines in a fixture: where it lies and its needles."""
    out = []
    for match in re.finditer(rb"# TYPE (\S+) (\S+)\n((?:[^#][^\n]*\n)+)", payload):
        name, kind = match.group(1).decode(), match.group(2).decode()
        mtype = MetricType.UNKNOWN if kind == "untyped" else MetricType(kind)
        needles = fast_needles(name, mtype, Format.TEXT) or (b"\n" + name.encode() + b"{",)
        out.append((match.start(3), match.end(3), needles))
    return out


REAL = [
    (path.read_bytes(), start, end, needles)
    for path in [*TEXT_FIXTURES, *OM_FIXTURES]
    for start, end, needles in _blocks(path.read_bytes())
]
TP1 = (FIXTURES / "tp1.prom").read_bytes()


def _normal(found: object) -> object:
    if not isinstance(found, tuple):
        return found
    lines, skeletons, shapes = found
    return lines, sorted(skeletons), sorted(shapes)


def _split_verdict(
    payload: bytes, start: int, end: int, needles: tuple[bytes, ...]
) -> tuple[int, set[bytes]] | None:
    """What the split proof (no cache, no digest) makes of the block."""
    proof = byte_scan._split_proof(
        payload, start, end, needles, Format.TEXT, None, keep_values=False
    )
    if proof is None or not byte_scan.values_proven(proof.values or [], None):
        return None
    return proof.lines, byte_scan.value_shapes(proof.values or [])


def _digest_verdict(
    payload: bytes, start: int, end: int, needles: tuple[bytes, ...]
) -> tuple[int, set[bytes]] | None:
    """What ``prove_block`` makes of the block by its digest (the specification's)."""
    proof = byte_scan._digested(digest_python(payload, start, end), needles)
    if proof is None or not byte_scan.values_proven(proof.values or [], None):
        return None
    return proof.lines, set(proof.values or [])


def _assert_agree(payload: bytes, start: int, end: int, needles: tuple[bytes, ...]) -> None:
    specified = digest_python(payload, start, end)
    if digest is not None:
        compiled = digest(payload, start, end)
        if compiled is False:  # two heads hash alike: the specification refuses the block
            assert specified is None
        else:
            assert _normal(compiled) == _normal(specified)
    assert _digest_verdict(payload, start, end, needles) == _split_verdict(
        payload, start, end, needles
    )


@pytest.mark.parametrize(("payload", "start", "end", "needles"), REAL[::7])
def test_real_blocks_digest_as_they_split(
    payload: bytes, start: int, end: int, needles: tuple[bytes, ...]
) -> None:
    _assert_agree(payload, start, end, needles)
    assert digest_python(payload, start, end) is not None


# Lines over the bytes that matter to the grammar: names, braces, quotes, commas, spaces.
LINE = st.lists(
    st.sampled_from(
        [b"x", b"x{", b'a="', b'1"', b'"', b",", b"}", b" ", b"1", b"-1", b"NaN", b"e5"]
    ),
    min_size=0,
    max_size=9,
).map(b"".join)


@settings(deadline=None, max_examples=examples(1000, 200))
@given(lines=st.lists(LINE, min_size=1, max_size=12), tail=st.booleans())
def test_random_blocks_digest_as_they_split(lines: list[bytes], tail: bool) -> None:
    block = b"\n".join(lines) + (b"\n" if tail else b"")
    payload = b"# TYPE x gauge\n" + block
    _assert_agree(payload, 15, len(payload), (b"\nx{",))


@settings(deadline=None, max_examples=examples(500, 100))
@given(data=st.data())
def test_broken_real_blocks_digest_as_they_split(data: st.DataObject) -> None:
    payload, start, end, needles = data.draw(st.sampled_from(REAL))
    broken = bytearray(payload[start:end])
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(broken) - 1))
        broken[pos] = data.draw(st.sampled_from(b' {}",=\n_a1e-'))
    body = bytes(broken)
    _assert_agree(payload[:start] + body, start, start + len(body), needles)


@COMPILED
def test_a_repeated_head_is_left_to_the_split() -> None:
    """The compiled pass sorts hashes: equal ones are answered False, the split refuses them."""
    line = b'x{a="1"} 1\n'
    payload = b"# TYPE x gauge\n" + line + b'x{a="2"} 2\n' + line
    assert digest is not None
    assert digest(payload, 15, len(payload)) is False
    assert digest_python(payload, 15, len(payload)) is None
    assert byte_scan.prove_block(payload, 15, len(payload), (b"\nx{",), Format.TEXT, None) is None


@pytest.mark.parametrize("fmt", list(Format))
def test_a_reader_that_digests_every_block_reads_as_the_full_parse(fmt: Format) -> None:
    """With no heads cache every block is digested: the families and problems are the same."""
    source = TP1 if fmt is Format.TEXT else (FIXTURES / "tp1.om.txt").read_bytes()
    digested = read_exposition(
        source, fmt, Verify.STRUCTURE, caches=CodecCaches({"proven_heads": 0})
    )
    full = read_exposition(source, fmt, Verify.FULL)
    assert [f.name for f in digested.families] == [f.name for f in full.families]
    assert not digested.problems
    assert not full.problems
