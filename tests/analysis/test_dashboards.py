"""Tests for reading dashboards, rule files and PromQL files into queries, one quirk per test.

Fixtures live in ``tests/dashboards/``; quirks that need a file of their own are written to
``tmp_path`` by ``write_dashboard``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from helpers.paths import TESTS
from metricbridge.analysis.dashboards import (
    InputError,
    LoadResult,
    ProblemKind,
    Query,
    QueryKind,
    load_queries,
)
from metricbridge.analysis.promql import VARIABLE_PLACEHOLDER, MatchOp
from metricbridge.errors import MetricbridgeError

DASHBOARDS = TESTS / "dashboards"
ANY = VARIABLE_PLACEHOLDER
PROM = {"type": "prometheus", "uid": "prom"}


def load(name: str) -> LoadResult:
    """Load one fixture file."""
    return load_queries(DASHBOARDS / name)


def query_at(result: LoadResult, location: str) -> Query:
    """The one query at ``location``; fails listing what there is otherwise."""
    found = [q for q in result.queries if q.location == location]
    assert len(found) == 1, [q.location for q in result.queries]
    return found[0]


def problems_at(result: LoadResult, location: str) -> list[str]:
    """The messages of the problems at ``location``."""
    return [p.message for p in result.problems if p.location == location]


def write_dashboard(tmp_path: Path, name: str = "board.json", **board: object) -> Path:
    """Write a minimal dashboard with the given top-level keys."""
    path = tmp_path / name
    path.write_text(json.dumps({"title": "t", "panels": [], **board}), encoding="utf-8")
    return path


def panel(title: str, *targets: Mapping[str, object], **extra: object) -> dict[str, object]:
    """A timeseries panel with targets."""
    return {"type": "timeseries", "title": title, "targets": list(targets), **extra}


@pytest.fixture(scope="module")
def overview() -> LoadResult:
    """The main fixture: rows, every common panel type, every variable form, an annotation."""
    return load("sglang_overview.json")


# --- panels and rows -------------------------------------------------------------------------


def test_expanded_row_owns_the_panels_that_follow_it(overview: LoadResult) -> None:
    """Top-level panels after an expanded row are located inside that row."""
    query = query_at(overview, 'row "Throughput" > panel "Request rate" > query A')
    assert query.kind is QueryKind.PANEL_TARGET
    assert query.usage.metric_names == ("sglang:num_requests_total",)


def test_panels_nested_in_collapsed_rows_are_found(overview: LoadResult) -> None:
    """A collapsed row keeps its panels in ``panels[].panels``; they are walked too."""
    query = query_at(overview, 'row "Latency" > panel "Queue wait p90" > query A')
    assert query.usage.metric_names == ("sglang:request_waiting_time_bucket",)


def test_legacy_rows_panels_are_found() -> None:
    """Dashboards before schemaVersion 16 keep panels in ``rows[].panels``."""
    result = load("legacy_rows.json")
    assert [q.location for q in result.queries if q.kind is QueryKind.PANEL_TARGET] == [
        'row "Overview" > panel "Prompt tokens" > query A',
        'row "Overview" > panel "Running requests" > query A',
        'row "Cache" > panel "Cache hit rate" > query A',
    ]


@pytest.mark.parametrize(
    ("location", "metric"),
    [
        pytest.param(
            'row "Latency" > panel "TTFT heatmap" > query A',
            "sglang:time_to_first_token_seconds_bucket",
            id="heatmap",
        ),
        pytest.param(
            'row "Throughput" > panel "Running requests" > query A',
            "sglang:num_running_reqs",
            id="stat",
        ),
        pytest.param(
            'row "Throughput" > panel "Token usage" > query A', "sglang:token_usage", id="gauge"
        ),
        pytest.param(
            'row "Throughput" > panel "Cached tokens by source" > query A',
            "sglang:cached_tokens_total",
            id="bargauge",
        ),
        pytest.param(
            'row "Latency" > panel "Queue wait" > query A',
            "sglang:request_waiting_time_sum",
            id="table",
        ),
    ],
)
def test_every_panel_type_with_targets_is_read(
    overview: LoadResult, location: str, metric: str
) -> None:
    """No panel-type allow-list: heatmap, stat, gauge, bargauge and table targets all count."""
    assert metric in query_at(overview, location).usage.metric_names


def test_text_panel_without_targets_is_ignored(overview: LoadResult) -> None:
    """A text panel has no queries and is no problem."""
    assert not [q for q in overview.queries if '"Notes"' in q.location]
    assert not [p for p in overview.problems if '"Notes"' in p.location]


def test_hidden_target_is_still_checked(overview: LoadResult) -> None:
    """``hide: true`` hides a series from the graph, but the query still runs."""
    query = query_at(overview, 'row "Latency" > panel "TTFT p99" > query B')
    assert query.raw.startswith("histogram_quantile(0.5,")


def test_untitled_panel_is_located_by_id(tmp_path: Path) -> None:
    """A panel without a title is named by its id."""
    path = write_dashboard(tmp_path, panels=[{"id": 7, "targets": [{"refId": "A", "expr": "up"}]}])
    assert [q.location for q in load_queries(path).queries] == ["panel #7 > query A"]


def test_target_without_ref_id_is_located_by_position(tmp_path: Path) -> None:
    """A target without ``refId`` is named by its 1-based position."""
    path = write_dashboard(tmp_path, panels=[panel("P", {"expr": "a"}, {"expr": "b"})])
    assert [q.location for q in load_queries(path).queries] == [
        'panel "P" > query #1',
        'panel "P" > query #2',
    ]


def test_empty_expr_target_is_skipped(tmp_path: Path) -> None:
    """A target with an empty ``expr`` (a new, unfinished query) is neither query nor problem."""
    path = write_dashboard(tmp_path, panels=[panel("P", {"refId": "A", "expr": "  "})])
    assert load_queries(path) == LoadResult((), ())


def test_queries_come_in_document_order(overview: LoadResult) -> None:
    """Panels first in layout order, then variables, then annotations."""
    kinds = [q.kind for q in overview.queries]
    assert kinds == sorted(kinds, key=[*QueryKind].index)
    assert overview.queries[0].location.startswith('row "Throughput" > panel "Request rate"')


# --- expressions and legends -----------------------------------------------------------------


def test_crlf_inside_expression_is_normalised(overview: LoadResult) -> None:
    """An expression saved with Windows line ends is analysed with LF only."""
    query = query_at(overview, 'row "Latency" > panel "Queue wait" > query A')
    assert "\r" in query.raw
    assert "\r" not in query.expr
    assert query.usage.metric_names == (
        "sglang:request_waiting_time_count",
        "sglang:request_waiting_time_sum",
    )


def test_rate_interval_is_substituted(overview: LoadResult) -> None:
    """``$__rate_interval`` becomes a duration so the query parses."""
    query = query_at(overview, 'row "Throughput" > panel "Request rate" > query A')
    assert "[5m]" in query.expr
    assert "$__rate_interval" in query.raw


def test_interval_ms_is_substituted_as_a_number(overview: LoadResult) -> None:
    """``$__interval_ms`` is used as a number, not a duration."""
    query = query_at(overview, 'row "Throughput" > panel "Generated tokens per interval" > query A')
    assert query.expr.endswith("* 60000 / 1000")


def test_range_s_with_unit_suffix_is_substituted(overview: LoadResult) -> None:
    """``[${__range_s}s]`` becomes a valid range."""
    query = query_at(overview, 'row "Throughput" > panel "Requests in range" > query A')
    assert "[3600s]" in query.expr


def test_legend_format_labels_are_collected(overview: LoadResult) -> None:
    """``{{label}}`` in ``legendFormat`` names labels the panel reads."""
    query = query_at(overview, 'row "Throughput" > panel "Cached tokens by source" > query B')
    assert query.legend_labels == ("cache_source", "instance")


def test_auto_legend_reads_no_label(overview: LoadResult) -> None:
    """``legendFormat: "__auto"`` is Grafana's automatic legend, not a label."""
    assert (
        query_at(overview, 'row "Throughput" > panel "Token usage" > query A').legend_labels == ()
    )


