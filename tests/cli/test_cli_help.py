"""``--help``: what users of ``metricbridge --upstream ...`` read documents the whole service."""

from __future__ import annotations

import pytest

from metricbridge.cli.main import build_parser, main, parse_command_line

SERVE_FLAGS_AND_VARIABLES = [
    ("--upstream", "METRICBRIDGE_UPSTREAM"),
    ("--web.listen-address", "METRICBRIDGE_WEB_LISTEN_ADDRESS"),
    ("--listen", "METRICBRIDGE_LISTEN"),
    ("--web.config.file", "METRICBRIDGE_WEB_CONFIG_FILE"),
    ("--config", "METRICBRIDGE_CONFIG"),
    ("--log.level", "METRICBRIDGE_LOG_LEVEL"),
    ("--log-level", "METRICBRIDGE_LOG_LEVEL"),
    ("--log.format", "METRICBRIDGE_LOG_FORMAT"),
    ("--log-format", "METRICBRIDGE_LOG_FORMAT"),
    ("--upstream-timeout", "METRICBRIDGE_UPSTREAM_TIMEOUT"),
    ("--upstream-max-bytes", "METRICBRIDGE_UPSTREAM_MAX_BYTES"),
    ("--no-server-info", "METRICBRIDGE_NO_SERVER_INFO"),
    ("--cache-ttl", "METRICBRIDGE_CACHE_TTL"),
]
COMMANDS = [
    "serve",
    "demo",
    "translate",
    "config",
    "rules",
    "check",
    "contract",
    "diff",
    "mm-pad-id",
]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines where it likes


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["serve", "--help"]])
def test_help_documents_every_serve_flag_with_its_variable_and_default(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Each flag is listed next to its variable, in the help users of the default command see."""
    text = _help(capsys, *argv)
    for flag, variable in SERVE_FLAGS_AND_VARIABLES:
        assert flag in text, flag
        assert variable in text, variable
    for default in ("default :9850", "default info", "default logfmt", "default 10;", "default 1;"):
        assert default in text, default
    assert "':30000' means 127.0.0.1:30000/metrics" in text


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"]])
def test_help_documents_endpoints_signals_readiness_and_caching(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """The HTTP surface and process behaviour are in --help, not only in the README."""
    text = _help(capsys, *argv)
    for endpoint in ("GET /metrics", "GET /contract", "GET /-/healthy", "GET /-/ready"):
        assert endpoint in text, endpoint
    assert "POST /-/reload re-read the rules file" in text
    assert "SIGHUP re-read the rules file" in text
    assert "SIGTERM, SIGINT stop listening, let scrapes in flight finish" in text
    assert "readiness: 200 once the rules are loaded" in text
    assert "engine's own health is not required" in text
    assert "a finished fetch is reused for --cache-ttl seconds" in text
    assert "an empty variable counts as unset" in text
    assert "1/0, true/false, yes/no, on/off" in text
    assert "2 cannot start" in text
    assert "address already in use" in text


def test_top_level_help_still_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """The serve flags are added to, not substituted for, the command list."""
    text = _help(capsys, "--help")
    assert "usage: metricbridge [serve] --upstream HOST:PORT|URL [OPTIONS]" in text
    assert "metricbridge COMMAND [ARGS]" in text
    for command in COMMANDS:
        assert f" {command} " in text, command
    assert "--version" in text


def test_command_usage_lines_name_only_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """A command's usage starts 'metricbridge translate', not the top-level usage text."""
    assert _help(capsys, "translate", "--help").startswith("usage: metricbridge translate [-h]")


def test_translate_help_documents_validation_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    """--validation's default and precedence, and what -o does to an existing file."""
    text = _help(capsys, "translate", "--help")
    assert "--validation {full,structure}" in text
    assert "whatever the rules file's 'validation' says" in text
    assert "structure (default)" in text
    assert "mode 0666 minus the umask, an existing one keeps its mode" in text
    assert "only) is refused, as cp and sort -o refuse it" in text  # "read-" may wrap
    assert "OpenMetrics if a line is exactly '# EOF'" in text


def test_demo_help_gives_the_engine_port_default(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's engine no longer defaults to SGLang's own port."""
    text = _help(capsys, "demo", "--help")
    assert "default 0: a free port the system picks" in text
    assert "not SGLang's 30000" in text


def test_colon_port_means_loopback_metrics() -> None:
    """`metricbridge --upstream :30000` scrapes http://127.0.0.1:30000/metrics."""
    args = parse_command_line(build_parser(), ["--upstream", ":30000"])
    assert args.command == "serve"
    assert [(u.url, u.label) for u in args.upstream] == [
        ("http://127.0.0.1:30000/metrics", "127.0.0.1:30000/metrics")
    ]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--listen", ":١٢٣٤٥", "cannot listen on ':١٢٣٤٥': expected [HOST]:PORT"),
        ("--listen", ":²", "cannot listen on ':²': expected [HOST]:PORT"),
        ("--listen", ":65536", "cannot listen on ':65536': expected [HOST]:PORT"),
        ("--upstream", ":0", "cannot use upstream ':0': port 0 is no server's port"),
        ("--upstream", ":١٢٣", "cannot use upstream ':١٢٣'"),
    ],
)
def test_addresses_must_be_plain_port_numbers(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Digits that only look like a port are refused in one line, not bound or crashed on."""
    arguments = ["--upstream", ":30000", flag, value] if flag == "--listen" else [flag, value]
    with pytest.raises(SystemExit) as exited:
        parse_command_line(build_parser(), arguments)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["١٢٣", "1_0", "+80", " 80 "])
def test_demo_ports_are_plain_digits_too(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The one whole-number check serves every port and count flag."""
    with pytest.raises(SystemExit) as exited:
        parse_command_line(build_parser(), ["demo", "--engine-port", value])
    assert exited.value.code == 2
    assert f"invalid port {value!r}: expected 0 to 65535" in capsys.readouterr().err
