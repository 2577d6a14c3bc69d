"""The reader is as tolerant as Prometheus' own parsers, and refuses what would fail a scrape.

Each case comes from Prometheus' parser tests (``model/textparse/promparse_test.go``,
``openmetricsparse_test.go`` in prometheus/prometheus), named in a comment beside it. Every
case is read with both validations, and twice with one set of caches, so that the second read
takes the fast path (cached header pairs and proven heads) wherever it can.
"""

from __future__ import annotations

import pytest

from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format, Verify


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
    """A line cut short is still refused by the grammar, with its line; the rest is served."""
    # promparse_test.go TestPromParseErrors: `something_weird{problem="` with no newline.
    payload = b'# HELP g A gauge.\n# TYPE g gauge\ng{a="b"} 1\n# TYPE w gauge\nw{problem="'
    for exposition in reads(payload, Format.TEXT):
        assert [family.name for family in exposition.families] == ["g"]
        assert [(problem.line, problem.family) for problem in exposition.problems] == [(5, "w")]


def test_openmetrics_still_needs_its_eof_line() -> None:
    """OpenMetrics ends with ``# EOF``: without it the body is refused, as Prometheus does."""
    # openmetricsparse_test.go TestOMParseErrors: "data does not end with # EOF".
    with pytest.raises(Exception, match="no '# EOF' line"):
        read_exposition(b"# TYPE g gauge\ng 1", Format.OPENMETRICS)
