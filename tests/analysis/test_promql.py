"""Tests for PromQL analysis and Grafana variable substitution, one quirk per test."""

from __future__ import annotations

import pytest

from metricbridge.analysis.promql import (
    VARIABLE_PLACEHOLDER,
    LabelMatcher,
    LabelUse,
    LabelUseKind,
    MatchOp,
    PromQLError,
    Selector,
    analyze,
    substitute_grafana_variables,
)
from metricbridge.analysis.templating import variable_query_expr
from metricbridge.errors import MetricbridgeError

ANY = VARIABLE_PLACEHOLDER
REQUESTS = "sglang:num_requests_total"
TTFT = "sglang:time_to_first_token_seconds_bucket"

# --- substitution ----------------------------------------------------------------------------

SUBSTITUTIONS = [
    pytest.param("rate(x[$__rate_interval])", "rate(x[5m])", id="rate_interval_becomes_5m"),
    pytest.param("rate(x[$__interval])", "rate(x[1m])", id="interval_becomes_1m"),
    pytest.param("increase(x[$__range])", "increase(x[1h])", id="range_becomes_1h"),
    pytest.param("x * $__interval_ms / 1000", "x * 60000 / 1000", id="interval_ms_is_a_number"),
    pytest.param("x / $__range_ms", "x / 3600000", id="range_ms_is_a_number"),
    pytest.param("x / $__rate_interval_ms", "x / 300000", id="rate_interval_ms_is_not_cut_short"),
    pytest.param("increase(x[${__range_s}s])", "increase(x[3600s])", id="range_s_with_unit_suffix"),
    pytest.param("increase(x[${__range_s:glob}s])", "increase(x[3600s])", id="range_s_with_format"),
    pytest.param(
        "max_over_time(x[$__range:$__interval])", "max_over_time(x[1h:1m])", id="subquery"
    ),
    pytest.param("x @ ${__to:date:seconds}", "x @ 1700003600", id="to_with_date_format_is_seconds"),
    pytest.param('x{m=~"$model"}', f'x{{m=~"{ANY}"}}', id="dollar_variable_in_matcher"),
    pytest.param('x{m=~"${model}"}', f'x{{m=~"{ANY}"}}', id="braced_variable_in_matcher"),
    pytest.param('x{m=~"${model:regex}"}', f'x{{m=~"{ANY}"}}', id="braced_variable_regex_format"),
    pytest.param('x{i=~"${instance:pipe}"}', f'x{{i=~"{ANY}"}}', id="braced_variable_pipe_format"),
    pytest.param('x{job="[[job]]"}', f'x{{job="{ANY}"}}', id="legacy_double_bracket_variable"),
    pytest.param("x{job='$job'}", f"x{{job='{ANY}'}}", id="variable_in_single_quoted_string"),
    pytest.param('x{job=~"$job.*"}', f'x{{job=~"{ANY}.*"}}', id="variable_inside_longer_regex"),
    pytest.param("rate(x[$window])", "rate(x[5m])", id="unknown_variable_in_range_is_duration"),
    pytest.param("rate(x[[[window]]])", "rate(x[5m])", id="legacy_variable_in_range_is_duration"),
    pytest.param("x offset $shift", "x offset 5m", id="variable_after_offset_is_duration"),
    pytest.param("topk($n, x)", "topk(1, x)", id="variable_as_topk_parameter_is_number"),
    pytest.param("x > $threshold", "x > 1", id="variable_as_threshold_is_number"),
    pytest.param("sum by ($group) (x)", f"sum by ({ANY}) (x)", id="variable_in_by_clause_is_name"),
    pytest.param("x * on ($l) y", f"x * on ({ANY}) y", id="variable_in_on_clause_is_name"),
    pytest.param('{$label!=""}', f'{{{ANY}!=""}}', id="variable_as_matcher_label_name"),
    pytest.param(
        "rate(${m}_total[5m])", f"rate({ANY}_total[5m])", id="variable_inside_metric_name"
    ),
    pytest.param('$metric{job="a"}', f'{ANY}{{job="a"}}', id="variable_as_metric_before_braces"),
    pytest.param("rate($metric[5m])", f"rate({ANY}[5m])", id="variable_as_metric_before_range"),
    pytest.param(
        'label_replace(x, "dst", "$1", "src", "(.*)")',
        'label_replace(x, "dst", "$1", "src", "(.*)")',
        id="label_replace_capture_reference_is_not_a_variable",
    ),
    pytest.param("sum(\r\n  x\r\n)", "sum(\n  x\n)", id="crlf_becomes_lf"),
    pytest.param("sum(\r  x)", "sum(\n  x)", id="lone_cr_becomes_lf"),
    pytest.param("sum(x) # by $var\n", "sum(x) # by $var\n", id="comment_is_left_alone"),
]


