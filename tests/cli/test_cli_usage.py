"""Usage errors say what is wrong and how to fix it; a command loads only what it runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers.paths import FIXTURES
from metricbridge.cli.main import build_parser, main, parse_command_line

HEAVY = ("aiohttp", "promql_parser", "prometheus_client")


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_a_file_after_snapshot_gets_the_command_line_that_ends_the_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--snapshot took my.promql: the error shows the same command with -- before it."""
    err = _usage_error(capsys, "check", "--snapshot", "engine.txt", "my.promql")
    assert (
        "metricbridge check: error: the following arguments are required: FILE "
        "(--snapshot took every value after it)\n"
        "  did you mean: metricbridge check --snapshot engine.txt -- my.promql\n"
    ) in err
    args = parse_command_line(
        build_parser(), ["check", "--snapshot", "engine.txt", "--", "my.promql"]
    )
    assert ([str(p) for p in args.snapshot], [str(p) for p in args.files]) == (
        ["engine.txt"],
        ["my.promql"],
    )


def test_diff_moves_as_many_values_as_it_misses(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "diff", "--dashboard", "board.json", "old.prom", "new.prom")
    assert "did you mean: metricbridge diff --dashboard board.json -- old.prom new.prom\n" in err


def test_a_list_followed_by_other_flags_gets_the_rule_not_a_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(capsys, "check", "--snapshot", "a.prom", "b", "--format", "json")
    assert err.endswith("FILE (--snapshot takes every value after it: end them with --)\n")
    assert "did you mean" not in err


def test_other_usage_errors_are_argparse_s_own(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "check", "board.json")  # no --snapshot or --upstream
    assert err.endswith("one of the arguments --upstream --snapshot is required\n")
    err = _usage_error(capsys, "rules")
    assert err.endswith("the following arguments are required: --format\n")


def test_bare_metricbridge_says_what_is_missing_first_in_a_few_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("METRICBRIDGE_UPSTREAM", raising=False)
    assert main([]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0] == (
        "metricbridge: error: --upstream is required (or METRICBRIDGE_UPSTREAM); "
        "try 'metricbridge demo' to see it work without SGLang"
    )
    assert (
        lines[1]
        == "usage: metricbridge [serve] --upstream HOST:PORT|URL [OPTIONS]   run the sidecar"
    )
    assert len(lines) <= 5, lines
    assert "metricbridge --help" in lines[-1]
    assert captured.out == ""


def test_serve_without_an_upstream_says_the_same(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("METRICBRIDGE_UPSTREAM", " ")  # blank counts as unset
    monkeypatch.setattr("metricbridge.cli.serve.configure_logging", lambda *_: None)
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == (
        "metricbridge: --upstream is required (or METRICBRIDGE_UPSTREAM); "
        "try 'metricbridge demo' to see it work without SGLang\n"
    )


def test_serve_usage_shows_upstream_required(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert usage.startswith("usage: metricbridge serve [-h] -u HOST:PORT|URL [--web.listen-address")
    assert "[-u" not in usage
    # Its variable still gives it: the parser does not require the flag.
    monkeypatch.setenv("METRICBRIDGE_UPSTREAM", ":30000")
    args = parse_command_line(build_parser(), ["serve"])
    assert [u.url for u in args.upstream] == ["http://127.0.0.1:30000/metrics"]


def test_diff_help_mentions_no_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    text = capsys.readouterr().out
    assert "--upstream" not in text
    assert "--server-info JSON" in text


def _imported(*argv: str) -> set[str]:
    """Top-level packages ``python -X importtime -m metricbridge ARGV`` imports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICBRIDGE_")}
    done = subprocess.run(  # noqa: S603 - our interpreter, our arguments
        [sys.executable, "-X", "importtime", "-m", "metricbridge", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.MULTILINE)
    assert found, done.stderr[-2000:]
    return {name.split(".")[0] for name in found}


@pytest.mark.parametrize("argv", [["--version"], ["config", "check"]])
def test_light_commands_import_no_http_stack_nor_promql_parser(argv: list[str]) -> None:
    imported = _imported(*argv)
    assert "metricbridge" in imported
    assert not imported & set(HEAVY), imported & set(HEAVY)


def test_a_report_from_a_snapshot_imports_no_http_client() -> None:
    imported = _imported("contract", "--snapshot", str(FIXTURES / "tp1.prom"))
    assert not imported & {"aiohttp", "prometheus_client"}


def test_a_command_that_needs_the_parser_still_imports_it() -> None:
    """The check above would pass if -X importtime reported nothing: here it must see one."""
    assert "promql_parser" in _imported("check", "--help")
