"""Whatever the input, an offline command ends with an exit status and a line, never a crash."""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import FIXTURES
from metricbridge.cli import main as cli

SNAPSHOT = str(FIXTURES / "tp1.prom")


def _check(path: Path) -> int:
    return cli.main(["check", str(path), "--snapshot", SNAPSHOT])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, "JSON nested too deeply to read", id="deep"),
        pytest.param(
            '{"a": ' + "1" * 5000 + "}", "unreadable JSON: Exceeds the limit", id="bigint"
        ),
    ],
)
def test_json_python_cannot_hold_is_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "board.json"
    path.write_text(text)
    assert _check(path) == 2
    assert f"{path}: {message}" in capsys.readouterr().err


def test_yaml_nested_too_deeply_is_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("groups:\n" + "- " * 20_000 + "x\n")
    assert _check(path) == 2
    assert f"{path}: YAML nested too deeply to read" in capsys.readouterr().err


def test_a_lone_surrogate_in_a_title_does_not_end_the_report(tmp_path: Path) -> None:
    """JSON may spell one (\\ud800); printing it must not raise UnicodeEncodeError."""
    path = tmp_path / "board.json"
    path.write_text(
        '{"title": "\\ud800", "panels": [{"title": "\\ud800 bad", "targets": '
        '[{"expr": "sglang:no_such_family"}]}]}'
    )
    done = subprocess.run(  # noqa: S603 - our interpreter, our file
        [sys.executable, "-m", "metricbridge", "check", str(path), "--snapshot", SNAPSHOT],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1  # the missing family is a finding; the title printed escaped
    assert b"\\ud800" in done.stdout
    assert b"Traceback" not in done.stderr


def test_an_expression_the_parser_would_crash_on_is_not_checked(tmp_path: Path) -> None:
    """promql_parser segfaults past some 3,000 operators: refused before it is called."""
    path = tmp_path / "long.promql"
    path.write_text(" or ".join(["sglang:num_running_reqs"] * 5000) + "\n")
    done = subprocess.run(  # noqa: S603 - our interpreter, our file
        [sys.executable, "-m", "metricbridge", "check", str(path), "--snapshot", SNAPSHOT],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"too long to analyse: 4999 operators (at most 1000)" in done.stdout + done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_exit_2() -> None:
    with Path("/dev/full").open("wb") as full:
        done = subprocess.run(  # noqa: S603 - our interpreter, our fixture
            [sys.executable, "-m", "metricbridge", "contract", "--snapshot", SNAPSHOT],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.decode().startswith("metricbridge: [Errno 28] No space left on device")


def test_a_bug_is_exit_3_not_a_finding(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 1 tells CI "something is missing"; a crash must not read as one."""

    def broken(_: argparse.Namespace) -> int:
        raise KeyError("boom")

    parser = cli.build_parser()
    args = parser.parse_args(["contract", "--snapshot", SNAPSHOT])
    assert cli._run(broken, args) == 3  # the wrapper every command runs in
    assert capsys.readouterr().err == (
        "metricbridge: internal error (KeyError: 'boom'); please report it with the command "
        "line and input that caused it\n"
    )


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_an_offline_upstream_timeout_must_be_a_positive_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["contract", "--upstream", ":20001", "--upstream-timeout", value])
    assert exited.value.code == 2
    assert f"invalid value '{value}': expected a number of seconds > 0" in capsys.readouterr().err


def test_a_gzip_snapshot_is_read_and_a_broken_one_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scrape saved without curl's --compressed is gzip: read it, do not call it truncated."""
    whole = tmp_path / "tp1.prom.gz"
    whole.write_bytes(gzip.compress((FIXTURES / "tp1.prom").read_bytes()))
    assert cli.main(["contract", "--snapshot", str(whole)]) == 0
    assert "served" in capsys.readouterr().out
    broken = tmp_path / "cut.gz"
    broken.write_bytes(whole.read_bytes()[:100])
    assert cli.main(["contract", "--snapshot", str(broken)]) == 2
    assert f"{broken}: gzip-compressed but unreadable" in capsys.readouterr().err
