"""``check`` with an engine release's catalogue: later, behind a switch, removed, or unknown.

Real data only: the SGLang 0.5.23 scrapes in ``tests/fixtures/sglang-0.5.23/`` (``tp1-cold`` was
taken before any request, so every family SGLang creates lazily is absent) and the packaged
release catalogues. Each query is checked through the pure API, as the CLI does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.check import CHECK, check, served, write
from metricbridge.analysis.engine_notes import EngineClass, EngineView
from metricbridge.analysis.findings import FindingKind, NotFailing
from metricbridge.engines import load_catalogue
from metricbridge.render.findings import check_summary, render_check
from metricbridge.translation.contract_index import MissingClass


def finding_for(tmp_path: Path, expr: str, *snapshots: str, engine: str | None = "0.5.23"):
    """The one finding of a one-line PromQL file against ``snapshots``."""
    queries = write(tmp_path / "q.promql", expr + "\n")
    report = check([queries], *snapshots, engine=engine)
    (finding,) = report.findings
    return finding


def families(name: str) -> frozenset[str]:
    """The family names SGLang sent in a fixture."""
    return served(name).upstream


# --- Created later: lazy ------------------------------------------------------------------------


def test_lazy_family_is_a_note_against_the_cold_snapshot(tmp_path: Path):
    """inter_token_latency_seconds: in tp1, absent before the first request, lazy in 0.5.23."""
    family = "sglang:inter_token_latency_seconds"
    assert family in families("tp1")
    assert family not in families("tp1-cold")
    assert load_catalogue("0.5.23").get(family).lifecycle.kind == "lazy"

    expr = f"histogram_quantile(0.9, sum by (le) (rate({family}_bucket[5m])))"
    finding = finding_for(tmp_path, expr, "tp1-cold")
    assert finding.kind is FindingKind.MISSING_FAMILY
    assert finding.contract is MissingClass.UNKNOWN  # not a contract row...
    assert finding.engine.cls is EngineClass.LAZY  # ...but 0.5.23 creates it later
    assert not finding.failing
    assert finding.why_not_failing is NotFailing.LAZY
    assert finding.shown_class == "lazy"
    assert finding.reason == (
        f"{family}_bucket is not served and is not a contract row: SGLang 0.5.23 creates "
        f"{family} lazily: it appears on the first call of observe_inter_token_latency(), not "
        "yet in this payload (not failing)"
    )


def test_the_same_query_is_clean_once_the_engine_has_served_requests(tmp_path: Path):
    queries = write(tmp_path / "q.promql", "sglang:inter_token_latency_seconds_bucket\n")
    assert check([queries], "tp1", engine="0.5.23").findings == ()


def test_without_an_engine_release_the_cold_snapshot_fails_as_before(tmp_path: Path):
    """``check_queries`` without ``engine`` knows no catalogue: the old classification."""
    finding = finding_for(
        tmp_path, "sglang:inter_token_latency_seconds_bucket", "tp1-cold", engine=None
    )
    assert (finding.contract, finding.engine, finding.failing) == (MissingClass.UNKNOWN, None, True)
    assert finding.reason == (
        "sglang:inter_token_latency_seconds_bucket is not served and is not a contract row"
    )


def test_contract_row_whose_source_is_lazy_is_lazy_too(tmp_path: Path):
    """request_waiting_time is the bridge's alias of queue_time_seconds, created lazily."""
    expr = "histogram_quantile(0.9, sum by (le) (rate(sglang:request_waiting_time_bucket[5m])))"
    finding = finding_for(tmp_path, expr, "tp1-cold")
    assert finding.contract is MissingClass.UPSTREAM  # the contract's class is kept
    assert finding.engine.cls is EngineClass.LAZY
    assert finding.engine.family == "sglang:queue_time_seconds"
    assert not finding.failing
    assert "source sglang:queue_time_seconds is absent upstream; SGLang 0.5.23 creates" in (
        finding.reason
    )
    assert "on the first call of observe_queue_time()" in finding.reason


# --- Behind a feature switch --------------------------------------------------------------------


