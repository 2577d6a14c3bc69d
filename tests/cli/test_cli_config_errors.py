"""Every command that loads a rules file prints a broken one the same way, and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import FIXTURES, TESTS
from metricbridge.cli.main import main
from metricbridge.cli.problems import config_error_lines
from metricbridge.config.load import load_config
from metricbridge.errors import ConfigError

INVALID = TESTS / "config_invalid"
SNAPSHOT = str(FIXTURES / "tp1.prom")
QUERIES = str(TESTS / "dashboards" / "queries.promql")
# One issue, several, a file YAML cannot read and one that is not text: every kind of report.
CASES = ["bad_regex", "many_issues", "invalid_yaml", "not_utf8"]

# Each command line with its rules file flag last; the file's path is appended.
OFFLINE = {
    "translate": ["translate", SNAPSHOT, "-c"],
    "config check": ["config", "check"],
    "check": ["check", QUERIES, "--snapshot", SNAPSHOT, "-c"],
    "contract": ["contract", "--snapshot", SNAPSHOT, "-c"],
    "diff": ["diff", SNAPSHOT, SNAPSHOT, "-c"],
    "rules": ["rules", "--format", "relabel", "-c"],
}
# These start servers when the rules load, so they run in a process of their own.
SERVING = {
    "serve": ["serve", "--upstream", "127.0.0.1:9", "--listen", "127.0.0.1:0", "-c"],
    "demo": ["demo", "--listen", "127.0.0.1:0", "--duration", "0.1", "-c"],
}


def _expected(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return "\n".join(config_error_lines(caught.value)) + "\n"


def test_the_report_is_each_issue_then_the_count() -> None:
    path = INVALID / "many_issues.yaml"
    *issues, count = _expected(path).splitlines()
    assert count == f"{len(issues)} issue(s) found"
    assert len(issues) > 1
    assert all(line.startswith(f"{path}:") for line in issues), issues


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", sorted(OFFLINE))
def test_offline_commands_print_a_broken_rules_file_alike(
    command: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = INVALID / f"{case}.yaml"
    assert main([*OFFLINE[command], str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == _expected(path)
    assert captured.out == ""


@pytest.mark.parametrize("command", sorted(SERVING))
def test_serving_commands_print_a_broken_rules_file_alike(command: str) -> None:
    path = INVALID / "many_issues.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICBRIDGE_")}
    done = subprocess.run(  # noqa: S603 - our interpreter, our arguments
        [sys.executable, "-m", "metricbridge", *SERVING[command], str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr, done.stdout) == (2, _expected(path), "")