def test_heatmap_le_legend(overview: LoadResult) -> None:
    """A heatmap's ``{{le}}`` legend reads the bucket label."""
    query = query_at(overview, 'row "Latency" > panel "TTFT heatmap" > query A')
    assert query.legend_labels == ("le",)


# --- template variables ----------------------------------------------------------------------


def test_query_variable_in_matcher_is_any_value(overview: LoadResult) -> None:
    """``=~"$model_name"`` matches whatever the user picks: the matcher is a variable."""
    query = query_at(overview, 'row "Throughput" > panel "Request rate" > query A')
    matchers = query.usage.selectors[0].matchers
    assert [(m.name, m.value, m.is_variable) for m in matchers] == [
        ("model_name", ANY, True),
        ("instance", ANY, True),
    ]


@pytest.mark.parametrize(
    "location",
    [
        pytest.param('row "Throughput" > panel "Running requests" > query A', id="regex_format"),
        pytest.param('row "Throughput" > panel "Cached tokens by source" > query B', id="pipe"),
        pytest.param('row "Throughput" > panel "Token usage" > query A', id="double_brackets"),
    ],
)
def test_formatted_and_legacy_variables_are_any_value(overview: LoadResult, location: str) -> None:
    """``${var:regex}``, ``${var:pipe}`` and ``[[var]]`` are variables too."""
    (selector,) = query_at(overview, location).usage.selectors
    assert [m.is_variable for m in selector.matchers] == [True]


