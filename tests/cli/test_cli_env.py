"""METRICBRIDGE_* variables: checked like their flags, only by the command that reads them."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.paths import FIXTURES, TESTS
from metricbridge.cli import serve as cli_serve
from metricbridge.cli.main import build_parser, main, parse_command_line
from metricbridge.cli.options import EnvError

ALL_VARIABLES = (
    "METRICBRIDGE_UPSTREAM",
    "METRICBRIDGE_LISTEN",
    "METRICBRIDGE_CONFIG",
    "METRICBRIDGE_LOG_LEVEL",
    "METRICBRIDGE_LOG_FORMAT",
    "METRICBRIDGE_UPSTREAM_TIMEOUT",
    "METRICBRIDGE_UPSTREAM_MAX_BYTES",
    "METRICBRIDGE_FAMILY_SAMPLE_LIMIT",
    "METRICBRIDGE_NO_SERVER_INFO",
    "METRICBRIDGE_CACHE_TTL",
)
RULES = str(TESTS.parent / "config" / "aliases.yaml")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own METRICBRIDGE_* settings must not leak into these tests."""
    for name in ALL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _never_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value wrongly accepted must fail the test, not start a server that never returns."""
    monkeypatch.setattr(cli_serve, "run_serve", lambda _args: 99)


def _serve_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_command_line(build_parser(), argv or ["--upstream", ":30000"])


# (variable, a good value, the attribute it sets, the value expected)
GOOD = [
    ("METRICBRIDGE_UPSTREAM", "h:1, :2/encoder/metrics", "upstream", None),
    ("METRICBRIDGE_LISTEN", "127.0.0.1:9999", "listen", ("127.0.0.1", 9999)),
    ("METRICBRIDGE_CONFIG", RULES, "config", Path(RULES)),
    ("METRICBRIDGE_LOG_LEVEL", "DEBUG", "log_level", "debug"),
    ("METRICBRIDGE_LOG_FORMAT", "JSON", "log_format", "json"),
    ("METRICBRIDGE_UPSTREAM_TIMEOUT", "2.5", "upstream_timeout", 2.5),
    ("METRICBRIDGE_UPSTREAM_MAX_BYTES", "1000000", "upstream_max_bytes", 1_000_000),
    ("METRICBRIDGE_FAMILY_SAMPLE_LIMIT", "0", "family_sample_limit", 0),
    ("METRICBRIDGE_NO_SERVER_INFO", "true", "no_server_info", True),
    ("METRICBRIDGE_CACHE_TTL", "0", "cache_ttl", 0.0),
]


@pytest.mark.parametrize(("variable", "text", "dest", "expected"), GOOD, ids=[g[0] for g in GOOD])
def test_good_value_sets_the_flag(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str, dest: str, expected: Any
) -> None:
    """Each variable reaches its flag, converted as the flag's value is."""
    monkeypatch.setenv(variable, text)
    if variable == "METRICBRIDGE_UPSTREAM":
        args = parse_command_line(build_parser(), [])
        assert args.command == "serve"  # the variable alone makes a bare `metricbridge` serve
        assert [u.url for u in args.upstream] == [
            "http://h:1/metrics",
            "http://127.0.0.1:2/encoder/metrics",
        ]
    else:
        assert getattr(_serve_args(), dest) == expected


# (variable, a bad value, what the message says about it)
BAD = [
    ("METRICBRIDGE_UPSTREAM", "ftp://x:1", "cannot use upstream 'ftp://x:1'"),
    ("METRICBRIDGE_LISTEN", "nowhere", "cannot listen on 'nowhere': expected [HOST]:PORT"),
    ("METRICBRIDGE_CONFIG", "/no/such/rules.yaml", "'/no/such/rules.yaml': no such file"),
    ("METRICBRIDGE_LOG_LEVEL", "verbose", "'verbose': expected one of debug, info, warning"),
    ("METRICBRIDGE_LOG_FORMAT", "yaml", "'yaml': expected one of logfmt, json (text is logfmt)"),
    ("METRICBRIDGE_UPSTREAM_TIMEOUT", "abc", "'abc': expected a number of seconds > 0"),
    ("METRICBRIDGE_UPSTREAM_TIMEOUT", "0", "'0': expected a number of seconds > 0"),
    ("METRICBRIDGE_UPSTREAM_MAX_BYTES", "64M", "'64M': expected a whole number > 0"),
    ("METRICBRIDGE_FAMILY_SAMPLE_LIMIT", "-1", "'-1': expected a whole number >= 0"),
    ("METRICBRIDGE_NO_SERVER_INFO", "maybe", "'maybe': expected 1/0, true/false, yes/no"),
    ("METRICBRIDGE_CACHE_TTL", "1s", "'1s': expected a number of seconds >= 0"),
    ("METRICBRIDGE_CACHE_TTL", "nan", "'nan': expected a number of seconds >= 0"),
]


