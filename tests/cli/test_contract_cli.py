"""``metricbridge contract``: the coverage table of every contract row, as /contract serves it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.check import closed_port, metrics_app, run_cli, run_cli_in_thread, served, write
from helpers.check import snapshot as snap
from metricbridge.config.load import load_config
from metricbridge.render.contract import contract_totals
from metricbridge.translation.report import contract_report


def report_for(*names: str) -> dict:
    """The contract report for snapshots, computed without the CLI."""
    return contract_report(load_config(None), served(*names).translation)


def row_line(text: str, family: str) -> list[str]:
    """The cells of ``family``'s line in the text table."""
    line = next(line for line in text.splitlines() if line.startswith(family + " "))
    return re.split(r"\s{2,}", line)


def test_json_is_the_report(capsys):
    """``--format json`` prints exactly ``contract_report`` of the translated snapshot.

    Plus, since the engine's catalogue explains missing rows, an ``engine`` object for the rows
    SGLang 0.5.23 explains (the KV-transfer source is created lazily, the encoder rows' need
    an EPD encoder server).
    """
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1"), "--format", "json")
    assert run.code == 0
    data = json.loads(run.out)
    engine = data.pop("engine")
    assert data == report_for("tp1")
    assert engine["release"] == "0.5.23"
    classes = {row["row"]: row["class"] for row in engine["rows"]}
    assert classes["sglang:kvcache_transfer_time"] == "feature"  # PD only in 0.5.23
    assert classes["sglang:encoder_num_requests_total"] == "feature"


def test_text_table_has_every_row_and_item(capsys):
    """Every metric row and every non-metric item appears in the aligned text table."""
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1"))
    assert run.code == 0
    report = report_for("tp1")
    lines = run.out.splitlines()
    header = next(line for line in lines if line.startswith("FAMILY"))
    assert re.split(r"\s{2,}", header) == [
        "FAMILY",
        "DISPOSITION",
        "TYPE",
        "SOURCE",
        "STATE",
        "REASON",
    ]
    for row in report["rows"]:
        assert row_line(run.out, row["family"])[:5] == [
            row["family"], row["disposition"], row["type"], row["source"] or "-", row["state"],
        ]  # fmt: skip
    for item in report["items"]:
        assert any(line.startswith(item["item"] + " ") for line in lines), item


def test_text_columns_are_aligned(capsys):
    """Every column starts at its header's offset on every row line."""
    lines = run_cli(capsys, "contract", "--snapshot", snap("tp1")).out.splitlines()
    header = next(line for line in lines if line.startswith("FAMILY"))
    report = report_for("tp1")
    for row in report["rows"]:
        line = next(line for line in lines if line.startswith(row["family"] + " "))
        for column, key in (("DISPOSITION", "disposition"), ("STATE", "state")):
            offset = header.index(column)
            assert line[offset:].startswith(row[key] + " "), (column, line)
            assert line[offset - 2 : offset] == "  "


def test_totals_at_the_bottom(capsys):
    """The last line sums the states; the counts agree with the report's totals."""
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1"))
    report = report_for("tp1")
    last = run.out.splitlines()[-1]
    assert last == contract_totals(report)
    totals = report["totals"]
    served_rows = totals["native"] + totals["translated"] + totals["synthesized"]
    assert last.startswith(f"Totals: {len(report['rows'])} rows: {served_rows} served (")
    assert f"{totals['missing']} missing (" in last
    assert f"{totals['structural']} structural" in last
    assert "6 non-metric items (5 engine, 1 sidecar)" in last


def test_rows_follow_the_upstream(capsys):
    """kvcache_transfer_time is served from the prefill side and missing on tp1."""
    prefill = run_cli(capsys, "contract", "--snapshot", snap("pd-prefill")).out
    tp1 = run_cli(capsys, "contract", "--snapshot", snap("tp1")).out
    assert row_line(prefill, "sglang:kvcache_transfer_time")[4] == "translated"
    assert row_line(tp1, "sglang:kvcache_transfer_time")[4:] == [
        "missing", "source sglang:kv_transfer_latency_ms is absent upstream",
    ]  # fmt: skip


