"""The exposition reader: precise errors on bad input, exact round trips on good input."""

from __future__ import annotations

import io
import re

import pytest
from prometheus_client.openmetrics.parser import (
    text_fd_to_metric_families as om_fd_to_metric_families,
)
from prometheus_client.parser import text_fd_to_metric_families

from helpers.paths import FIXTURES
from metricbridge.errors import ExpositionError
from metricbridge.exposition import byte_scan
from metricbridge.exposition import reader as exposition_reader
from metricbridge.exposition.byte_scan import prove_block, values_proven
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition, write_pieces
from metricbridge.model.family import Family, Format, MetricType, RawFamily, Verify

GOOD_HEAD = b"# HELP g A gauge.\n# TYPE g gauge\n"

# Payloads no part of which can be trusted: the whole read fails with this message.
FATAL = [
    pytest.param(b"", Format.TEXT, "empty exposition (0 bytes)", id="zero_bytes"),
    pytest.param(
        GOOD_HEAD + b"g 1\r\ng 2\r\n",
        Format.TEXT,
        "line 3: CRLF line ending; exposition lines end with \\n only",
        id="crlf",
    ),
    pytest.param(
        b"# TYPE g gauge\ng 1\n",
        Format.OPENMETRICS,
        "OpenMetrics exposition has no '# EOF' line (truncated body?)",
        id="openmetrics_without_eof",
    ),
]

# Payloads where one family is bad: it is dropped with this problem, the rest is kept.
PER_FAMILY = [
    pytest.param(
        b'# TYPE g gauge\ng{a="x" b} 1\n',
        "line 2, family g: expected '=' after label name 'b' at column 10",
        id="missing_equals",
    ),
    pytest.param(
        b"# HELP g one\n# HELP g two\n# TYPE g gauge\ng 1\n",
        "line 2, family g: duplicate HELP line",
        id="duplicate_help",
    ),
    pytest.param(
        b"# TYPE g gauge\n# TYPE g counter\ng 1\n",
        "line 2, family g: duplicate TYPE line",
        id="duplicate_type",
    ),
    pytest.param(
        b'# TYPE g gauge\ng{a="1"} one\n',
        "line 2, family g: invalid value 'one'",
        id="non_numeric_value",
    ),
    pytest.param(
        b'# TYPE g gauge\ng{a="b" 1\n',
        "line 2, family g: expected a label name at column 9",
        id="unclosed_label_set",
    ),
    pytest.param(
        b"# TYPE g gauge\ng\n",
        "line 2, family g: expected a space before the value at column 2",
        id="missing_value",
    ),
    pytest.param(
        b"# TYPE g gauge\ng 1 2 3\n",
        "line 2, family g: unexpected text after the value: '3'",
        id="extra_tokens",
    ),
    pytest.param(
        b"# TYPE g gauge\ng 1 1.5\n",
        "line 2, family g: invalid timestamp '1.5': the text format wants milliseconds in digits",
        id="fractional_text_timestamp",
    ),
    pytest.param(
        b"# TYPE g gaug\ng 1\n", "line 1, family g: unknown metric type 'gaug'", id="unknown_type"
    ),
    pytest.param(
        b"g 1\n# TYPE g gauge\n",
        "line 2, family g: TYPE line after the family's samples",
        id="type_after_samples",
    ),
    pytest.param(
        b'# TYPE g gauge\ng{a="\xff"} 1\n',
        "line 2, family g: invalid UTF-8 (invalid start byte)",
        id="invalid_utf8",
    ),
    pytest.param(
        b"# TYPE g gauge\ng 1\x00\n", "line 2, family g: invalid value '1\\x00'", id="nul_byte"
    ),
]


@pytest.mark.parametrize(("payload", "fmt", "message"), FATAL)
def test_unusable_payload_raises_precise_error(payload: bytes, fmt: Format, message: str) -> None:
    """A payload that cannot be trusted at all raises ExpositionError with the line and cause."""
    with pytest.raises(ExpositionError) as caught:
        read_exposition(payload, fmt)
    assert str(caught.value) == message


