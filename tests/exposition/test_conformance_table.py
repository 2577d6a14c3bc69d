"""OpenMetrics 1.0 and text 0.0.4 conformance: small expositions per class, accepted or refused.

Written from the OpenMetrics 1.0 specification's text ("Data Model", "Text format"), most cases
its own examples. A valid case is read without a problem and written back in both formats so
that prometheus_client's parsers and ``promtool check metrics`` accept it; an invalid case is
refused with its exact message and reason (the ``reason`` label of
``metricbridge_exposition_problems_total``), the rest of the exposition kept. Where the sources
differ, the choice made is in docs/conformance.md.
"""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.promtool import promtool_check_metrics
from metricbridge.exposition.breach import REASONS
from metricbridge.exposition.openmetrics_fit import Misfit, openmetrics_misfit
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import AnyFamily, Family, Format, MetricType, Verify

OM, TX = Format.OPENMETRICS, Format.TEXT


def _om(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n# EOF\n").encode()


def _tx(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


VALID = [
    (
        "spec_complete_exposition",
        OM,
        _om(
            "# TYPE acme_http_router_request_seconds summary",
            "# UNIT acme_http_router_request_seconds seconds",
            "# HELP acme_http_router_request_seconds Latency though all of ACME's HTTP request router.",
            'acme_http_router_request_seconds_sum{path="/api/v1",method="GET"} 9036.32',
            'acme_http_router_request_seconds_count{path="/api/v1",method="GET"} 807283.0',
            'acme_http_router_request_seconds_created{path="/api/v1",method="GET"} 1605281325.0',
            'acme_http_router_request_seconds_sum{path="/api/v2",method="POST"} 479.3',
            'acme_http_router_request_seconds_count{path="/api/v2",method="POST"} 34.0',
            'acme_http_router_request_seconds_created{path="/api/v2",method="POST"} 1605281325.0',
            "# TYPE go_goroutines gauge",
            "# HELP go_goroutines Number of goroutines that currently exist.",
            "go_goroutines 69",
            "# TYPE process_cpu_seconds counter",
            "# UNIT process_cpu_seconds seconds",
            "# HELP process_cpu_seconds Total user and system CPU time spent in seconds.",
            "process_cpu_seconds_total 4.20072246e+06",
        ),
    ),
    ("help_undefined_escape", OM, _om("# HELP a x\\ty", "# TYPE a gauge", "a 1")),
    (
        "help_escapes",
        OM,
        _om('# HELP a Some text and \\n some \\" escaping', "# TYPE a gauge", "a 1"),
    ),
    ("label_undefined_escape", OM, _om("# TYPE a gauge", 'a{l="x\\ty"} 1')),
    (
        "label_spec_escaping",
        OM,
        _om(
            "# TYPE bar_seconds summary", 'bar_seconds_count{a="x",b="escaping\\" example \\n "} 0'
        ),
    ),
    ("label_backslash", OM, _om("# TYPE a gauge", 'a{l="C:\\\\dir"} 1')),
    ("label_nul_byte", OM, _om("# TYPE a gauge", 'a{l="x\x00y"} 1')),
    ("help_nul_byte", OM, _om("# HELP a x\x00y", "# TYPE a gauge", "a 1")),
    ("eof_without_newline", OM, _om("# TYPE a gauge", "a 1")[:-1]),
    ("gauge_points_with_timestamps", OM, _om("# TYPE foo gauge", "foo 17.0 123", "foo 18.0 456")),
    (
        "summary_points_with_timestamps",
        OM,
        _om(
            "# TYPE foo_seconds summary",
            "# UNIT foo_seconds seconds",
            'foo_seconds_count{a="bb"} 0 123',
            'foo_seconds_sum{a="bb"} 0 123',
            'foo_seconds_count{a="bb"} 0 456',
            'foo_seconds_sum{a="bb"} 0 456',
            'foo_seconds_count{a="ccc"} 0 123',
            'foo_seconds_sum{a="ccc"} 0 123',
            'foo_seconds_count{a="ccc"} 0 456',
            'foo_seconds_sum{a="ccc"} 0 456',
        ),
    ),
    (
        "counter_created_timestamps",
        OM,
        _om(
            "# TYPE foo counter",
            "foo_total 17.0 1520879607.789",
            "foo_created 1520430000.123 1520879607.789",
        ),
    ),
    (
        "counter_exemplar",
        OM,
        _om("# TYPE foo counter", 'foo_total 17.0 # {trace_id="KOO5S4vxi0o"} 1.0'),
    ),
    (
        "histogram_spec_buckets",
        OM,
        _om(
            "# TYPE foo histogram",
            'foo_bucket{le="0.0"} 0',
            'foo_bucket{le="1e-05"} 0',
            'foo_bucket{le="0.0001"} 5',
            'foo_bucket{le="0.1"} 8',
            'foo_bucket{le="1.0"} 10',
            'foo_bucket{le="10.0"} 11',
            'foo_bucket{le="100000.0"} 11',
            'foo_bucket{le="1e+06"} 15',
            'foo_bucket{le="1e+23"} 16',
            'foo_bucket{le="1.1e+23"} 17',
            'foo_bucket{le="+Inf"} 17',
            "foo_count 17",
            "foo_sum 324789.3",
            "foo_created 1520430000.123",
        ),
    ),
    (
        "histogram_spec_exemplars",
        OM,
        _om(
            "# TYPE foo histogram",
            'foo_bucket{le="0.01"} 0',
            'foo_bucket{le="0.1"} 8 # {} 0.054',
            'foo_bucket{le="1"} 11 # {trace_id="KOO5S4vxi0o"} 0.67',
            'foo_bucket{le="10"} 17 # {trace_id="oHg5SJYRHA0"} 9.8 1520879607.789',
            'foo_bucket{le="+Inf"} 17',
            "foo_count 17",
            "foo_sum 324789.3",
            "foo_created 1520430000.123",
        ),
    ),
    (
        "histogram_float_counts",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="1"} 3.0',
            'h_bucket{le="+Inf"} 4.0',
            "h_count 4.0",
            "h_sum 2.5",
        ),
    ),
    (
        "histogram_negative_buckets_without_sum",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="-1.0"} 1', 'h_bucket{le="+Inf"} 3'),
    ),
    (
        "histogram_buckets_only",
        OM,
        _om("# TYPE h histogram", 'h_bucket{x="a",le="+Inf"} 3', 'h_bucket{x="b",le="+Inf"} 4'),
    ),
    (
        "gaugehistogram_spec",
        OM,
        _om(
            "# TYPE foo gaugehistogram",
            'foo_bucket{le="0.01"} 20.0',
            'foo_bucket{le="0.1"} 25.0',
            'foo_bucket{le="1"} 34.0',
            'foo_bucket{le="10"} 34.0',
            'foo_bucket{le="+Inf"} 42.0',
            "foo_gcount 42.0",
            "foo_gsum 3289.3",
        ),
    ),
    (
        "gaugehistogram_negative_gsum",
        OM,
        _om(
            "# TYPE g gaugehistogram",
            'g_bucket{le="-1.0"} 1',
            'g_bucket{le="+Inf"} 2',
            "g_gcount 2",
            "g_gsum -3.5",
        ),
    ),
    (
        "stateset_spec",
        OM,
        _om("# TYPE foo stateset", 'foo{foo="a"} 0', 'foo{foo="bb"} 1', 'foo{foo="ccc"} 0'),
    ),
    (
        "stateset_entity",
        OM,
        _om(
            "# TYPE foo stateset",
            'foo{entity="controller",foo="a"} 1.0',
            'foo{entity="controller",foo="bb"} 0.0',
            'foo{entity="replica",foo="a"} 1.0',
            'foo{entity="replica",foo="bb"} 0.0',
        ),
    ),
    ("info_spec", OM, _om("# TYPE foo info", 'foo_info{name="pretty name",version="8.2.7"} 1')),
    (
        "info_entity",
        OM,
        _om(
            "# TYPE foo info",
            'foo_info{entity="controller",name="pretty name",version="8.2.7"} 1.0',
            'foo_info{entity="replica",name="prettier name",version="8.1.9"} 1.0',
        ),
    ),
    (
        "summary_quantiles",
        OM,
        _om(
            "# TYPE foo summary",
            'foo{quantile="0.95"} 123.7',
            'foo{quantile="0.99"} 150.0',
            "foo_count 17.0",
            "foo_sum 324789.3",
        ),
    ),
    (
        "summary_quantile_bounds_and_nan",
        OM,
        _om("# TYPE foo summary", 'foo{quantile="0"} NaN', 'foo{quantile="1"} NaN'),
    ),
    (
        "summary_no_quantiles",
        OM,
        _om(
            "# TYPE foo summary", "foo_count 17.0", "foo_sum 324789.3", "foo_created 1520430000.123"
        ),
    ),
    ("unknown_spec", OM, _om("# TYPE foo unknown", "foo 42.23")),
    ("family_without_metrics", OM, _om("# TYPE foo gauge")),
    ("empty_label_set", OM, _om("# TYPE bar_seconds summary", "bar_seconds_count{} 0")),
    (
        "unit_on_gauge",
        OM,
        _om("# TYPE foo_seconds gauge", "# UNIT foo_seconds seconds", "foo_seconds 1.5"),
    ),
    (
        "empty_unit",
        OM,
        _om("# TYPE foo_seconds counter", "# UNIT foo_seconds ", "foo_seconds_total 1"),
    ),
    (
        "number_spellings",
        OM,
        _om(
            "# TYPE a gauge",
            'a{n="1"} 0042',
            'a{n="2"} 1.89e-7',
            'a{n="3"} +Inf',
            'a{n="4"} -Inf',
            'a{n="5"} NaN',
            'a{n="6"} -3',
        ),
    ),
    ("negative_timestamp", OM, _om("# TYPE a gauge", "a 1 -5")),
    ("counter_float_value", OM, _om("# TYPE a counter", "a_total 1e3")),
    (
        "non_canonical_le",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="1"} 1',
            'h_bucket{le="1.5e1"} 2',
            'h_bucket{le="+Inf"} 2',
        ),
    ),
    (
        "exemplar_128_characters",
        OM,
        _om("# TYPE c counter", 'c_total 1 # {t="' + "x" * 127 + '"} 1'),
    ),
    (
        "exemplar_timestamp",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="+Inf"} 1 # {t="a"} 0.5 1520879607.789',
            "h_count 1",
            "h_sum 0.5",
        ),
    ),
    ("text_help_undefined_escape", TX, _tx("# HELP a x\\ty", "# TYPE a gauge", "a 1")),
    ("text_help_quote_is_not_an_escape", TX, _tx('# HELP a say \\"hi\\"', "# TYPE a gauge", "a 1")),
    ("text_label_nul_byte", TX, _tx("# TYPE a gauge", 'a{l="x\x00y"} 1')),
    # The OpenMetrics suite's bad_grouping_or_ordering: Prometheus' parser reads it (it does not
    # check grouping), so the bridge serves each series' samples together.
    (
        "series_interleaved_regrouped",
        OM,
        _om(
            "# TYPE foo_seconds summary",
            'foo_seconds_count{a="bb"} 0 123',
            'foo_seconds_count{a="ccc"} 0 123',
            'foo_seconds_count{a="bb"} 0 456',
            'foo_seconds_count{a="ccc"} 0 456',
        ),
    ),
    (
        "text_interleaved_series_regrouped",
        TX,
        _tx(
            "# TYPE h histogram",
            'h_bucket{x="a",le="1"} 1',
            'h_bucket{x="b",le="1"} 2',
            'h_bucket{x="a",le="+Inf"} 1',
            'h_bucket{x="b",le="+Inf"} 2',
            'h_count{x="a"} 1',
            'h_count{x="b"} 2',
            'h_sum{x="a"} 1',
            'h_sum{x="b"} 2',
        ),
    ),
    ("text_counter_without_total_suffix", TX, _tx("# TYPE requests counter", "requests 3")),
    ("text_repeated_series_distinct_timestamps", TX, _tx("# TYPE a gauge", "a 1 1000", "a 2 2000")),
    # Not contiguous, which OpenMetrics forbids, but Prometheus' parsers ingest every sample
    # (promparse_test.go TestPromParse: go_gc_duration_seconds appears again after wind_speed):
    # read as one family and served as one block.
    (
        "family_interleaved_with_another",
        OM,
        _om(
            "# TYPE a gauge", 'a{x="1"} 1', "# TYPE b gauge", "b 1", "# TYPE a gauge", 'a{x="2"} 1'
        ),
    ),
    (
        "text_family_appears_again_without_type_lines",
        TX,
        _tx('a{x="1"} 1', "b 1", 'a{x="2"} 1'),
    ),
]

