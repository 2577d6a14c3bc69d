"""The reader is as tolerant as Prometheus' own parsers, and refuses what would fail a scrape.

Each case comes from Prometheus' parser tests (``model/textparse/promparse_test.go``,
``openmetricsparse_test.go`` in prometheus/prometheus), named in a comment beside it. Every
case is read with both validations, and twice with one set of caches, so that the second read
takes the fast path (cached header pairs and proven heads) wherever it can.
"""

from __future__ import annotations

import time

import pytest

from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format, MetricType, Verify


def reads(payload: bytes, fmt: Format) -> list[Exposition]:
    """The payload read with each validation, without caches and twice with one set."""
    out = []
    for verify in Verify:
        out.append(read_exposition(payload, fmt, verify))
        caches = CodecCaches()
        out.extend(read_exposition(payload, fmt, verify, caches=caches) for _ in range(2))
    return out


def served(exposition: Exposition, fmt: Format) -> bytes:
    """What the bridge would serve of the exposition, in ``fmt``."""
    return write_exposition(exposition.families, fmt)


# --- a __name__ label inside the braces ------------------------------------------------------
# promparse.go and openmetricsparse.go ``Labels()`` add the metric name as __name__, then every
# label of the braces, so `x{__name__="evil"} 1` makes a label set with __name__ twice, which
# the head appender refuses (`label name "__name__" is not unique`), failing the whole scrape.
# Without a name before the braces it is promparse_test.go TestPromParseErrors' `{a="ok"} 1`
# ("metric name not set"). Neither may be served.
NAME_LABEL_CASES = [
    pytest.param(b'x{__name__="evil"} 1\n', Format.TEXT, 1, id="text_unlabelled"),
    pytest.param(
        b'# HELP x h\n# TYPE x gauge\nx{a="1",__name__="evil"} 1\nx{a="2",__name__="e"} 1\n',
        Format.TEXT,
        3,
        id="text_labelled_block",
    ),
    pytest.param(b'{__name__="x"} 1\n', Format.TEXT, 1, id="text_name_only_as_label"),
    pytest.param(b'{"x",__name__="evil"} 1\n', Format.TEXT, 1, id="text_utf8_and_label"),
    pytest.param(
        b'# TYPE x gauge\nx{"__name__"="evil",a="1"} 1\n', Format.TEXT, 2, id="text_quoted_label"
    ),
    pytest.param(
        b'# HELP x h\n# TYPE x gauge\nx{a="1",__name__="evil"} 1\n# EOF\n',
        Format.OPENMETRICS,
        3,
        id="om_labelled",
    ),
]


@pytest.mark.parametrize(("payload", "fmt", "line"), NAME_LABEL_CASES)
def test_a_name_label_in_the_braces_is_refused_with_its_line(
    payload: bytes, fmt: Format, line: int
) -> None:
    """A ``__name__`` label in a sample's braces is refused, located, and never served."""
    for exposition in _readable(payload, fmt):
        assert exposition.families == []
        (problem,) = exposition.problems
        assert problem.line == line
        assert "'__name__' label in the label set" in str(problem)


def _readable(payload: bytes, fmt: Format) -> list[Exposition]:
    """``reads``, each read on its own: a payload of one refused family is unusable, and then
    the error must name the ``__name__`` label."""
    out = []
    for verify in Verify:
        caches = CodecCaches()
        for use in (None, caches, caches):
            try:
                out.append(read_exposition(payload, fmt, verify, caches=use))
            except ExpositionError as exc:
                assert "'__name__' label in the label set" in str(exc)  # noqa: PT017
    return out


def test_a_name_label_in_an_exemplar_is_kept() -> None:
    """An exemplar's labels are not a series: Prometheus keeps a ``__name__`` among them."""
    # openmetricsparse_test.go TestOpenMetricsParse: exemplars with labels on counter totals.
    payload = b'# TYPE a counter\na_total 1 # {__name__="x",id="1"} 1\n# EOF\n'
    for exposition in reads(payload, Format.OPENMETRICS):
        assert exposition.problems == []
        assert b'# {__name__="x",id="1"} 1' in served(exposition, Format.OPENMETRICS)