# Faults inside a sample line that the fast path does not look for (see exposition_reader's
# docstring); with validation: structure these lines are served as the upstream wrote them.
@pytest.mark.parametrize(
    ("bad", "message", "verify"),
    [
        pytest.param(*case.values, verify, id=f"{case.id}-{verify}")
        for case in PER_FAMILY
        for verify in Verify
    ],
)
def test_bad_family_is_dropped_and_the_rest_kept(bad: bytes, message: str, verify: Verify) -> None:
    """One malformed family becomes a located problem; the families around it survive."""
    before = b"# TYPE before gauge\nbefore 1\n"
    after = b"# TYPE after gauge\nafter 2\n"
    exposition = read_exposition(before + bad + after, Format.TEXT, verify)
    assert [f.name for f in exposition.families] == ["before", "after"]
    assert [str(p) for p in exposition.problems] == [_shift(message, 2)]


def _shift(message: str, lines: int) -> str:
    head, rest = message.split(",", 1) if "," in message else (message, "")
    number = int(head.removeprefix("line "))
    return f"line {number + lines},{rest}"


def test_repeated_family_is_read_as_one() -> None:
    """A family whose lines are not contiguous is one family, served where it first was."""
    payload = b'# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\na{x="1"} 2\n'
    exposition = read_exposition(payload, Format.TEXT)
    assert [f.name for f in exposition.families] == ["a", "b"]
    assert exposition.problems == []
    assert write_exposition(exposition.families[:1], Format.TEXT) == (
        b'# TYPE a gauge\na 1\na{x="1"} 2\n'
    )


SAMPLE_NAME_CLASHES = [
    pytest.param(
        b'# TYPE a_info gauge\na_info 1\n# TYPE a info\na_info{x="1"} 1\n# EOF\n',
        Format.OPENMETRICS,
        "line 3, family a: a_info already taken by the family at line 1",
        id="info-beside-a-gauge-named-like-its-sample",
    ),
    pytest.param(
        b"# TYPE a_created gauge\na_created 1\n# TYPE a counter\na_total 1\na_created 5\n# EOF\n",
        Format.OPENMETRICS,
        "line 3, family a: a_created already taken by the family at line 1",
        id="openmetrics-counter-beside-a-created-gauge",
    ),
    pytest.param(
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1\na_sum 1\na_count 1\n'
        b"# TYPE a_count gauge\na_count 3\n",
        Format.TEXT,
        "line 5, family a_count: a_count already taken by the family at line 1",
        id="gauge-named-like-a-histogram-sample",
    ),
    pytest.param(
        b'# TYPE a_bucket gauge\na_bucket{x="1"} 3\n# TYPE a histogram\na_bucket{le="+Inf"} 1\n',
        Format.TEXT,
        "line 3, family a: a_bucket already taken by the family at line 1",
        id="histogram-after-a-gauge-named-like-its-buckets",
    ),
]


@pytest.mark.parametrize(("payload", "fmt", "message"), SAMPLE_NAME_CLASHES)
@pytest.mark.parametrize("verify", list(Verify))
def test_a_family_whose_sample_names_another_family_takes_is_dropped(
    payload: bytes, fmt: Format, message: str, verify: Verify
) -> None:
    """Two families may not share a sample name: promtool and prometheus_client refuse it."""
    exposition = read_exposition(payload, fmt, verify)
    assert len(exposition.families) == 1
    assert [str(p) for p in exposition.problems] == [
        f"{message} (a family's name and sample names must be its own); this one is dropped"
    ]
    for out in Format:
        text = write_exposition(exposition.families, out).decode()
        parse = text_fd_to_metric_families if out is Format.TEXT else om_fd_to_metric_families
        assert len(list(parse(io.StringIO(text)))) == 1


