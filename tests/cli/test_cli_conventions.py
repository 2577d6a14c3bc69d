"""The exporters' conventions: ``--web.*`` and ``--log.*`` flags, logfmt, and ``--version``."""

from __future__ import annotations

import io
import json
import logging
import platform
import re
import sys
from importlib import metadata

import pytest

from metricbridge import __version__
from metricbridge.cli import serve as cli_serve
from metricbridge.cli.logs import JsonFormatter, LogfmtFormatter, configure_logging, logfmt_value
from metricbridge.cli.main import build_parser, main, parse_command_line
from metricbridge.cli.version import runtime_dependencies, version_text
from metricbridge.exposition import line_match

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture(autouse=True)
def _never_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing only: a command line wrongly accepted must not start a server."""
    monkeypatch.setattr(cli_serve, "run_serve", lambda _args: 99)


def _fail() -> None:
    raise ValueError("boom")


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            _fail()
        except ValueError:
            exc_info = sys.exc_info()
    record = logging.LogRecord(
        "metricbridge.server", logging.WARNING, __file__, 1, message, args, exc_info
    )
    record.created = 1_796_191_862.2319  # 2026-12-02T06:11:02.231Z
    return record


def test_logfmt_line_has_rfc3339_utc_milliseconds_and_quotes_what_needs_it() -> None:
    """ts=2026-12-02T06:11:02.231Z level=warning logger=... msg="..." as promslog writes."""
    line = LogfmtFormatter().format(_record("serving on %s", "127.0.0.1:9850"))
    assert line == (
        'ts=2026-12-02T06:11:02.231Z level=warning logger=metricbridge.server msg="serving on 127.0.0.1:9850"'
    )


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("plain", "plain"),
        ("", '""'),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a=b", '"a=b"'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak\ttab", '"line\\nbreak\\ttab"'),
        ("bell\x07", '"bell\\u0007"'),
        ("ünïcode", "ünïcode"),
    ],
)
def test_logfmt_values(value: str, written: str) -> None:
    """Bare when possible; quoted and escaped otherwise, so one record is always one line."""
    assert logfmt_value(value) == written


def test_a_traceback_stays_on_the_records_line() -> None:
    """The exception is one escaped exc= value in logfmt and one key in JSON."""
    line = LogfmtFormatter().format(_record("failed", exc=True))
    assert "\n" not in line
    assert re.fullmatch(
        rf'ts={TS} level=warning logger=\S+ msg=failed exc="Traceback .*ValueError: boom"', line
    )
    entry = json.loads(JsonFormatter().format(_record("failed", exc=True)))
    assert list(entry) == ["ts", "level", "logger", "msg", "exc"]
    assert entry["ts"] == "2026-12-02T06:11:02.231Z"
    assert entry["exc"].endswith("ValueError: boom")


def test_configure_logging_writes_logfmt_to_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default format is logfmt, at the level asked for."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("info", "logfmt")
        logging.getLogger("metricbridge").debug("hidden")
        logging.getLogger("metricbridge").info("shown %d", 1)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    assert re.fullmatch(rf'ts={TS} level=info logger=metricbridge msg="shown 1"\n', err.getvalue())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--log.format", "logfmt"], "logfmt"),
        (["--log.format", "JSON"], "json"),
        (["--log-format", "text"], "logfmt"),
        (["--log.format", "text"], "logfmt"),
        ([], "logfmt"),
    ],
)
def test_log_format_flag_and_its_old_spelling(argv: list[str], expected: str) -> None:
    """--log.format logfmt|json; --log-format and 'text' are the old names of flag and value."""
    args = parse_command_line(build_parser(), ["-u", ":1", *argv])
    assert args.log_format == expected


@pytest.mark.parametrize("flag", ["--log.level", "--log-level"])
def test_log_level_flag_and_its_old_spelling(flag: str) -> None:
    """Both spellings set the one level."""
    assert parse_command_line(build_parser(), ["-u", ":1", flag, "DEBUG"]).log_level == "debug"


@pytest.mark.parametrize("flag", ["--web.listen-address", "--listen"])
def test_listen_address_flag_and_its_old_spelling(flag: str) -> None:
    """--web.listen-address, as every exporter; --listen still works."""
    args = parse_command_line(build_parser(), ["-u", ":1", flag, "127.0.0.1:9999"])
    assert args.listen == ("127.0.0.1", 9999)


def test_listen_variables_new_name_wins_over_old(monkeypatch: pytest.MonkeyPatch) -> None:
    """METRICBRIDGE_WEB_LISTEN_ADDRESS, else the old METRICBRIDGE_LISTEN, else the default."""
    monkeypatch.setenv("METRICBRIDGE_LISTEN", "127.0.0.1:1111")
    assert parse_command_line(build_parser(), ["-u", ":1"]).listen == ("127.0.0.1", 1111)
    monkeypatch.setenv("METRICBRIDGE_WEB_LISTEN_ADDRESS", "127.0.0.1:2222")
    assert parse_command_line(build_parser(), ["-u", ":1"]).listen == ("127.0.0.1", 2222)


def test_a_bad_old_variable_is_named_in_the_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error names the variable that was read, old name or new."""
    monkeypatch.setenv("METRICBRIDGE_LISTEN", "nowhere")
    assert main(["-u", ":1"]) == 2
    assert capsys.readouterr().err.startswith(
        "metricbridge: environment variable METRICBRIDGE_LISTEN: "
    )


def test_web_config_file_variable_must_name_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    """METRICBRIDGE_WEB_CONFIG_FILE is checked as METRICBRIDGE_CONFIG is, naming what it is."""
    monkeypatch.setenv("METRICBRIDGE_WEB_CONFIG_FILE", str(tmp_path / "missing.yml"))
    assert main(["-u", ":1"]) == 2
    assert "invalid web config file" in capsys.readouterr().err


def test_version_prints_what_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Like Go's version.Print: version and reader first, then Python and each dependency."""
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    reader = "compiled" if line_match.COMPILED else "python"
    assert lines[0] == f"metricbridge, version {__version__} (reader: {reader})"
    rows = dict(re.fullmatch(r"  (.+?):\s+(.+)", line).groups() for line in lines[1:])
    assert rows["reader"].startswith(reader + " (")
    assert (
        rows["python version"]
        == f"{platform.python_version()} ({platform.python_implementation()})"
    )
    for name in ("aiohttp", "prometheus-client", "pyyaml", "bcrypt"):
        assert rows[name] == metadata.version(name), name


def test_version_lists_exactly_the_runtime_dependencies() -> None:
    """The dependencies come from the installed metadata, less the test and lint extras."""
    names = {name for name, _ in runtime_dependencies()}
    assert "aiohttp" in names
    assert not names & {"pytest", "ruff", "mypy", "trustme"}


def test_version_without_the_compiled_pass_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python reader is named with its reason."""
    monkeypatch.setattr(line_match, "COMPILED", False)
    monkeypatch.setenv("METRICBRIDGE_PURE_PYTHON", "1")
    text = version_text()
    assert text.splitlines()[0].endswith("(reader: python)")
    assert "python (METRICBRIDGE_PURE_PYTHON is set)" in text
    monkeypatch.delenv("METRICBRIDGE_PURE_PYTHON")
    assert "was not built at install time" in version_text()