INVALID = [
    ("counter_nan", OM, _om("# TYPE a counter", "a_total NaN")),
    ("counter_negative", OM, _om("# TYPE a counter", "a_total -1")),
    (
        "counter_negative_labelled",
        OM,
        _om("# TYPE a counter", 'a_total{x="1"} 2', 'a_total{x="2"} -2'),
    ),
    (
        "histogram_sum_nan",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 1', "h_count 1", "h_sum NaN"),
    ),
    (
        "histogram_sum_negative",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 1', "h_count 1", "h_sum -1"),
    ),
    (
        "histogram_count_negative",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+Inf"} -1', "h_count -1", "h_sum 1"),
    ),
    (
        "histogram_bucket_negative",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="1"} -1', 'h_bucket{le="+Inf"} 1'),
    ),
    ("histogram_bucket_nan", OM, _om("# TYPE h histogram", 'h_bucket{le="+Inf"} NaN')),
    (
        "gaugehistogram_gsum_nan",
        OM,
        _om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} 1', "g_gcount 1", "g_gsum NaN"),
    ),
    (
        "gaugehistogram_gcount_negative",
        OM,
        _om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} -1', "g_gcount -1", "g_gsum 1"),
    ),
    ("summary_sum_negative", OM, _om("# TYPE s summary", "s_count 1", "s_sum -1")),
    ("summary_count_nan", OM, _om("# TYPE s summary", "s_count NaN", "s_sum 1")),
    (
        "buckets_out_of_order",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="2"} 1',
            'h_bucket{le="1"} 1',
            'h_bucket{le="+Inf"} 1',
        ),
    ),
    (
        "bucket_repeated_le",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="1"} 1',
            'h_bucket{le="1.0"} 1',
            'h_bucket{le="+Inf"} 1',
        ),
    ),
    (
        "buckets_not_cumulative",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="1"} 2', 'h_bucket{le="+Inf"} 1'),
    ),
    (
        "missing_inf_bucket",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="1"} 1', "h_count 1", "h_sum 1"),
    ),
    (
        "count_differs_from_inf_bucket",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 2', "h_count 3", "h_sum 1"),
    ),
    ("sum_without_count", OM, _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 2', "h_sum 1")),
    ("count_without_sum", OM, _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 2', "h_count 2")),
    (
        "sum_with_negative_buckets",
        OM,
        _om(
            "# TYPE h histogram",
            'h_bucket{le="-1"} 1',
            'h_bucket{le="+Inf"} 2',
            "h_count 2",
            "h_sum 1",
        ),
    ),
    (
        "negative_gsum_without_negative_buckets",
        OM,
        _om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} 2', "g_gcount 2", "g_gsum -1"),
    ),
    (
        "bucket_not_integer",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="1"} 0.5', 'h_bucket{le="+Inf"} 1'),
    ),
    ("count_not_integer", OM, _om("# TYPE s summary", "s_count 1.5", "s_sum 1")),
    ("inf_bucket_value", OM, _om("# TYPE h histogram", 'h_bucket{le="+Inf"} +Inf')),
    (
        "le_spelled_INF",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+INF"} 1', "h_count 1", "h_sum 1"),
    ),
    ("le_spelled_inf", OM, _om("# TYPE h histogram", 'h_bucket{le="inf"} 1')),
    ("le_missing", OM, _om("# TYPE h histogram", 'h_bucket{x="1"} 1')),
    ("le_nan", OM, _om("# TYPE h histogram", 'h_bucket{le="NaN"} 1', 'h_bucket{le="+Inf"} 1')),
    (
        "le_not_a_number",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="abc"} 1', 'h_bucket{le="+Inf"} 1'),
    ),
    ("quantile_above_one", OM, _om("# TYPE s summary", 's{quantile="1.5"} 1')),
    ("quantile_below_zero", OM, _om("# TYPE s summary", 's{quantile="-0.1"} 1')),
    ("quantile_nan", OM, _om("# TYPE s summary", 's{quantile="NaN"} 1')),
    ("quantile_missing", OM, _om("# TYPE s summary", 's{x="1"} 1')),
    ("quantile_value_negative", OM, _om("# TYPE s summary", 's{quantile="0.5"} -1')),
    ("info_value_two", OM, _om("# TYPE i info", 'i_info{a="b"} 2')),
    ("info_value_zero", OM, _om("# TYPE i info", 'i_info{a="b"} 0')),
    ("stateset_value_two", OM, _om("# TYPE s stateset", 's{s="a"} 2')),
    ("stateset_value_fraction", OM, _om("# TYPE s stateset", 's{s="a"} 0.5')),
    ("stateset_without_its_label", OM, _om("# TYPE s stateset", 's{state="a"} 1')),
    (
        "unit_on_info",
        OM,
        _om("# TYPE i_seconds info", "# UNIT i_seconds seconds", 'i_seconds_info{a="b"} 1'),
    ),
    (
        "unit_on_stateset",
        OM,
        _om("# TYPE s_seconds stateset", "# UNIT s_seconds seconds", 's_seconds{s_seconds="a"} 1'),
    ),
    ("unit_not_a_suffix", OM, _om("# TYPE foo counter", "# UNIT foo seconds", "foo_total 1")),
    ("exemplar_on_gauge", OM, _om("# TYPE a gauge", 'a 1 # {t="x"} 1')),
    ("exemplar_on_info", OM, _om("# TYPE i info", 'i_info{a="b"} 1 # {t="x"} 1')),
    ("exemplar_on_created", OM, _om("# TYPE c counter", "c_total 1", 'c_created 1 # {t="x"} 1')),
    ("exemplar_on_summary_count", OM, _om("# TYPE s summary", 's_count 1 # {t="x"} 1', "s_sum 1")),
    (
        "exemplar_on_histogram_sum",
        OM,
        _om("# TYPE h histogram", 'h_bucket{le="+Inf"} 1', "h_count 1", 'h_sum 1 # {t="x"} 1'),
    ),
    (
        "exemplar_129_characters",
        OM,
        _om("# TYPE c counter", 'c_total 1 # {t="' + "x" * 128 + '"} 1'),
    ),
    ("exemplar_timestamp_nan", OM, _om("# TYPE c counter", 'c_total 1 # {t="x"} 1 NaN')),
    ("exemplar_timestamp_inf", OM, _om("# TYPE c counter", 'c_total 1 # {t="x"} 1 +Inf')),
    ("exemplar_without_value", OM, _om("# TYPE c counter", 'c_total 1 # {t="x"}')),
    ("exemplar_without_braces", OM, _om("# TYPE c counter", 'c_total 1 # t="x" 1')),
    ("exemplar_unquoted_value", OM, _om("# TYPE c counter", "c_total 1 # {t=x} 1")),
    ("exemplar_value_not_a_number", OM, _om("# TYPE c counter", 'c_total 1 # {t="x"} one')),
    ("exemplar_extra_field", OM, _om("# TYPE c counter", 'c_total 1 # {t="x"} 1 2 3')),
    (
        "points_interleaved",
        OM,
        _om(
            "# TYPE foo_seconds summary",
            'foo_seconds_count{a="bb"} 0 123',
            'foo_seconds_count{a="bb"} 0 456',
            'foo_seconds_sum{a="bb"} 0 123',
            'foo_seconds_sum{a="bb"} 0 456',
        ),
    ),
    ("timestamps_go_back", OM, _om("# TYPE foo gauge", "foo 17.0 456", "foo 18.0 123")),
    ("timestamps_mixed", OM, _om("# TYPE s summary", "s_count 1 10", "s_sum 1")),
    ("text_counter_negative", TX, _tx("# TYPE a_total counter", 'a_total{x="1"} -1')),
    ("text_counter_nan", TX, _tx("# TYPE a counter", "a NaN")),
    (
        "text_histogram_not_cumulative",
        TX,
        _tx(
            "# TYPE h histogram",
            'h_bucket{le="1"} 2',
            'h_bucket{le="+Inf"} 1',
            "h_count 1",
            "h_sum 1",
        ),
    ),
    (
        "text_le_spelled_inf",
        TX,
        _tx("# TYPE h histogram", 'h_bucket{le="Inf"} 1', "h_count 1", "h_sum 1"),
    ),
    ("text_timestamps_go_back", TX, _tx("# TYPE a gauge", "a 1 2000", "a 2 1000")),
]


