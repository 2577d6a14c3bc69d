"""The command line's engine releases: ``check``/``contract --engine`` and ``diff --engine-*``.

Real SGLang 0.5.23 scrapes (``tp1-cold`` before any request), the packaged release catalogues
and ``tests/dashboards/engine_upgrade.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from helpers.check import metrics_app, run_cli, run_cli_in_thread, write
from helpers.check import snapshot as snap
from helpers.paths import TESTS

BOARD = TESTS / "dashboards" / "engine_upgrade.json"
COLD_BOARD = (
    "histogram_quantile(0.9, sum by (le) (rate(sglang:inter_token_latency_seconds_bucket[5m])))\n"
    "sum(sglang:hicache_host_used_tokens)\n"
    "histogram_quantile(0.9, sum by (le) (rate(sglang:request_waiting_time_bucket[5m])))\n"
)


@pytest.fixture
def cold_board(tmp_path: Path) -> Path:
    """Panels of families SGLang 0.5.23 creates later or behind a switch."""
    return write(tmp_path / "cold.promql", COLD_BOARD)


# --- check --engine ----------------------------------------------------------------------------


def test_a_board_of_lazy_families_passes_against_the_cold_snapshot(capsys, cold_board: Path):
    run = run_cli(capsys, "check", cold_board, "--snapshot", snap("tp1-cold"))
    assert run.code == 0, run.out
    assert run.out.count("  note: missing family (lazy): ") == 2
    assert "  note: missing family (feature): sglang:hicache_host_used_tokens" in run.out
    assert "2 created later by the engine (not failing), 1 behind a feature switch" in run.out


def test_a_name_no_release_has_still_fails(capsys, tmp_path: Path):
    board = write(tmp_path / "q.promql", COLD_BOARD + "sum(sglang:num_waiting_reqs)\n")
    run = run_cli(capsys, "check", board, "--snapshot", snap("tp1-cold"))
    assert run.code == 1
    assert (
        "  error: missing family (unknown): sglang:num_waiting_reqs is not served and is not a "
        "contract row\n"
    ) in run.out


def test_a_removed_family_fails_naming_where(capsys, tmp_path: Path):
    board = write(tmp_path / "q.promql", "rate(sglang:queue_time_s_count[5m])\n")
    run = run_cli(capsys, "check", board, "--snapshot", snap("tp1"))
    assert run.code == 1
    assert "error: missing family (removed): sglang:queue_time_s_count" in run.out
    assert (
        "removed in SGLang 0.5.3 (last in 0.5.2), renamed to sglang:queue_time_seconds" in run.out
    )
    assert "    hint: sglang:queue_time_seconds_count is served" in run.out


@pytest.mark.parametrize(
    ("version", "nearest"),
    [
        ("0.5.99", "nearest catalogued: 0.5.23"),
        ("0.4.3.post2", "nearest catalogued: 0.4.3, 0.4.3.post4"),
        ("0.5", "nearest catalogued: 0.5.1, 0.5.23"),
        ("latest", "catalogued: 0.3.5.post1 to 0.5.23"),
    ],
)
def test_an_uncatalogued_engine_is_a_one_line_usage_error(
    capsys, cold_board: Path, version: str, nearest: str
):
    run = run_cli(capsys, "check", cold_board, "--snapshot", snap("tp1"), "--engine", version)
    assert run.code == 2
    assert run.out == ""
    assert run.err == f"error: --engine {version}: not a catalogued SGLang release ({nearest})\n"


def test_the_engine_option_chooses_the_release(capsys, tmp_path: Path):
    """per_stage_req_latency_seconds is lazy in 0.5.23 and first defined in 0.5.3."""
    board = write(tmp_path / "q.promql", "sglang:per_stage_req_latency_seconds_count\n")
    newest = run_cli(capsys, "check", board, "--snapshot", snap("tp1-cold"))
    assert newest.code == 0
    assert "(lazy)" in newest.out
    old = run_cli(capsys, "check", board, "--snapshot", snap("tp1-cold"), "--engine", "0.5.2")
    assert old.code == 1
    assert "first defined in SGLang 0.5.3, after 0.5.2" in old.out


def test_the_version_server_info_reports_is_the_default(capsys, tmp_path: Path):
    board = write(tmp_path / "q.promql", "sglang:per_stage_req_latency_seconds_count\n")
    info = write(tmp_path / "info.json", json.dumps({"version": "0.5.2", "tp_size": 1}))
    args = ["check", board, "--snapshot", snap("tp1-cold"), "--server-info", info]
    run = run_cli(capsys, *args)
    assert run.code == 1
    assert "after 0.5.2" in run.out
    assert run_cli(capsys, *args, "--engine", "0.5.23").code == 0  # --engine wins


def test_an_uncatalogued_reported_version_falls_back_with_a_warning(capsys, tmp_path: Path):
    board = write(tmp_path / "q.promql", "sglang:per_stage_req_latency_seconds_count\n")
    info = write(tmp_path / "info.json", json.dumps({"version": "0.5.24rc0"}))
    run = run_cli(capsys, "check", board, "--snapshot", snap("tp1-cold"), "--server-info", info)
    assert run.code == 0
    assert run.err == (
        "warning: /server_info reports SGLang 0.5.24rc0, which is not catalogued; explaining "
        "with 0.5.23 (--engine VERSION chooses another)\n"
    )


async def test_a_live_engine_s_server_info_version_is_used(aiohttp_server, capsys, tmp_path: Path):
    """``--upstream``: /server_info's ``version`` (SGLang's get_server_info returns it)."""
    app = metrics_app("tp1-cold")

    async def server_info(_: web.Request) -> web.Response:
        return web.json_response({"version": "0.5.2", "max_running_requests": 256})

    app.router.add_get("/server_info", server_info)
    server = await aiohttp_server(app)
    board = write(tmp_path / "q.promql", "sglang:per_stage_req_latency_seconds_count\n")
    url = str(server.make_url("/metrics"))
    run = await run_cli_in_thread(capsys, "check", board, "--upstream", url)
    assert run.code == 1, run.err
    assert "first defined in SGLang 0.5.3, after 0.5.2" in run.out


def test_json_findings_carry_the_engine_object(capsys, cold_board: Path):
    run = run_cli(capsys, "check", cold_board, "--snapshot", snap("tp1-cold"), "--format", "json")
    data = json.loads(run.out)
    assert data["passed"] is True
    assert data["summary"]["lazy"] == 2
    assert data["summary"]["feature"] == 1
    row = data["findings"][2]
    assert (row["contract"], row["engine"]["class"], row["engine"]["family"]) == (
        "upstream",
        "lazy",
        "sglang:queue_time_seconds",
    )


# --- contract --engine -------------------------------------------------------------------------


def test_contract_lists_the_missing_rows_the_release_explains(capsys):
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1-cold"))
    assert run.code == 0
    lines = run.out.splitlines()
    start = lines.index("Missing rows SGLang 0.5.23 explains:")
    assert lines[start + 1].split() == ["ROW", "CLASS", "WHY"]
    rows = {line.split()[0]: line.split()[1] for line in lines[start + 2 :] if line.strip()}
    assert rows["sglang:request_waiting_time"] == "lazy"
    assert rows["sglang:encoder_num_requests_total"] == "feature"
    assert lines[-1].startswith("Totals: ")


def test_contract_json_engine_object(capsys):
    run = run_cli(
        capsys, "contract", "--snapshot", snap("tp1-cold"), "--format", "json", "--engine", "0.5.23"
    )
    engine = json.loads(run.out)["engine"]
    assert (engine["engine"], engine["release"]) == ("sglang", "0.5.23")
    waiting = next(r for r in engine["rows"] if r["row"] == "sglang:request_waiting_time")
    assert waiting["class"] == "lazy"
    assert waiting["event"] == "first call of observe_queue_time()"


def test_contract_with_an_uncatalogued_engine_exits_2(capsys):
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1"), "--engine", "9.9.9")
    assert run.code == 2
    assert run.err == (
        "error: --engine 9.9.9: not a catalogued SGLang release (nearest catalogued: 0.5.23)\n"
    )


# --- diff --engine-from A --engine-to B --------------------------------------------------------


def test_diff_of_two_releases_shows_the_rename(capsys):
    run = run_cli(capsys, "diff", "--engine-from", "0.5.2", "--engine-to", "0.5.3")
    assert run.code == 0  # no file given: nothing of yours can break
    lines = run.out.splitlines()
    start = lines.index("Likely renames:")
    assert lines[start + 1].split() == ["OLD", "NEW", "SIMILARITY"]
    assert lines[start + 2].split() == ["sglang:queue_time_s", "sglang:queue_time_seconds", "0.8"]
    assert "  sglang:total_retracted_reqs" in lines
    assert lines[-1] == (
        "diff not breaking: SGLang 0.5.2 -> 0.5.3: 1 families added, 3 removed, 1 renamed, "
        "0 changed type, 0 changed labels, 0 changed HELP"
    )


def test_diff_json_of_0_5_10_post1_to_0_5_11(capsys):
    run = run_cli(
        capsys, "diff", "--engine-from", "0.5.10.post1", "--engine-to", "0.5.11", "--format", "json"
    )
    data = json.loads(run.out)
    assert (data["from"], data["to"], data["breaking"]) == ("0.5.10.post1", "0.5.11", False)
    assert {"old": "sglang:gpu_execution_seconds", "new": "sglang:forward_execution_seconds"} in [
        {"old": r["old"], "new": r["new"]} for r in data["renames"]
    ]
    assert "sglang:num_retractions" in data["families_removed"]
    assert {
        "family": "sglang:spec_accept_length",
        "old": "The average acceptance length of speculative decoding.",
        "new": "Mean acceptance length of speculative decoding (accepted drafts + bonus token "
        "per forward).",
    } in data["help_changes"]


def test_a_dashboard_querying_a_removed_family_exits_1_naming_it(capsys):
    run = run_cli(capsys, "diff", "--engine-from", "0.5.2", "--engine-to", "0.5.3", BOARD)
    assert run.code == 1
    assert (
        f'  {BOARD}: row "Scheduler" > panel "Retracted requests" > query A\n'
        '      sum(sglang:total_retracted_reqs{model_name=~"$model_name"})\n'
        "    error: removed: sglang:total_retracted_reqs: SGLang 0.5.3 no longer defines "
        "sglang:total_retracted_reqs\n"
    ) in run.out
    assert (
        "    error: renamed: sglang:queue_time_s_bucket: SGLang 0.5.3 renamed sglang:queue_time_s "
        "to sglang:queue_time_seconds\n"
        "      hint: the bridge serves the data as sglang:request_waiting_time (alias of "
        "sglang:queue_time_seconds)\n"
    ) in run.out
    assert run.out.splitlines()[-1].endswith(
        "; 1 file, 9 queries checked: 2 break(s), 0 bridged by a contract rule (not failing)"
    )


def test_a_break_the_contract_bridges_does_not_fail(capsys):
    run = run_cli(capsys, "diff", "--engine-from", "0.5.16", "--engine-to", "0.5.17", BOARD)
    assert run.code == 0, run.out
    assert (
        "    note: removed: sglang:engine_startup_time: SGLang 0.5.17 no longer defines "
        "sglang:engine_startup_time\n"
        "      bridged by the contract rule sglang:engine_startup_time (select of "
        "sglang:startup_time_seconds)\n"
    ) in run.out
    assert run.out.splitlines()[-1].startswith("diff not breaking: SGLang 0.5.16 -> 0.5.17:")


def test_diff_json_breaks(capsys):
    args = ["diff", "--engine-from", "0.5.11", "--engine-to", "0.5.12", BOARD, "--format", "json"]
    data = json.loads(run_cli(capsys, *args).out)
    (bridged,) = data["breaks"]
    assert bridged["bridge"] == {
        "rule": "sglang:num_prefill_prealloc_queue_reqs",
        "disposition": "alias",
        "reads": ["sglang:num_prefill_bootstrap_queue_reqs"],
    }
    assert (bridged["kind"], bridged["failing"], data["breaking"]) == ("renamed", False, False)


def test_diff_markdown(capsys):
    run = run_cli(
        capsys,
        "diff",
        "--engine-from",
        "0.5.2",
        "--engine-to",
        "0.5.3",
        BOARD,
        "--format",
        "markdown",
    )
    lines = run.out.splitlines()
    assert lines[0] == "### metricbridge diff: SGLang 0.5.2 -> 0.5.3"
    assert "| `sglang:queue_time_s` | `sglang:queue_time_seconds` | 0.8 |" in lines
    assert "**Queries that break**" in lines
    assert run.code == 1


def test_files_may_also_follow_dashboard(capsys):
    run = run_cli(
        capsys, "diff", "--engine-from", "0.5.2", "--engine-to", "0.5.3", "--dashboard", BOARD
    )
    assert run.code == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine-from", "0.5.2"], "--engine-from and --engine-to go together"),
        (
            ["--engine-from", "0.5.2", "--engine-to", "0.5.3", "--server-info", "x.json"],
            "--server-info is for two expositions, not --engine-from/--engine-to",
        ),
    ],
)
def test_diff_usage_errors(capsys, args: list[str], message: str):
    with pytest.raises(SystemExit) as exited:
        run_cli(capsys, "diff", *args)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"metricbridge diff: error: {message}\n")


def test_diff_with_an_uncatalogued_release_exits_2(capsys):
    run = run_cli(capsys, "diff", "--engine-from", "0.5.2", "--engine-to", "0.6.0")
    assert run.code == 2
    assert run.err == (
        "error: --engine-to 0.6.0: not a catalogued SGLang release (nearest catalogued: 0.5.23)\n"
    )


def test_diff_with_an_unreadable_file_exits_2(capsys, tmp_path: Path):
    run = run_cli(
        capsys, "diff", "--engine-from", "0.5.2", "--engine-to", "0.5.3", tmp_path / "none.json"
    )
    assert run.code == 2
    assert "none.json: cannot read" in run.err


def test_two_expositions_still_need_both(capsys):
    with pytest.raises(SystemExit) as exited:
        run_cli(capsys, "diff", snap("tp1"))
    assert exited.value.code == 2
    assert "the following arguments are required: NEW_EXPOSITION" in capsys.readouterr().err
