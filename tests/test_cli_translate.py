"""``metricbridge translate``: the service's translation offline, exit codes, atomic output."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from metricbridge.cli import main


def test_translates_a_fixture_with_the_default_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Default config, file in, file out: the contract aliases are there."""
    out = tmp_path / "out.prom"
    assert main(["translate", str(FIXTURES / "tp1.prom"), "-o", str(out)]) == 0
    text = out.read_text()
    assert "\n# TYPE sglang:request_waiting_time histogram\n" in text
    assert capsys.readouterr().err == ""


def test_openmetrics_output_and_stdin(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """'-' reads stdin; --format openmetrics ends with # EOF."""
    payload = (FIXTURES / "tp1-cold.prom").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    assert main(["translate", "-", "--format", "openmetrics"]) == 0
    assert capsysbinary.readouterr().out.endswith(b"# EOF\n")


def test_malformed_input_exits_2_naming_the_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad line: exit 2, a message with its line number, and OUTPUT left untouched."""
    bad = tmp_path / "bad.prom"
    bad.write_bytes(b'# TYPE g gauge\ng{a="x\\q"} 1\n')
    out = tmp_path / "out.prom"
    out.write_text("previous content\n")
    assert main(["translate", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: line 2, family g: invalid escape sequence '\\q' in label value" in err
    assert "nothing written" in err
    assert out.read_text() == "previous content\n"
    assert sorted(tmp_path.iterdir()) == sorted([bad, out])  # no temporary file left behind


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty exposition (0 bytes)"),
        (b"# TYPE g gauge\r\ng 1\r\n", "line 1: CRLF line ending"),
        (b"# TYPE g gauge\ng 1", "line 2: last line has no terminating newline"),
    ],
    ids=["zero_bytes", "crlf", "truncated"],
)
def test_unusable_input_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: bytes, message: str
) -> None:
    """Whole-payload faults are reported, not tracebacks."""
    path = tmp_path / "in.prom"
    path.write_bytes(payload)
    assert main(["translate", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_missing_input_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable input is a clear message."""
    assert main(["translate", str(tmp_path / "absent.prom")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_broken_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The config's issues are printed with file and line."""
    config = tmp_path / "c.yaml"
    config.write_text("version: 1\nfamilies: {x: {disposition: alias}}\n")
    assert main(["translate", "-c", str(config), str(FIXTURES / "tp1.prom")]) == 2
    assert (
        f"{config}:2: families.x: missing required field 'source' while disposition is alias"
        in capsys.readouterr().err
    )