def test_feature_gated_family_is_a_note_naming_the_switch(tmp_path: Path):
    """A HiCache family: in the HiCache scrape, absent from tp1, tagged hicache in 0.5.23."""
    family = "sglang:hicache_host_used_tokens"
    assert family in families("hicache")
    assert family not in families("tp1")
    finding = finding_for(tmp_path, f"sum({family})", "tp1")
    assert finding.engine.cls is EngineClass.FEATURE
    assert finding.engine.switches == ("--enable-hierarchical-cache (HiCache)",)
    assert "needs --enable-hierarchical-cache (HiCache) in SGLang 0.5.23" in finding.reason
    assert (finding.failing, finding.why_not_failing) == (False, NotFailing.FEATURE)


def test_encoder_row_on_the_llm_server_needs_an_epd_encoder(tmp_path: Path):
    """The encoder rows' sources are on an EPD encoder server's own /metrics."""
    finding = finding_for(tmp_path, "rate(sglang:encoder_num_requests_total[5m])", "tp1")
    assert finding.contract is MissingClass.UPSTREAM
    assert finding.engine.cls is EngineClass.FEATURE
    assert "needs --encoder-only" in finding.reason
    assert not finding.failing


def test_a_hicache_cache_source_is_a_feature_note_as_the_hicache_gauges_are(tmp_path: Path):
    """cache_source="host" exists only with HiCache: a note on tp1, served on the HiCache engine."""
    expr = 'sum(rate(sglang:cached_tokens_total{cache_source="host"}[5m]))'
    finding = finding_for(tmp_path, expr, "tp1")
    assert finding.kind is FindingKind.NO_MATCHING_VALUE
    assert finding.engine.cls is EngineClass.FEATURE
    assert finding.engine.switches == ("--enable-hierarchical-cache (HiCache)",)
    assert (finding.failing, finding.why_not_failing) == (False, NotFailing.FEATURE)
    assert finding.reason.startswith(
        'cache_source="host" matches no served series of sglang:cached_tokens_total '
        '(served values: "device"); cache_source="host" of sglang:cached_tokens needs '
        "--enable-hierarchical-cache (HiCache) in SGLang 0.5.23"
    )
    queries = write(tmp_path / "hicache.promql", expr + "\n")
    assert check([queries], "hicache", engine="0.5.23").findings == ()


def test_a_value_no_feature_explains_still_fails(tmp_path: Path):
    """Only the values a switch adds are notes: a value SGLang never reports fails as before."""
    expr = 'sum(rate(sglang:cached_tokens_total{cache_source="disk"}[5m]))'
    finding = finding_for(tmp_path, expr, "tp1")
    assert finding.kind is FindingKind.NO_MATCHING_VALUE
    assert finding.engine is None
    assert finding.failing


def test_the_counter_of_a_similar_name_is_suggested_not_the_gauge(tmp_path: Path):
    """num_retracted_reqs_total: 0.5.23's counter is num_retracted_requests, the gauge has no _total."""
    finding = finding_for(tmp_path, "sum(rate(sglang:num_retracted_reqs_total[5m]))", "tp1")
    assert finding.kind is FindingKind.WRONG_SUFFIX
    assert finding.failing
    assert finding.hint == "sglang:num_retracted_requests_total is served"
    assert "select sglang:num_retracted_reqs" not in finding.reason
    assert finding.reason == (
        "sglang:num_retracted_reqs is a gauge: it has no sglang:num_retracted_reqs_total; "
        "sglang:num_retracted_requests_total, of a similar name, is served"
    )


def test_the_similar_counter_is_named_from_the_release_when_not_served_yet(tmp_path: Path):
    """Before the first retraction the counter is not served: the catalogue names it."""
    assert "sglang:num_retracted_requests_total" not in families("tp1-cold")
    finding = finding_for(tmp_path, "sum(rate(sglang:num_retracted_reqs_total[5m]))", "tp1-cold")
    assert finding.hint == "sglang:num_retracted_requests_total is what SGLang 0.5.23 defines"


# --- Failing: unknown, removed, dead, newer, startup --------------------------------------------