def test_the_other_families_of_the_payload_are_served() -> None:
    """Only the family with the ``__name__`` label is refused; its neighbours are served."""
    payload = b'# TYPE g gauge\ng 1\n# TYPE x gauge\nx{__name__="evil"} 1\n# TYPE h gauge\nh 2\n'
    for exposition in reads(payload, Format.TEXT):
        assert [family.name for family in exposition.families] == ["g", "h"]
        assert [problem.line for problem in exposition.problems] == [4]
        assert b"__name__" not in served(exposition, Format.OPENMETRICS)


# --- the last line without its newline ------------------------------------------------------
# promparse.go NewPromParser appends the newline itself: promparse_test.go TestPromParse's input
# ends in `null_byte_metric{a="abc\x00"} 1` without one, as TestPromNullByteHandling's first case
# (`null_byte_metric{a="abc\x00"} 1`, no error) does.
@pytest.mark.parametrize(
    ("payload", "last"),
    [
        pytest.param(b'null_byte_metric{a="abc\x00"} 1', b'null_byte_metric{a="abc\x00"} 1\n'),
        pytest.param(
            b'# HELP g A gauge.\n# TYPE g gauge\ng{a="b"} 1\ng{a="c"} 2',
            b'g{a="c"} 2\n',
            id="labelled_block",
        ),
        pytest.param(
            b"# TYPE go_goroutines gauge\ngo_goroutines 33  \t123123",
            b"go_goroutines 33 123123\n",
            id="promparse_timestamp_last",
        ),
        pytest.param(b"a 1\n# a comment", b"a 1\n", id="comment_last"),
    ],
)
def test_a_last_line_without_its_newline_is_read(payload: bytes, last: bytes) -> None:
    """The text format's last line is read without its newline, as Prometheus reads it."""
    for exposition in reads(payload, Format.TEXT):
        assert exposition.problems == []
        assert served(exposition, Format.TEXT).endswith(last)


def test_a_last_line_cut_inside_a_label_value_is_refused() -> None:
    """A last line without its newline that does not parse is a body cut short where no
    framing said so (a close-delimited answer): the payload is refused, naming the line, as
    Prometheus refuses the scrape. A broken line that ends in its newline drops its family only.
    """
    # promparse_test.go TestPromParseErrors: `something_weird{problem="` with no newline.
    payload = b'# HELP g A gauge.\n# TYPE g gauge\ng{a="b"} 1\n# TYPE w gauge\nw{problem="'
    for verify in Verify:
        with pytest.raises(ExpositionError, match="does not parse") as caught:
            read_exposition(payload, Format.TEXT, verify)
        assert caught.value.line == 5
    for exposition in reads(payload + b"\n", Format.TEXT):
        assert [family.name for family in exposition.families] == ["g"]
        assert [(problem.line, problem.family) for problem in exposition.problems] == [(5, "w")]


def test_openmetrics_still_needs_its_eof_line() -> None:
    """OpenMetrics ends with ``# EOF``: without it the body is refused, as Prometheus does."""
    # openmetricsparse_test.go TestOMParseErrors: "data does not end with # EOF".
    with pytest.raises(Exception, match="no '# EOF' line"):
        read_exposition(b"# TYPE g gauge\ng 1", Format.OPENMETRICS)