# Each invalid case's (reason, problem) as the reader reports it with validation: full.
EXPECTED = {
    "counter_nan": (
        "nan_value",
        "line 2, family a: a_total is NaN; a counter's _total cannot be NaN",
    ),
    "counter_negative": (
        "negative_value",
        "line 2, family a: a_total is -1; it cannot be negative",
    ),
    "counter_negative_labelled": (
        "negative_value",
        "line 3, family a: a_total is -2; it cannot be negative",
    ),
    "histogram_sum_nan": (
        "nan_value",
        "line 4, family h: h_sum is NaN; a histogram's _sum cannot be NaN",
    ),
    "histogram_sum_negative": (
        "negative_value",
        "line 4, family h: h_sum is -1; it cannot be negative",
    ),
    "histogram_count_negative": (
        "negative_value",
        "line 3, family h: h_count is -1; it cannot be negative",
    ),
    "histogram_bucket_negative": (
        "negative_value",
        "line 2, family h: h_bucket is -1; it cannot be negative",
    ),
    "histogram_bucket_nan": (
        "nan_value",
        "line 2, family h: h_bucket is NaN; a histogram's _bucket cannot be NaN",
    ),
    "gaugehistogram_gsum_nan": (
        "nan_value",
        "line 4, family g: g_gsum is NaN; a gaugehistogram's _gsum cannot be NaN",
    ),
    "gaugehistogram_gcount_negative": (
        "negative_value",
        "line 3, family g: g_gcount is -1; it cannot be negative",
    ),
    "summary_sum_negative": (
        "negative_value",
        "line 3, family s: s_sum is -1; it cannot be negative",
    ),
    "summary_count_nan": (
        "nan_value",
        "line 2, family s: s_count is NaN; a summary's _count cannot be NaN",
    ),
    "sum_with_negative_buckets": (
        "sum_with_negative_buckets",
        "line 2, family h: _sum beside buckets below zero (the sum is then no counter)",
    ),
    "negative_gsum_without_negative_buckets": (
        "sum_with_negative_buckets",
        "line 2, family g: _gsum below zero without a bucket below zero",
    ),
    "bucket_not_integer": (
        "non_integer_count",
        "line 2, family h: h_bucket is 0.5, not a whole number",
    ),
    "count_not_integer": (
        "non_integer_count",
        "line 2, family s: s_count is 1.5, not a whole number",
    ),
    "inf_bucket_value": (
        "non_integer_count",
        "line 2, family h: h_bucket is +Inf, not a whole number",
    ),
    "le_spelled_INF": (
        "le_label",
        "line 2, family h: h_bucket has le='+INF'; le is a number, +Inf as such",
    ),
    "le_spelled_inf": (
        "le_label",
        "line 2, family h: h_bucket has le='inf'; le is a number, +Inf as such",
    ),
    "le_missing": (
        "le_label",
        "line 2, family h: h_bucket has no le label; le is a number, not NaN",
    ),
    "le_nan": ("le_label", "line 2, family h: h_bucket has le='NaN'; le is a number, not NaN"),
    "le_not_a_number": (
        "le_label",
        "line 2, family h: h_bucket has le='abc'; le is a number, not NaN",
    ),
    "quantile_above_one": (
        "quantile_label",
        "line 2, family s: s has quantile='1.5'; a quantile is a number in [0, 1]",
    ),
    "quantile_below_zero": (
        "quantile_label",
        "line 2, family s: s has quantile='-0.1'; a quantile is a number in [0, 1]",
    ),
    "quantile_nan": (
        "quantile_label",
        "line 2, family s: s has quantile='NaN'; a quantile is a number in [0, 1]",
    ),
    "quantile_missing": (
        "quantile_label",
        "line 2, family s: s has no quantile label; a quantile is a number",
    ),
    "quantile_value_negative": (
        "negative_value",
        "line 2, family s: s{quantile='0.5'} is -1; it cannot be negative",
    ),
    "info_value_two": ("info_value", "line 2, family i: i_info is 2; an info sample is always 1"),
    "info_value_zero": ("info_value", "line 2, family i: i_info is 0; an info sample is always 1"),
    "stateset_value_two": ("stateset_value", "line 2, family s: s is 2; a state is 0 or 1"),
    "stateset_value_fraction": ("stateset_value", "line 2, family s: s is 0.5; a state is 0 or 1"),
    "stateset_without_its_label": (
        "stateset_label",
        "line 2, family s: s has no 's' label naming its state",
    ),
    "unit_on_info": ("unit", "family i_seconds: info families may not have a unit"),
    "unit_on_stateset": ("unit", "family s_seconds: stateset families may not have a unit"),
    "unit_not_a_suffix": ("unit", "family foo: unit 'seconds' is not the suffix of 'foo'"),
    "exemplar_on_gauge": (
        "exemplar",
        "line 2, family a: a may not carry an exemplar (a gauge's value)",
    ),
    "exemplar_on_info": (
        "exemplar",
        "line 2, family i: i_info may not carry an exemplar (a info's _info)",
    ),
    "exemplar_on_created": (
        "exemplar",
        "line 3, family c: c_created may not carry an exemplar (a counter's _created)",
    ),
    "exemplar_on_summary_count": (
        "exemplar",
        "line 2, family s: s_count may not carry an exemplar (a summary's _count)",
    ),
    "exemplar_on_histogram_sum": (
        "exemplar",
        "line 4, family h: h_sum may not carry an exemplar (a histogram's _sum)",
    ),
    "exemplar_129_characters": (
        "exemplar",
        (
            "line 2, family c: exemplar: its labels are 129 characters long; at most 128 are"
            " allowed; the sample is kept without it"
        ),
    ),
    "exemplar_timestamp_nan": ("malformed", "line 2, family c: exemplar: invalid timestamp 'NaN'"),
    "exemplar_timestamp_inf": ("malformed", "line 2, family c: exemplar: invalid timestamp '+Inf'"),
    "exemplar_without_value": (
        "malformed",
        "line 2, family c: exemplar: expected ' VALUE' or ' VALUE TIMESTAMP' after its labels",
    ),
    "exemplar_without_braces": (
        "malformed",
        "line 2, family c: exemplar: expected '{' after ' # '",
    ),
    "exemplar_unquoted_value": (
        "malformed",
        "line 2, family c: exemplar: label 't': value must be a double-quoted string",
    ),
    "exemplar_value_not_a_number": ("malformed", "line 2, family c: exemplar: invalid value 'one'"),
    "exemplar_extra_field": (
        "malformed",
        "line 2, family c: exemplar: expected ' VALUE' or ' VALUE TIMESTAMP' after its labels",
    ),
    "points_interleaved": (
        "timestamps",
        "line 4, family foo_seconds: foo_seconds_sum: timestamps of one series go back",
    ),
    "timestamps_go_back": (
        "timestamps",
        "line 3, family foo: foo: timestamps of one series go back",
    ),
    "timestamps_mixed": (
        "timestamps",
        "line 3, family s: s_sum: samples of one series with and without timestamps",
    ),
    "text_counter_negative": (
        "negative_value",
        "line 2, family a_total: a_total is -1; it cannot be negative",
    ),
    "text_counter_nan": (
        "nan_value",
        "line 2, family a: a is NaN; a counter's _total cannot be NaN",
    ),
    "text_le_spelled_inf": (
        "le_label",
        "line 2, family h: h_bucket has le='Inf'; le is a number, +Inf as such",
    ),
    "text_timestamps_go_back": (
        "timestamps",
        "line 3, family a: a: timestamps of one series go back",
    ),
}