def test_a_name_no_release_has_fails_as_unknown_word_for_word(tmp_path: Path):
    """sglang:num_waiting_reqs is in no catalogued release: the finding is today's."""
    with_engine = finding_for(tmp_path, "sum(sglang:num_waiting_reqs)", "tp1-cold")
    without = finding_for(tmp_path, "sum(sglang:num_waiting_reqs)", "tp1-cold", engine=None)
    assert with_engine == without
    assert with_engine.contract is MissingClass.UNKNOWN
    assert with_engine.engine is None
    assert with_engine.failing
    assert with_engine.reason == "sglang:num_waiting_reqs is not served and is not a contract row"


def test_a_renamed_family_fails_with_removed_in_and_its_new_name(tmp_path: Path):
    """queue_time_s became queue_time_seconds in 0.5.3; the new name is served."""
    finding = finding_for(tmp_path, "rate(sglang:queue_time_s_bucket[5m])", "tp1")
    assert finding.failing
    assert finding.shown_class == "removed"
    assert finding.engine.cls is EngineClass.REMOVED
    assert (finding.engine.last_in, finding.engine.removed_in) == ("0.5.2", "0.5.3")
    assert finding.engine.renamed_to == "sglang:queue_time_seconds"
    assert (
        "removed in SGLang 0.5.3 (last in 0.5.2), renamed to sglang:queue_time_seconds in 0.5.3"
        in (finding.reason)
    )
    assert finding.hint == "sglang:queue_time_seconds_bucket is served"


def test_gpu_execution_seconds_was_renamed_in_0_5_11(tmp_path: Path):
    finding = finding_for(tmp_path, "rate(sglang:gpu_execution_seconds_total[5m])", "tp1")
    assert finding.failing
    assert "removed in SGLang 0.5.11" in finding.reason
    assert "renamed to sglang:forward_execution_seconds in 0.5.11" in finding.reason
    assert finding.hint == "sglang:forward_execution_seconds_total is its new name"


def test_a_removed_family_without_a_rename(tmp_path: Path):
    """total_retracted_reqs was dropped in 0.5.3, with nothing of its shape added."""
    finding = finding_for(tmp_path, "sum(sglang:total_retracted_reqs)", "tp1")
    assert finding.failing
    assert finding.engine.renamed_to is None
    assert (
        "sglang:total_retracted_reqs was removed in SGLang 0.5.3 (last in 0.5.2)" in finding.reason
    )


def test_a_dead_family_fails(tmp_path: Path):
    """0.5.23 defines grammar_compilation_time_seconds, but nothing records it."""
    finding = finding_for(tmp_path, "sglang:grammar_compilation_time_seconds_count", "tp1")
    assert finding.engine.cls is EngineClass.DEAD
    assert finding.failing
    assert "it never appears: no code path in this release records a value" in finding.reason


def test_a_sample_the_family_s_type_never_has_fails(tmp_path: Path):
    """The KV-transfer gauge became a histogram in 0.5.10: its bare name never comes back."""
    finding = finding_for(tmp_path, "max(sglang:kv_transfer_latency_ms)", "tp1")
    assert finding.engine.cls is EngineClass.NO_SAMPLE
    assert finding.failing
    assert "defines sglang:kv_transfer_latency_ms as a histogram, which has no" in finding.reason
    assert finding.reason.endswith("; it was a gauge until 0.5.9")


def test_a_family_of_a_newer_release_fails_for_an_older_one(tmp_path: Path):
    """Checked as 0.5.2, per_stage_req_latency_seconds (first in 0.5.3) is not yet there."""
    finding = finding_for(
        tmp_path, "sglang:per_stage_req_latency_seconds_count", "tp1-cold", engine="0.5.2"
    )
    assert finding.engine.cls is EngineClass.NEWER
    assert finding.engine.added_in == "0.5.3"
    assert finding.failing


def test_a_startup_family_absent_from_the_payload_fails(tmp_path: Path):
    """dp_attention_steps is on every LLM server from start-up; the encoder's /metrics lacks it."""
    finding = finding_for(tmp_path, "rate(sglang:dp_attention_steps_total[5m])", "epd-encoder")
    assert finding.engine.cls is EngineClass.STARTUP
    assert finding.failing
    assert "exports sglang:dp_attention_steps from start-up (scheduler process)" in finding.reason