@pytest.mark.parametrize("split_by_comment", [False, True])
def test_repeated_series_is_dropped_and_located(split_by_comment: bool) -> None:
    """A repeat in a parsed family names both lines and the series as written on the wire.

    The unlabelled line sends the family to the exact parser. After a free comment the lines
    before it were first kept as a vouched view and are parsed only then: their line numbers
    must survive that path too.
    """
    comment = b"# a comment\n" if split_by_comment else b""
    payload = b'# TYPE a gauge\na{x="1"} 1\na{y="2"} 1\n' + comment + b'a 7\na{x="1"} 2\n'
    exposition = read_exposition(payload, Format.TEXT, Verify.STRUCTURE)
    line = 6 if split_by_comment else 5
    message = f'line {line}, family a: series a{{x="1"}} repeats the one at line 2; the repeat'
    assert [str(p) for p in exposition.problems] == [f"{message} is dropped"]
    (family,) = exposition.families
    assert isinstance(family, Family)
    assert [s.value for s in family.samples] == [1.0, 1.0, 7.0]


def test_a_repeated_series_is_shown_as_written() -> None:
    """The message quotes the line's labels as the wire has them (escaped, in their order), so
    the series can be grepped for."""
    payload = b'# TYPE a gauge\na{y="q\\"z",b="1"} 1\na{y="q\\"z",b="1"} 3\n'
    exposition = read_exposition(payload, Format.TEXT, Verify.FULL)
    series = 'a{y="q\\"z",b="1"}'
    assert [str(p) for p in exposition.problems] == [
        f"line 3, family a: series {series} repeats the one at line 2; the repeat is dropped"
    ]


def test_fast_path_vouches_only_for_the_familys_own_lines() -> None:
    """A block with a foreign, header-less sample falls back to the line parser and splits off."""
    payload = b"# TYPE a gauge\na 1\nab 2\n"
    exposition = read_exposition(payload, Format.TEXT)
    assert [(f.name, f.meta.type) for f in exposition.families] == [
        ("a", MetricType.GAUGE),
        ("ab", MetricType.UNKNOWN),
    ]


def test_spaces_in_label_values_take_the_exact_path() -> None:
    """A line with more than one space cannot be vouched for by counting, so it is parsed."""
    payload = b'# TYPE a gauge\na{x="1 2"} 3\n'
    (family,) = read_exposition(payload, Format.TEXT).families
    assert isinstance(family, Family)
    assert family.samples[0].labels == (("x", "1 2"),)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.name)
def test_real_text_fixtures_take_the_fast_path_and_round_trip(fixture: object) -> None:
    """SGLang's own output is vouched for family by family and written back byte for byte."""
    payload = fixture.read_bytes()  # type: ignore[attr-defined]
    exposition = read_exposition(payload, Format.TEXT)
    # Unlabelled series (e.g. sglang:routing_keys_active 0.0) take the exact path by design.
    unlabelled = set(re.findall(r"^([a-z_:]+) ", payload.decode(), flags=re.MULTILINE))
    assert {f.name for f in exposition.families if not isinstance(f, RawFamily)} == unlabelled
    assert write_exposition(exposition.families, Format.TEXT) == payload
    parsed = [parse_family(f) for f in exposition.families]
    assert write_exposition(parsed, Format.TEXT) == payload


def test_openmetrics_escaped_sample_names_are_restored() -> None:
    """client_python#1177: sglang_x_total under '# TYPE sglang:x counter' reads as sglang:x_total."""
    payload = (FIXTURES / "tp1.om.txt").read_bytes()
    exposition = read_exposition(payload, Format.OPENMETRICS)
    assert not exposition.problems
    assert exposition.renamed_samples == 578
    names = {f.name for f in exposition.families}
    assert "sglang:num_requests_total" in names
    assert not any(name.startswith("sglang_") for name in names)


def test_quoted_utf8_names_are_read_and_escaped_to_legacy_names() -> None:
    """Prometheus 3 quoted names are read without crashing and escaped with underscores."""
    payload = b'{"a.b", "c.d"="e"} 1\n'
    (family,) = read_exposition(payload, Format.TEXT).families
    assert family.name == "a_b"
    assert parse_family(family).samples[0].labels == (("c_d", "e"),)


def test_special_values_round_trip() -> None:
    """NaN, +Inf, -Inf and Go-style exponents are kept as written."""
    payload = (
        b'# TYPE g gauge\ng{a="1"} NaN\ng{a="2"} +Inf\ng{a="3"} -Inf\ng{a="4"} 8.313110528e+09\n'
    )
    exposition = read_exposition(payload, Format.TEXT, Verify.FULL)
    assert write_exposition(exposition.families, Format.TEXT) == payload