# --- a family whose lines are not contiguous ------------------------------------------------
# promparse_test.go TestPromParse: go_gc_duration_seconds (a summary: the text lexer reads
# `# \tTYPE` as a TYPE line) appears again after wind_speed, comments and a HELP line of another
# family, and every one of its samples is read.
PROMPARSE_REPEATED_FAMILY = (
    b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
    b"# \tTYPE go_gc_duration_seconds summary\n"
    b'go_gc_duration_seconds{quantile="0"} 4.9351e-05\n'
    b'go_gc_duration_seconds{quantile="0.25",} 7.424100000000001e-05\n'
    b'go_gc_duration_seconds{quantile="0.5",a="b"} 8.3835e-05\n'
    b"# Hrandom comment starting with prefix of HELP\n"
    b"#\n"
    b'wind_speed{A="2",c="3"} 12345\n'
    b"# comment with escaped \\n newline\n"
    b"# HELP nohelp1\n"
    b'go_gc_duration_seconds{ quantile="1.0", a="b" } 8.3835e-05\n'
    b"go_gc_duration_seconds_count 99\n"
    b'some:aggregate:rate5m{a_b="c"}\t1\n'
)


def test_promparse_family_appearing_again_is_served_whole_as_one_block() -> None:
    """Every sample of the repeated family is served, in one block, where it first was."""
    for exposition in reads(PROMPARSE_REPEATED_FAMILY, Format.TEXT):
        assert exposition.problems == []
        names = [family.name for family in exposition.families]
        assert names == [
            "go_gc_duration_seconds",
            "wind_speed",
            "nohelp1",
            "some:aggregate:rate5m",
        ]
        block = (
            b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
            b"# TYPE go_gc_duration_seconds summary\n"
            b'go_gc_duration_seconds{quantile="0"} 4.9351e-05\n'
            b'go_gc_duration_seconds{quantile="0.25"} 7.424100000000001e-05\n'
            b"go_gc_duration_seconds_count 99\n"
            b'go_gc_duration_seconds{quantile="0.5",a="b"} 8.3835e-05\n'
            b'go_gc_duration_seconds{quantile="1.0",a="b"} 8.3835e-05\n'
            b"# TYPE wind_speed unknown\n"
        )
        assert block in served(exposition, Format.OPENMETRICS)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            b'# HELP h h\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="2"} 1\n'
            b'# HELP g g\n# TYPE g gauge\ng{x="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n',
            id="histogram_continued_by_its_samples",
        ),
        pytest.param(
            b'# HELP h h\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="2"} 1\n'
            b'# HELP g g\n# TYPE g gauge\ng{x="1"} 1\n# HELP h h\n# TYPE h histogram\n'
            b'h_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n',
            id="histogram_continued_under_its_header_again",
        ),
    ],
)
def test_a_histogram_in_two_parts_is_one_valid_histogram(payload: bytes) -> None:
    """A histogram whose buckets are split by another family is served as one histogram."""
    histogram = (
        b'# HELP h h\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="2"} 1\n'
        b'h_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n'
    )
    for exposition in reads(payload, Format.TEXT):
        assert exposition.problems == []
        assert histogram in served(exposition, Format.OPENMETRICS)
        assert sorted(family.name for family in exposition.families) == ["g", "h"]


def test_a_series_split_across_the_parts_is_served_together() -> None:
    """A series in both parts (distinct timestamps) is regrouped, as OpenMetrics wants it."""
    payload = (
        b'# TYPE a gauge\na{x="1"} 1 1000\n# TYPE b gauge\nb 1\n'
        b'# TYPE a gauge\na{x="2"} 1 1000\na{x="1"} 2 2000\n# EOF\n'
    )
    for exposition in reads(payload, Format.OPENMETRICS):
        assert exposition.problems == []
        assert (
            b'# TYPE a gauge\na{x="1"} 1 1000.0\na{x="1"} 2 2000.0\na{x="2"} 1 1000.0\n'
            b"# TYPE b gauge\n" in served(exposition, Format.OPENMETRICS)
        )


def test_a_family_appearing_again_with_another_type_keeps_its_first_part() -> None:
    """One family has one type: lines under another TYPE are dropped, located and reported."""
    payload = b"# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a counter\na 2\n"
    for exposition in reads(payload, Format.TEXT):
        assert served(exposition, Format.TEXT) == b"# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n"
        assert [str(problem) for problem in exposition.problems] == [
            (
                "line 5, family a: family appears again with another type (first at line 1); "
                "this occurrence is dropped"
            )
        ]