# --- Output -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_unaffected_reports_are_byte_identical(fmt: str):
    """Nothing the engine explains: the same report, with or without its catalogue."""
    board = CHECK / "overview.json"
    assert render_check(check([board], "tp1", engine="0.5.23"), fmt) == render_check(
        check([board], "tp1"), fmt
    )


def cold_report(tmp_path: Path):
    queries = write(
        tmp_path / "q.promql",
        "sglang:inter_token_latency_seconds_bucket\n"
        "sum(sglang:hicache_host_used_tokens)\n"
        "sum(sglang:num_waiting_reqs)\n",
    )
    return check([queries], "tp1-cold", engine="0.5.23")


def test_text_output_shows_the_classes_and_counts_them(tmp_path: Path):
    text = render_check(cold_report(tmp_path), "text")
    assert "  note: missing family (lazy): sglang:inter_token_latency_seconds_bucket" in text
    assert "  note: missing family (feature): sglang:hicache_host_used_tokens" in text
    assert "  error: missing family (unknown): sglang:num_waiting_reqs" in text
    assert text.endswith(
        "check FAILED: 1 file, 3 queries checked: 1 failing finding(s), 0 structural (not "
        "failing), 1 created later by the engine (not failing), 1 behind a feature switch "
        "(not failing), 0 not checked\n"
    )


def test_json_output_has_the_engine_object_only_where_it_explains(tmp_path: Path):
    data = json.loads(render_check(cold_report(tmp_path), "json"))
    assert data["summary"] == {
        "failing": 1,
        "lazy": 1,
        "feature": 1,
        "structural": 0,
        "not_checked": 0,
    }
    lazy, feature, unknown = data["findings"]
    assert lazy["engine"] == {
        "class": "lazy",
        "engine": "sglang",
        "release": "0.5.23",
        "family": "sglang:inter_token_latency_seconds",
        "failing": False,
        "event": "first call of observe_inter_token_latency()",
    }
    assert (lazy["contract"], lazy["failing"]) == ("unknown", False)
    assert feature["engine"]["switches"] == ["--enable-hierarchical-cache (HiCache)"]
    assert "engine" not in unknown


def test_markdown_rows_are_notes_with_the_class(tmp_path: Path):
    lines = render_check(cold_report(tmp_path), "markdown").splitlines()
    rows = [line for line in lines if line.startswith("| note |")]
    assert len(rows) == 2
    assert "**missing family** (lazy):" in rows[0]
    assert "**missing family** (feature):" in rows[1]


def test_summary_of_a_passing_cold_check(tmp_path: Path):
    """A board of lazily created families passes against the cold scrape."""
    queries = write(
        tmp_path / "q.promql", "sum(sglang:num_running_reqs)\nsum(sglang:token_usage)\n"
    )
    report = check([queries], "tp1-cold", engine="0.5.23")
    assert report.failing == ()
    assert check_summary(report) == (
        "check passed: 1 file, 2 queries checked: 0 failing finding(s), 0 structural (not "
        "failing), 2 created later by the engine (not failing), 0 not checked"
    )


# --- EngineView ---------------------------------------------------------------------------------


def test_a_family_the_payload_sent_gets_no_note():
    """The bridge may drop or rename a family; that is not the engine's doing."""
    view = EngineView("0.5.23", families("tp1"))
    assert view.explain("sglang:num_running_reqs") is None
    assert view.explain("sglang:num_requests_total") is None  # the counter's sample name


def test_of_several_absent_sources_the_failing_note_wins():
    view = EngineView("0.5.23", families("tp1-cold"))
    note = view.explain_sources(["sglang:queue_time_seconds", "sglang:queue_time_s"])
    assert note.cls is EngineClass.REMOVED
    note = view.explain_sources(["sglang:queue_time_seconds", "sglang:hicache_host_used_tokens"])
    assert note.cls is EngineClass.FEATURE
    assert view.explain_sources(["sglang:queue_time_seconds", "sglang:num_waiting_reqs"]) is None
    assert view.explain_sources(["sglang:startup_time_seconds"]) is None  # present


def test_an_uncatalogued_release_is_a_lookup_error():
    with pytest.raises(LookupError, match=r"0\.5\.99 is not catalogued"):
        EngineView("0.5.99")
