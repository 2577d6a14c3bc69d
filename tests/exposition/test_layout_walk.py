"""A payload read by its upstream's remembered layout reads as it reads in full.

The scrape memory (``exposition.scrape_memory``) changes speed, never a result: a payload
walked by the last payload's layout gives the families and problems a read without any memory
or cache gives, whether it matches the layout or differs from it anywhere; and the compiled walk
answers as the Python walk, its specification, for real, generated and mutated payloads cut at
any offset.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import OM_FIXTURES, TEXT_FIXTURES
from helpers.strategies import expositions, mutate, render
from helpers.strength import examples
from metricbridge.errors import ExpositionError
from metricbridge.exposition import line_match
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.scrape_memory import PayloadLayout, ScrapeMemory, walk_python
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format

COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXTURES = [(path, Format.TEXT) for path in TEXT_FIXTURES] + [
    (path, Format.OPENMETRICS) for path in OM_FIXTURES
]
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


def _summary(exposition: Exposition) -> tuple[object, ...]:
    """Everything a read says, comparable (the families as both formats write them)."""
    return (
        [
            (type(f).__name__, f.name, f.meta, getattr(f, "first_line", 0))
            for f in exposition.families
        ],
        [(str(problem), problem.line) for problem in exposition.problems],
        exposition.renamed_samples,
        exposition.headers_seen,
        tuple(write_exposition(exposition.families, fmt) for fmt in Format),
    )


def _read(
    payload: bytes, fmt: Format, caches: CodecCaches | None, memory: ScrapeMemory | None
) -> object:
    try:
        return _summary(read_exposition(payload, fmt, caches=caches, memory=memory))
    except ExpositionError as exc:
        return str(exc)


def _remembered(payload: bytes, fmt: Format) -> tuple[CodecCaches, ScrapeMemory]:
    """Caches and a memory that have read ``payload`` twice: its layout is kept."""
    caches, memory = CodecCaches(), ScrapeMemory()
    for _ in range(2):
        read_exposition(payload, fmt, caches=caches, memory=memory)
    return caches, memory


def _layout(memory: ScrapeMemory, fmt: Format) -> PayloadLayout:
    layout = memory.layouts.get(fmt)
    assert layout is not None
    return layout


@pytest.mark.parametrize("fixture", TEXT_FIXTURES, ids=lambda path: path.name)
def test_a_real_payload_is_walked_by_its_layout_and_reads_as_in_full(fixture) -> None:
    payload, fmt = fixture.read_bytes(), Format.TEXT
    caches, memory = _remembered(payload, fmt)
    layout = _layout(memory, fmt)
    hits = memory.layouts.hits
    assert _read(payload, fmt, caches, memory) == _read(payload, fmt, None, None)
    assert memory.layouts.hits == hits + 1  # the walk matched: one hit, counted once
    assert sum(segment.heads is not None for segment in layout.segments) > 0


def test_a_walk_whose_header_differs_counts_a_miss() -> None:
    payload = TEXT_FIXTURES[0].read_bytes()
    caches, memory = _remembered(payload, Format.TEXT)
    misses = memory.layouts.misses
    at = payload.index(b"# HELP ", 1) + len(b"# HELP ")
    changed = payload[:at] + payload[at:].replace(b" ", b" changed ", 1)
    assert _read(changed, Format.TEXT, caches, memory) == _read(changed, Format.TEXT, None, None)
    assert memory.layouts.misses == misses + 1


def test_a_new_series_is_proven_in_the_walk_and_remembered() -> None:
    """Other label sets in one family: that block is proven afresh, the rest walked, and the
    layout kept with the new heads, so the next payload matches them without a proof."""
    payload = TEXT_FIXTURES[0].read_bytes()
    caches, memory = _remembered(payload, Format.TEXT)
    before = _layout(memory, Format.TEXT)
    changed = payload.replace(b'tp_rank="0"', b'tp_rank="9"', 1)
    hits, misses = memory.layouts.hits, memory.layouts.misses
    assert _read(changed, Format.TEXT, caches, memory) == _read(changed, Format.TEXT, None, None)
    assert (memory.layouts.hits, memory.layouts.misses) == (hits + 1, misses)
    after = _layout(memory, Format.TEXT)
    differ = [i for i, (a, b) in enumerate(zip(before.heads, after.heads, strict=True)) if a != b]
    assert len(differ) == 1
    assert after.segments[differ[0]].heads is after.heads[differ[0]]
    walked = walk_python(changed, after.headers, after.heads, after.wanted)
    assert walked is not None
    assert all(simple is not None for _, simple, _ in walked)
    # The size the memory is charged, kept up as the heads changed, is what a new count says.
    counted = PayloadLayout.of(
        after.fmt,
        after.segments,
        after.tail,
        headers=after.headers,
        heads=after.heads,
        wanted=after.wanted,
    )
    assert after.size() == counted.size()


@pytest.mark.parametrize("fixture", OM_FIXTURES, ids=lambda path: path.name)
def test_an_openmetrics_payload_reads_as_in_full_with_its_memory(fixture) -> None:
    """Most of these fixtures restore escaped sample names, so their layout is not kept."""
    payload = fixture.read_bytes()
    caches, memory = _remembered(payload, Format.OPENMETRICS)
    escaped = read_exposition(payload, Format.OPENMETRICS).renamed_samples
    assert memory.layouts.entries == (0 if escaped else 1)
    assert _read(payload, Format.OPENMETRICS, caches, memory) == _read(
        payload, Format.OPENMETRICS, None, None
    )


def test_the_memory_holds_its_own_heads_and_forgets_them_on_reset() -> None:
    payload = TEXT_FIXTURES[0].read_bytes()
    caches, memory = _remembered(payload, Format.TEXT)
    layout = _layout(memory, Format.TEXT)
    # (the caches' entries, read directly: a lookup would count a hit)
    held = {id(proven.heads) for proven, _ in caches.proven_heads._data.values()}
    held |= {id(kept.heads) for kept, _ in caches.raw_layouts._data.values()}
    assert all(id(segment.heads) not in held for segment in layout.segments if segment.heads)
    assert 0 < memory.layouts.bytes <= memory.layouts.budget
    memory.reset()
    assert memory.layouts.entries == 0
    assert memory.layouts.bytes == 0


@settings(COMMON, max_examples=examples(400, 60))
@given(data=st.data())
def test_a_mutated_real_payload_reads_as_in_full(data) -> None:
    """A byte changed, removed or cut anywhere after the layout was kept: the same result."""
    path, fmt = data.draw(st.sampled_from(FIXTURES))
    payload = path.read_bytes()
    caches, memory = _remembered(payload, fmt)
    at = data.draw(st.integers(0, len(payload) - 1))
    how = data.draw(st.sampled_from(["replace", "delete", "cut", "insert"]))
    byte = data.draw(st.sampled_from(list(b'0 9.-+eNI\n#{}",=\\x\x00\xff')))
    if how == "replace":
        changed = payload[:at] + bytes([byte]) + payload[at + 1 :]
    elif how == "delete":
        changed = payload[:at] + payload[at + 1 :]
    elif how == "insert":
        changed = payload[:at] + bytes([byte]) + payload[at:]
    else:
        changed = payload[:at]
    assert _read(changed, fmt, caches, memory) == _read(changed, fmt, None, None)
    if line_match.walk_layout is not None:
        layout = _layout(memory, fmt) if memory.layouts.entries else None
        if layout is not None:
            args = (layout.headers, layout.heads, layout.wanted)
            assert line_match.walk_layout(changed, *args) == walk_python(changed, *args)


@settings(COMMON, max_examples=examples(200, 40))
@given(data=st.data())
def test_generated_payloads_read_alike_by_the_layout_of_another(data) -> None:
    """The layout of one generated payload, then a mutation of it: read as in full."""
    fmt = data.draw(st.sampled_from(list(Format)))
    first = render(data.draw(expositions(min_size=1)), fmt)
    caches, memory = CodecCaches(), ScrapeMemory()
    for payload in (first, first, data.draw(mutate(first))):
        assert _read(payload, fmt, caches, memory) == _read(payload, fmt, None, None)


@pytest.mark.skipif(line_match.walk_layout is None, reason="the compiled walk is not built")
@settings(COMMON, max_examples=examples(300, 60))
@given(data=st.data())
def test_the_compiled_walk_answers_as_the_python_walk(data) -> None:
    path = data.draw(st.sampled_from(TEXT_FIXTURES))
    payload, fmt = path.read_bytes(), Format.TEXT
    _, memory = _remembered(payload, fmt)
    layout = _layout(memory, fmt)
    args = (layout.headers, layout.heads, layout.wanted)
    assert line_match.walk_layout is not None
    assert line_match.walk_layout(payload, *args) == walk_python(payload, *args)
    cut = data.draw(st.integers(0, len(payload)))
    at = data.draw(st.integers(0, len(payload) - 1))
    flipped = payload[:at] + bytes([payload[at] ^ 1]) + payload[at + 1 :]
    for changed in (payload[:cut], flipped, payload[:cut] + payload[cut + 1 :]):
        assert line_match.walk_layout(changed, *args) == walk_python(changed, *args)