def test_label_values_with_metric_variable(overview: LoadResult) -> None:
    """``label_values(m, l)`` needs label ``l`` on metric ``m``."""
    query = query_at(overview, 'variable "model_name"')
    assert query.kind is QueryKind.TEMPLATE_VARIABLE
    assert query.raw == "label_values(sglang:num_running_reqs, model_name)"
    (use,) = query.usage.label_uses
    assert (use.labels, use.selectors[0].metric) == (("model_name",), "sglang:num_running_reqs")


def test_variable_query_as_object(overview: LoadResult) -> None:
    """Grafana 10's variable editor saves ``{"query": ..., "refId": ...}``."""
    query = query_at(overview, 'variable "instance"')
    assert query.usage.label_uses[0].labels == ("instance",)
    assert query.usage.selectors[0].matchers[0].is_variable


def test_label_values_without_metric_variable(overview: LoadResult) -> None:
    """``label_values(l)`` needs some series carrying ``l``."""
    (selector,) = query_at(overview, 'variable "job"').usage.selectors
    assert selector.metric is None
    assert [(m.name, m.op) for m in selector.matchers] == [("job", MatchOp.NOT_EQUAL)]


def test_query_result_variable(overview: LoadResult) -> None:
    """``query_result(e)`` needs what ``e`` needs; ``$__range`` inside is substituted."""
    query = query_at(overview, 'variable "top_model"')
    assert query.usage.metric_names == ("sglang:num_requests_total",)
    assert "[1h]" in query.expr


def test_metrics_regex_variable(overview: LoadResult) -> None:
    """``metrics(re)`` becomes a metric-name regex requirement."""
    (selector,) = query_at(overview, 'variable "histogram"').usage.selectors
    assert selector.metric is None
    assert selector.name_matchers[0].value == ".*(?:sglang:.*_seconds_bucket).*"


def test_custom_variable_value_is_substituted(overview: LoadResult) -> None:
    """A custom variable's selected value is used: ``histogram_quantile($quantile, ...)``."""
    query = query_at(overview, 'row "Latency" > panel "TTFT p99" > query A')
    assert query.expr.startswith("histogram_quantile(0.99,")


def test_constant_variable_value_is_substituted(overview: LoadResult) -> None:
    """A constant variable is a fixed value: its label value is required as written."""
    query = query_at(overview, 'row "Throughput" > panel "Cached tokens by source" > query A')
    (matcher,) = query.usage.selectors[0].matchers
    assert (matcher.value, matcher.is_variable) == ("storage_MooncakeStore", False)