def test_a_family_refused_at_its_first_lines_stays_refused() -> None:
    """Lines of a family refused earlier are not served alone; both refusals are reported."""
    payload = b"a 1\na{x=1} 2\nb 1\na 3\n"
    for exposition in reads(payload, Format.TEXT):
        assert [family.name for family in exposition.families] == ["b"]
        assert [(problem.line, problem.family) for problem in exposition.problems] == [
            (2, "a"),
            (4, "a"),
        ]


# --- line numbers ----------------------------------------------------------------------------
# The two symptoms: without TYPE lines every problem said "line 1"; a repeat under its
# family's header said the line of the header before it.
@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(
            b"a 1\nb 1\na 2\n",
            ["line 3, family a: series a repeats the one at line 1; the repeat is dropped"],
            id="no_type_lines",
        ),
        pytest.param(
            b'g 1\nh 1\nh_bucket{le="1"} 1\nh 2\ng 3\n',
            [
                "line 4, family h: series h repeats the one at line 2; the repeat is dropped",
                "line 5, family g: series g repeats the one at line 1; the repeat is dropped",
            ],
            id="no_type_lines_two_repeats",
        ),
        pytest.param(
            b'# HELP a h\n# TYPE a gauge\na{x="1"} 1\na{x="2"} 1\n'
            b'# HELP b h\n# TYPE b gauge\nb{x="1"} 1\na{x="1"} 1\n',
            [
                (
                    'line 8, family a: series a{x="1"} repeats the one at line 3; the repeat '
                    "is dropped"
                )
            ],
            id="repeat_after_another_family",
        ),
        pytest.param(
            b"a 1\nb 1\nc 1\nb -1 1\nb{x=\n",
            ["line 5, family b: label 'x': value must be a double-quoted string"],
            id="bad_line_without_type_lines",
        ),
    ],
)
def test_problems_name_the_line_they_are_on(payload: bytes, expected: list[str]) -> None:
    """Each problem names the line it is on, whatever the headers and repeats."""
    for exposition in reads(payload, Format.TEXT):
        assert [str(problem) for problem in exposition.problems] == expected


def test_a_broken_line_is_blamed_on_the_family_its_name_starts() -> None:
    """Without TYPE lines, a broken line of a new family leaves the family before it served."""
    # promparse_test.go TestPromParseErrors: `something_weird{problem="`, here after two families.
    payload = b'a 1\nb 2\nsomething_weird{problem="\n'
    for exposition in reads(payload, Format.TEXT):
        assert [family.name for family in exposition.families] == ["a", "b"]
        assert [(problem.line, problem.family) for problem in exposition.problems] == [
            (3, "something_weird")
        ]


def _alternating(pairs: int) -> bytes:
    """Two families whose lines alternate: each line reopens its family."""
    return b"".join(b'a{x="%d"} 1\nb{x="%d"} 1\n' % (i, i) for i in range(pairs))


