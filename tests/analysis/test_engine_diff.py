"""``diff_engines``: two SGLang releases compared from their catalogues, and the queries that break.

Real catalogue data throughout, and ``tests/dashboards/engine_upgrade.json``, a Grafana dashboard
written against SGLang 0.5.2 to 0.5.16 names (a row of panels per upgrade that breaks one). The
relabelled case has no real example (no catalogued release drops a label), so it drops one from
a real family.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers.check import write
from helpers.paths import TESTS
from metricbridge.analysis.dashboards import load_queries
from metricbridge.analysis.engine_diff import BreakKind, diff_engines
from metricbridge.config.load import load_config
from metricbridge.engines import load_catalogue

BOARD = TESTS / "dashboards" / "engine_upgrade.json"


def diff(old: str, new: str, *files: Path):
    loads = [(str(path), load_queries(path)) for path in files]
    return diff_engines(load_catalogue(old), load_catalogue(new), loads, load_config(None).families)


def by_panel(result, panel: str):
    """The breaks of the panel titled ``panel``."""
    return [b for b in result.breaks if f'panel "{panel}"' in b.location]


def test_catalogue_changes_come_from_diff_catalogues():
    """0.5.2 -> 0.5.3: queue_time_s became queue_time_seconds, three families dropped."""
    result = diff("0.5.2", "0.5.3")
    assert [(r.old, r.new) for r in result.changes.renames] == [
        ("sglang:queue_time_s", "sglang:queue_time_seconds")
    ]
    assert [f.name for f in result.changes.removed] == [
        "sglang:avg_request_queue_latency",
        "sglang:time_to_first_token_seconds_offline_batch",
        "sglang:total_retracted_reqs",
    ]
    assert (result.files, result.queries, result.breaks, result.breaking) == ((), 0, (), False)


def test_renamed_family_breaks_the_panel_and_the_contract_alias_is_the_hint():
    result = diff("0.5.2", "0.5.3", BOARD)
    (renamed,) = by_panel(result, "Queue time p90")
    assert renamed.kind is BreakKind.RENAMED
    assert renamed.subject == "sglang:queue_time_s_bucket"
    assert renamed.reason == "SGLang 0.5.3 renamed sglang:queue_time_s to sglang:queue_time_seconds"
    assert renamed.failing
    assert renamed.bridge is None
    assert str(renamed.alternative) == (
        "sglang:request_waiting_time (alias of sglang:queue_time_seconds)"
    )
    assert result.breaking


def test_removed_family_breaks_the_panel():
    (removed,) = by_panel(diff("0.5.2", "0.5.3", BOARD), "Retracted requests")
    assert (removed.kind, removed.family) == (BreakKind.REMOVED, "sglang:total_retracted_reqs")
    assert removed.reason == "SGLang 0.5.3 no longer defines sglang:total_retracted_reqs"
    assert (removed.failing, removed.alternative) == (True, None)


def test_an_or_with_the_new_name_on_the_other_side_is_excused():
    """`new_name or old_name` is how a dashboard bridges a rename itself."""
    (excused,) = by_panel(diff("0.5.2", "0.5.3", BOARD), "Queue time (either name)")
    assert excused.subject == "sglang:queue_time_s_count"
    assert excused.excused
    assert not excused.failing


def test_gpu_execution_seconds_renamed_in_0_5_11():
    result = diff("0.5.10.post1", "0.5.11", BOARD)
    assert ("sglang:gpu_execution_seconds", "sglang:forward_execution_seconds") in [
        (r.old, r.new) for r in result.changes.renames
    ]
    (renamed,) = result.breaks
    assert renamed.subject == "sglang:gpu_execution_seconds_total"
    assert renamed.kind is BreakKind.RENAMED
    assert result.breaking


def test_a_rename_the_contract_serves_under_the_old_name_is_bridged():
    """0.5.12 renamed num_prefill_prealloc_queue_reqs; the shipped alias serves the old name."""
    result = diff("0.5.11", "0.5.12", BOARD)
    (bridged,) = result.breaks
    assert bridged.subject == "sglang:num_prefill_prealloc_queue_reqs"
    assert str(bridged.bridge) == (
        "sglang:num_prefill_prealloc_queue_reqs (alias of sglang:num_prefill_bootstrap_queue_reqs)"
    )
    assert not bridged.failing
    assert not result.breaking


def test_a_removed_family_the_contract_selects_from_its_successor_is_bridged():
    """0.5.17 dropped engine_startup_time for startup_time_seconds{phase}: a select rule."""
    result = diff("0.5.16", "0.5.17", BOARD)
    (bridged,) = result.breaks
    assert bridged.kind is BreakKind.REMOVED
    assert (
        str(bridged.bridge) == "sglang:engine_startup_time (select of sglang:startup_time_seconds)"
    )
    assert not result.breaking


def test_a_gauge_turned_histogram_breaks_a_query_of_the_bare_name():
    """0.5.10 made the KV-transfer gauges histograms: the bare sample is gone."""
    result = diff("0.5.9", "0.5.10", BOARD)
    (retyped,) = by_panel(result, "KV transfer latency (last)")
    assert retyped.kind is BreakKind.RETYPED
    assert "sglang:kv_transfer_latency_ms is a histogram in SGLang 0.5.10, a gauge before" in (
        retyped.reason
    )
    assert str(retyped.alternative) == (
        "sglang:kvcache_transfer_time (scale of sglang:kv_transfer_latency_ms)"
    )


def test_a_contract_row_breaks_when_its_source_is_removed(tmp_path: Path):
    """engine_startup_time in 0.5.17+ is a select of startup_time_seconds; take that away."""
    queries = write(tmp_path / "q.promql", "max(sglang:engine_startup_time)\n")
    old = load_catalogue("0.5.17")
    new = dataclasses.replace(
        old, families=tuple(f for f in old.families if f.name != "sglang:startup_time_seconds")
    )
    result = diff_engines(
        old, new, [(str(queries), load_queries(queries))], load_config(None).families
    )
    (broken,) = result.breaks
    assert broken.kind is BreakKind.ROW_SOURCE
    assert broken.reason == (
        "contract row sglang:engine_startup_time (select) reads sglang:startup_time_seconds, "
        "which SGLang 0.5.17 no longer defines"
    )


@pytest.mark.parametrize(
    ("expr", "breaks"),
    [
        ('sum(sglang:num_running_reqs{model_name="m"})', True),  # a matcher reads it
        ("sum by (model_name) (sglang:num_running_reqs)", True),  # a grouping reads it
        ('sum(sglang:num_running_reqs{model_name=""})', False),  # absent matches ""
        ("sum without (model_name) (sglang:num_running_reqs)", False),  # dropping it is fine
        ("sum(sglang:num_running_reqs)", False),
    ],
)
def test_a_lost_label_breaks_only_queries_that_read_it(tmp_path: Path, expr: str, breaks: bool):
    queries = write(tmp_path / "q.promql", expr + "\n")
    old = load_catalogue("0.5.23")
    families = tuple(
        dataclasses.replace(
            f,
            labels=tuple(n for n in f.labels if n != "model_name"),
            declared_labels=tuple(n for n in f.declared_labels if n != "model_name"),
        )
        if f.name == "sglang:num_running_reqs"
        else f
        for f in old.families
    )
    new = dataclasses.replace(old, version="0.5.23-no-model", families=families)
    result = diff_engines(old, new, [(str(queries), load_queries(queries))], ())
    assert [c.name for c in result.changes.labels_changed] == ["sglang:num_running_reqs"]
    assert bool(result.breaks) is breaks
    if breaks:
        assert result.breaks[0].kind is BreakKind.RELABELLED
        assert "without model_name, which the query reads" in result.breaks[0].reason


def test_queries_of_families_neither_release_has_are_not_the_diff_s_business(tmp_path: Path):
    queries = write(tmp_path / "q.promql", "sum(sglang:num_waiting_reqs)\nup\n")
    assert diff("0.5.2", "0.5.23", queries).breaks == ()