def test_interval_variable_value_is_substituted(overview: LoadResult) -> None:
    """An interval variable's current value is used as the range."""
    query = query_at(overview, 'row "Throughput" > panel "Cached tokens by source" > query A')
    assert "[15m]" in query.expr


def test_custom_variable_with_several_values_selected_is_any_value(tmp_path: Path) -> None:
    """A multi-value selection has no single value: the variable stays "any value"."""
    variable = {"name": "m", "type": "custom", "query": "a,b", "current": {"value": ["a", "b"]}}
    path = write_dashboard(
        tmp_path,
        panels=[panel("P", {"refId": "A", "expr": 'up{model_name=~"$m"}'})],
        templating={"list": [variable]},
    )
    (query,) = load_queries(path).queries
    assert query.usage.selectors[0].matchers[0].is_variable


@pytest.mark.parametrize(
    "variable",
    [
        pytest.param(
            {"name": "m", "type": "custom", "query": "a,b", "current": {"value": "$__all"}},
            id="custom_all",
        ),
        pytest.param(
            {
                "name": "m",
                "type": "interval",
                "query": "1m,5m",
                "auto": True,
                "current": {"value": "$__auto_interval_m"},
            },
            id="interval_auto",
        ),
    ],
)
def test_all_or_auto_selection_is_not_a_value(tmp_path: Path, variable: dict[str, object]) -> None:
    """``$__all`` and ``$__auto_interval_*`` are Grafana's, not values to substitute."""
    path = write_dashboard(
        tmp_path,
        panels=[panel("P", {"refId": "A", "expr": 'rate(up{model_name=~"$m"}[$m])'})],
        templating={"list": [variable]},
    )
    (query,) = load_queries(path).queries
    assert query.expr == f'rate(up{{model_name=~"{ANY}"}}[5m])'


def test_custom_variable_without_current_uses_its_first_option(tmp_path: Path) -> None:
    """With no saved selection Grafana starts on the first option (``text : value`` form)."""
    variable = {"name": "q", "type": "custom", "query": "p50 : 0.5, p99 : 0.99"}
    path = write_dashboard(
        tmp_path,
        panels=[panel("P", {"refId": "A", "expr": "histogram_quantile($q, x_bucket)"})],
        templating={"list": [variable]},
    )
    assert load_queries(path).queries[0].expr == "histogram_quantile(0.5, x_bucket)"


def test_label_names_variable_needs_nothing(tmp_path: Path) -> None:
    """``label_names()`` lists label names; no metric or label is required."""
    variable = {"name": "l", "type": "query", "datasource": PROM, "query": "label_names()"}
    path = write_dashboard(tmp_path, templating={"list": [variable]})
    assert load_queries(path) == LoadResult((), ())


def test_variable_query_object_without_query_field_is_a_problem(tmp_path: Path) -> None:
    """An object query with neither ``query`` nor ``label`` cannot be read."""
    variable = {"name": "v", "type": "query", "datasource": PROM, "query": {"refId": "X"}}
    path = write_dashboard(tmp_path, templating={"list": [variable]})
    (problem,) = load_queries(path).problems
    assert (problem.location, problem.kind) == ('variable "v"', ProblemKind.NOT_CHECKABLE)


# --- annotations -----------------------------------------------------------------------------


def test_annotation_expr_is_found(overview: LoadResult) -> None:
    """A Prometheus annotation's ``expr`` is a query; its ``$__interval`` is substituted."""
    query = query_at(overview, 'annotation "Engine restarts"')
    assert query.kind is QueryKind.ANNOTATION
    assert query.usage.metric_names == ("sglang:engine_startup_timestamp_seconds",)
    assert "[1m]" in query.expr


def test_annotation_title_text_and_tag_keys_read_labels(overview: LoadResult) -> None:
    """``titleFormat``/``textFormat`` templates and ``tagKeys`` name labels."""
    query = query_at(overview, 'annotation "Engine restarts"')
    assert query.legend_labels == ("instance", "model_name", "job")