# The invalid cases that Prometheus ingests and the text format carries as they came: read and
# kept, never refused, and answered in text for the reason OpenMetrics cannot carry them.
CARRIED = {
    "counter_nan": Misfit.COUNTER_VALUE,
    "counter_negative": Misfit.COUNTER_VALUE,
    "counter_negative_labelled": Misfit.COUNTER_VALUE,
    "histogram_sum_nan": Misfit.SUM_VALUE,
    "histogram_sum_negative": Misfit.SUM_VALUE,
    "histogram_count_negative": Misfit.COUNT_VALUE,
    "histogram_bucket_negative": Misfit.COUNT_VALUE,
    "histogram_bucket_nan": Misfit.COUNT_VALUE,
    "gaugehistogram_gsum_nan": Misfit.SUM_VALUE,
    "gaugehistogram_gcount_negative": Misfit.COUNT_VALUE,
    "summary_sum_negative": Misfit.SUM_VALUE,
    "summary_count_nan": Misfit.COUNT_VALUE,
    "sum_with_negative_buckets": Misfit.SUM_VALUE,
    "negative_gsum_without_negative_buckets": Misfit.SUM_VALUE,
    "bucket_not_integer": Misfit.COUNT_VALUE,
    "count_not_integer": Misfit.COUNT_VALUE,
    "inf_bucket_value": Misfit.COUNT_VALUE,
    "le_spelled_INF": Misfit.LE_LABEL,
    "le_spelled_inf": Misfit.LE_LABEL,
    "quantile_above_one": Misfit.QUANTILE_LABEL,
    "quantile_below_zero": Misfit.QUANTILE_LABEL,
    "quantile_nan": Misfit.QUANTILE_LABEL,
    "quantile_value_negative": Misfit.QUANTILE_VALUE,
    "text_counter_negative": Misfit.COUNTER_VALUE,
    "text_counter_nan": Misfit.COUNTER_NAME,  # `a NaN`: first, a counter not named a_total
    "text_le_spelled_inf": Misfit.LE_LABEL,
    "text_timestamps_go_back": Misfit.TIMESTAMPS,
    "buckets_out_of_order": Misfit.HISTOGRAM_SHAPE,
    "bucket_repeated_le": Misfit.HISTOGRAM_SHAPE,
    "buckets_not_cumulative": Misfit.HISTOGRAM_SHAPE,
    "missing_inf_bucket": Misfit.HISTOGRAM_SHAPE,
    "count_differs_from_inf_bucket": Misfit.HISTOGRAM_SHAPE,
    "sum_without_count": Misfit.HISTOGRAM_SHAPE,
    "count_without_sum": Misfit.HISTOGRAM_SHAPE,
    "text_histogram_not_cumulative": Misfit.HISTOGRAM_SHAPE,
}
REFUSED = [case for case in INVALID if case[0] not in CARRIED]


