"""The OpenMetrics cases of the Prometheus-oracle test (see ``helpers.oracle_case``)."""

from __future__ import annotations

from helpers.oracle_case import om_case as _om

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
    # The Go test's info sample, without the _info suffix the specification asks for: read as
    # the gauge Prometheus stores.
    _om("info_without_suffix", b'# TYPE ii info\nii{foo="bar"} 1\n# EOF\n'),
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
    ),
    # Values OpenMetrics forbids and Prometheus' parser does not check.
    _om(
        "suite_bad_counter_values_10", b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} NaN\n# EOF\n'
    ),
    _om(
        "suite_bad_counter_values_11",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} -1\na_gcount -1\n# EOF\n',
    ),
    _om("suite_bad_counter_values_12", b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} -1\n# EOF\n'),
    _om("suite_bad_counter_values_4", b'# TYPE a histogram\na_bucket{le="+Inf"} NaN\n# EOF\n'),
    _om("suite_bad_counter_values_7", b'# TYPE a histogram\na_bucket{le="+Inf"} -1\n# EOF\n'),
    _om(
        "suite_bad_counter_values_8",
        b'# TYPE a histogram\na_bucket{le="-1.0"} 1\na_bucket{le="+Inf"} 2\na_sum -1\n# EOF\n',
    ),
    _om(
        "suite_bad_counter_values_9",
        b'# TYPE a histogram\na_bucket{le="-1.0"} 1\na_bucket{le="+Inf"} 2\na_sum 1\n# EOF\n',
    ),
    _om(
        "suite_bad_counter_values_13",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} 1\na_gsum -1\n# EOF\n',
    ),
    _om(
        "suite_bad_counter_values_14",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} 1\na_gsum NaN\n# EOF\n',
    ),
    _om("suite_bad_counter_values_20", b"# TYPE a counter\n# HELP a help\na_total 1.1\n# EOF\n"),
    # The shape of a histogram's points: OpenMetrics' rules, which Prometheus does not check.
    _om(
        "suite_bad_histograms_4",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 0\n#a_sum 0\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_histograms_5",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 0\n#a_count 0\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_histograms_8",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} 0\na_gsum 0\n# EOF\n',
    ),
    _om(
        "suite_bad_histograms_9",
        b'# TYPE a histogram\na_bucket{le="2"} 0\na_bucket{le="1"} 0\na_bucket{le="+Inf"} 0\n# EOF\n',
    ),
    _om(
        "suite_bad_histograms_10",
        b'# TYPE a histogram\na_bucket{le="1"} 1\na_bucket{le="2"} 1\na_bucket{le="+Inf"} 0\n# EOF\n',
    ),
    _om(
        "suite_bad_histograms_11", b'# TYPE a histogram\na_bucket{le="+Inf"} 0\na_count 1\n# EOF\n'
    ),
    _om(
        "suite_bad_histograms_13", b'# TYPE a histogram\na_count 1\na_bucket{le="+Inf"} 0\n# EOF\n'
    ),
    _om(
        "suite_bad_histograms_14",
        b'# TYPE a gaugehistogram\na_bucket{le="+Inf"} 0\na_gcount 0\n# EOF\n',
    ),
    _om(
        "suite_bad_grouping_or_ordering_0",
        b'# TYPE a histogram\na_sum{a="1"} 0\na_sum{a="2"} 0\na_count{a="1"} 0\n# EOF\n',
    ),
    # Exemplars: a label set longer than 128 characters, timestamps no number can be, spacing.
    _om(
        "suite_bad_exemplars_6",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {a="'
        + b"".join(str(i % 10).encode() for i in range(2, 130))
        + b'"} 1 1\n# EOF\n',
        exemplars_refused=True,
    ),
    _om(
        "suite_bad_exemplars_size_0",
        b'# TYPE a counter\n# HELP a help\na_total{foo="bar"} 1 # {a="'
        + b"a" * 126
        + b'"} 1\n# EOF\n',
    ),
    _om(
        "suite_bad_exemplar_timestamp_Inf",
        b'# TYPE a counter\na_total 1 # {a="b"} 0.5 Inf\n# EOF',
        valid=False,
    ),
    _om(
        "suite_bad_exemplar_timestamp_NaN",
        b'# TYPE a counter\na_total 1 # {a="b"} 0.5 NaN\n# EOF',
        valid=False,
    ),
    _om(
        "suite_bad_exemplar_timestamp_Negative_Inf",
        b'# TYPE a counter\na_total 1 # {a="b"} 0.5 -Inf\n# EOF',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_0",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 #\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_1",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1# {} 1\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_2",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 #{} 1\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_3",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {}1\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_4",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {} 1 \n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_5",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {} 1 1 \n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_7",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {} 0x1p-3\n# EOF\n',
        valid=False,
    ),
    _om(
        "suite_bad_exemplars_8",
        b'# TYPE a histogram\na_bucket{le="+Inf"} 1 # {} 1 0x1p-3\n# EOF\n',
        valid=False,
    ),
    _om("suite_simple_counter", b"# TYPE a counter\n# HELP a help\na_total 1\n# EOF"),
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