def test_lax_go_values_are_normalised() -> None:
    """Spellings only Go's ParseFloat accepts are rewritten so OpenMetrics output stays valid."""
    payload = b'# TYPE g gauge\ng{a="1"} inf\ng{a="2"} nan\n'
    exposition = read_exposition(payload, Format.TEXT, Verify.FULL)
    out = write_exposition(exposition.families, Format.OPENMETRICS)
    assert b'g{a="1"} +Inf\n' in out
    assert b'g{a="2"} NaN\n' in out


def test_family_split_by_a_comment_mixes_vouched_and_parsed_blocks() -> None:
    """A vouched block, a comment, then a line the fast path refuses: all samples kept, in order."""
    payload = (
        b'# TYPE g gauge\ng{a="1"} 1\n# a comment inside the family\ng{a="2"} 2 1700000000000\n'
    )
    (family,) = read_exposition(payload, Format.TEXT).families
    assert isinstance(family, Family)
    assert [s.value for s in family.samples] == [1.0, 2.0]
    assert write_exposition([family], Format.TEXT).endswith(
        b'g{a="1"} 1\ng{a="2"} 2 1700000000000\n'
    )


def test_an_undefined_escape_in_an_openmetrics_help_line_is_kept_as_written() -> None:
    """OpenMetrics' ABNF allows ``BS normal-char``: ``\\q`` is a backslash and a q, as in Prometheus."""
    payload = b"# HELP g odd \\q escape\n# TYPE g gauge\ng 1\n# TYPE h gauge\nh 2\n# EOF\n"
    exposition = read_exposition(payload, Format.OPENMETRICS)
    assert exposition.problems == []
    assert [f.meta.help for f in exposition.families] == ["odd \\q escape", None]


TEXT_COUNTER_WITH_CREATED = (
    b"# HELP foo_total Requests.\n# TYPE foo_total counter\nfoo_total 1.0\n"
    b"# HELP foo_created Requests.\n# TYPE foo_created gauge\nfoo_created 1.7e+09\n"
)  # prometheus_client's text output for a counter when _created series are on


def test_text_created_gauge_family_joins_its_counter() -> None:
    """A text `foo_created` gauge family becomes the counter's _created sample, both ways round."""
    exposition = read_exposition(TEXT_COUNTER_WITH_CREATED, Format.TEXT)
    assert [f.name for f in exposition.families] == ["foo_total"]
    assert write_exposition(exposition.families, Format.TEXT) == TEXT_COUNTER_WITH_CREATED
    om = write_exposition(exposition.families, Format.OPENMETRICS)
    assert (
        om
        == b"# HELP foo Requests.\n# TYPE foo counter\nfoo_total 1.0\nfoo_created 1.7e+09\n# EOF\n"
    )


def test_a_creation_time_of_no_series_is_left_out_and_reported() -> None:
    """In OpenMetrics it would be a histogram series without its +Inf bucket: refused."""
    payload = (
        b'# TYPE h histogram\nh_bucket{a="1",le="+Inf"} 1\nh_count{a="1"} 1\nh_sum{a="1"} 1\n'
        b'# TYPE h_created gauge\nh_created{a="1"} 4\nh_created{a="2"} 5\n'
    )
    exposition = read_exposition(payload, Format.TEXT)
    assert [str(p) for p in exposition.problems] == [
        "family h_created: 1 creation time(s) of no series of h; left out"
    ]
    om = write_exposition(exposition.families, Format.OPENMETRICS).decode()
    assert 'h_created{a="1"} 4' in om
    assert 'a="2"' not in om
    list(om_fd_to_metric_families(io.StringIO(om)))