def _params(cases: list[tuple[str, Format, bytes]]) -> list[object]:
    return [pytest.param(fmt, payload, id=name) for name, fmt, payload in cases]


def _invalid_params() -> list[object]:
    return [pytest.param(fmt, payload, *EXPECTED[name], id=name) for name, fmt, payload in REFUSED]


def _carried_params() -> list[object]:
    return [
        pytest.param(fmt, payload, CARRIED[name], id=name)
        for name, fmt, payload in INVALID
        if name in CARRIED
    ]


@pytest.mark.parametrize("verify", list(Verify))
@pytest.mark.parametrize(("fmt", "payload"), _params(VALID))
def test_valid_input_is_accepted_and_written_back_valid(
    fmt: Format, payload: bytes, verify: Verify
) -> None:
    exposition = read_exposition(payload, fmt, verify)
    assert exposition.problems == []
    om = write_exposition(exposition.families, Format.OPENMETRICS)
    text = write_exposition(exposition.families, Format.TEXT)
    list(parse_om(om.decode()))
    list(parse_text(text.decode()))
    if verify is Verify.FULL:  # one promtool run per case is enough
        promtool_check_metrics(text)


@pytest.mark.parametrize(("fmt", "payload", "reason", "message"), _invalid_params())
def test_invalid_input_is_refused_with_its_exact_problem(
    fmt: Format, payload: bytes, reason: str, message: str
) -> None:
    exposition = read_exposition(payload, fmt, Verify.FULL)
    assert [(p.reason, str(p)) for p in exposition.problems] == [(reason, message)]
    assert reason in REASONS | {"malformed"}