@pytest.mark.parametrize(("expr", "expected"), SUBSTITUTIONS)
def test_substitution_keeps_the_query_valid(expr: str, expected: str) -> None:
    """Each Grafana variable form is replaced by something that parses where it stands."""
    result = substitute_grafana_variables(expr)
    assert result == expected
    analyze(result)


KNOWN_VALUES = [
    pytest.param(
        'x{cache_source="$cache_source"}',
        {"cache_source": "storage_MooncakeStore"},
        'x{cache_source="storage_MooncakeStore"}',
        id="known_value_in_matcher",
    ),
    pytest.param(
        "histogram_quantile($quantile, x)",
        {"quantile": "0.99"},
        "histogram_quantile(0.99, x)",
        id="known_value_outside_strings_is_verbatim",
    ),
    pytest.param(
        'x{a="$v"}', {"v": 'say "hi"'}, r'x{a="say \"hi\""}', id="known_value_escaped_in_strings"
    ),
    pytest.param(
        'x{a=~"${v:regex}"}', {"v": "a.b"}, r'x{a=~"a\\.b"}', id="known_value_with_regex_format"
    ),
    pytest.param("x{a=`$v`}", {"v": "a\\b"}, "x{a=`a\\b`}", id="known_value_raw_in_backticks"),
    pytest.param(
        "rate(x[$__rate_interval])",
        {"__rate_interval": "2m"},
        "rate(x[2m])",
        id="known_overrides_builtin",
    ),
]


@pytest.mark.parametrize(("expr", "variables", "expected"), KNOWN_VALUES)
def test_known_variable_values_are_substituted(
    expr: str, variables: dict[str, str], expected: str
) -> None:
    """A variable with a known value (constant, custom) is replaced by that value."""
    result = substitute_grafana_variables(expr, variables)
    assert result == expected
    analyze(result)


# --- variable queries ------------------------------------------------------------------------

VARIABLE_QUERIES = [
    pytest.param(
        "label_values(sglang:num_running_reqs, model_name)",
        "count by (model_name) (sglang:num_running_reqs)",
        id="label_values_with_metric",
    ),
    pytest.param(
        'label_values(sglang:num_running_reqs{a="1",b="2"}, instance)',
        'count by (instance) (sglang:num_running_reqs{a="1",b="2"})',
        id="label_values_with_commas_inside_the_selector",
    ),
    pytest.param(
        "label_values(\n  sglang:num_running_reqs,\n  model_name\n)",
        "count by (model_name) (sglang:num_running_reqs)",
        id="label_values_over_several_lines",
    ),
    pytest.param(
        "label_values(job)", 'count by (job) ({job!=""})', id="label_values_without_metric"
    ),
    pytest.param(
        f"query_result(topk(5, {REQUESTS}))", f"topk(5, {REQUESTS})", id="query_result_is_its_query"
    ),
    pytest.param(
        "metrics(sglang:.*_bucket)",
        '{__name__=~".*(?:sglang:.*_bucket).*"}',
        id="metrics_regex_is_unanchored_name_regex",
    ),
    pytest.param("label_names()", None, id="label_names_needs_nothing"),
    pytest.param(
        "sglang:query_result_total", "sglang:query_result_total", id="metric_named_query_result"
    ),
    pytest.param(
        f'{REQUESTS}{{job="a"}}', f'{REQUESTS}{{job="a"}}', id="other_query_is_a_selector"
    ),
]


@pytest.mark.parametrize(("query", "expected"), VARIABLE_QUERIES)
def test_variable_query_becomes_promql(query: str, expected: str | None) -> None:
    """Grafana's variable query functions become PromQL that needs the same data."""
    assert variable_query_expr(query) == expected


