"""A block that gained series after the ones proven before: only the new lines are split.

``byte_scan._grown_proof`` proves such a block by matching the known lines in place and
splitting the tail. Whatever the block, the proof must be the one the full split makes: the
same heads, values, line count and verdict.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.paths import FIXTURES
from helpers.strength import examples
from metricbridge.exposition import byte_scan
from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format

pytestmark = pytest.mark.skipif(byte_scan.match_heads is None, reason="needs the compiled pass")

PAYLOAD = (FIXTURES / "tp1.prom").read_bytes()
NAME = b"sglang:per_stage_req_latency_seconds"
BLOCK = re.search(rb"# TYPE " + NAME + rb" histogram\n((?:[^#][^\n]*\n)+)", PAYLOAD)
assert BLOCK is not None
LINES = BLOCK.group(1).split(b"\n")[:-1]
NEEDLES = tuple(b"\n" + NAME + suffix + b"{" for suffix in (b"_bucket", b"_count", b"_sum"))
HEADER = b"# TYPE " + NAME + b" histogram\n"


def _proof(lines: list[bytes], caches: CodecCaches | None, *, keep: bool) -> object:
    payload = HEADER + b"\n".join(lines) + b"\n"
    proof = byte_scan.prove_block(
        payload, len(HEADER), len(payload), NEEDLES, Format.TEXT, caches, keep_values=keep
    )
    if proof is None:
        return None
    values = proof.values if keep or not proof.settled else None
    return proof.lines, proof.heads, values


def _split(lines: list[bytes], *, keep: bool) -> object:
    """The full split's proof: no heads known."""
    payload = HEADER + b"\n".join(lines) + b"\n"
    proof = byte_scan._split_proof(
        payload, len(HEADER), len(payload), NEEDLES, Format.TEXT, None, keep_values=keep
    )
    return None if proof is None else (proof.lines, proof.heads, proof.values)


@settings(deadline=None, max_examples=examples(300, 60))
@given(
    known=st.integers(1, len(LINES) - 1),
    keep=st.booleans(),
    tail=st.sampled_from(["new series", "a known line again", "another value", "cut short"]),
)
def test_a_grown_block_is_proven_as_the_full_split_proves_it(
    known: int, keep: bool, tail: str
) -> None:
    caches = CodecCaches()
    before = LINES[:known]
    assert _proof(before, caches, keep=keep) is not None  # its heads are known now
    rest = LINES[known:]
    if tail == "a known line again":
        rest = [*rest, before[-1]]  # a series twice: refused, as the split refuses it
    elif tail == "another value":
        rest = [line.rsplit(b" ", 1)[0] + b" 7" for line in rest]
    elif tail == "cut short":
        rest = [line.split(b" ")[0] for line in rest]  # heads without values
    grown = before + rest
    found = _proof(grown, caches, keep=keep)
    expected = _split(grown, keep=keep)
    if expected is None:
        assert found is None
        return
    assert found is not None
    lines, heads, values = found  # type: ignore[misc]
    assert (lines, heads) == expected[:2]  # type: ignore[index]
    if keep:
        assert values == expected[2]  # type: ignore[index]


def test_the_known_lines_are_not_split_again() -> None:
    """The proof of the grown block holds the very head objects proven before, then the new."""
    caches = CodecCaches()
    half = len(LINES) // 2
    _proof(LINES[:half], caches, keep=True)
    first = _proof(LINES[:half], caches, keep=True)
    assert first is not None
    grown = _proof(LINES, caches, keep=True)
    assert grown is not None
    heads = grown[1]  # type: ignore[index]
    assert all(a is b for a, b in zip(heads[:half], first[1], strict=False))  # type: ignore[index]
    assert len(heads) == len(LINES)