def _read_seconds(payload: bytes) -> float:
    """The fastest of three reads of the payload, in seconds."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        read_exposition(payload, Format.TEXT)
        times.append(time.perf_counter() - start)
    return min(times)


def test_alternating_families_read_in_linear_time() -> None:
    """A hostile payload whose families alternate line by line costs its size, not its square.

    Each reappearance parks the family, which is judged once at the end of the pass: judging
    it at each one made 4,000 lines take a minute. Four times the lines must take well under
    the sixteen times a quadratic read would.
    """
    small, large = _alternating(1000), _alternating(4000)
    exposition = read_exposition(large, Format.TEXT)
    assert exposition.problems == []
    assert [len(family.samples) for family in exposition.families] == [4000, 4000]
    assert _read_seconds(large) < 10 * _read_seconds(small)


# --- the text lexer's blanks -----------------------------------------------------------------
# promparse_test.go TestPromParse: blanks between the name and the braces, around `=`, no comma
# between two labels, and (promlex.l reads a value token wherever one starts) a value straight
# after the closing brace. OpenMetrics' ABNF allows none of them.
@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'm { quantile="1.0", a="b" } 8.3835e-05', id="space_before_brace"),
        pytest.param(b'm { quantile= "1.0", a= "b", } 8.3835e-05', id="space_after_equals"),
        pytest.param(b'm { quantile = "1.0" a = "b" } 8.3835e-05', id="no_comma"),
        pytest.param(b'm{quantile="1.0",a="b"}8.3835e-05', id="no_space_before_value"),
    ],
)
def test_the_text_lexers_blanks_are_read_as_prometheus_reads_them(line: bytes) -> None:
    """Read in text with its labels and value; refused in OpenMetrics, naming the line."""
    for exposition in reads(b"# TYPE m gauge\n" + line + b"\n", Format.TEXT):
        assert exposition.problems == []
        assert served(exposition, Format.TEXT).endswith(b'm{quantile="1.0",a="b"} 8.3835e-05\n')
    for exposition in reads(b"# TYPE m gauge\n" + line + b"\n# EOF\n", Format.OPENMETRICS):
        assert exposition.families == []
        assert [problem.line for problem in exposition.problems] == [2]


def test_a_created_sample_without_a_timestamp_beside_a_timestamped_total_is_read() -> None:
    """openmetricsparse_test.go TestOpenMetricsParse: `foo_total 17.0 TS # {...} 5` then
    `foo_created CT`, without a timestamp; Prometheus reads both. A _total that mixes is not."""
    payload = (
        b'# TYPE foo counter\nfoo_total 17.0 1520879607.789 # {id="counter-test"} 5\n'
        b"foo_created 1520872607.123\n# EOF\n"
    )
    for exposition in reads(payload, Format.OPENMETRICS):
        assert exposition.problems == []
        assert served(exposition, Format.OPENMETRICS) == payload
    mixed = b"# TYPE foo counter\nfoo_total 1 1520879607.789\nfoo_total 2\n# EOF\n"
    for exposition in reads(mixed, Format.OPENMETRICS):
        assert [problem.reason for problem in exposition.problems] == ["timestamps"]


@pytest.mark.parametrize("fmt", [Format.TEXT, Format.OPENMETRICS])
def test_a_quoted_name_not_first_in_the_braces_is_the_metric_name(fmt: Format) -> None:
    """Prometheus 3's UTF-8 syntax (TestUTF8OpenMetricsParse: `{q="0.9","http.status",a="b"}`):
    the quoted string without a value is the name wherever it stands in the braces."""
    eof = b"# EOF\n" if fmt is Format.OPENMETRICS else b""
    payload = b'# TYPE http_status gauge\n{q="0.9","http.status",a="b"} 8.3835e-05\n' + eof
    for exposition in reads(payload, fmt):
        assert exposition.problems == []
        assert len(exposition.families) == 1
        assert b'http_status{q="0.9",a="b"} 8.3835e-05\n' in served(exposition, fmt)
    twice = b'# TYPE a gauge\na{"b"} 1\n' + eof
    for exposition in reads(twice, fmt):
        assert [problem.line for problem in exposition.problems] == [2]


def test_blanks_at_the_start_of_a_line_and_between_a_headers_words_are_skipped() -> None:
    """expfmt's TestTextParse scenario 2: ` # HELP  name2  doc`, `  #    TYPE    name2 gauge`
    and a sample line after blanks; Prometheus' text lexer skips them all."""
    payload = (
        b' # HELP  name2  \tdoc 2\n  #    TYPE    name2 gauge\n  name2{a="1"} 3\n\t# a comment\n'
    )
    for exposition in reads(payload, Format.TEXT):
        assert exposition.problems == []
        (family,) = exposition.families
        assert (family.name, family.meta.type) == ("name2", MetricType.GAUGE)
        assert served(exposition, Format.TEXT).endswith(b'name2{a="1"} 3\n')