# --- analysis --------------------------------------------------------------------------------


def test_selector_metric_and_every_matcher_op() -> None:
    """A selector yields its metric name and each matcher with its operator."""
    usage = analyze(f'{REQUESTS}{{model_name="llama", instance!="a", job=~"s.*", le!~"1"}}')
    assert usage.selectors == (
        Selector(
            REQUESTS,
            (
                LabelMatcher("model_name", MatchOp.EQUAL, "llama", is_variable=False),
                LabelMatcher("instance", MatchOp.NOT_EQUAL, "a", is_variable=False),
                LabelMatcher("job", MatchOp.RE, "s.*", is_variable=False),
                LabelMatcher("le", MatchOp.NOT_RE, "1", is_variable=False),
            ),
        ),
    )


def test_matrix_selector_is_marked_as_range() -> None:
    """A selector under ``[5m]`` is reported with ``is_range``."""
    (selector,) = analyze(f"rate({REQUESTS}[5m])").selectors
    assert selector.is_range
    assert selector.metric == REQUESTS


def test_placeholder_value_marks_matcher_as_variable() -> None:
    """A matcher whose value holds the placeholder means "any value"."""
    (selector,) = analyze(f'{REQUESTS}{{model_name=~"{ANY}.*", job="sglang"}}').selectors
    assert [m.is_variable for m in selector.matchers] == [True, False]


def test_placeholder_label_name_marks_matcher_as_variable() -> None:
    """``label_values($label)`` gives a matcher whose name is a variable."""
    (selector,) = analyze(f'count by (job) ({{{ANY}!=""}})').selectors
    assert selector.matchers[0].is_variable


def test_name_regex_selector_has_no_metric() -> None:
    """``{__name__=~"sglang:.*"}`` has no metric name, only a name matcher."""
    (selector,) = analyze('{__name__=~"sglang:.*"}').selectors
    assert selector.metric is None
    name_regex = LabelMatcher("__name__", MatchOp.RE, "sglang:.*", is_variable=False)
    assert selector.name_matchers == (name_regex,)
    assert selector.matchers == ()


def test_name_equality_matcher_becomes_the_metric() -> None:
    """``{__name__="m"}`` names the metric as ``m`` does (the parser keeps it a matcher)."""
    (selector,) = analyze(f'{{__name__="{REQUESTS}", model_name="a"}}').selectors
    assert selector.metric == REQUESTS
    assert selector.name_matchers == ()
    assert [m.name for m in selector.matchers] == ["model_name"]


def test_quoted_utf8_metric_name_becomes_the_metric() -> None:
    """Prometheus 3's ``{"sglang:name"}`` form names the metric."""
    (selector,) = analyze(f'{{"{REQUESTS}", model_name="a"}}').selectors
    assert selector.metric == REQUESTS


def test_or_matchers_become_alternatives() -> None:
    """Prometheus 3's ``{a="1" or b="2"}`` keeps each group."""
    (selector,) = analyze(f'{REQUESTS}{{model_name="a" or instance="b"}}').selectors
    assert selector.matchers == ()
    assert [[m.name for m in group] for group in selector.alternatives] == [
        ["model_name"],
        ["instance"],
    ]


def test_aggregation_by_labels_are_tied_to_their_selectors() -> None:
    """``sum by (...)`` labels are checked against the selectors it aggregates, not others."""
    usage = analyze(f"sum by (model_name) (rate({REQUESTS}[5m])) / scalar(sum(up))")
    (use,) = usage.label_uses
    assert use.kind is LabelUseKind.BY
    assert use.labels == ("model_name",)
    assert [s.metric for s in use.selectors] == [REQUESTS]


def test_trailing_by_clause() -> None:
    """``sum(x) by (l)`` is the same as ``sum by (l) (x)``."""
    assert analyze(f"sum({REQUESTS}) by (model_name)").label_uses[0].labels == ("model_name",)


def test_aggregation_without_labels() -> None:
    """``without (...)`` labels are reported with their own kind."""
    (use,) = analyze(f"sum without (instance) ({REQUESTS})").label_uses
    assert (use.kind, use.labels) == (LabelUseKind.WITHOUT, ("instance",))