def test_builtin_annotation_is_ignored(overview: LoadResult) -> None:
    """Grafana's built-in "Annotations & Alerts" has no query and is no problem."""
    assert not [p for p in overview.problems if "Annotations & Alerts" in p.location]


# --- export formats and library panels -------------------------------------------------------


def test_export_wrapper_with_meta_is_unwrapped() -> None:
    """``{"meta": ..., "dashboard": ...}`` (the HTTP API's shape) is read through."""
    (query,) = load("export_wrapper.json").queries
    assert query.location == 'panel "Generation throughput" > query A'


def test_library_panel_from_elements_is_resolved() -> None:
    """An external export keeps library panel models in ``__elements``, keyed by uid."""
    query = query_at(load("external_export.json"), 'panel "TTFT p50" > query A')
    assert query.usage.metric_names == ("sglang:time_to_first_token_seconds_bucket",)


def test_library_panels_listed_as_grafana_8_exports_them_are_resolved(tmp_path: Path) -> None:
    """Grafana 8 wrote ``__elements`` as a list, each element with its own uid."""
    model = panel("Running", {"refId": "A", "expr": "sum(sglang:num_running_reqs)"})
    elements = [{"uid": "lib-run", "name": "Running", "kind": 1, "model": model}]
    reference = {"type": "timeseries", "libraryPanel": {"uid": "lib-run", "name": "Running"}}
    path = write_dashboard(tmp_path, panels=[reference], __elements=elements)
    result = load_queries(path)
    assert not result.problems
    (query,) = result.queries
    assert query.usage.metric_names == ("sglang:num_running_reqs",)


def test_library_panel_with_inline_model_is_resolved() -> None:
    """A library panel reference that carries ``model`` is read from it."""
    query = query_at(load("external_export.json"), 'panel "Waiting requests" > query A')
    assert query.usage.metric_names == ("sglang:num_queue_reqs",)


def test_library_panel_without_model_is_a_problem() -> None:
    """A bare ``libraryPanel`` reference cannot be checked from the file alone."""
    (problem,) = load("external_export.json").problems
    assert (problem.location, problem.kind) == ('panel "GPU memory"', ProblemKind.NOT_CHECKABLE)
    assert "lib-gpu" in problem.message


def test_library_panel_saved_with_its_targets_is_read(tmp_path: Path) -> None:
    """Grafana 8 saved the whole panel beside the ``libraryPanel`` reference."""
    reference = {"uid": "lib-x", "name": "Running"}
    target = {"refId": "A", "expr": "sum(sglang:num_running_reqs)"}
    path = write_dashboard(tmp_path, panels=[panel("Running", target, libraryPanel=reference)])
    (query,) = load_queries(path).queries
    assert query.usage.metric_names == ("sglang:num_running_reqs",)


def test_export_constant_input_is_substituted() -> None:
    """``__inputs`` constants (``${VAR_JOB}``) are fixed values."""
    query = query_at(load("external_export.json"), 'panel "TTFT p50" > query A')
    assert 'job="sglang"' in query.expr


# --- datasources -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed() -> LoadResult:
    """The mixed-datasource fixture."""
    return load("mixed_datasources.json")


@pytest.mark.parametrize(
    ("location", "kind"),
    [
        pytest.param('panel "Requests and errors" > query B', "loki", id="loki_target_in_mixed"),
        pytest.param('panel "Engine logs" > query A', "loki", id="datasource_variable_is_loki"),
        pytest.param('panel "Slow requests" > query A', "elasticsearch", id="elasticsearch"),
        pytest.param('panel "Doubled rate" > query B', "__expr__", id="server_side_expression"),
        pytest.param('variable "app"', "loki", id="loki_template_variable"),
        pytest.param('annotation "Deploys"', "loki", id="loki_annotation"),
    ],
)
def test_non_prometheus_datasource_is_not_checkable(
    mixed: LoadResult, location: str, kind: str
) -> None:
    """Queries for other datasources are skipped and reported, not parsed as PromQL."""
    assert problems_at(mixed, location) == [f'datasource type "{kind}" is not Prometheus']
    assert all(p.kind is ProblemKind.NOT_CHECKABLE for p in mixed.problems)