def test_blank_lines_after_eof_are_not_content() -> None:
    """An editor's trailing newline is no reason to refuse an OpenMetrics file."""
    exposition = read_exposition(b"# TYPE a gauge\na 1\n# EOF\n\n\n", Format.OPENMETRICS)
    assert [f.name for f in exposition.families] == ["a"]
    assert not exposition.problems
    exposition = read_exposition(b"# TYPE a gauge\na 1\n# EOF\n\nb 2\n", Format.OPENMETRICS)
    assert [str(p) for p in exposition.problems] == [
        "line 4: content after '# EOF', which ends an exposition"
    ]


def test_an_openmetrics_histogram_creation_time_of_no_series_is_left_out_too() -> None:
    """As the text reader does when it folds in a _created gauge: both formats read it alike."""
    payload = (
        b'# TYPE h histogram\nh_bucket{a="1",le="+Inf"} 1\nh_count{a="1"} 1\nh_sum{a="1"} 1\n'
        b'h_created{a="1"} 4\nh_created{a="2"} 5\n# EOF\n'
    )
    exposition = read_exposition(payload, Format.OPENMETRICS, Verify.FULL)
    assert [str(p) for p in exposition.problems] == [
        "family h: 1 creation time(s) of no series of h; left out"
    ]
    om = write_exposition(exposition.families, Format.OPENMETRICS).decode()
    assert 'a="2"' not in om
    list(om_fd_to_metric_families(io.StringIO(om)))


def test_escaped_looking_family_after_its_sibling_stays_separate() -> None:
    """Only a family with no sample spelled as declared gets client_python#1177's restoration."""
    payload = b'# TYPE a:b gauge\na:b{x="1"} 1\na_b{x="1"} 2\n# EOF\n'
    exposition = read_exposition(payload, Format.OPENMETRICS)
    assert [f.name for f in exposition.families] == ["a:b", "a_b"]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.name)
