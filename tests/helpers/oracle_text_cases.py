"""The text-format cases of the Prometheus-oracle test (see ``helpers.oracle_case``)."""

from __future__ import annotations

from helpers.oracle_case import text_case as _t

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
    _t("promparse_whole_input", _PROMPARSE_WHOLE),
    _t("promparse_whole_input_quantile_in_range", _PROMPARSE_WHOLE.replace(b'"2.0"', b'"0.2"')),
    _t(
        "client_golang_gauge_beside_counter",
        b"# HELP go_memstats_alloc_bytes Number of bytes allocated and still in use.\n"
        b"# TYPE go_memstats_alloc_bytes gauge\ngo_memstats_alloc_bytes 1.2e+06\n"
        b"# HELP go_memstats_alloc_bytes_total Total number of bytes allocated.\n"
        b"# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 3.4e+07\n",
    ),
    _t(
        "negative_summary_quantiles_and_sum",
        b'# TYPE s summary\ns{quantile="0.5"} -1.5\ns{quantile="0.9"} -0.5\ns_sum -3\ns_count 2\n',
    ),
    _t(
        "negative_histogram_sum",
        b'# TYPE h histogram\nh_bucket{le="0"} 1\nh_bucket{le="+Inf"} 2\nh_sum -4\nh_count 2\n',
    ),
    _t(
        "non_integer_bucket_counts",
        b'# TYPE h histogram\nh_bucket{le="1"} 0.5\nh_bucket{le="+Inf"} 2.5\n'
        b"h_sum 3\nh_count 2.5\n",
    ),
    # A histogram point's shape, which OpenMetrics asks for and Prometheus does not check.
    _t(
        "histogram_buckets_out_of_order_not_cumulative",
        b'# TYPE h histogram\nh_bucket{le="2"} 3\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\n'
        b"h_sum 1\nh_count 7\n",
    ),
    _t("histogram_without_inf_bucket", b'# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\n'),
    _t("histogram_sum_alone", b"# TYPE h histogram\nh_sum 4\n"),
    _t("nan_counter", b"# TYPE c counter\nc NaN\n"),
    _t("negative_inf_counter", b"# TYPE c counter\nc -Inf\n"),
    _t(
        "mixed_timestamps_in_a_family",
        b'# TYPE g gauge\ng{a="1"} 1 @MS@\ng{a="2"} 2\n',
    ),
    # One series with and without a timestamp: Prometheus stores both samples, the second at
    # the scrape's time.
    _t(
        "mixed_timestamps_in_a_series",
        b"# TYPE g gauge\ng 1 @MS@\ng 2\n",
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
    _t("expfmt_whitespace_and_escapes", _EXPFMT_WHITESPACE),
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

# --- promparse_test.go TestPromParseErrors and TestPromNullByteHandling, then the two
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