def test_on_labels_apply_to_both_sides() -> None:
    """``on (...)`` needs its labels on both operands."""
    (use,) = analyze(f"{REQUESTS} / on (model_name) sglang:num_running_reqs").label_uses
    assert use.kind is LabelUseKind.ON
    assert [s.metric for s in use.selectors] == [REQUESTS, "sglang:num_running_reqs"]


def test_ignoring_labels() -> None:
    """``ignoring (...)`` labels are reported with their own kind."""
    (use,) = analyze(f"{REQUESTS} / ignoring (cache_source) y").label_uses
    assert (use.kind, use.labels) == (LabelUseKind.IGNORING, ("cache_source",))


def test_group_left_labels_come_from_the_right_side() -> None:
    """``group_left (l)`` copies ``l`` from the "one" side, so ``l`` must be on the right."""
    uses = analyze(f"{REQUESTS} * on (instance) group_left (version) sglang_info").label_uses
    assert uses[1] == LabelUse(
        LabelUseKind.GROUP_LEFT, ("version",), (Selector("sglang_info", ()),)
    )


def test_group_right_labels_come_from_the_left_side() -> None:
    """``group_right (l)`` copies ``l`` from the left operand."""
    uses = analyze(f"sglang_info * ignoring (x) group_right (version) {REQUESTS}").label_uses
    assert uses[1] == LabelUse(
        LabelUseKind.GROUP_RIGHT, ("version",), (Selector("sglang_info", ()),)
    )


def test_label_replace_source_label_is_required() -> None:
    """``label_replace``'s source label must exist on its input."""
    (use,) = analyze(f'label_replace({REQUESTS}, "m", "$1", "model_name", "(.*)")').label_uses
    assert (use.kind, use.labels) == (LabelUseKind.LABEL_REPLACE, ("model_name",))
    assert use.selectors[0].metric == REQUESTS


def test_label_join_source_labels_are_required() -> None:
    """``label_join``'s source labels (all after the separator) must exist."""
    (use,) = analyze(f'label_join({REQUESTS}, "id", "/", "instance", "model_name")').label_uses
    assert (use.kind, use.labels) == (LabelUseKind.LABEL_JOIN, ("instance", "model_name"))


def test_label_created_by_label_replace_is_not_required_by_outer_by() -> None:
    """A ``by`` over a label that ``label_replace`` creates needs nothing from the data."""
    expr = f'sum by (model, le) (label_replace({TTFT}, "model", "$1", "model_name", "(.*)"))'
    by = next(u for u in analyze(expr).label_uses if u.kind is LabelUseKind.BY)
    assert by.labels == ("le",)


def test_label_created_by_count_values_is_not_required() -> None:
    """``count_values("v", ...)`` creates ``v``; an outer ``by (v)`` needs nothing."""
    usage = analyze(f'sum by (v) (count_values("v", {REQUESTS}))')
    assert usage.label_uses == ()


def test_histogram_quantile_requires_le() -> None:
    """``histogram_quantile`` over classic buckets reads ``le`` even without ``by (le)``."""
    (use,) = analyze(f"histogram_quantile(0.99, rate({TTFT}[5m]))").label_uses
    assert (use.kind, use.labels, use.selectors[0].metric) == (
        LabelUseKind.HISTOGRAM_QUANTILE,
        ("le",),
        TTFT,
    )


def test_sort_by_label() -> None:
    """``sort_by_label`` reads the labels it sorts by."""
    (use,) = analyze(f'sort_by_label({REQUESTS}, "model_name")').label_uses
    assert (use.kind, use.labels) == (LabelUseKind.SORT_BY_LABEL, ("model_name",))


def test_selectors_inside_subquery_offset_and_at() -> None:
    """Selectors under subqueries, ``offset`` and ``@`` are still found."""
    usage = analyze(f"max_over_time(rate({REQUESTS}[1m] offset 1h)[1d:5m] @ end())")
    assert usage.metric_names == (REQUESTS,)


