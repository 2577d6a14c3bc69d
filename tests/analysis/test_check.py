"""``metricbridge check``: one test per finding class, real dashboard shapes, exit codes, inputs.

Dashboards live in ``tests/dashboards/check/``; snapshots are the real SGLang 0.5.23 scrapes in
``tests/fixtures/sglang-0.5.23/``, translated by the default contract as the bridge serves them.
``findings.json`` has one panel per finding class, titled after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.check import (
    CHECK,
    at,
    check,
    closed_port,
    metrics_app,
    run_cli,
    run_cli_in_thread,
    write,
)
from helpers.check import snapshot as snap
from metricbridge.analysis.check import check_queries
from metricbridge.analysis.findings import FindingKind
from metricbridge.analysis.promql import LabelMatcher, MatchOp
from metricbridge.analysis.series_match import accepts, matches_empty
from metricbridge.render.findings import render_check
from metricbridge.translation.contract_index import MissingClass

OVERVIEW = CHECK / "overview.json"
FINDINGS = CHECK / "findings.json"
RULES = CHECK / "rules.yaml"
L3_PANEL = 'row "Cache" > panel "L3 (file) hits"'


@pytest.fixture(scope="module")
def tp1_findings():
    """The findings dashboard checked against tp1 (shared: the check is pure)."""
    return check([FINDINGS], "tp1")


def only(findings, kind):
    """The single finding of ``kind`` among ``findings``."""
    matching = [f for f in findings if f.kind is kind]
    assert len(matching) == 1, findings
    return matching[0]


# --- Real dashboard shapes ---------------------------------------------------------------------


def test_overview_passes_against_hicache():
    """Nested rows, heatmap, stat panels, variables and CRLF: everything served with HiCache."""
    report = check([OVERVIEW], "hicache")
    assert report.findings == ()
    assert report.queries == 15


RATE_ROWS = [
    "sglang:device_cache_hit_rate",
    "sglang:host_cache_hit_rate",
    "sglang:encoder_cache_req_hit_rate",
    "sglang:encoder_cache_byte_hit_rate",
]


def test_rates_between_two_fetches_are_pending_in_one_snapshot_not_failing(tmp_path: Path):
    """The running bridge serves them from its second fetch; one payload cannot show them."""
    queries = tmp_path / "rates.promql"
    queries.write_text("".join(f"{name}\n" for name in RATE_ROWS))
    report = check([queries], "hicache", "epd-encoder", profiles=["approximations"])
    assert [(f.subject, f.contract, f.failing) for f in report.findings] == [
        (name, MissingClass.PENDING, False) for name in RATE_ROWS
    ]


def test_storage_panel_fails_against_tp1_only():
    """cache_source="storage_file" exists only where the engine has an L3 tier (hicache's)."""
    report = check([OVERVIEW], "tp1")
    finding = only(report.findings, FindingKind.NO_MATCHING_VALUE)
    assert finding.location == f"{L3_PANEL} > query A"
    assert finding.subject == 'cache_source="storage_file"'
    assert '"device"' in finding.reason
    assert finding.failing


def test_panels_of_a_collapsed_row_are_checked():
    """A collapsed row's own panels (the TTFT heatmap) are found and checked."""
    report = check([OVERVIEW], "pd-prefill")  # the prefill side has no TTFT histogram
    heatmap = at(report, 'row "Latency" > panel "TTFT heatmap"')
    assert [f.subject for f in heatmap] == ["sglang:time_to_first_token_seconds_bucket"]


def test_heatmap_le_grouping_needs_bucket_samples(tmp_path: Path):
    """``by (le)`` is fine on ``_bucket`` samples and a missing label on ``_count``."""
    queries = write(
        tmp_path / "q.promql",
        "sum by (le) (rate(sglang:time_to_first_token_seconds_bucket[5m]))\n"
        "sum by (le) (rate(sglang:time_to_first_token_seconds_count[5m]))\n",
    )
    report = check([queries], "tp1")
    finding = only(report.findings, FindingKind.MISSING_LABEL)
    assert (finding.location, finding.subject) == ("line 2", "le")


def test_dropping_or_ignoring_an_absent_label_is_no_finding(tmp_path: Path):
    """`without (dp_rank)` on an engine without DP changes nothing; `by (dp_rank)` needs it."""
    queries = tmp_path / "dp.promql"
    queries.write_text(
        "sum without (dp_rank) (sglang:num_running_reqs)\n"
        "sglang:num_running_reqs / ignoring(dp_rank) sglang:num_queue_reqs\n"
        "sum by (dp_rank) (sglang:num_running_reqs)\n"
    )
    report = check([queries], "tp1")
    assert [(f.line, f.kind, f.subject) for f in report.findings] == [
        (3, FindingKind.MISSING_LABEL, "dp_rank")
    ]


def test_an_or_bridging_a_rename_fails_only_when_neither_side_is_served(tmp_path: Path):
    """`new_name or old_name` shows whichever the engine serves: the other side is a note.

    `or vector(0)` is no such bridge: a panel of a constant 0 is the lie the contract prevents.
    """
    queries = tmp_path / "or.promql"
    queries.write_text(
        "sglang:renamed_away or sglang:num_running_reqs\n"
        "sglang:num_running_reqs or sglang:renamed_away\n"
        "sglang:renamed_away or sglang:also_gone\n"
        "sum(sglang:renamed_away) or vector(0)\n"
    )
    report = check([queries], "tp1")
    assert [(f.line, f.subject, f.failing) for f in report.findings] == [
        (1, "sglang:renamed_away", False),
        (2, "sglang:renamed_away", False),
        (3, "sglang:renamed_away", True),
        (3, "sglang:also_gone", True),
        (4, "sglang:renamed_away", True),
    ]
    assert all(f.excused for f in report.findings if not f.failing)
    summary = json.loads(render_check(report, "json"))["summary"]
    assert summary == {"failing": 3, "excused": 2, "structural": 0, "not_checked": 0}


def test_histogram_quantile_without_le(tmp_path: Path):
    """histogram_quantile over ``_sum`` samples reads an ``le`` label they do not have."""
    queries = write(
        tmp_path / "q.promql",
        "histogram_quantile(0.9, rate(sglang:e2e_request_latency_seconds_sum[5m]))\n",
    )
    finding = only(check([queries], "tp1").findings, FindingKind.MISSING_LABEL)
    assert finding.subject == "le"


def test_crlf_expression_is_checked():
    """The CRLF query parses and is checked: against the encoder, its family is missing."""
    report = check([OVERVIEW], "epd-encoder")
    token_usage = at(report, 'panel "Token usage"')
    assert [f.subject for f in token_usage] == ["sglang:token_usage"]
    assert "\r\n" in token_usage[0].expr  # reported as written


def test_library_panel_and_loki_target_are_reported_not_failing():
    """Library panels not inlined and non-Prometheus targets are listed as not checked."""
    report = check([OVERVIEW], "hicache")
    messages = [str(problem) for problem in report.not_checked]
    assert any('library panel "GPU memory"' in m for m in messages)
    assert any('query B: not checkable: datasource type "loki"' in m for m in messages)
    assert not report.failing


def test_template_variable_queries_are_checked():
    """``label_values(m, l)`` needs label l on m: a lost model_name breaks the variable."""
    report = check([OVERVIEW], "tp1")
    assert at(report, 'variable "model_name"') == []
    assert report.queries == 15  # three variables (label_values(job) included) plus 12 targets


# --- One test per finding class ----------------------------------------------------------------


def test_engine_row_is_classified_engine_with_its_note(tp1_findings):
    """A contract row that needs engine instrumentation says so and quotes the note."""
    finding = only(at(tp1_findings, "Scheduler generation time"), FindingKind.MISSING_FAMILY)
    assert finding.contract is MissingClass.ENGINE
    assert "Wall time of the last scheduler iteration" in finding.reason
    assert finding.failing


def test_structural_row_is_not_a_failure(tp1_findings):
    """A structural row is expected absent: reported, classified, not failing."""
    finding = only(at(tp1_findings, "Offline batch requests"), FindingKind.MISSING_FAMILY)
    assert finding.contract is MissingClass.STRUCTURAL
    assert not finding.failing


def test_wrong_prefix_gets_a_hint(tp1_findings):
    """``sglang_num_requests_total`` is missing; the hint names the served ``sglang:`` spelling."""
    finding = only(at(tp1_findings, "Requests (wrong prefix)"), FindingKind.MISSING_FAMILY)
    assert finding.contract is MissingClass.UNKNOWN
    assert finding.hint == "the other prefix spelling sglang:num_requests_total is served"


def test_missing_label_in_by(tp1_findings):
    """A label in ``by (...)`` that the family does not have."""
    finding = only(at(tp1_findings, "Requests by tenant"), FindingKind.MISSING_LABEL)
    assert finding.subject == "tenant"
    assert "by (tenant)" in finding.reason


def test_regex_matcher_matching_nothing(tp1_findings):
    """A regex matcher whose alternatives match no served value lists the served values."""
    finding = only(at(tp1_findings, "Streaming requests (regex)"), FindingKind.NO_MATCHING_VALUE)
    assert finding.subject == 'is_streaming=~"yes|maybe"'
    assert 'served values: "false", "true"' in finding.reason


@pytest.mark.parametrize(
    ("regex", "value", "expected"),
    [
        ("[[:alpha:]]+", "abc", True),  # RE2's POSIX class, not the letters ":ahlp"
        ("[[:alpha:]]+", "a1", False),
        ("[^[:digit:]]+", "ab", True),
        ("(?i)META-llama.*", "meta-llama/x", True),  # a leading flag group, kept in front
        ("(?i)nomatch", "other", False),
        ("(?U)a+", "aaa", True),
    ],
)
def test_prometheus_regex_syntax_is_read_as_prometheus_reads_it(
    regex: str, value: str, expected: bool
) -> None:
    matcher = LabelMatcher("model_name", MatchOp.RE, regex, is_variable=False)
    assert accepts(matcher, value) is expected


def test_regex_is_fully_anchored(tp1_findings):
    """``=~"Llama"`` does not match "meta-llama/Llama-3.1-8B-Instruct": Prometheus anchors."""
    finding = only(at(tp1_findings, "Model substring"), FindingKind.NO_MATCHING_VALUE)
    assert finding.subject == 'model_name=~"Llama"'


def test_name_regex_resolves_against_served_names(tp1_findings):
    """``{__name__=~"sglang:per_prompt.*"}`` matches the served ``per_prompt_*`` aliases."""
    assert at(tp1_findings, "Per-prompt histograms") == []


def test_name_regex_matching_nothing(tp1_findings):
    """A ``__name__`` regex that matches no served name."""
    finding = only(at(tp1_findings, "Per-request histograms"), FindingKind.NO_MATCHING_NAME)
    assert finding.subject == '__name__=~"sglang:per_request_.*"'


def test_histogram_selected_without_suffix(tp1_findings):
    """A histogram has no bare samples: the finding lists the suffixes it does have."""
    finding = only(at(tp1_findings, "TTFT without suffix"), FindingKind.WRONG_SUFFIX)
    assert "sglang:time_to_first_token_seconds_bucket" in finding.reason


def test_counter_selected_without_total(tmp_path: Path):
    """Counters are keyed by their ``_total`` name: the bare base name is a wrong suffix."""
    queries = write(tmp_path / "q.promql", "rate(sglang:num_requests[5m])\n")
    finding = only(check([queries], "tp1").findings, FindingKind.WRONG_SUFFIX)
    assert "select sglang:num_requests_total" in finding.reason


def test_valid_suffix_without_samples(tmp_path: Path):
    """``_created`` is valid for a counter, but the multiprocess engine serves none."""
    queries = write(tmp_path / "q.promql", "sglang:num_requests_created\n")
    finding = only(check([queries], "tp1").findings, FindingKind.MISSING_FAMILY)
    assert "served without sglang:num_requests_created samples" in finding.reason


def test_unknown_family(tp1_findings):
    """A name neither served nor in the contract is classified unknown."""
    finding = only(at(tp1_findings, "Made-up metric"), FindingKind.MISSING_FAMILY)
    assert finding.contract is MissingClass.UNKNOWN
    assert finding.hint is None


def test_translated_row_without_its_source(tp1_findings):
    """kvcache_transfer_time is a scale of a prefill-only histogram: upstream, with the reason."""
    finding = only(at(tp1_findings, "KV transfer time p90"), FindingKind.MISSING_FAMILY)
    assert finding.contract is MissingClass.UPSTREAM
    assert "sglang:kv_transfer_latency_ms is absent upstream" in finding.reason


def test_translated_row_served_from_the_prefill_side():
    """The same panel passes against the prefill side, where the bridge scales the source."""
    assert at(check([FINDINGS], "pd-prefill"), "KV transfer time p90") == []


def test_legend_label_missing(tp1_findings):
    """A legend reading ``{{pod_name}}`` that no selected series has."""
    finding = only(at(tp1_findings, "Running requests by pod"), FindingKind.MISSING_LABEL)
    assert finding.subject == "pod_name"


def test_legend_label_created_by_label_replace(tmp_path: Path):
    """A legend may read a label the query makes itself with label_replace."""
    board = {
        "panels": [
            {
                "title": "renamed",
                "targets": [
                    {
                        "refId": "A",
                        "expr": 'label_replace(sglang:num_running_reqs, "model", "$1", '
                        '"model_name", "(.*)")',
                        "legendFormat": "{{model}}",
                    }
                ],
            }
        ]
    }
    path = write(tmp_path / "d.json", json.dumps(board))
    assert check([path], "tp1").findings == ()


def test_matchers_that_match_nothing_together(tp1_findings):
    """gt="0" and le="2" each exist on the routing-key gauge, but never on one series."""
    finding = only(at(tp1_findings, "Routing keys in one bucket"), FindingKind.NO_MATCHING_SERIES)
    assert finding.subject == 'gt="0", le="2"'


def test_variable_placeholders_match_any_value(tp1_findings):
    """``$model`` and ``$instance`` stand for any value; ``job`` is added by the scraper."""
    assert at(tp1_findings, "Variable model") == []


def test_kubernetes_labels_are_not_assumed_by_default(tp1_findings):
    """namespace and pod come from relabeling that the check cannot see: not assumed unasked."""
    found = at(tp1_findings, "Kubernetes labels")
    assert {(f.kind, f.subject) for f in found} == {
        (FindingKind.MISSING_LABEL, "namespace"),
        (FindingKind.MISSING_LABEL, "pod"),
    }


def test_assumed_labels_count_as_present():
    """With namespace and pod assumed, the Kubernetes panel passes."""
    report = check([FINDINGS], "tp1", assumed=("instance", "job", "namespace", "pod"))
    assert at(report, "Kubernetes labels") == []


def test_unparseable_query_is_reported_not_failing(tp1_findings):
    """A query that does not parse is listed with its panel, and is no finding."""
    problems = [p for p in tp1_findings.not_checked if "Broken query" in p.location]
    assert [p.kind.value for p in problems] == ["parse error"]
    assert at(tp1_findings, "Broken query") == []


def test_matchers_that_accept_a_missing_label_need_no_label(tmp_path: Path):
    """``{x=""}`` and ``{x!="a"}`` match series without x, as in Prometheus: no finding."""
    queries = write(
        tmp_path / "q.promql",
        'sglang:num_running_reqs{tenant=""}\nsglang:num_running_reqs{tenant!="a"}\n'
        'sglang:num_running_reqs{tenant="a"}\n',
    )
    report = check([queries], "tp1")
    assert [(f.location, f.kind) for f in report.findings] == [
        ("line 3", FindingKind.MISSING_LABEL)
    ]


def test_label_matcher_semantics():
    """Equality, negation and anchored regexes, with absent labels read as empty."""
    assert accepts(LabelMatcher("m", MatchOp.RE, "a|b", is_variable=False), "b")
    assert not accepts(LabelMatcher("m", MatchOp.RE, "a", is_variable=False), "ab")
    assert accepts(LabelMatcher("m", MatchOp.NOT_RE, "a", is_variable=False), "ab")
    assert matches_empty(LabelMatcher("m", MatchOp.RE, ".*", is_variable=False))
    assert not matches_empty(LabelMatcher("m", MatchOp.RE, ".+", is_variable=False))


# --- Rule files ----------------------------------------------------------------------------------


def test_rule_file_findings_carry_rule_name_and_line():
    """Rule findings name group, rule and the expr's line."""
    report = check([RULES], "tp1")
    l3 = only(at(report, "sglang_l3_cached_tokens"), FindingKind.NO_MATCHING_VALUE)
    assert (
        l3.location
        == 'group "sglang-recording" > record "model_name:sglang_l3_cached_tokens:rate5m"'
    )
    assert l3.line == 11
    tenant = only(at(report, "SGLangTenantBacklog"), FindingKind.MISSING_LABEL)
    assert (tenant.subject, tenant.line) == ("tenant", 30)


def test_recorded_names_and_prometheus_series_exist():
    """An alert on a recording rule's output, and on ``up``, needs nothing from the payload."""
    report = check([RULES], "tp1")
    assert at(report, "SGLangSlowFirstToken") == []
    assert at(report, "SGLangBridgeDown") == []


def test_alert_template_labels_are_checked(tmp_path: Path):
    """``{{ $labels.x }}`` in annotations reads label x of the alert's series."""
    rules = write(
        tmp_path / "r.yaml",
        "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sglang:num_queue_reqs > 1\n"
        "    annotations:\n      summary: '{{ $labels.gpu_uuid }} on {{ $labels.instance }}'\n",
    )
    finding = only(check([rules], "tp1").findings, FindingKind.MISSING_LABEL)
    assert finding.subject == "gpu_uuid"


def test_warm_zero_family_is_served():
    """num_transfer_failed_reqs_total is warm-zero before the first failure: served on tp1."""
    assert at(check([RULES], "tp1"), "SGLangTransferFailures") == []


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_exit_0_when_everything_is_served(capsys):
    """Against HiCache the overview passes: exit 0 and a passing summary."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", snap("hicache"))
    assert run.code == 0, run.out
    assert "check passed: 1 file, 15 queries checked: 0 failing finding(s)" in run.out
    assert "Not checked:" in run.out


def test_cli_exit_1_when_something_is_missing(capsys):
    """Against tp1 the L3 panel fails: exit 1, the finding in the text output."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", snap("tp1"))
    assert run.code == 1
    assert f"{OVERVIEW}: {L3_PANEL} > query A" in run.out
    assert 'error: no matching value: cache_source="storage_file"' in run.out
    assert "check FAILED" in run.out