@pytest.mark.parametrize(("fmt", "payload", "reason", "message"), _invalid_params())
def test_the_default_validation_refuses_the_same(
    fmt: Format, payload: bytes, reason: str, message: str
) -> None:
    exposition = read_exposition(payload, fmt, Verify.STRUCTURE)
    assert [(p.reason, str(p)) for p in exposition.problems] == [(reason, message)]


@pytest.mark.parametrize(("fmt", "payload", "reason", "message"), _invalid_params())
def test_a_refused_family_leaves_the_rest_served(
    fmt: Format, payload: bytes, reason: str, message: str
) -> None:
    """The problem drops its family only: a valid family after it is read and served."""
    del reason, message
    tail = b"# TYPE zz_after gauge\nzz_after 1\n"
    body = payload[: -len(b"# EOF\n")] + tail + b"# EOF\n" if fmt is OM else payload + tail
    exposition = read_exposition(body, fmt, Verify.FULL)
    assert len(exposition.problems) == 1
    assert "zz_after" in {family.name for family in exposition.families}
    list(parse_om(write_exposition(exposition.families, Format.OPENMETRICS).decode()))


@pytest.mark.parametrize("verify", list(Verify))
@pytest.mark.parametrize(("fmt", "payload", "misfit"), _carried_params())
def test_what_only_the_text_format_carries_is_kept_whole_for_a_text_answer(
    fmt: Format, payload: bytes, misfit: Misfit, verify: Verify
) -> None:
    """Prometheus ingests it from the engine: the bridge keeps every sample as it came, and
    knows the answer must be text (OpenMetrics readers refuse it)."""
    exposition = read_exposition(payload, fmt, verify)
    assert exposition.problems == []
    assert openmetrics_misfit(exposition.families) is misfit
    text = write_exposition(exposition.families, Format.TEXT)
    list(parse_text(text.decode()))
    again = read_exposition(text, Format.TEXT, Verify.FULL)
    assert again.problems == []

    came = read_exposition(payload, fmt, Verify.FULL)  # every family parsed
    assert _samples(again.families) == _samples(came.families)
    if verify is Verify.FULL:
        promtool_check_metrics(text)


