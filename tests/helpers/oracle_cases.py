"""Expositions for the Prometheus-oracle test, each small enough that one failure names one rule.

The inputs are those of Prometheus' parser tests (``model/textparse/promparse_test.go`` and
``openmetricsparse_test.go`` in prometheus/prometheus), split into one case per rule so that a
line Prometheus refuses does not hide the lines around it, plus the inputs the issue about
tolerance listed. ``valid`` is what the installed Prometheus (2.42) does with the case when it
scrapes it directly: the oracle test checks that too, so a case that says the wrong thing fails.

Timestamps are written ``@MS@`` (milliseconds) or ``@S@`` (seconds, three decimals) and
replaced by one recent instant when the test starts: a timestamp of 1970 or 2018, as the Go
tests write, would be out of the TSDB's bounds and dropped by both paths, proving nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass(frozen=True)
class OracleCase:
    """One exposition, how the engine labels it, and whether Prometheus ingests it."""

    name: str
    body: bytes
    content_type: str
    valid: bool
    # Why the bridge cannot pass the case yet (an xfail, strict); None when it must pass.
    gap: str | None = None
    # Prometheus ingests the scrape but keeps none of its samples (a timestamp out of the TSDB's
    # bounds): the bridge must then store nothing either.
    stores_nothing: bool = False

    def render(self, now_ms: int) -> bytes:
        """The body with its timestamps placeholders set to ``now_ms``."""
        seconds = f"{now_ms // 1000}.{now_ms % 1000:03d}"
        return self.body.replace(b"@MS@", str(now_ms).encode()).replace(b"@S@", seconds.encode())


# Families Prometheus reads in text that OpenMetrics, which the bridge answers Prometheus in,
# cannot carry: they pass once the bridge answers such a scrape in text (the format fallback).
CLASH = "OpenMetrics cannot carry a _total counter beside a gauge of its stem: needs the fallback"
INFO_NAME = "OpenMetrics names an info sample NAME_info: needs the format fallback to carry it"
QUANTILE = "OpenMetrics wants a quantile in [0, 1]: needs the format fallback"
OM_VALUES = "OpenMetrics forbids this value in a counter-like sample: needs the format fallback"


def _t(
    name: str, body: bytes, *, valid: bool = True, gap: str | None = None, empty: bool = False
) -> OracleCase:
    return OracleCase(f"text_{name}", body, TEXT, valid, gap, empty)


def _om(
    name: str, body: bytes, *, valid: bool = True, gap: str | None = None, empty: bool = False
) -> OracleCase:
    return OracleCase(f"om_{name}", body, OPENMETRICS, valid, gap, empty)


# promparse_test.go TestPromParse's input as it is, but for its timestamp.
_PROMPARSE_WHOLE = (
    b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
    b"# \tTYPE go_gc_duration_seconds summary\n"
    b'go_gc_duration_seconds{quantile="0"} 4.9351e-05\n'
    b'go_gc_duration_seconds{quantile="0.25",} 7.424100000000001e-05\n'
    b'go_gc_duration_seconds{quantile="0.5",a="b"} 8.3835e-05\n'
    b'go_gc_duration_seconds{quantile="0.8", a="b"} 8.3835e-05\n'
    b'go_gc_duration_seconds{ quantile="0.9", a="b"} 8.3835e-05\n'
    b"# Hrandom comment starting with prefix of HELP\n#\n"
    b'wind_speed{A="2",c="3"} 12345\n'
    b"# comment with escaped \\n newline\n# comment with escaped \\ escape character\n"
    b"# HELP nohelp1\n# HELP nohelp2 \n"
    b'go_gc_duration_seconds{ quantile="1.0", a="b" } 8.3835e-05\n'
    b'go_gc_duration_seconds { quantile="1.0", a="b" } 8.3835e-05\n'
    b'go_gc_duration_seconds { quantile= "1.0", a= "b", } 8.3835e-05\n'
    b'go_gc_duration_seconds { quantile = "1.0", a = "b" } 8.3835e-05\n'
    b'go_gc_duration_seconds { quantile = "2.0" a = "b" } 8.3835e-05\n'
    b"go_gc_duration_seconds_count 99\n"
    b'some:aggregate:rate5m{a_b="c"}\t1\n'
    b"# HELP go_goroutines Number of goroutines that currently exist.\n"
    b"# TYPE go_goroutines gauge\ngo_goroutines 33  \t@MS@\n"
    b"_metric_starting_with_underscore 1\n"
    b'testmetric{_label_starting_with_underscore="foo"} 1\n'
    b'testmetric{label="\\"bar\\""} 1\n'
    b"# HELP metric foo\x00bar\n"
    b'null_byte_metric{a="abc\x00"} 1'
)

# --- promparse_test.go TestPromParse, one rule a case ------------------------------------------
TEXT_VALID = [
    _t(
        "summary_label_spacing",
        b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
        b"# \tTYPE go_gc_duration_seconds summary\n"
        b'go_gc_duration_seconds{quantile="0"} 4.9351e-05\n'
        b'go_gc_duration_seconds{quantile="0.25",} 7.424100000000001e-05\n'
        b'go_gc_duration_seconds{quantile="0.5",a="b"} 8.3835e-05\n'
        b'go_gc_duration_seconds{quantile="0.8", a="b"} 8.3835e-05\n'
        b'go_gc_duration_seconds{ quantile="0.9", a="b"} 8.3835e-05\n'
        b'go_gc_duration_seconds{ quantile="1.0", a="b" } 8.3835e-05\n'
        b"go_gc_duration_seconds_count 99\n",
    ),
    _t(
        "comments_and_empty_help",
        b"# Hrandom comment starting with prefix of HELP\n#\n"
        b'wind_speed{A="2",c="3"} 12345\n'
        b"# comment with escaped \\n newline\n# comment with escaped \\ escape character\n"
        b"# HELP nohelp1\n# HELP nohelp2 \n",
    ),
    _t("space_before_brace", b'go_gc_duration_seconds { quantile="1.0", a="b" } 8.3835e-05\n'),
    _t(
        "spaces_around_equals",
        b'go_gc_duration_seconds { quantile= "1.0", a= "b", } 8.3835e-05\n'
        b'go_gc_duration_seconds { quantile = "2.0", a = "b" } 8.3835e-05\n',
    ),
    _t(
        "labels_without_comma",
        b'go_gc_duration_seconds { quantile = "2.0" a = "b" } 8.3835e-05\n',
    ),
    _t("colon_name_tab_value", b'some:aggregate:rate5m{a_b="c"}\t1\n'),
    _t(
        "gauge_timestamp_after_whitespace",
        b"# HELP go_goroutines Number of goroutines that currently exist.\n"
        b"# TYPE go_goroutines gauge\ngo_goroutines 33  \t@MS@\n",
    ),
    _t(
        "underscore_names_escaped_quotes",
        b"_metric_starting_with_underscore 1\n"
        b'testmetric{_label_starting_with_underscore="foo"} 1\n'
        b'testmetric{label="\\"bar\\""} 1\n',
    ),
    _t("null_byte_in_help_and_value", b'# HELP metric foo\x00bar\nnull_byte_metric{a="abc\x00"} 1'),
    # TestPromNullByteHandling's accepted inputs.
    _t("null_byte_value_start", b'a{b="\x00ss"} 1\n'),
    _t("null_byte_value_only", b'a{b="\x00"} 1\n'),
    # What the issue listed beside the Go tests.
    _t("last_line_without_newline", b"# TYPE a gauge\na 1\nb 2"),
    _t("no_space_after_brace", b'a{b="c"}1\n'),
    _t("family_not_contiguous", b'a 1\nb 2\na{x="y"} 3\n'),
    _t(
        "typed_family_again_later",
        b'# TYPE a counter\na 1\n# TYPE b gauge\nb 2\na{x="y"} 3\n',
    ),
    # The same, its TYPE line repeated: expfmt (promtool check metrics) refuses a second TYPE
    # line, Prometheus' scrape parser reads it.
    _t(
        "type_line_again",
        b'# TYPE a counter\na 1\n# TYPE b gauge\nb 2\n# TYPE a counter\na{x="y"} 3\n',
    ),
    # TestPromParse's input whole: the family that comes back after wind_speed, its repeated
    # series, comments and blanks together. Its summary has a quantile="2.0", which
    # OpenMetrics forbids; the same input with quantile="0.2" must pass whole.
    _t("promparse_whole_input", _PROMPARSE_WHOLE, gap=QUANTILE),
    _t("promparse_whole_input_quantile_in_range", _PROMPARSE_WHOLE.replace(b'"2.0"', b'"0.2"')),
    _t(
        "client_golang_gauge_beside_counter",
        b"# HELP go_memstats_alloc_bytes Number of bytes allocated and still in use.\n"
        b"# TYPE go_memstats_alloc_bytes gauge\ngo_memstats_alloc_bytes 1.2e+06\n"
        b"# HELP go_memstats_alloc_bytes_total Total number of bytes allocated.\n"
        b"# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 3.4e+07\n",
        gap=CLASH,
    ),
    _t(
        "negative_summary_quantiles_and_sum",
        b'# TYPE s summary\ns{quantile="0.5"} -1.5\ns{quantile="0.9"} -0.5\ns_sum -3\ns_count 2\n',
        gap=OM_VALUES,
    ),
    _t(
        "negative_histogram_sum",
        b'# TYPE h histogram\nh_bucket{le="0"} 1\nh_bucket{le="+Inf"} 2\nh_sum -4\nh_count 2\n',
        gap=OM_VALUES,
    ),
    _t(
        "non_integer_bucket_counts",
        b'# TYPE h histogram\nh_bucket{le="1"} 0.5\nh_bucket{le="+Inf"} 2.5\n'
        b"h_sum 3\nh_count 2.5\n",
        gap=OM_VALUES,
    ),
    _t("nan_counter", b"# TYPE c counter\nc NaN\n", gap=OM_VALUES),
    _t("negative_inf_counter", b"# TYPE c counter\nc -Inf\n", gap=OM_VALUES),
    _t(
        "mixed_timestamps_in_a_family",
        b'# TYPE g gauge\ng{a="1"} 1 @MS@\ng{a="2"} 2\n',
    ),
    # One series with and without a timestamp: Prometheus stores both samples, the second at
    # the scrape's time.
    _t(
        "mixed_timestamps_in_a_series",
        b"# TYPE g gauge\ng 1 @MS@\ng 2\n",
        gap="OpenMetrics readers refuse a series mixing timestamps: needs the format fallback",
    ),
    _t("special_values", b"a +Inf\nb -Inf\nc NaN\nd -0\ne 1e-310\n"),
    _t("untyped_type", b"# TYPE u untyped\nu 3\n"),
]

# --- expfmt's text_parse_test.go (prometheus/common) TestTextParse scenarios, which client_golang
# --- and promtool read with; here Prometheus' scrape parser is the judge
_EXPFMT_WHITESPACE = (
    b"\n# A normal comment.\n#\n# TYPE name counter\n"
    b'name{labelname="val1",basename="basevalue"} NaN\n'
    b'name {labelname="val2",basename="base\\"v\\\\al\\nue"} 0.23 @MS@\n'
    b"# HELP name two-line\\n doc  str\\\\ing\n\n"
    b' # HELP  name2  \tdoc str"ing 2\n  #    TYPE    name2 gauge\n'
    b'name2{labelname="val2"\t,basename   =   "basevalue2"\t\t} +Inf @MS@\n'
    b'name2{ labelname = "val1" , }-Inf\n'
)
TEXT_EXPFMT = [
    _t("expfmt_empty_lines", b"\n\n", empty=True),
    _t(
        "expfmt_minimal",
        b"\nminimal_metric 1.234\nanother_metric -3e3 @MS@\n# Even that:\nno_labels{} 3\n"
        b"# HELP line for non-existing metric will be ignored.\n",
    ),
    _t("expfmt_whitespace_and_escapes", _EXPFMT_WHITESPACE, gap=OM_VALUES),
    _t("expfmt_whitespace_and_escapes_no_nan", _EXPFMT_WHITESPACE.replace(b"} NaN", b"} 7")),
    _t(
        "expfmt_evil_summary",
        b"\n# TYPE my_summary summary\n"
        b'my_summary{n1="val1",quantile="0.5"} 110\ndecoy -1 -2\n'
        b'my_summary{n1="val1",quantile="0.9"} 140 1\nmy_summary_count{n1="val1"} 42\n'
        b"# Latest timestamp wins in case of a summary.\n"
        b'my_summary_sum{n1="val1"} 4711 2\nfake_sum{n1="val1"} 2001\n'
        b"# TYPE another_summary summary\n"
        b'another_summary_count{n2="val2",n1="val1"} 20\n'
        b'my_summary_count{n2="val2",n1="val1"} 5 5\n'
        b'another_summary{n1="val1",n2="val2",quantile=".3"} -1.2\n'
        b'my_summary_sum{n1="val2"} 08 15\nmy_summary{n1="val3", quantile="0.2"} 4711\n'
        b'  my_summary{n1="val1",n2="val2",quantile="-12.34",} NaN\n'
        b"# some\n# funny comments\n# HELP\n# HELP\n# HELP my_summary\n# HELP my_summary\n",
        # Prometheus' scrape parser refuses the negative timestamp of `decoy -1 -2`, which
        # expfmt reads.
        valid=False,
    ),
    _t(
        "expfmt_histogram",
        b"\n# HELP request_duration_microseconds The response latency.\n"
        b"# TYPE request_duration_microseconds histogram\n"
        b'request_duration_microseconds_bucket{le="100"} 123\n'
        b'request_duration_microseconds_bucket{le="120"} 412\n'
        b'request_duration_microseconds_bucket{le="144"} 592\n'
        b'request_duration_microseconds_bucket{le="172.8"} 1524\n'
        b'request_duration_microseconds_bucket{le="+Inf"} 2693\n'
        b"request_duration_microseconds_sum 1.7560473e+06\n"
        b"request_duration_microseconds_count 2693\n",
    ),
]

# --- promparse_test.go TestPromParseErrors and TestPromNullByteHandling, then the issue's two
# --- scrape-failing inputs
TEXT_INVALID = [
    _t("err_name_only", b"a", valid=False),
    _t("err_single_quotes", b"a{b='c'} 1\n", valid=False),
    _t("err_label_value_missing", b"a{b=\n", valid=False),
    _t("err_label_name_not_utf8", b'a{\xff="foo"} 1\n', valid=False),
    _t("err_label_value_not_utf8", b'a{b="\xff"} 1\n', valid=False),
    _t("err_value_true", b"a true\n", valid=False),
    _t("err_unterminated_value", b'something_weird{problem="', valid=False),
    _t("err_empty_label_name", b'empty_label_name{=""} 0', valid=False),
    _t("err_underscore_float", b"foo 1_2\n", valid=False),
    _t("err_hex_float", b"foo 0x1p-3\n", valid=False),
    _t("err_hex_float_upper", b"foo 0x1P-3\n", valid=False),
    _t("err_underscore_timestamp", b"foo 0 1_2\n", valid=False),
    _t("err_no_metric_name", b'{a="ok"} 1', valid=False),
    _t("err_type_no_name", b"# TYPE #\n#EOF\n", valid=False),
    _t("err_help_no_name", b"# HELP #\n#EOF\n", valid=False),
    _t("err_null_before_value_quote", b'a{b=\x00"ssss"} 1\n', valid=False),
    _t("err_null_unterminated", b'a{b="\x00', valid=False),
    _t("err_null_in_label_name", b'a{b\x00="hiih"}\t1', valid=False),
    _t("err_null_in_name", b'a\x00{b="ddd"} 1', valid=False),
    _t("err_null_after_timestamp", b"a 0 1\x00", valid=False),
    # Prometheus 2.42's text parser knows no gaugehistogram type ("invalid metric type"), nor
    # does expfmt ("unknown metric type"): only OpenMetrics has one.
    _t("gaugehistogram_type", b'# TYPE gh gaugehistogram\ngh_bucket{le="+Inf"} 1\n', valid=False),
    _t("err_name_label_in_braces", b'x{__name__="evil"} 1\n', valid=False),
    _t("err_timestamp_20_digits", b"a 1 100000000000000000000\n", valid=False),
    # TestUTF8PromParse's syntax, which Prometheus 2.42 does not read yet (Prometheus 3 does).
    _t(
        "utf8_quoted_name_first",
        b'{"go.gc_duration_seconds",quantile="0"} 4.9351e-05\n',
        valid=False,
    ),
    _t("utf8_quoted_name_not_first", b'{q="0.9","http.status",a="b"} 8.3835e-05\n', valid=False),
]

# --- openmetricsparse_test.go TestOpenMetricsParse, one rule a case ---------------------------
OM_VALID = [
    _om(
        "summary_with_unit",
        b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
        b"# TYPE go_gc_duration_seconds summary\n# UNIT go_gc_duration_seconds seconds\n"
        b'go_gc_duration_seconds{quantile="0"} 4.9351e-05\n'
        b'go_gc_duration_seconds{quantile="0.25"} 7.424100000000001e-05\n'
        b'go_gc_duration_seconds{quantile="0.5",a="b"} 8.3835e-05\n'
        b'go_gc_duration_seconds{quantile="1.0",a="b"} 8.3835e-05\n'
        b"go_gc_duration_seconds_count 99\n# EOF\n",
    ),
    _om(
        "help_escapes_and_empty_metadata",
        b'# HELP nohelp1 \n# HELP help2 escape \\ \\n \\\\ \\" \\x chars\n# UNIT nounit \n'
        b'some:aggregate:rate5m{a_b="c"} 1\n# EOF\n',
    ),
    _om(
        "gauge_with_timestamp",
        b"# HELP go_goroutines Number of goroutines that currently exist.\n"
        b"# TYPE go_goroutines gauge\ngo_goroutines 33 @S@\n# EOF\n",
    ),
    _om(
        "histogram_and_gaugehistogram",
        b'# TYPE hh histogram\nhh_bucket{le="+Inf"} 1\n'
        b'# TYPE gh gaugehistogram\ngh_bucket{le="+Inf"} 1\n# EOF\n',
    ),
    _om(
        "exemplars",
        b'# TYPE hhh histogram\nhhh_bucket{le="+Inf"} 1 # {id="histogram-bucket-test"} 4\n'
        b"# TYPE ggh gaugehistogram\n"
        b'ggh_bucket{le="+Inf"} 1 # {id="gaugehistogram-bucket-test",xx="yy"} 4 @S@\n'
        b"ggh_gcount 1\nggh_gsum 1\n# TYPE c counter\n"
        b'c_total 3 # {id="counter-test"} 5\n# EOF\n',
    ),
    _om("info", b'# TYPE ii info\nii_info{foo="bar"} 1\n# EOF\n'),
    # The Go test's info sample, without the _info suffix the specification asks for.
    _om("info_without_suffix", b'# TYPE ii info\nii{foo="bar"} 1\n# EOF\n', gap=INFO_NAME),
    _om(
        "stateset",
        b'# TYPE ss stateset\nss{ss="foo"} 1\nss{ss="bar"} 0\n# EOF\n',
    ),
    _om(
        "unknown",
        b"# TYPE un unknown\nun 1\n_metric_starting_with_underscore 1\n"
        b'testmetric{_label_starting_with_underscore="foo"} 1\n'
        b'testmetric{label="\\"bar\\""} 1\n# EOF\n',
    ),
    _om(
        "counter_created",
        b"# HELP foo Counter with and without labels\n# TYPE foo counter\n"
        b'foo_total 17.0 @S@ # {id="counter-test"} 5\nfoo_created 1520872607.123\n'
        b'foo_total{a="b"} 17.0 @S@ # {id="counter-test"} 5\n'
        b'foo_created{a="b"} 1520872607.123\n'
        b'foo_total{le="c"} 21.0\nfoo_created{le="c"} 1520872621.123\n'
        b'foo_total{le="1"} 10.0\n# EOF\n',
    ),
    _om(
        "summary_created_last",
        b"# TYPE bar summary\nbar_count 17.0\nbar_sum 324789.3\n"
        b'bar{quantile="0.95"} 123.7\nbar{quantile="0.99"} 150.0\n'
        b"bar_created 1520872608.124\n# EOF\n",
    ),
    _om(
        "histogram_created",
        b'# TYPE baz histogram\nbaz_bucket{le="0.0"} 0\nbaz_bucket{le="+Inf"} 17\n'
        b"baz_count 17\nbaz_sum 324789.3\nbaz_created 1520872609.125\n# EOF\n",
    ),
    _om("gauge_named_created", b"# TYPE fizz_created gauge\nfizz_created 17.0\n# EOF\n"),
    _om(
        "null_byte",
        b'# HELP metric foo\x00bar\nnull_byte_metric{a="abc\x00"} 1\n# EOF\n',
    ),
    # TestOpenMetricsParseErrors' happy cases: an exposition of nothing but its EOF line.
    _om("only_eof", b"# EOF\n", empty=True),
    _om("only_eof_without_newline", b"# EOF", empty=True),
    # TestOMNullByteHandling's accepted inputs.
    _om("null_byte_value_start", b'a{b="\x00ss"} 1\n# EOF\n'),
    _om("null_byte_eof_without_newline", b'a{b="\x00"} 1\n# EOF'),
    # TestCTParseFailures: _created before the samples it belongs to, and a counter without
    # metadata.
    _om(
        "created_first",
        b"# HELP thing histogram with _created as first line\n# TYPE thing histogram\n"
        b"thing_created 1520872607.123\nthing_count 17\nthing_sum 324789.3\n"
        b'thing_bucket{le="0.0"} 0\nthing_bucket{le="+Inf"} 17\n'
        b"# HELP thing_c counter with _created as first line\n# TYPE thing_c counter\n"
        b"thing_c_created 1520872607.123\nthing_c_total 14123.232\n# EOF\n",
    ),
    _om(
        "counter_without_metadata",
        b'foo_total 17.0\nfoo_created 1520872607.123\nfoo_total{a="b"} 17.0\n'
        b'foo_created{a="b"} 1520872608.123\n# EOF\n',
    ),
    # The OpenMetrics project's duplicate_timestamps_1 as the issue described it: a series
    # repeated with equal timestamps (Prometheus keeps the first sample).
    _om(
        "duplicate_timestamps",
        b'# TYPE a gauge\na{a="1"} 1 @S@\na{a="1"} 2 @S@\n# EOF\n',
    ),
]

# --- cases of the OpenMetrics project's parser suite (tests/testdata/parsers in
# --- OpenObservability/OpenMetrics), by the suite's case name; validity is Prometheus' verdict
OM_SUITE = [
    _om(
        "suite_roundtrip",
        b"# HELP go_gc_duration_seconds A summary of the GC invocation durations.\n"
        b"# TYPE go_gc_duration_seconds summary\n"
        b'go_gc_duration_seconds{quantile="0.0"} 0.013300656000000001\n'
        b'go_gc_duration_seconds{quantile="0.25"} 0.013638736\n'
        b'go_gc_duration_seconds{quantile="1.0"} 0.021383540000000003\n'
        b"go_gc_duration_seconds_sum 56.12904785\ngo_gc_duration_seconds_count 7476.0\n"
        b"# TYPE prometheus_local_storage_indexing_batch_duration_milliseconds summary\n"
        b'prometheus_local_storage_indexing_batch_duration_milliseconds{quantile="0.5"} NaN\n'
        b"prometheus_local_storage_indexing_batch_duration_milliseconds_sum 871.5665949999999\n"
        b"prometheus_local_storage_indexing_batch_duration_milliseconds_count 229.0\n"
        b"# HELP process_cpu_seconds Total user and system CPU time spent in seconds.\n"
        b"# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 29323.4\n"
        b"# TYPE prometheus_build_info gauge\n"
        b'prometheus_build_info{branch="HEAD",revision="ef176e5",version="0.16.0rc1"} 1.0\n'
        b"# HELP foo histogram Testing histogram buckets\n# TYPE foo histogram\n"
        b'foo_bucket{le="0.0"} 0.0\nfoo_bucket{le="1e-05"} 0.0\nfoo_bucket{le="0.1"} 8.0\n'
        b'foo_bucket{le="1.55555555555552e+06"} 17.0\nfoo_bucket{le="1e+23"} 17.0\n'
        b'foo_bucket{le="+Inf"} 17.0\nfoo_count 17.0\nfoo_sum 324789.3\n'
        b"foo_created 1.520430000123e+09\n# EOF\n",
    ),
    _om(
        "suite_escaping",
        b"# TYPE a counter\n# HELP a he\\n\\\\l\\tp\n"
        b'a_total{foo="b\\"a\\nr"} 1\na_total{foo="b\\\\a\\z"} 2\n# EOF\n',
    ),
    _om(
        "suite_exemplars_wide_chars",
        '# TYPE a histogram\na_bucket{le="+Inf"} 1 # {a="\u2603'.encode()
        + b"".join(str(i % 10).encode() for i in range(3, 129))
        + b'"} 1 1\n# EOF\n',
    ),
    _om(
        "suite_bad_grouping_or_ordering_1",
        b'# TYPE a histogram\na_bucket{a="1",le="1"} 0\na_bucket{a="2",le="+Inf""} 0\n'
        b'a_bucket{a="1",le="+Inf"} 0\n# EOF\n',
        valid=False,
    ),
    # Prometheus stores le="+INF" as it is written; OpenMetrics asks +Inf spelled so.
    _om(
        "suite_bad_histograms_12",
        b'# TYPE a histogram\na_bucket{le="+INF"} 0\n# EOF\n',
        gap="OpenMetrics spells +Inf one way only: needs the format fallback to keep le as it came",
    ),
    # Values OpenMetrics forbids and Prometheus' parser does not check.
    _om(
        "suite_bad_counter_values_10",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} NaN\n# EOF\n',
        gap=OM_VALUES,
    ),
    _om(
        "suite_bad_counter_values_11",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} -1\na_gcount -1\n# EOF\n',
        gap=OM_VALUES,
    ),
    _om(
        "suite_bad_counter_values_12",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} -1\n# EOF\n',
        gap=OM_VALUES,
    ),
]

# --- openmetricsparse_test.go TestOpenMetricsParseErrors and TestOMNullByteHandling, each input
# --- as the test writes it, then the issue's two scrape-failing inputs
_OM_ERRORS = [
    b"",
    b"\n",
    b"metric",
    b"metric 1",
    b"metric 1\n",
    b'metric_total 1 # {aa="bb"} 4',
    b"a\n#EOF\n",
    b"\n\n#EOF\n",
    b" a 1\n#EOF\n",
    b"9\n#EOF\n",
    b"# TYPE u untyped\n#EOF\n",
    b"# TYPE c counter \n#EOF\n",
    b"#  TYPE c counter\n#EOF\n",
    b"# TYPE \n#EOF\n",
    b"# TYPE m\n#EOF\n",
    b"# UNIT metric suffix\n#EOF\n",
    b"# UNIT metricsuffix suffix\n#EOF\n",
    b"# UNIT m suffix\n#EOF\n",
    b"# UNIT \n#EOF\n",
    b"# UNIT m\n#EOF\n",
    b"# HELP \n#EOF\n",
    b"# HELP m\n#EOF\n",
    b"a\t1\n#EOF\n",
    b"a 1\t2\n#EOF\n",
    b"a 1 2 \n#EOF\n",
    b"a 1 2 #\n#EOF\n",
    b"a 1 1z\n#EOF\n",
    b" # EOF\n",
    b"# EOF\na 1",
    b"# EOF\n\n",
    b"# EOFa 1",
    b"#\tTYPE c counter\n",
    b"# TYPE c  counter\n",
    b"a 1 1 1\n# EOF\n",
    b"a{b='c'} 1\n# EOF\n",
    b'a{,b="c"} 1\n# EOF\n',
    b'a{b="c"d="e"} 1\n# EOF\n',
    b'a{b="c",,d="e"} 1\n# EOF\n',
    b"a{b=\n# EOF\n",
    b'a{\xff="foo"} 1\n# EOF\n',
    b'a{b="\xff"} 1\n# EOF\n',
    b'{"a","b = "c"}\n# EOF\n',
    b'{"a",b\\nc="d"} 1\n# EOF\n',
    b"a true\n",
    b'something_weird{problem="\n# EOF\n',
    b'empty_label_name{=""} 0\n# EOF\n',
    b"foo 1_2\n\n# EOF\n",
    b"foo 0x1p-3\n\n# EOF\n",
    b"foo 0x1P-3\n\n# EOF\n",
    b"foo 0 1_2\n\n# EOF\n",
    b"custom_metric_total 1 # {aa=bb}\n# EOF\n",
    b'custom_metric_total 1 # {aa="bb"}\n# EOF\n',
    b'custom_metric_total 1 # {aa="bb"}',
    b"custom_metric_total 1 # {bb}",
    b'custom_metric_total 1 # {bb, a="dd"}',
    b'custom_metric_total 1 # {aa="bb",,cc="dd"} 1',
    b'custom_metric_total 1 # {aa="bb"} 1_2',
    b'custom_metric_total 1 # {aa="bb"} 0x1p-3',
    b'custom_metric_total 1 # {aa="bb"} true',
    b'custom_metric_total 1 # {aa="bb",cc=}',
    b'custom_metric_total 1 # {aa=\\"\xff\\"} 9.0',
    b'{b="c",} 1',
    b"a 1 NaN",
    b"a 1 -Inf",
    b"a 1 Inf",
    b'# TYPE hhh histogram\nhhh_bucket{le="+Inf"} 1 # {aa="bb"} 4 NaN',
    b'# TYPE hhh histogram\nhhh_bucket{le="+Inf"} 1 # {aa="bb"} 4 -Inf',
    # TestOMNullByteHandling
    b'a{b=\x00"ssss"} 1\n# EOF\n',
    b'a{b="\x00',
    b'a{b\x00="hiih"}\t1',
    b'a\x00{b="ddd"} 1',
    b"#",
    b"# H",
    b'custom_metric_total 1 # {b=\x00"ssss"} 1\n',
    b'custom_metric_total 1 # {b="\x00ss"} 1\n',
]
# Each fails Prometheus' scrape: the bridge must refuse it, or serve what it keeps valid.
OM_INVALID = [
    *(_om(f"err_{index:02d}", body, valid=False) for index, body in enumerate(_OM_ERRORS)),
    _om("err_name_label_in_braces", b'x{__name__="evil"} 1\n# EOF\n', valid=False),
    # Prometheus 2.42 allows exemplars on buckets and counters only: one on a histogram's
    # _count or a summary's fails the scrape. Newer releases take them.
    _om(
        "err_exemplar_on_count",
        b'# TYPE hhh histogram\nhhh_bucket{le="+Inf"} 1\n'
        b'hhh_count 1 # {id="histogram-count-test"} 4\n# EOF\n',
        valid=False,
    ),
    _om(
        "err_exemplar_on_summary",
        b'# TYPE smr_seconds summary\nsmr_seconds_count 2.0 # {id="summary-count-test"} 1 @S@\n'
        b'smr_seconds_sum 42.0 # {id="summary-sum-test"} 1 @S@\n# EOF\n',
        valid=False,
    ),
    _om("err_exemplar_on_gauge", b'# TYPE g gauge\ng 1 # {a="b"} 1\n# EOF\n', valid=False),
    _om("err_bad_type", b"# TYPE a foo\na 1\n# EOF\n", valid=False),
]

CASES = [*TEXT_VALID, *TEXT_EXPFMT, *TEXT_INVALID, *OM_VALID, *OM_SUITE, *OM_INVALID]