def test_cli_structural_only_findings_pass(capsys, tmp_path: Path):
    """A query on a structural row is a note, and the check still exits 0."""
    queries = write(tmp_path / "q.promql", "sum(sglang:num_running_reqs_offline_batch)\n")
    run = run_cli(capsys, "check", queries, "--snapshot", snap("tp1"))
    assert run.code == 0
    assert "note: missing family (structural)" in run.out


def test_cli_strict_fails_on_unchecked_queries(capsys):
    """``--strict`` turns not-checkable queries (library panel, Loki) into a failure."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", snap("hicache"), "--strict")
    assert run.code == 1


def test_cli_assume_label_accepts_a_comma_list(capsys):
    """``--assume-label namespace,pod`` clears the Kubernetes-label findings."""
    args: list[str | Path] = ["check", FINDINGS, "--snapshot", snap("tp1"), "--format", "json"]
    before = json.loads(run_cli(capsys, *args).out)
    after = json.loads(run_cli(capsys, *args, "--assume-label", "namespace,pod").out)
    subjects = {f["subject"] for f in before["findings"]} - {
        f["subject"] for f in after["findings"]
    }
    assert subjects == {"namespace", "pod"}


def test_cli_json_output(capsys):
    """JSON output carries every field of a finding and the summary.

    The KV-transfer panel reads a row whose source SGLang 0.5.23 records only on a PD prefill
    server: with the engine's catalogue that is a feature note, not one of the failures.
    """
    run = run_cli(capsys, "check", FINDINGS, "--snapshot", snap("tp1"), "--format", "json")
    data = json.loads(run.out)
    assert data["passed"] is False
    assert data["summary"] == {"failing": 12, "feature": 1, "structural": 1, "not_checked": 1}
    kv = next(f for f in data["findings"] if f["subject"].startswith("sglang:kvcache_transfer"))
    assert (kv["contract"], kv["engine"]["class"], kv["failing"]) == ("upstream", "feature", False)
    assert kv["engine"]["switches"] == [
        "--disaggregation-mode prefill or decode (PD disaggregation)"
    ]
    engine = next(f for f in data["findings"] if f["subject"] == "sglang:generation_time")
    assert engine["contract"] == "engine"
    assert engine["location"] == 'panel "Scheduler generation time" > query A'
    assert engine["expr"] == "max(sglang:generation_time)"


def test_cli_markdown_output(capsys):
    """Markdown output is a GitHub table with one row per finding."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", snap("tp1"), "--format", "markdown")
    lines = run.out.splitlines()
    assert lines[0] == "### metricbridge check: failed"
    assert "| File | Location | Query | Finding |" in lines[2]
    assert sum(line.startswith("| error |") for line in lines) == 1