def _samples(families: list[AnyFamily]) -> str:
    """Every sample's name, labels, value and timestamp, NaN equal to NaN (by its repr)."""
    return repr(
        [
            (s.name, s.labels, s.value, s.timestamp)
            for family in families
            if isinstance(family, Family)
            for s in family.samples
        ]
    )


@pytest.mark.parametrize("verify", list(Verify))
def test_an_exemplar_too_long_is_dropped_and_its_sample_kept(verify: Verify) -> None:
    """Prometheus stores the sample and refuses the exemplar alone (its storage's 128 limit)."""
    payload = _om(
        "# TYPE c counter",
        'c_total 1 # {t="' + "x" * 128 + '"} 1',
        'c_total{a="1"} 2 # {t="' + "x" * 127 + '"} 1',
    )
    exposition = read_exposition(payload, OM, verify)
    assert [(p.reason, p.line, p.family_kept) for p in exposition.problems] == [
        ("exemplar", 2, True)
    ]
    (family,) = exposition.families
    assert isinstance(family, Family)
    assert [(s.value, s.exemplar) for s in family.samples] == [
        (1.0, None),
        (2.0, '{t="' + "x" * 127 + '"} 1'),
    ]
    list(parse_om(write_exposition(exposition.families, Format.OPENMETRICS).decode()))


def test_an_info_sample_without_its_suffix_is_read_as_the_gauge_prometheus_stores() -> None:
    """openmetricsparse_test.go's `ii{foo="bar"} 1` under `# TYPE ii info`: series `ii`."""
    payload = _om("# TYPE ii info", 'ii{foo="bar"} 1')
    exposition = read_exposition(payload, OM, Verify.FULL)
    assert exposition.problems == []
    (family,) = exposition.families
    assert (family.meta.name, family.meta.type) == ("ii", MetricType.GAUGE)
    assert isinstance(family, Family)
    assert [(s.name, s.labels, s.value) for s in family.samples] == [("ii", (("foo", "bar"),), 1)]
    mixed = _om("# TYPE ii info", 'ii_info{foo="bar"} 1', 'ii{foo="baz"} 1')
    assert [p.line for p in read_exposition(mixed, OM, Verify.FULL).problems] == [3]
