"""SGLang's old example dashboard against a real 0.5.23 exposition, with --profile sglang-legacy.

The dashboard is SGLang's own ``examples/monitoring/grafana.json`` as it was at commit
f32b084119d9bcb1f76d060ecd9d727b525be217 of sgl-project/sglang (saved verbatim as
``tests/dashboards/sglang_legacy_example.json``): it queries the names of SGLang's first
metrics code (``sglang:num_requests_running``, ``sglang:max_prefill_tokens`` ...) with a
``name`` label for the model, none of which a catalogued release serves. The /server_info
answer is ``tests/fixtures/server_info/sglang-0.5.23-tp1.json`` (hand-written, see the README
beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from helpers.check import run_cli, snapshot
from helpers.paths import TESTS
from helpers.promtool import promtool_check_metrics
from metricbridge.config.load import load_config
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format, Verify

BOARD = TESTS / "dashboards" / "sglang_legacy_example.json"
INFO = TESTS / "fixtures" / "server_info" / "sglang-0.5.23-tp1.json"
PROFILE = ("--profile", "sglang-legacy")
# The two panels whose old family has no honest source (the profile's engine rows).
ENGINE_PANELS = {"Cached Tokens", "Cache Hit Rate (%)"}


def _check(capsys, *extra: str | Path, board: Path = BOARD, shot: str = "tp1"):
    args = ["check", board, "--snapshot", snapshot(shot), "--server-info", INFO, "--format", "json"]
    run = run_cli(capsys, *args, *extra)
    return run.code, json.loads(run.out)


def _failing(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["failing"]]


def _panel(finding: dict) -> str:
    return finding["location"].split('panel "', 1)[1].split('"', 1)[0]


def _queries(board: Path) -> list[str]:
    panels = json.loads(board.read_text("utf-8"))["panels"]
    return [t["expr"] for p in panels for t in p["targets"] if t["expr"].strip()]


def test_the_saved_dashboard_is_the_old_one() -> None:
    """It queries the old names with the name label: the revision the profile is for."""
    text = BOARD.read_text("utf-8")
    for old in (
        "sglang:num_requests_running", "sglang:num_requests_waiting",
        "sglang:waiting_request_latency_seconds", "sglang:request_prompt_tokens",
        "sglang:request_generation_tokens", "sglang:cached_token", "sglang:max_prefill_tokens",
        "sglang:max_running_requests", 'name=\\"$name\\"',
    ):  # fmt: skip
        assert old in text, old
    assert len(_queries(BOARD)) == 28


def test_without_the_profile_every_query_fails(capsys) -> None:
    """Against 0.5.23 no query is served (old names, or no name label); only $instance is."""
    code, report = _check(capsys)
    assert code == 1
    assert report["queries"] == 30  # 28 panel queries and 2 template variables
    located = {f["location"] for f in _failing(report)}
    panel_queries = {loc for loc in located if loc.startswith("panel ")}
    assert len(panel_queries) == len(_queries(BOARD))
    # $name reads the old label; $instance the scraper's own label, which no rule can break.
    assert located - panel_queries == {'variable "name"'}


def test_with_the_profile_only_the_engine_rows_fail(capsys) -> None:
    """Every query is served but those of the two old families with no honest source."""
    code, report = _check(capsys, *PROFILE)
    assert code == 1
    failing = _failing(report)
    assert {_panel(f) for f in failing} == ENGINE_PANELS
    cached = next(f for f in failing if _panel(f) == "Cached Tokens")
    assert cached["contract"] == "engine"
    assert "prefix-cache hit tokens of the last prefill batch" in cached["reason"]


def test_with_the_profile_the_rest_of_the_dashboard_passes(capsys, tmp_path: Path) -> None:
    """The old dashboard without the two engine panels: exit 0, nothing failing."""
    board = json.loads(BOARD.read_text("utf-8"))
    board["panels"] = [p for p in board["panels"] if p["title"] not in ENGINE_PANELS]
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps(board), "utf-8")
    code, report = _check(capsys, *PROFILE, board=rest)
    assert code == 0
    assert _failing(report) == []
    _, without = _check(capsys, board=rest)
    assert len(_failing(without)) > 20


def test_the_derived_rows_need_the_server_info(capsys) -> None:
    """Without /server_info the two configuration panels fail, naming what is missing."""
    args = ["check", BOARD, "--snapshot", snapshot("tp1"), *PROFILE, "--format", "json"]
    run = run_cli(capsys, *args)
    failing = _failing(json.loads(run.out))
    panels = {_panel(f) for f in failing}
    assert panels == ENGINE_PANELS | {"Max Running Requests", "Max Prefill Tokens"}


def test_contract_reports_the_engine_rows(capsys) -> None:
    """contract lists the old families it cannot serve as engine rows, with the reason."""
    args = ["contract", "--snapshot", snapshot("tp1"), "--server-info", INFO, *PROFILE]
    run = run_cli(capsys, *args, "--format", "json")
    assert run.code == 0
    report = json.loads(run.out)
    rows = {row["family"]: row for row in report["rows"]}
    assert rows["sglang:cached_token"]["disposition"] == "engine"
    assert rows["sglang:cached_token"]["state"] == "missing"
    assert rows["sglang:num_requests_running"]["state"] == "translated"
    assert rows["sglang:max_prefill_tokens"]["state"] == "translated"
    items = {item["item"]: item for item in report["items"]}
    assert items["sglang:cache_hit_rate{name}"]["disposition"] == "engine"
    assert "sglang-legacy" in report["profiles"]


def _translate(capsys, fmt: str, shot: str = "tp1") -> str:
    args = ["translate", *PROFILE, "--server-info", INFO, "--format", fmt, snapshot(shot)]
    run = run_cli(capsys, *args)
    assert run.code == 0, run.err
    return run.out


def _series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_translate_serves_the_old_names_beside_today_s(capsys) -> None:
    """Old names carry today's values with name=model_name; today's names are unchanged."""
    served = _series(_translate(capsys, "text"))
    plain = _series(snapshot("tp1").read_text("utf-8"))
    for old, new in (
        ("sglang:num_requests_running", "sglang:num_running_reqs"),
        ("sglang:num_requests_waiting", "sglang:num_queue_reqs"),
        ("sglang:waiting_request_latency_seconds_count", "sglang:queue_time_seconds_count"),
        ("sglang:request_prompt_tokens_sum", "sglang:prompt_tokens_histogram_sum"),
        ("sglang:request_generation_tokens_bucket", "sglang:generation_tokens_histogram_bucket"),
    ):
        assert served[new] == plain[new], new
        expected = [({**labels, "name": labels["model_name"]}, v) for labels, v in plain[new]]
        assert sorted(served[old], key=repr) == sorted(expected, key=repr), old
    for same in ("sglang:context_len", "sglang:e2e_request_latency_seconds_count"):
        assert all(labels["name"] == labels["model_name"] for labels, _ in served[same])
    assert "sglang:cached_token" not in served
    assert all("name" not in labels for labels, _ in served["sglang:cache_hit_rate"])


def test_translate_serves_the_server_info_values(capsys) -> None:
    """max_prefill_tokens and max_running_requests: /server_info's values, one series."""
    info = json.loads(INFO.read_text("utf-8"))
    served = _series(_translate(capsys, "text"))
    for field in ("max_prefill_tokens", "max_running_requests"):
        [(labels, value)] = served[f"sglang:{field}"]
        assert value == info[field]
        assert labels["name"] == info["served_model_name"]
        assert not {"tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"} & set(labels)


