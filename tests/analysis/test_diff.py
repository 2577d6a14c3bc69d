"""``metricbridge diff``: what an engine upgrade changes for dashboards, after translation.

Variants of the real scrapes live in ``tests/fixtures/diff/`` (see its README): the KV-transfer
gauges before sgl-project/sglang#19009 made them histograms, and tp1 without ``model_name`` on
the request counter.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.check import CHECK, DIFF, run_cli, served, write
from helpers.check import snapshot as snap
from metricbridge.analysis.findings import FindingKind
from metricbridge.analysis.upgrade_diff import diff_upgrade
from metricbridge.translation.translate import RowState

KV_GAUGE = DIFF / "pd-prefill-kv-gauge.prom"
NO_MODEL = DIFF / "tp1-no-model-name.prom"
PD_BOARD = CHECK / "pd_transfer.json"
OVERVIEW = CHECK / "overview.json"


def diff_json(capsys, *args: str | Path) -> tuple[int, dict]:
    """Run ``diff ... --format json``; return exit code and the parsed output."""
    run = run_cli(capsys, "diff", *args, "--format", "json")
    return run.code, json.loads(run.out)


def test_gauge_becoming_histogram_is_a_type_change(capsys):
    """The KV-transfer gauges turned histograms: type change, ``le`` added, row gained."""
    code, data = diff_json(capsys, KV_GAUGE, snap("pd-prefill"))
    assert code == 0  # no dashboard given, and the change only gains a contract row
    assert data["type_changes"] == [
        {"family": "sglang:kv_transfer_latency_ms", "old": "gauge", "new": "histogram"},
        {"family": "sglang:kv_transfer_speed_gb_s", "old": "gauge", "new": "histogram"},
    ]
    assert {"family": "sglang:kv_transfer_latency_ms", "added": ["le"], "removed": []} in data[
        "label_changes"
    ]
    (flip,) = data["contract_rows"]
    assert flip["row"] == "sglang:kvcache_transfer_time"
    assert (flip["old"]["state"], flip["new"]["state"], flip["breaks"]) == (
        "missing",
        "translated",
        False,
    )
    assert "is a gauge, the contract expects a histogram" in flip["old"]["reason"]
    assert data["families_added"] == ["sglang:kvcache_transfer_time"]


def test_type_change_breaks_a_panel_reading_the_gauge(capsys):
    """A panel reading the gauge's bare name breaks: exit 1; the histogram panel is fixed."""
    code, data = diff_json(capsys, KV_GAUGE, snap("pd-prefill"), "--dashboard", PD_BOARD)
    assert code == 1
    assert data["breaking"] is True
    (broken,) = data["dashboard_breaks"]
    assert (
        broken["location"]
        == 'row "PD disaggregation" > panel "KV transfer latency (last)" > query A'
    )
    assert broken["kind"] == FindingKind.WRONG_SUFFIX.value
    (fixed,) = data["dashboard_fixes"]
    assert "KV transfer time p90" in fixed["location"]


def test_lost_label_breaks_the_dashboard(capsys):
    """num_requests_total lost model_name: label change, and the panels grouping by it break."""
    code, data = diff_json(capsys, snap("tp1"), NO_MODEL, "--dashboard", OVERVIEW)
    assert code == 1
    assert data["label_changes"] == [
        {"family": "sglang:num_requests_total", "added": [], "removed": ["model_name"]}
    ]
    broken = {(f["location"], f["subject"]) for f in data["dashboard_breaks"]}
    assert broken == {
        ('row "Overview" > panel "Request rate by model" > query A', "model_name"),
        ('variable "model_name"', "model_name"),
    }


def test_lost_label_without_dashboards_is_not_breaking(capsys):
    """Without ``--dashboard``, a label change alone breaks no contract row: exit 0."""
    run = run_cli(capsys, "diff", snap("tp1"), NO_MODEL)
    assert run.code == 0
    assert "sglang:num_requests_total  -model_name" in run.out
    assert run.out.splitlines()[-1].startswith("diff not breaking:")


def test_served_row_becoming_missing_exits_1(capsys):
    """pd-prefill to tp1: kvcache_transfer_time loses its source, a served row goes missing."""
    run = run_cli(capsys, "diff", snap("pd-prefill"), snap("tp1"))
    assert run.code == 1
    line = next(line for line in run.out.splitlines() if "sglang:kvcache_transfer_time " in line)
    assert line.split()[1:4] == ["translated", "missing", "breaks"]
    assert "source sglang:kv_transfer_latency_ms is absent upstream" in line
    removed = run.out.split("Families removed (")[1].split("\n\n")[0]
    assert "  sglang:kv_transfer_latency_ms" in removed.splitlines()
    assert run.out.splitlines()[-1].startswith("diff BREAKING:")


def test_same_payload_has_no_changes(capsys):
    """A payload against itself: nothing changes, exit 0."""
    code, data = diff_json(capsys, snap("tp1"), snap("tp1"), "--dashboard", OVERVIEW)
    assert code == 0
    assert data == {
        "breaking": False,
        "families_added": [],
        "families_removed": [],
        "type_changes": [],
        "label_changes": [],
        "contract_rows": [],
        "dashboard_breaks": [],
        "dashboard_fixes": [],
    }


def test_markdown_output(capsys):
    """Markdown has a heading, bold section titles, tables and fenced findings."""
    run = run_cli(
        capsys,
        "diff",
        KV_GAUGE,
        snap("pd-prefill"),
        "--dashboard",
        PD_BOARD,
        "--format",
        "markdown",
    )
    assert run.code == 1
    assert run.out.startswith("### metricbridge diff\n")
    assert "**Type changes**" in run.out
    assert "| sglang:kv_transfer_latency_ms | gauge -> histogram |" in run.out
    assert "```\n" in run.out


def test_unreadable_exposition_exit_2(capsys, tmp_path: Path):
    """A missing exposition: exit 2 naming it."""
    run = run_cli(capsys, "diff", tmp_path / "old.prom", snap("tp1"))
    assert run.code == 2
    assert "old.prom: cannot read" in run.err


def test_unusable_dashboard_exit_2(capsys):
    """A dashboard with merge-conflict markers: exit 2, the diff itself still printed."""
    run = run_cli(
        capsys, "diff", snap("tp1"), snap("tp1"), "--dashboard", CHECK / "merge_conflict.json"
    )
    assert run.code == 2
    assert "line 12: merge conflict marker" in run.err
    assert "diff not breaking" in run.out


def test_bad_server_info_exit_2(capsys, tmp_path: Path):
    """``--server-info`` must be a JSON object."""
    info = write(tmp_path / "info.json", "[1, 2]")
    run = run_cli(capsys, "diff", snap("tp1"), snap("tp1"), "--server-info", info)
    assert run.code == 2
    assert "expected a JSON object" in run.err


def test_diff_upgrade_is_pure():
    """The pure diff reports flips both ways and type changes by family."""
    old, new = served("pd-prefill"), served("tp1")
    diff = diff_upgrade(old.catalog, new.catalog, old.translation.rows, new.translation.rows)
    flips = {flip.row: flip for flip in diff.row_flips}
    lost = flips["sglang:kvcache_transfer_time"]
    assert (lost.old.state, lost.new.state, lost.breaks) == (
        RowState.TRANSLATED,
        RowState.MISSING,
        True,
    )
    assert diff.breaking
    reverse = diff_upgrade(new.catalog, old.catalog, new.translation.rows, old.translation.rows)
    assert not reverse.breaking
    assert {flip.row for flip in reverse.row_flips} == set(flips)