def test_cli_markdown_shows_names_and_regexes_as_written(capsys, tmp_path: Path):
    """`.*nope.*`, `__name__` and a title's <b> must not turn into emphasis or HTML on GitHub."""
    queries = tmp_path / "q.promql"
    queries.write_text('{__name__=~"sglang:.*nope.*"}\n')
    run = run_cli(capsys, "check", queries, "--snapshot", snap("tp1"), "--format", "markdown")
    (row,) = [line for line in run.out.splitlines() if line.startswith("| error |")]
    assert 'matches {\\_\\_name\\_\\_=\\~"sglang:.\\*nope.\\*"}' in row
    assert '`{__name__=~"sglang:.*nope.*"}`' in row  # the query itself stays a code span


def test_cli_merge_conflict_markers_exit_2(capsys):
    """A dashboard left mid-merge: exit 2, the marker's line, no traceback."""
    run = run_cli(capsys, "check", CHECK / "merge_conflict.json", "--snapshot", snap("tp1"))
    assert run.code == 2
    assert f"error: {CHECK / 'merge_conflict.json'}: line 12: merge conflict marker" in run.err
    assert "Traceback" not in run.err


def test_cli_invalid_json_reports_the_position(capsys, tmp_path: Path):
    """Invalid JSON: exit 2 with line and column."""
    bad = write(tmp_path / "bad.json", '{\n  "panels": [\n    {"title": "x",}\n  ]\n}\n')
    run = run_cli(capsys, "check", bad, "--snapshot", snap("tp1"))
    assert run.code == 2
    assert "line 3, column 19: Expecting property name" in run.err