def test_on_dp8_the_server_info_rows_are_one_series_per_model(capsys) -> None:
    """Eight DP ranks of context_len make one max_prefill_tokens series, not eight."""
    served = _series(_translate(capsys, "text", shot="dp8"))
    assert len(served["sglang:context_len"]) == 8
    assert len(served["sglang:max_prefill_tokens"]) == 1


@pytest.mark.integration
def test_translated_text_passes_promtool_and_both_parsers(capsys) -> None:
    """The text output: promtool check metrics, and prometheus_client's text parser."""
    text = _translate(capsys, "text")
    promtool_check_metrics(text.encode())
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"sglang:num_requests_running", "sglang:max_prefill_tokens"} <= names
    read_exposition(text.encode(), Format.TEXT, Verify.FULL)


def test_translated_openmetrics_passes_the_openmetrics_parser(capsys) -> None:
    """The OpenMetrics output parses with prometheus_client's OpenMetrics parser."""
    text = _translate(capsys, "openmetrics")
    names = {family.name for family in openmetrics_families(text)}
    assert {
        "sglang:num_requests_running", "sglang:waiting_request_latency_seconds",
        "sglang:request_prompt_tokens", "sglang:max_running_requests",
    } <= names  # fmt: skip


def test_the_profile_adds_rows_and_changes_none_of_the_contract() -> None:
    """The default contract's rows are the same with and without the profile."""
    plain = {rule.name: rule for rule in load_config().families}
    layered = {rule.name: rule for rule in load_config(profiles=["sglang-legacy"]).families}
    assert {name: layered[name] for name in plain} == plain


def test_translate_refuses_a_server_info_that_is_not_an_object(capsys, tmp_path: Path) -> None:
    """translate --server-info: a JSON list is an unusable input, exit 2, nothing written."""
    bad = tmp_path / "info.json"
    bad.write_text("[]", "utf-8")
    run = run_cli(capsys, "translate", "--server-info", bad, snapshot("tp1"))
    assert run.code == 2
    assert run.out == ""
    assert run.err == f"{bad}: expected a JSON object\n"
