"""The compiled line pass agrees with the Python path it stands in for, byte for byte.

``line_match.match_heads`` (C) may answer only where ``byte_scan.prove_block``'s Python split
would accept a block with the heads proven before, and must then give the same values; its
value check must be ``SIMPLE_VALUE`` exactly, and every simple value must be one the value
proof accepts and no counter rule refuses. The reader on top must give the same result, in
both formats, with the pass and without it, over real fixtures and successive scrapes. (The
whole suite runs a second time without the extension, with ``METRICBRIDGE_PURE_PYTHON`` set.)
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import OM_FIXTURES, TEXT_FIXTURES
from helpers.strategies import expositions, mutate, render
from helpers.strength import examples
from metricbridge.errors import ExpositionError
from metricbridge.exposition import block_digest, byte_scan, line_match
from metricbridge.exposition.byte_scan import any_signed
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format
from metricbridge.model.numbers import VALUE_SHAPE, canonical_shape
from metricbridge.simulator.engine import SimulatedEngine

COMMON = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples(300)
)
compiled = pytest.mark.skipif(not line_match.COMPILED, reason="the C line pass is not in use")

Matched = tuple[bool, list[bytes] | None] | None


def reference(block: bytes, heads: list[bytes], want_values: bool) -> Matched:
    """The Python path's answer for a block and the heads proven for it: the specification.

    None where that path gives up, or where it would keep the block only for the value proof
    to refuse it.
    """
    parts = block.replace(b"\n", b" \n").split(b" ")
    if not heads or len(parts) != 2 * len(heads) + 1 or parts[-1] != b"\n":
        return None
    if parts[0:-1:2] != heads:
        return None
    values = parts[1::2]
    if any(b"\n" in value for value in values):
        # A line without a space gives the next line to its "value": never a number, so the
        # value proof refuses the block, and the compiled pass may refuse it at once.
        return None
    simple = all(line_match.SIMPLE_VALUE.fullmatch(value) for value in values)
    return simple, values if want_values or not simple else None


def test_the_compiled_pass_is_built_where_it_is_required() -> None:
    """CI builds the extension; a build that silently fell back to Python must fail there."""
    if not os.environ.get("METRICBRIDGE_REQUIRE_COMPILED"):
        pytest.skip("METRICBRIDGE_REQUIRE_COMPILED is not set")
    assert line_match.COMPILED
    assert block_digest.digest is not None


def test_the_pure_python_switch_turns_the_pass_off() -> None:
    if os.environ.get("METRICBRIDGE_PURE_PYTHON"):
        assert not line_match.COMPILED
        assert byte_scan.match_heads is None
        assert byte_scan.digest is None
    else:
        assert byte_scan.match_heads is line_match.match_heads
        assert byte_scan.digest is block_digest.digest


_HEAD_BYTES = st.binary(min_size=1, max_size=12).filter(lambda b: b" " not in b and b"\n" not in b)
_VALUES = st.one_of(
    st.from_regex(line_match.SIMPLE_VALUE, fullmatch=True),
    st.sampled_from([b"", b"NaN", b"+Inf", b"-1", b"1e999", b"1 2", b"0x1p3", b"1_0", b"\xd9\xa3"]),
    st.binary(max_size=6).filter(lambda b: b"\n" not in b),
)


@st.composite
def blocks(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """Proven-like heads and a block made of them, often damaged afterwards."""
    heads = draw(st.lists(_HEAD_BYTES, min_size=1, max_size=6))
    heads = [heads[0]] + [b"\n" + head for head in heads[1:]]
    values = draw(st.lists(_VALUES, min_size=len(heads), max_size=len(heads)))
    block = b"".join(head + b" " + value for head, value in zip(heads, values, strict=True))
    block += b"\n"
    if draw(st.booleans()):
        at = draw(st.integers(0, len(block)))
        cut = draw(st.integers(0, 3))
        block = (
            block[:at] + draw(st.sampled_from([b"", b" ", b"\n", b"x", b"  "])) + block[at + cut :]
        )
    if draw(st.integers(0, 4)) == 0:
        heads = draw(st.permutations(heads)) if len(heads) > 1 else heads[:0]
    return block, heads


_AROUND = st.binary(max_size=8)


@compiled
@COMMON
@given(case=blocks(), want_values=st.booleans(), before=_AROUND, after=_AROUND)
def test_the_compiled_match_is_the_python_split(
    case: tuple[bytes, list[bytes]], want_values: bool, before: bytes, after: bytes
) -> None:
    """The block is read in place, whatever the payload holds around it."""
    block, heads = case
    payload, start = before + block + after, len(before)
    assert line_match.match_heads is not None
    matched = line_match.match_heads(payload, start, start + len(block), heads, want_values)
    assert matched == reference(block, heads, want_values)


@compiled
@pytest.mark.parametrize(("start", "end"), [(-1, 3), (2, 1), (0, 9), (9, 9)])
def test_the_compiled_match_refuses_a_block_outside_its_payload(start: int, end: int) -> None:
    assert line_match.match_heads is not None
    with pytest.raises(ValueError, match="not inside the payload"):
        line_match.match_heads(b"g 1\ng 2\n", start, end, [b"g", b"\ng"], False)  # noqa: FBT003


@compiled
@COMMON
@given(value=_VALUES)
def test_the_compiled_value_check_is_simple_value(value: bytes) -> None:
    assert line_match.is_simple_value is not None
    expected = line_match.SIMPLE_VALUE.fullmatch(value) is not None
    assert line_match.is_simple_value(value) is expected


@COMMON
@given(value=_VALUES)
def test_a_simple_value_is_proven_finite_and_unsigned(value: bytes) -> None:
    """What the pass settles, the value proof accepts, and no counter rule can refuse."""
    if line_match.SIMPLE_VALUE.fullmatch(value) is None:
        return
    shape = value.translate(VALUE_SHAPE)
    assert canonical_shape(shape)
    assert not any_signed([shape])
    number = float(value)
    assert math.isfinite(number)
    assert number >= 0


@pytest.mark.parametrize(
    "value",
    [b"0", b"1", b"17.5", b"1.", b".5", b"1e+06", b"1E-300", b"9" * 199, b"1e99"],
)
def test_simple_values_cover_what_engines_write(value: bytes) -> None:
    assert line_match.SIMPLE_VALUE.fullmatch(value)


@pytest.mark.parametrize(
    "value", [b"", b".", b"-0", b"+1", b"NaN", b"+Inf", b"1e999", b"1e", b"9" * 200, b"0x10"]
)
def test_other_values_are_left_to_the_value_proof(value: bytes) -> None:
    assert line_match.SIMPLE_VALUE.fullmatch(value) is None


def _summary(exposition: Exposition) -> tuple[object, ...]:
    return (
        [(type(f).__name__, f.name, f.meta) for f in exposition.families],
        [str(problem) for problem in exposition.problems],
        tuple(write_exposition(exposition.families, fmt) for fmt in Format),
    )


def _scrapes() -> list[tuple[bytes, Format]]:
    """Fixtures in turn, then successive scrapes of an engine whose series and values move."""
    out = [(path.read_bytes(), Format.TEXT) for path in TEXT_FIXTURES]
    out += [(path.read_bytes(), Format.OPENMETRICS) for path in OM_FIXTURES]
    engine = SimulatedEngine(dp_size=2, tp_size=2, seed=3)
    for step in range(8):
        engine.advance(7.0, arrivals_per_second=30.0 if step % 3 else 0.0)
        out.append((engine.render(), Format.TEXT))
    return out * 2


@compiled
def test_the_reader_gives_the_same_result_with_and_without_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scrapes = _scrapes()
    with_pass, calls = CodecCaches(), []
    matcher = line_match.match_heads
    assert matcher is not None

    def counted(payload: bytes, start: int, end: int, heads: list[bytes], want: bool) -> Matched:
        answer = matcher(payload, start, end, heads, want)
        calls.append(answer is not None)
        return answer

    monkeypatch.setattr(byte_scan, "match_heads", counted)
    compiled_results = [_summary(read_exposition(p, f, caches=with_pass)) for p, f in scrapes]
    monkeypatch.setattr(byte_scan, "match_heads", None)
    without = CodecCaches()
    python_results = [_summary(read_exposition(p, f, caches=without)) for p, f in scrapes]
    assert compiled_results == python_results
    assert sum(calls) > len(scrapes) * 10  # the pass took most blocks of the warm reads


_DECIMALS = st.from_regex(rb"[0-9]{1,17}(\.[0-9]{0,17})?|\.[0-9]{1,17}", fullmatch=True)


@compiled
@COMMON
@given(a=_DECIMALS, b=_DECIMALS)
def test_the_compiled_values_are_the_numbers_float_reads(a: bytes, b: bytes) -> None:
    """The C conversion (a fast path for short decimals, strtod otherwise) rounds as float()."""
    agree = line_match.values_agree
    assert agree is not None
    histogram, summary = False, True
    nearest = repr(float(a)).encode()  # another spelling of the same double
    assert agree([a, nearest], [], [], [], [0], [1], histogram) is True
    assert agree([a, b], [], [0], [1], [], [], histogram) is (float(a) <= float(b))
    assert agree([a, b], [], [], [], [0], [1], histogram) is (float(a) == float(b))
    assert agree([a], [0], [], [], [], [], summary) is float(a).is_integer()


def _read_all(payloads: list[bytes], fmt: Format) -> list[object]:
    """Each payload read in turn with one set of caches, as successive scrapes of one engine."""
    caches, out = CodecCaches(), []
    for payload in payloads:
        try:
            out.append(_summary(read_exposition(payload, fmt, caches=caches)))
        except ExpositionError as exc:
            out.append(str(exc))
    return out


@compiled
@settings(COMMON, max_examples=examples(150))
@given(data=st.data())
def test_mutated_scrapes_read_alike_with_and_without_the_pass(data: st.DataObject) -> None:
    """A payload, then mutations of it: the pass meets heads proven on the scrape before."""
    fmt = data.draw(st.sampled_from(list(Format)))
    first = render(data.draw(expositions(min_size=1)), fmt)
    mutations = [data.draw(mutate(first)) for _ in range(data.draw(st.integers(1, 3)))]
    payloads = [first, first, *mutations]
    compiled_reads = _read_all(payloads, fmt)
    matcher = byte_scan.match_heads
    byte_scan.match_heads = None
    try:
        python_reads = _read_all(payloads, fmt)
    finally:
        byte_scan.match_heads = matcher
    assert compiled_reads == python_reads