def test_cli_other_files_are_still_checked_next_to_an_unusable_one(capsys):
    """One unusable file exits 2, but the readable files are still checked and printed."""
    run = run_cli(
        capsys, "check", CHECK / "merge_conflict.json", OVERVIEW, "--snapshot", snap("tp1")
    )
    assert run.code == 2
    assert "no matching value" in run.out


def test_cli_unreadable_snapshot_exit_2(capsys, tmp_path: Path):
    """A snapshot that does not exist: exit 2 naming it."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", tmp_path / "none.prom")
    assert run.code == 2
    assert "none.prom: cannot read" in run.err


def test_cli_empty_snapshot_exit_2(capsys, tmp_path: Path):
    """A 0-byte snapshot is unusable, not an empty payload."""
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", write(tmp_path / "e.prom", ""))
    assert run.code == 2
    assert "empty exposition" in run.err


def test_cli_bad_config_exit_2(capsys, tmp_path: Path):
    """A rules file that does not load: exit 2 with its issues."""
    config = write(tmp_path / "c.yaml", "version: 1\nfamilies:\n  x:\n    disposition: nope\n")
    run = run_cli(capsys, "check", OVERVIEW, "--snapshot", snap("tp1"), "-c", config)
    assert run.code == 2
    assert "unknown value 'nope'" in run.err


def test_cli_snapshots_are_merged(capsys, tmp_path: Path):
    """LLM and encoder snapshots merge: a board reading both is served only with both.

    Against the LLM server alone the encoder row is a note (its source needs an EPD encoder
    server, SGLang 0.5.23's catalogue says), no longer a failure.
    """
    queries = write(
        tmp_path / "q.promql",
        "sum(sglang:num_running_reqs)\nsum(rate(sglang:encoder_num_requests_total[5m]))\n",
    )
    alone = run_cli(capsys, "check", queries, "--snapshot", snap("tp1"))
    assert alone.code == 0
    assert "note: missing family (feature): sglang:encoder_num_requests_total" in alone.out
    assert "needs --encoder-only" in alone.out
    both = run_cli(capsys, "check", queries, "--snapshot", snap("tp1"), snap("epd-encoder"))
    assert both.code == 0, both.out
    assert "note:" not in both.out


def test_first_snapshot_wins_for_a_shared_family():
    """Families named by two payloads keep the first, as the service does."""
    from helpers.check import served  # noqa: PLC0415

    result = served("tp1", "hicache")
    assert any("duplicates tp1's; dropped" in w for w in result.warnings)
    values = result.catalog.families["sglang:cached_tokens_total"].label_values("cache_source")
    assert values == {"device"}


async def test_cli_live_upstream(aiohttp_server, capsys):
    """``--upstream`` scrapes a real HTTP server (the CLI runs its own loop, in a thread)."""
    server = await aiohttp_server(metrics_app("hicache"))
    url = str(server.make_url("/metrics"))
    run = await run_cli_in_thread(capsys, "check", OVERVIEW, "--upstream", url)
    assert run.code == 0, run.err
    run = await run_cli_in_thread(capsys, "check", FINDINGS, "--upstream", url)
    assert run.code == 1


async def test_cli_two_live_upstreams_are_merged(aiohttp_server, capsys, tmp_path: Path):
    """Two ``--upstream`` values are merged like snapshots."""
    server = await aiohttp_server(metrics_app("tp1", "epd-encoder"))
    queries = write(
        tmp_path / "q.promql",
        "sglang:num_running_reqs + on() group_left sglang:encoder_cache_used_bytes\n",
    )
    urls = [str(server.make_url(f"/metrics/{name}")) for name in ("tp1", "epd-encoder")]
    run = await run_cli_in_thread(capsys, "check", queries, "--upstream", *urls)
    assert run.code == 0, run.out + run.err


def test_cli_unreachable_upstream_exit_2(capsys):
    """Nobody listening: exit 2 with the reason, no traceback."""
    run = run_cli(capsys, "check", OVERVIEW, "--upstream", f"127.0.0.1:{closed_port()}")
    assert run.code == 2
    assert "upstream unusable (connect)" in run.err
    assert "Traceback" not in run.err


def test_check_queries_is_pure_over_no_files():
    """No files: nothing to check, nothing failing."""
    from helpers.check import served  # noqa: PLC0415
    from metricbridge.config.load import load_config  # noqa: PLC0415
    from metricbridge.translation.contract_index import ContractIndex  # noqa: PLC0415

    result = served("tp1")
    index = ContractIndex(load_config(None).families, result.translation.rows)
    report = check_queries([], result.catalog, index)
    assert (report.queries, report.findings, report.failing) == (0, (), ())


def test_a_variable_in_a_matcher_is_shown_as_a_variable(tmp_path: Path):
    """The placeholder that stands in for ``$pod`` while parsing is not what the user wrote."""
    dashboard = tmp_path / "d.json"
    target = {"expr": 'sglang:num_running_reqs{pod="$pod"}', "refId": "A"}
    dashboard.write_text(json.dumps({"panels": [{"title": "Running", "targets": [target]}]}))
    report = check([dashboard], "tp1")
    finding = only(report.findings, FindingKind.MISSING_LABEL)
    assert finding.subject == "pod"
    assert finding.reason.startswith('pod="$var" needs label pod')
    assert "__metricbridge" not in render_check(report, "text")