@pytest.mark.parametrize(("variable", "text", "message"), BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_bad_value_exits_2_naming_variable_and_value(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    text: str,
    message: str,
) -> None:
    """Refused before anything starts: one line naming the variable and its value, exit 2."""
    monkeypatch.setenv(variable, text)
    # Without --upstream where the variable is the upstream: a flag would win over it.
    assert main([] if variable == "METRICBRIDGE_UPSTREAM" else ["--upstream", ":30000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"metricbridge: environment variable {variable}: "), err
    assert message in err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("text", ["1", "TRUE", "yes", "On", "0", "false", "NO", "off"])
def test_booleans_take_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """1/0, true/false, yes/no, on/off in any case; 0 and its kin really mean false."""
    monkeypatch.setenv("METRICBRIDGE_NO_SERVER_INFO", text)
    assert _serve_args().no_server_info is (text.lower() in ("1", "true", "yes", "on"))


def test_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag given on the command line is used, and its variable not even checked."""
    monkeypatch.setenv("METRICBRIDGE_CACHE_TTL", "1s")
    monkeypatch.setenv("METRICBRIDGE_UPSTREAM", "elsewhere:1")
    monkeypatch.setenv("METRICBRIDGE_NO_SERVER_INFO", "0")
    args = _serve_args(["--upstream", ":30000", "--cache-ttl", "5", "--no-server-info"])
    assert args.cache_ttl == 5.0
    assert [u.url for u in args.upstream] == ["http://127.0.0.1:30000/metrics"]
    assert args.no_server_info is True


def test_unset_and_empty_variables_give_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty variable counts as unset, as a manifest's blanked value means."""
    monkeypatch.setenv("METRICBRIDGE_CACHE_TTL", "")
    monkeypatch.setenv("METRICBRIDGE_LOG_LEVEL", "  ")
    args = _serve_args()
    assert (args.cache_ttl, args.log_level, args.log_format) == (1.0, "info", "logfmt")
    assert (args.upstream_timeout, args.upstream_max_bytes) == (10.0, 64 << 20)
    every_interface = "0.0.0.0"  # noqa: S104 - the default being checked, nothing is bound
    assert (args.listen, args.config, args.no_server_info) == ((every_interface, 9850), None, False)


def test_flags_are_checked_like_their_variables(capsys: pytest.CaptureFixture[str]) -> None:
    """The same checker refuses the flag: --log-format JSON is json, --cache-ttl -1 is refused."""
    assert _serve_args(["-u", ":1", "--log-format", "JSON"]).log_format == "json"
    with pytest.raises(SystemExit) as exit_info:
        _serve_args(["-u", ":1", "--cache-ttl", "-1"])
    assert exit_info.value.code == 2
    assert "argument --cache-ttl: invalid value '-1'" in capsys.readouterr().err


SERVE_ONLY = {
    "METRICBRIDGE_UPSTREAM_TIMEOUT": "abc",
    "METRICBRIDGE_CACHE_TTL": "1s",
    "METRICBRIDGE_LOG_LEVEL": "verbose",
    "METRICBRIDGE_LOG_FORMAT": "yaml",
    "METRICBRIDGE_NO_SERVER_INFO": "maybe",
    "METRICBRIDGE_UPSTREAM_MAX_BYTES": "x",
    "METRICBRIDGE_LISTEN": "nowhere",
}


def test_other_commands_ignore_the_serve_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--version, --help and translate run despite bad values of variables only serve reads."""
    for name, text in SERVE_ONLY.items():
        monkeypatch.setenv(name, text)
    for argv in (["--version"], ["translate", "--help"], ["--help"], ["serve", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0, argv
    out = tmp_path / "out.prom"
    assert main(["translate", str(FIXTURES / "tp1.prom"), "-o", str(out)]) == 0
    assert main(["config", "check"]) == 0
    assert "environment variable" not in capsys.readouterr().err


def test_config_variable_is_read_by_translate_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """translate shares -c/--config and so METRICBRIDGE_CONFIG, checked the same way."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\n")  # no rule: nothing renamed
    monkeypatch.setenv("METRICBRIDGE_CONFIG", str(rules))
    out = tmp_path / "out.prom"
    assert main(["translate", str(FIXTURES / "tp1.prom"), "-o", str(out)]) == 0
    assert "sglang:request_waiting_time" not in out.read_text()
    monkeypatch.setenv("METRICBRIDGE_CONFIG", str(tmp_path))
    assert main(["translate", str(FIXTURES / "tp1.prom")]) == 2
    assert (
        f"metricbridge: environment variable METRICBRIDGE_CONFIG: invalid rules file "
        f"'{tmp_path}': is a directory" in capsys.readouterr().err
    )


def test_a_bad_variable_is_an_env_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """parse_command_line raises EnvError (main turns it into exit 2), not ValueError."""
    monkeypatch.setenv("METRICBRIDGE_CACHE_TTL", "1s")
    with pytest.raises(EnvError, match="METRICBRIDGE_CACHE_TTL"):
        _serve_args()


@pytest.mark.slow
async def test_bad_variable_in_a_real_process_has_no_traceback() -> None:
    """The audit's reproducer: a bad value stopped every command with a traceback."""
    env = {**os.environ, "METRICBRIDGE_UPSTREAM_TIMEOUT": "abc", "METRICBRIDGE_UPSTREAM": ":1"}
    for argv, code in ((["--version"], 0), ([], 2)):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "metricbridge",
            *argv,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == code, err.decode()
        assert "Traceback" not in err.decode()


def test_the_lifecycle_api_is_off_unless_the_flag_or_its_variable_says_so(monkeypatch) -> None:
    """--web.enable-lifecycle (or METRICBRIDGE_WEB_ENABLE_LIFECYCLE) turns POST /-/reload on."""
    assert not cli_serve.service_settings(_serve_args()).enable_lifecycle
    flagged = _serve_args(["--upstream", ":30000", "--web.enable-lifecycle"])
    assert cli_serve.service_settings(flagged).enable_lifecycle
    monkeypatch.setenv("METRICBRIDGE_WEB_ENABLE_LIFECYCLE", "yes")
    assert cli_serve.service_settings(_serve_args()).enable_lifecycle