def test_real_fixtures_are_proven_from_the_cache_on_the_second_read(
    fixture: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGLang's label sets are proven once: the next read compares them, never re-checks them."""
    payload = fixture.read_bytes()  # type: ignore[attr-defined]
    caches = CodecCaches()
    first = read_exposition(payload, Format.TEXT, caches=caches)
    assert not first.problems

    def no_recheck(*_: object) -> bool:
        raise AssertionError("a block's heads were checked again, not taken from the cache")

    monkeypatch.setattr(byte_scan, "heads_proven", no_recheck)
    for _ in range(2):  # the second read also takes the cached-header path
        exposition = read_exposition(payload, Format.TEXT, caches=caches)
        assert exposition.families == first.families
        assert write_exposition(exposition.families, Format.TEXT) == payload
    assert caches.proven_heads.hits > 0


TRICKY_BLOCKS = [
    pytest.param(b'g{a="1"} 1\ng{a="2"} 2 1700000000000\n', id="timestamp_on_one_line"),
    pytest.param(b'g{a="1"} 1\ng{a="#"} 2\n', id="hash_in_a_label_value"),
    pytest.param(b'g{a="1",} 1\n', id="trailing_comma"),
    pytest.param(b'g{a="1"} 1\ng 2\n', id="unlabelled_line_among_labelled"),
    pytest.param(b'g{a="1"} 1\ngx{a="2"} 2\n', id="foreign_name"),
    pytest.param(b'g{a="1"}1\ng{a="} "} 2\n', id="shape_moved_between_lines"),
]


@pytest.mark.parametrize("block", TRICKY_BLOCKS)
def test_what_the_fast_path_refuses_is_settled_as_full_validation_settles_it(block: bytes) -> None:
    """A block the fast path cannot prove is parsed: the result is full validation's."""
    head = b"# HELP h Before.\n# TYPE h gauge\n" + b'h{b="1"} 1\n'
    payload = head + b"# HELP g G.\n# TYPE g gauge\n" + block + b'# TYPE z gauge\nz{c="1"} 3\n'
    fast = read_exposition(payload, Format.TEXT, Verify.STRUCTURE)
    full = read_exposition(payload, Format.TEXT, Verify.FULL)
    assert [parse_family(f) for f in fast.families] == full.families
    assert [str(p) for p in fast.problems] == [str(p) for p in full.problems]
    by_name = {f.name: f for f in fast.families}
    assert isinstance(by_name["h"], RawFamily)
    assert isinstance(by_name["z"], RawFamily)


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b'g{a="1"} 1 \ng{a="2"} 2\n', id="trailing_space"),
        pytest.param(b'g{a="1"} 1\n\ng{a="2"} 2\n', id="blank_line"),
        pytest.param(b'g{a="1"} 1 5\ng{a="2"} 2\n', id="timestamp"),
        pytest.param(b'g{a="1"}\n1 g{a="2"} 2\n', id="newline_moved"),
        pytest.param(b'g{a="1"} 1\ng{a="2"}  2\n', id="two_spaces"),
        pytest.param(b'g{a="1"} \n', id="no_value"),
    ],
)
def test_prove_block_refuses_lines_that_are_not_head_space_value(block: bytes) -> None:
    """Pieces out of place after the split never pass, even against heads proven before."""
    needles = (b"\ng{",)
    caches = CodecCaches()
    first = b'g{a="1"} 1\ng{a="2"} 2\n'
    proven = prove_block(first, 0, len(first), needles, Format.TEXT, caches)
    assert proven is not None
    assert proven.lines == 2
    proof = prove_block(block, 0, len(block), needles, Format.TEXT, caches)
    assert proof is None or not values_proven(proof.values or [], caches)


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(b"# HELP g G.\n", id="help_again"),
        pytest.param(b"# HELP g\n", id="help_again_without_text"),
        pytest.param(b"# TYPE g gauge\n", id="type_again"),
        pytest.param(b"# a free comment\n", id="free_comment"),
        pytest.param(b"# HELP gg Other.\n", id="family_with_a_longer_name"),
    ],
)
def test_a_family_taken_in_one_step_ends_exactly_where_the_general_path_ends_it(
    after: bytes,
) -> None:
    """The one-step path (cached header pair) closes a family only before another's header."""
    payload = b'# HELP g G.\n# TYPE g gauge\ng{a="1"} 1\n' + after + b'g{a="2"} 2\n'
    single = exposition_reader._Reader(payload, Format.TEXT, Verify.STRUCTURE).run()
    caches = CodecCaches()
    for _ in range(2):  # the second read finds the header pair cached
        cached = exposition_reader._Reader(payload, Format.TEXT, Verify.STRUCTURE, caches=caches)
        exposition = cached.run()
        assert exposition.families == single.families
        assert [str(p) for p in exposition.problems] == [str(p) for p in single.problems]
    assert caches.read_headers.hits > 0


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
@pytest.mark.parametrize("fmt", list(Format))
def test_pieces_are_the_exposition_cut_to_size(size: int, fmt: Format) -> None:
    """write_pieces is write_exposition without # EOF, in pieces of exactly ``size`` bytes."""
    payload = (FIXTURES / "tp1.prom").read_bytes()
    families = read_exposition(payload, Format.TEXT).families
    pieces = write_pieces(families, fmt, size, share_from=len(payload) + 1)
    assert b"".join(pieces) == write_exposition(families, fmt).removesuffix(b"# EOF\n")
    assert all(len(piece) == size for piece in pieces[:-1])
    assert 0 < len(pieces[-1]) <= size


@pytest.mark.parametrize("share_from", [1, 100, 2000, 1 << 16])
@pytest.mark.parametrize("fmt", list(Format))
def test_large_bodies_are_pieces_of_their_own_and_not_copied(share_from: int, fmt: Format) -> None:
    """A body of share_from bytes or more is served from the payload itself; the rest joined."""
    payload = (FIXTURES / "tp1.prom").read_bytes()
    families = read_exposition(payload, Format.TEXT).families
    size = 4096
    pieces = write_pieces(families, fmt, size, share_from=share_from)
    assert b"".join(pieces) == write_exposition(families, fmt).removesuffix(b"# EOF\n")
    shared = [p for p in pieces if isinstance(p, memoryview) and p.obj is payload]
    large = [f.body for f in families if isinstance(f, RawFamily) and len(f.body) >= share_from]
    assert len(shared) == len(large)
    assert all(len(piece) >= share_from for piece in shared)
    assert all(len(piece) <= size for piece in pieces if not isinstance(piece, memoryview))
