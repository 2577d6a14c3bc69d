"""``check --profile approximations``: an approximated row is pending a second fetch, not failing."""

from __future__ import annotations

from pathlib import Path

from helpers.paths import FIXTURES
from metricbridge.cli.main import main

SNAPSHOT = str(FIXTURES / "tp1.prom")


def _check(tmp_path: Path, capsys, *extra: str) -> tuple[int, str]:
    queries = tmp_path / "panels.promql"
    queries.write_text("sglang:run_batch_time\n", encoding="utf-8")
    status = main(["check", "--snapshot", SNAPSHOT, *extra, "--", str(queries)])
    return status, capsys.readouterr().out


def test_with_the_profile_an_approximated_row_waits_for_a_second_fetch(tmp_path, capsys) -> None:
    """The profile serves the row from two fetches: one snapshot shows it pending, exit 0."""
    status, out = _check(tmp_path, capsys, "--profile", "approximations")
    assert status == 0
    assert "(pending)" in out
    assert "rate between two fetches" in out


def test_without_the_profile_the_same_row_needs_the_engine(tmp_path, capsys) -> None:
    """Off by default: the row is an engine row, and a dashboard reading it fails."""
    status, out = _check(tmp_path, capsys)
    assert status == 1
    assert "(engine)" in out