def test_selectors_inside_aggregation_parameter() -> None:
    """``topk(scalar(y), x)`` reads ``y`` too."""
    usage = analyze(f"topk(scalar(sglang:max_total_num_tokens), {REQUESTS})")
    assert usage.metric_names == ("sglang:max_total_num_tokens", REQUESTS)


def test_variable_label_in_by_clause_is_left_out() -> None:
    """A label name that came from a variable cannot be checked, so it is not reported."""
    (use,) = analyze(f"sum by (le, {ANY}) ({TTFT})").label_uses
    assert use.labels == ("le",)


def test_empty_by_clause_reports_nothing() -> None:
    """``sum by () (x)`` and ``and on () y`` read no label."""
    assert analyze(f"sum by () ({REQUESTS}) and on () vector(1)").label_uses == ()


def test_repeated_selector_is_reported_once() -> None:
    """The same selector twice in one expression is one requirement."""
    usage = analyze(f"rate({REQUESTS}[5m]) / rate({REQUESTS}[5m])")
    assert len(usage.selectors) == 1


def test_functions_are_listed_once_sorted() -> None:
    """Function names come back sorted and without repeats."""
    usage = analyze(f"rate({REQUESTS}[5m]) + irate({REQUESTS}[5m]) + rate(up[5m])")
    assert usage.functions == ("irate", "rate")


def test_metric_names_leave_out_variable_names() -> None:
    """A metric name built from a variable is not a name to check."""
    usage = analyze(f"rate({ANY}_total[5m]) + rate({REQUESTS}[5m])")
    assert usage.metric_names == (REQUESTS,)
    assert usage.selectors[0].metric_is_variable


def test_backtick_raw_string_with_backslash() -> None:
    r"""Backtick strings are raw; promql_parser wrongly rejects `` `\d+` `` (worked around)."""
    (selector,) = analyze(f"{REQUESTS}{{instance=~`\\d+:30000`}}").selectors
    assert selector.matchers[0].value == "\\d+:30000"


def test_no_break_space_outside_strings_is_a_parse_error() -> None:
    """Prometheus' lexer takes only ASCII whitespace; a pasted no-break space breaks the query."""
    with pytest.raises(PromQLError, match="unexpected character"):
        analyze(f"sum({REQUESTS})\u00a0by (model_name)")


def test_no_break_space_inside_string_is_data() -> None:
    """Inside a label value a no-break space is data and stays."""
    (selector,) = analyze(f'{REQUESTS}{{model_name="a\u00a0b"}}').selectors
    assert selector.matchers[0].value == "a\u00a0b"


def test_comment_in_expression() -> None:
    """PromQL ``#`` comments are allowed."""
    assert analyze(f"sum({REQUESTS}) # total\n").metric_names == (REQUESTS,)


def test_parse_error_carries_the_parser_message() -> None:
    """A syntax error raises ``PromQLError`` with the parser's own words and the input."""
    with pytest.raises(PromQLError) as info:
        analyze(f"sum(rate({REQUESTS}[5m])")
    assert info.value.message == "unclosed left parenthesis"
    assert info.value.expr == f"sum(rate({REQUESTS}[5m])"
    assert isinstance(info.value, MetricbridgeError)


def test_unsubstituted_grafana_variable_is_a_parse_error() -> None:
    """``analyze`` does not substitute: ``$__rate_interval`` alone does not parse."""
    with pytest.raises(PromQLError, match=r"\$"):
        analyze(f"rate({REQUESTS}[$__rate_interval])")


def test_empty_expression_is_a_parse_error() -> None:
    """An empty query is reported, not silently accepted."""
    with pytest.raises(PromQLError, match="no expression found"):
        analyze("  ")


def test_deeply_nested_expression_is_a_parse_error_not_recursion_error() -> None:
    """Deep nesting overflows Python's stack (parser bindings or walk): a PromQLError too."""
    with pytest.raises(PromQLError, match="nested too deeply"):
        analyze("(" * 1500 + REQUESTS + ")" * 1500)


def test_selector_renders_as_promql_that_parses_back() -> None:
    """``str(selector)`` is PromQL naming the same series."""
    expr = f'{REQUESTS}{{model_name=~"a\\\\.b", job="say \\"hi\\""}}'
    (selector,) = analyze(expr).selectors
    assert analyze(str(selector)).selectors == (selector,)