def test_relabel_row_with_hicache(capsys):
    """HiCache's storage tier is relabeled: cached_tokens_total is translated."""
    out = run_cli(capsys, "contract", "--snapshot", snap("hicache")).out
    assert row_line(out, "sglang:cached_tokens_total")[1:5] == [
        "relabel",
        "counter",
        "-",
        "translated",
    ]


def test_markdown_table(capsys):
    """``--format markdown`` is a GitHub table with a separator line and escaped cells."""
    run = run_cli(capsys, "contract", "--snapshot", snap("tp1"), "--format", "markdown")
    lines = run.out.splitlines()
    assert lines[0].startswith("### Contract coverage")
    assert "| FAMILY | DISPOSITION | TYPE | SOURCE | STATE | REASON |" in lines
    assert "|---|---|---|---|---|---|" in lines
    assert any(line.startswith("| log_schema | engine |") for line in lines)
    assert lines[-1].startswith("Totals: ")


def test_two_snapshots_merge(capsys):
    """LLM plus encoder snapshot: the encoder rows become served too."""
    one = json.loads(run_cli(capsys, "contract", "--snapshot", snap("tp1"), "--format", "json").out)
    both = json.loads(
        run_cli(
            capsys, "contract", "--snapshot", snap("tp1"), snap("epd-encoder"), "--format", "json"
        ).out
    )
    state = {row["family"]: row["state"] for row in both["rows"]}
    assert state["sglang:encoder_num_requests_total"] == "translated"
    assert {r["family"]: r["state"] for r in one["rows"]}[
        "sglang:encoder_num_requests_total"
    ] == "missing"


async def test_live_upstream(aiohttp_server, capsys):
    """``--upstream`` against a real HTTP server gives the snapshot's report."""
    server = await aiohttp_server(metrics_app("pd-prefill"))
    url = str(server.make_url("/metrics"))
    run = await run_cli_in_thread(capsys, "contract", "--upstream", url, "--format", "json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["rows"] == report_for("pd-prefill")["rows"]


def test_unreachable_upstream_exit_2(capsys):
    """Nobody listening: exit 2, a one-line error."""
    run = run_cli(capsys, "contract", "--upstream", f"127.0.0.1:{closed_port()}")
    assert run.code == 2
    assert run.err.startswith("error: http://127.0.0.1:")
    assert run.out == ""


def test_unusable_snapshot_exit_2(capsys, tmp_path: Path):
    """A snapshot with CRLF line endings is unusable: exit 2 with the line."""
    bad = write(tmp_path / "bad.prom", "# TYPE x gauge\r\nx 1\r\n")
    run = run_cli(capsys, "contract", "--snapshot", bad)
    assert run.code == 2, run.out
    assert run.err == (
        f"error: {bad}: line 1: CRLF line ending; exposition lines end with \\n only\n"
    )


def test_a_family_breaking_its_type_is_dropped_with_a_warning(capsys, tmp_path: Path):
    """A histogram bucket whose le is no number drops that family, as the service does
    (exposition.semantics)."""
    bad = tmp_path / "bad.om.txt"
    bad.write_bytes(
        b'# TYPE h histogram\nh_bucket{le="x"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\n'
        b"h_sum 1\n# EOF\n"
    )
    run = run_cli(capsys, "contract", "--snapshot", bad)
    assert run.code == 0
    assert run.err == (
        f"warning: {bad}: dropped a family: line 2, family h: h_bucket has le='x'; le is a "
        "number, not NaN\n"
    )


def test_a_source_is_required(capsys):
    """Neither --snapshot nor --upstream: argparse's usage error, exit 2."""
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "contract")
    assert exc.value.code == 2
    assert "one of the arguments --upstream --snapshot is required" in capsys.readouterr().err