def test_mixed_panel_target_without_datasource_is_assumed_prometheus(mixed: LoadResult) -> None:
    """In a ``-- Mixed --`` panel a target without its own datasource uses the default."""
    query = query_at(mixed, 'panel "Requests and errors" > query C')
    assert query.usage.metric_names == ("sglang:num_running_reqs",)


def test_mixed_panel_prometheus_target_is_checked(mixed: LoadResult) -> None:
    """The Prometheus target next to a Loki one is still checked."""
    assert query_at(mixed, 'panel "Requests and errors" > query A').kind is QueryKind.PANEL_TARGET


def test_export_datasource_input_resolves_plugin_type(tmp_path: Path) -> None:
    """A legacy string datasource ``${DS_LOKI}`` is typed by its ``__inputs`` entry."""
    path = write_dashboard(
        tmp_path,
        __inputs=[{"name": "DS_LOKI", "type": "datasource", "pluginId": "loki"}],
        panels=[panel("Logs", {"refId": "A", "expr": '{app="x"}'}, datasource="${DS_LOKI}")],
    )
    (problem,) = load_queries(path).problems
    assert problem.message == 'datasource type "loki" is not Prometheus'


def test_managed_prometheus_plugin_is_checkable(tmp_path: Path) -> None:
    """Amazon Managed Prometheus takes PromQL, so its targets are checked."""
    datasource = {"type": "grafana-amazonprometheus-datasource", "uid": "amp"}
    path = write_dashboard(
        tmp_path, panels=[panel("P", {"refId": "A", "expr": "up"}, datasource=datasource)]
    )
    assert len(load_queries(path).queries) == 1


# --- parse errors ----------------------------------------------------------------------------


def test_query_that_fails_to_parse_is_a_problem_with_its_panel() -> None:
    """A broken query is reported with its panel and the parser's message; others still load."""
    result = load("broken_query.json")
    (problem,) = result.problems
    assert problem.location == 'panel "Request rate" > query A'
    assert (problem.kind, problem.message) == (ProblemKind.PARSE_ERROR, "unclosed left parenthesis")
    assert problem.expr == "sum(rate(sglang:num_requests_total[5m])"
    assert [q.location for q in result.queries] == ['panel "Request rate" > query B']


# --- unusable files --------------------------------------------------------------------------


def test_merge_conflict_markers_are_an_input_error() -> None:
    """A file left mid-merge is refused at the first marker's line."""
    with pytest.raises(InputError, match=r"line 12: merge conflict marker$") as info:
        load("merge_conflict.json")
    assert info.value.line == 12


def test_invalid_json_gives_line_and_column() -> None:
    """A JSON syntax error names its line and column."""
    with pytest.raises(InputError, match=r"invalid\.json: line 11, column 7: Expecting value"):
        load("invalid.json")


def test_invalid_yaml_gives_line() -> None:
    """A YAML syntax error names its line."""
    with pytest.raises(InputError, match=r"line 6: invalid YAML: expected <block end>") as info:
        load("invalid_rules.yaml")
    assert info.value.line == 6


def test_input_error_is_a_metricbridge_error() -> None:
    """Callers catch ``MetricbridgeError`` for every deliberate failure."""
    assert issubclass(InputError, MetricbridgeError)


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    """Dashboards saved by Windows editors may start with a UTF-8 BOM."""
    path = tmp_path / "bom.json"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"panels": [panel("P", {"expr": "up"})]}).encode()
    )
    assert len(load_queries(path).queries) == 1


