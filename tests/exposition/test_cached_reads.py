"""With caches the reader and writer give what they give without: the caches change speed only.

The reader's cached paths (a header pair seen before, a family taken in one step with its
block, a shape proven before) run only when the caller passes ``caches``; these tests run them
against the uncached read, on the reader's own tricky cases, on real fixtures and on generated
and mutated expositions.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import OM_FIXTURES, TEXT_FIXTURES
from helpers.strategies import expositions, junk, mutate, render
from helpers.strength import examples
from metricbridge.errors import ExpositionError
from metricbridge.exposition import byte_scan
from metricbridge.exposition import reader as exposition_reader
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format, RawFamily, Verify

COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


def _summary(exposition: Exposition) -> tuple[object, ...]:
    """Everything a reader result says, comparable (NaN values compare by their spelling)."""
    return (
        [(type(f).__name__, f.name, f.meta) for f in exposition.families],
        [str(problem) for problem in exposition.problems],
        exposition.renamed_samples,
        exposition.headers_seen,
        tuple(write_exposition(exposition.families, fmt) for fmt in Format),
    )


def _read(payload: bytes, fmt: Format, verify: Verify, caches: CodecCaches | None) -> object:
    try:
        return _summary(read_exposition(payload, fmt, verify, caches=caches))
    except ExpositionError as exc:
        return str(exc)


def _agree(payload: bytes, fmt: Format, verify: Verify = Verify.STRUCTURE) -> CodecCaches:
    """Reading with caches, cold and then warm, gives the uncached read's result."""
    uncached = _read(payload, fmt, verify, None)
    caches = CodecCaches()
    for _ in range(2):
        assert _read(payload, fmt, verify, caches) == uncached
    return caches


TRICKY_BLOCKS = [
    b'g{a="1"} 1\ng{a="2"} 2 1700000000000\n',
    b'g{a="1"} 1\ng{a="#"} 2\n',
    b'g{a="1",} 1\n',
    b'g{a="1"} 1\ng 2\n',
    b'g{a="1"} 1\ngx{a="2"} 2\n',
    b'g{a="1"}1\ng{a="} "} 2\n',
    b'g{a="1"} 1\ng{a="1"} 2\n',
    b'g{a="\\\\"} 1\n',
    b'g_count{a="1"} 1\n',
]


@pytest.mark.parametrize("block", TRICKY_BLOCKS)
@pytest.mark.parametrize("verify", list(Verify))
def test_tricky_blocks_read_alike_with_and_without_caches(block: bytes, verify: Verify) -> None:
    head = b"# HELP h Before.\n# TYPE h gauge\n" + b'h{b="1"} 1\n'
    payload = head + b"# HELP g G.\n# TYPE g gauge\n" + block + b'# TYPE z gauge\nz{c="1"} 3\n'
    caches = _agree(payload, Format.TEXT, verify)
    if verify is Verify.STRUCTURE:
        assert caches.read_headers.hits > 0  # the warm read took the cached header pairs


@pytest.mark.parametrize(
    "after",
    [
        b"# HELP g G.\n",
        b"# HELP g\n",
        b"# TYPE g gauge\n",
        b"# a free comment\n",
        b"# HELP gg O.\n",
    ],
)
def test_a_family_taken_in_one_step_ends_where_the_uncached_read_ends_it(after: bytes) -> None:
    payload = b'# HELP g G.\n# TYPE g gauge\ng{a="1"} 1\n' + after + b'g{a="2"} 2\n'
    caches = CodecCaches()
    single = exposition_reader._Reader(payload, Format.TEXT, Verify.STRUCTURE).run()
    for _ in range(2):
        batch = exposition_reader._Reader(payload, Format.TEXT, Verify.STRUCTURE, caches=caches)
        assert _summary(batch.run()) == _summary(single)
    assert caches.read_headers.hits > 0


@pytest.mark.parametrize("fixture", TEXT_FIXTURES, ids=lambda p: p.name)
def test_real_fixtures_are_proven_from_the_cache(
    fixture: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm read of a fixture takes every header pair and every block's heads from the cache."""
    payload = fixture.read_bytes()  # type: ignore[attr-defined]
    caches = CodecCaches()
    read_exposition(payload, Format.TEXT, caches=caches)

    def no_recheck(*_: object) -> None:
        raise AssertionError("a block's heads were checked again, not taken from the cache")

    monkeypatch.setattr(byte_scan, "heads_proven", no_recheck)
    for _ in range(2):
        exposition = read_exposition(payload, Format.TEXT, caches=caches)
        assert not exposition.problems
        assert write_exposition(exposition.families, Format.TEXT, caches=caches) == payload
    assert caches.read_headers.hits > 0
    assert caches.proven_heads.hits > 0


@pytest.mark.parametrize("fixture", TEXT_FIXTURES + OM_FIXTURES, ids=lambda p: p.name)
def test_real_fixtures_read_and_parse_alike_with_and_without_caches(fixture: object) -> None:
    payload = fixture.read_bytes()  # type: ignore[attr-defined]
    fmt = Format.OPENMETRICS if fixture.name.endswith(".om.txt") else Format.TEXT  # type: ignore[attr-defined]
    caches = _agree(payload, fmt)
    families = read_exposition(payload, fmt, caches=caches).families
    # OpenMetrics fixtures spell sample names escaped (client_python#1177): all parsed already.
    raw = [family for family in families if isinstance(family, RawFamily)]
    for family in raw:
        uncached = write_exposition([parse_family(family)], fmt)
        for _ in range(2):  # the second parse takes every line from the last one
            cached = parse_family(family, caches=caches)
            assert write_exposition([cached], fmt, caches=caches) == uncached
    assert caches.last_parse.hits == len(raw)


@settings(COMMON, max_examples=examples(150))
@given(data=st.data())
def test_generated_and_mutated_expositions_read_alike_with_and_without_caches(data):
    fmt = data.draw(st.sampled_from(list(Format)))
    payload = render(data.draw(expositions(min_size=1)), fmt)
    if data.draw(st.booleans()):
        payload = data.draw(mutate(payload))
    _agree(payload, fmt, data.draw(st.sampled_from(list(Verify))))


@settings(COMMON, max_examples=examples(100))
@given(payload=junk(), fmt=st.sampled_from(list(Format)))
def test_arbitrary_bytes_read_alike_with_and_without_caches(payload, fmt):
    _agree(payload, fmt)