def test_non_utf8_file_is_an_input_error(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are refused with their line."""
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{\n"title": "caf\xe9"}')
    with pytest.raises(InputError, match="line 2: not UTF-8 text"):
        load_queries(path)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    """A path that cannot be read is an input error, not an OSError."""
    with pytest.raises(InputError, match="cannot read"):
        load_queries(tmp_path / "missing.json")


def test_top_level_json_list_is_an_input_error(tmp_path: Path) -> None:
    """A JSON array is not a dashboard."""
    path = tmp_path / "list.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON object at the top level, got list"):
        load_queries(path)


def test_json_without_panels_is_not_a_dashboard(tmp_path: Path) -> None:
    """A JSON object with no panels, rows or templating is some other file."""
    path = tmp_path / "package.json"
    path.write_text('{"name": "x"}', encoding="utf-8")
    with pytest.raises(InputError, match="not a Grafana dashboard"):
        load_queries(path)


def test_schema_v2_dashboard_is_an_input_error(tmp_path: Path) -> None:
    """Grafana 12's v2 schema (``spec.elements``) is refused with a clear message."""
    path = tmp_path / "v2.json"
    path.write_text(json.dumps({"kind": "Dashboard", "spec": {"elements": {}}}), encoding="utf-8")
    with pytest.raises(InputError, match="schema v2"):
        load_queries(path)


def test_kubernetes_style_v1_resource_is_unwrapped(tmp_path: Path) -> None:
    """Grafana 12 exports a v1 dashboard as a resource whose ``spec`` is the classic model."""
    path = write_dashboard(
        tmp_path,
        apiVersion="dashboard.grafana.app/v1beta1",
        kind="Dashboard",
        spec={"panels": [panel("P", {"refId": "A", "expr": "sglang:num_running_reqs"})]},
    )
    assert [q.location for q in load_queries(path).queries] == ['panel "P" > query A']


def test_format_is_sniffed_for_unknown_suffix(tmp_path: Path) -> None:
    """A dashboard without ``.json`` is recognised by its content."""
    path = write_dashboard(tmp_path, "board.dashboard", panels=[panel("P", {"expr": "up"})])
    assert load_queries(path).queries[0].kind is QueryKind.PANEL_TARGET


# --- rule files ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules() -> LoadResult:
    """The rule file fixture."""
    return load("sglang_rules.yaml")


def test_recording_and_alerting_rules_are_found(rules: LoadResult) -> None:
    """Both rule kinds are queries, located by group and rule name."""
    ttft = "model_name:sglang_time_to_first_token_seconds:p99_5m"
    assert [(q.kind, q.location) for q in rules.queries] == [
        (QueryKind.RECORDING_RULE, f'group "sglang-recording" > record "{ttft}"'),
        (
            QueryKind.RECORDING_RULE,
            'group "sglang-recording" > record "model_name:sglang_cached_tokens:rate5m"',
        ),
        (QueryKind.ALERTING_RULE, 'group "sglang-alerts" > alert "SGLangQueueBacklog"'),
        (QueryKind.ALERTING_RULE, 'group "sglang-alerts" > alert "SGLangDown"'),
    ]


def test_rule_expr_line_numbers(rules: LoadResult) -> None:
    """Each rule query carries the line of its ``expr``."""
    assert [q.line for q in rules.queries] == [7, 11, 15, 24]


def test_multiline_rule_expr_is_analysed(rules: LoadResult) -> None:
    """A block-scalar ``expr: |`` spanning lines parses."""
    (use, _) = rules.queries[0].usage.label_uses
    assert use.labels == ("le", "model_name")


def test_alert_templates_read_labels(rules: LoadResult) -> None:
    """``$labels.x`` and ``.Labels.x`` in alert labels and annotations name labels."""
    assert rules.queries[2].legend_labels == ("model_name", "instance")


def test_rule_parse_error_is_a_problem_with_its_line(rules: LoadResult) -> None:
    """A broken rule is reported with its group, name and line; the rest still load."""
    (problem,) = rules.problems
    assert problem.location == 'group "sglang-alerts" > alert "SGLangBrokenRule"'
    assert (problem.kind, problem.line) == (ProblemKind.PARSE_ERROR, 27)
    assert 'sglang_rules.yaml:27: group "sglang-alerts"' in str(problem)


def test_rules_are_not_grafana_substituted(tmp_path: Path) -> None:
    """Prometheus does not expand ``$__rate_interval``: in a rule it is a parse error."""
    path = tmp_path / "rules.yml"
    path.write_text(
        "groups:\n- name: g\n  rules:\n  - record: r\n    expr: rate(x[$__rate_interval])\n",
        encoding="utf-8",
    )
    (problem,) = load_queries(path).problems
    assert problem.kind is ProblemKind.PARSE_ERROR


def test_prometheusrule_object_spec_groups() -> None:
    """A Kubernetes ``PrometheusRule`` keeps its groups under ``spec``."""
    (query,) = load("prometheusrule.yaml").queries
    assert query.usage.metric_names == ("sglang:request_waiting_time_bucket",)


def test_rule_without_expr_is_a_problem(tmp_path: Path) -> None:
    """A rule with no ``expr`` is reported with its line."""
    path = tmp_path / "rules.yaml"
    path.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n", encoding="utf-8")
    (problem,) = load_queries(path).problems
    assert (problem.location, problem.message, problem.line) == (
        'group "g" > alert "A"',
        "rule has no 'expr'",
        4,
    )


def test_yaml_without_groups_is_an_input_error(tmp_path: Path) -> None:
    """A YAML file that is not a rule file is refused."""
    path = tmp_path / "values.yaml"
    path.write_text("replicas: 2\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a Prometheus rule file"):
        load_queries(path)


def test_empty_rule_file_has_no_queries(tmp_path: Path) -> None:
    """An empty YAML file is an empty rule file, as promtool treats it."""
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    assert load_queries(path) == LoadResult((), ())


# --- plain PromQL files ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain() -> LoadResult:
    """The plain PromQL fixture."""
    return load("queries.promql")


def test_plain_file_has_one_expression_per_line(plain: LoadResult) -> None:
    """Blank lines and ``#`` comments are skipped; locations are line numbers."""
    assert [(q.location, q.line, q.kind) for q in plain.queries] == [
        ("line 3", 3, QueryKind.PLAIN),
        ("line 4", 4, QueryKind.PLAIN),
        ("line 7", 7, QueryKind.PLAIN),
    ]


def test_plain_file_substitutes_grafana_time_variables(plain: LoadResult) -> None:
    """Queries pasted from Grafana keep ``$__rate_interval``; it is substituted."""
    assert plain.queries[0].expr.endswith("[5m]))")


def test_plain_file_label_replace_dollar_one_survives(plain: LoadResult) -> None:
    """``"$1"`` in ``label_replace`` is not mistaken for a variable."""
    assert '"$1"' in plain.queries[2].expr


def test_plain_file_parse_error_names_the_line(plain: LoadResult) -> None:
    """A broken line is a problem at that line."""
    (problem,) = plain.problems
    assert (problem.location, problem.line, problem.kind) == (
        "line 8",
        8,
        ProblemKind.PARSE_ERROR,
    )


def test_txt_suffix_is_a_plain_file(tmp_path: Path) -> None:
    """``.txt`` is read as plain PromQL, even when a line starts with ``{``."""
    path = tmp_path / "queries.txt"
    path.write_text('{__name__=~"sglang:.*"}\n', encoding="utf-8")
    (query,) = load_queries(path).queries
    assert query.usage.selectors[0].name_matchers[0].value == "sglang:.*"


def test_a_rule_file_written_as_json_is_read_as_rules(tmp_path: Path) -> None:
    """JSON is YAML too: promtool reads such a rule file, and so does check."""
    path = tmp_path / "rules.json"
    rules = [
        {"record": "x:running", "expr": "sum(sglang:num_running_reqs)"},
        {"alert": "Queued", "expr": "sglang:num_queue_reqs > 0"},
    ]
    document = {"groups": [{"name": "g", "rules": rules}]}
    path.write_text(json.dumps(document, indent="\t"), encoding="utf-8")  # as jq --tab writes
    result = load_queries(path)
    assert not result.problems
    assert [q.usage.metric_names for q in result.queries] == [
        ("sglang:num_running_reqs",),
        ("sglang:num_queue_reqs",),
    ]
