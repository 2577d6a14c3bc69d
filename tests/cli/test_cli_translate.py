"""``metricbridge translate``: the service's translation offline, exit codes, atomic output."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.paths import FIXTURES
from metricbridge.cli import offline
from metricbridge.cli.main import main
from metricbridge.model.family import Format
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import detect_format, stray_eof_line


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


@pytest.mark.parametrize("fmt", ["openmetrics", "text"])
def test_openmetrics_output_says_when_it_cannot_carry_a_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """A counter not named _total: written as asked, said on stderr (not for text, which can)."""
    source = tmp_path / "bare.prom"
    source.write_bytes(b"# TYPE jobs counter\njobs 3\n")
    assert main(["translate", str(source), "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert "jobs 3\n" in captured.out
    warning = (
        f"{source}: OpenMetrics cannot carry every family (counter_name); written as asked, "
        "where the service answers text 0.0.4 (--format text)\n"
    )
    assert captured.err == (warning if fmt == "openmetrics" else "")


def test_malformed_input_exits_2_naming_the_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad line: exit 2, a message with its line number, and OUTPUT left untouched."""
    bad = tmp_path / "bad.prom"
    bad.write_bytes(b'# TYPE g gauge\ng{a="x" b} 1\n')
    out = tmp_path / "out.prom"
    out.write_text("previous content\n")
    assert main(["translate", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: line 2, family g: expected '=' after label name 'b' at column 10" in err
    assert "nothing written" in err
    assert out.read_text() == "previous content\n"
    assert sorted(tmp_path.iterdir()) == sorted([bad, out])  # no temporary file left behind


def test_a_series_repeated_at_one_timestamp_is_written_once_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The OpenMetrics suite's duplicate_timestamps: Prometheus keeps the first sample, and so
    does translate, saying so on stderr, exit 0."""
    source = tmp_path / "in.om"
    source.write_bytes(b'# TYPE a gauge\na{a="1"} 1 1700000000\na{a="1"} 2 1700000000\n# EOF\n')
    rules = tmp_path / "rules.yml"
    rules.write_text("version: 1\n")
    out = tmp_path / "out.om"
    args = ["translate", str(source), "-c", str(rules), "--format", "openmetrics", "-o", str(out)]
    assert main(args) == 0
    assert out.read_bytes() == b'# TYPE a gauge\na{a="1"} 1 1700000000.0\n# EOF\n'
    err = capsys.readouterr().err
    assert (
        err
        == f'{source}: line 3, family a: series a{{a="1"}} repeats the one at line 2; the repeat is dropped\n'
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty exposition (0 bytes)"),
        (b"# TYPE g gauge\r\ng 1\r\n", "line 1: CRLF line ending"),
        (b"<html>Bad Gateway</html>", "nothing in the body is an exposition"),
    ],
    ids=["zero_bytes", "crlf", "html"],
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


# --- -o/--output: errors, modes, read-only targets ---------------------------------------------


def _translate_to(out: Path, *extra: str) -> int:
    return main(["translate", str(FIXTURES / "tp1.prom"), "-o", str(out), *extra])


def test_output_in_a_missing_directory_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No FileNotFoundError traceback: the directory is named, nothing is created."""
    out = tmp_path / "absent" / "x.prom"
    assert _translate_to(out) == 2
    err = capsys.readouterr().err
    assert err == f"{out}: cannot write: no such directory: {out.parent}; nothing written\n"
    assert list(tmp_path.iterdir()) == []


def test_output_naming_a_directory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No IsADirectoryError traceback, and no temporary file left beside it."""
    target = tmp_path / "dir"
    target.mkdir()
    assert _translate_to(target) == 2
    assert capsys.readouterr().err == f"{target}: cannot write: is a directory; nothing written\n"
    assert list(tmp_path.iterdir()) == [target]
    assert list(target.iterdir()) == []


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for one test, restoring it afterwards."""
    previous = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(previous)


@pytest.mark.parametrize(
    ("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)], ids=["022", "027", "002"]
)
def test_new_output_gets_the_mode_open_would_give(
    tmp_path: Path, umask: Callable[[int], None], mask: int, mode: int
) -> None:
    """0666 minus the umask, as a plain open() creates it (mkstemp made every file 0600)."""
    umask(mask)
    out = tmp_path / "out.prom"
    assert _translate_to(out) == 0
    assert stat.S_IMODE(out.stat().st_mode) == mode


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o666], ids=oct)
def test_existing_output_keeps_its_mode(
    tmp_path: Path, umask: Callable[[int], None], mode: int
) -> None:
    """Replacing a file keeps its mode, whatever the umask."""
    umask(0o077)
    out = tmp_path / "out.prom"
    out.write_text("previous\n")
    out.chmod(mode)
    assert _translate_to(out) == 0
    assert "sglang:request_waiting_time" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_read_only_output_is_refused_like_cp_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file the user may not write to is left alone, exit 2 (cp and sort -o refuse it too)."""
    out = tmp_path / "out.prom"
    out.write_text("previous\n")
    out.chmod(0o444)
    if os.geteuid() == 0:
        # Root may write any file (and cp as root replaces it): ask as a non-root owner would.
        monkeypatch.setattr(os, "access", lambda _path, mode: not mode & os.W_OK)
    assert _translate_to(out) == 2
    assert capsys.readouterr().err == (
        f"{out}: cannot write: permission denied (the file is read-only; left as it was); "
        "nothing written\n"
    )
    assert out.read_text() == "previous\n"
    assert list(tmp_path.iterdir()) == [out]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may write a read-only file")
def test_root_replaces_a_read_only_output_like_cp_does(tmp_path: Path) -> None:
    """As root, cp overwrites a 0444 file; so does translate, and the mode stays 0444."""
    out = tmp_path / "out.prom"
    out.write_text("previous\n")
    out.chmod(0o444)
    assert _translate_to(out) == 0
    assert "sglang:request_waiting_time" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o444


def test_symlinked_output_is_written_through(tmp_path: Path) -> None:
    """As cp does: the link stays a link, its target gets the new content."""
    real = tmp_path / "real.prom"
    real.write_text("previous\n")
    link = tmp_path / "link.prom"
    link.symlink_to(real)
    assert _translate_to(link) == 0
    assert link.is_symlink()
    assert "sglang:request_waiting_time" in real.read_text()


def test_output_to_a_device_is_written_in_place() -> None:
    """-o /dev/null writes to the device; a rename would try to replace /dev/null itself."""
    assert _translate_to(Path("/dev/null")) == 0
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


# --- format detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "fmt", "stray"),
    [
        (b"# TYPE a gauge\na 1\n# EOF\n", Format.OPENMETRICS, None),
        (b"# TYPE a gauge\na 1\n# EOF", Format.OPENMETRICS, None),
        (b"# TYPE a gauge\na 1\n# EOF\n\n", Format.OPENMETRICS, None),
        (b"# EOF\n", Format.OPENMETRICS, None),
        (b"# TYPE a gauge\na 1\n# EOF\nb 2.0\n", Format.TEXT, 3),
        (b"# EOF\nb 2.0\n", Format.TEXT, 1),
        (b"# TYPE a gauge\na 1\n", Format.TEXT, None),
        (b"", Format.TEXT, None),
        (b"# TYPE a gauge\na 1\n# EOFX\n", Format.TEXT, None),
        (b"# TYPE a gauge\na 1 # EOF\n", Format.TEXT, None),
        (b'# HELP a says # EOF\n# TYPE a gauge\na{x="\n# EOF"} 1\n', Format.TEXT, None),
        (b"# TYPE a gauge\na 1\n# EOF \n", Format.TEXT, None),
    ],
    ids=[
        "eof_last",
        "eof_no_newline",
        "eof_then_blank",
        "eof_only",
        "eof_in_the_middle",
        "eof_first",
        "no_eof",
        "empty",
        "eof_prefix",
        "eof_in_a_sample_line",
        "eof_inside_a_line",
        "eof_trailing_space",
    ],
)
def test_detect_format_takes_a_last_eof_line_as_openmetrics(
    payload: bytes, fmt: Format, stray: int | None
) -> None:
    """OpenMetrics exactly when the last line that is not blank is '# EOF'; one before it is
    ambiguous (a text-format comment, or OpenMetrics with lines after its end) and is found."""
    assert detect_format(payload) is fmt
    assert stray_eof_line(payload) == stray


def test_text_with_an_eof_comment_is_read_as_text_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real fixture plus a '# EOF' comment: served as text (timestamps and _total
    counters intact), with a warning that names the line and the way to read it otherwise."""
    fixture = (FIXTURES / "tp1.prom").read_bytes()
    path = tmp_path / "in.prom"
    path.write_bytes(b"# EOF\n" + fixture)
    assert main(["translate", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"{path}: line 1: '# EOF' with more lines after it: read as the text format, where it is "
        "a comment (--input-format openmetrics if this is OpenMetrics)\n"
    )
    assert "sglang:prompt_tokens_total" in captured.out


def test_content_after_eof_is_reported_when_read_as_openmetrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.om"
    path.write_bytes(b"# TYPE sglang:a gauge\nsglang:a 1.0\n# EOF\nsglang:b 2.0\n")
    assert main(["translate", str(path), "--input-format", "openmetrics"]) == 2
    captured = capsys.readouterr()
    assert f"{path}: line 4: content after '# EOF', which ends an exposition" in captured.err
    assert captured.out == ""


# --- --validation -------------------------------------------------------------------------------

BAD_VALUE = b'# TYPE sglang:zz gauge\nsglang:zz{a="1"} abc\n'


def _stdin(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))


def test_validation_full_reports_a_bad_value_at_its_line(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The audit's case: a bad value inside a labelled block is reported with its line."""
    _stdin(monkeypatch, BAD_VALUE)
    assert main(["translate", "--validation", "full"]) == 2
    captured = capsysbinary.readouterr()
    assert b"<stdin>: line 2, family sglang:zz: invalid value 'abc'" in captured.err
    assert captured.out == b""


def test_validation_structure_refuses_a_bad_value_as_full_does(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The default, the service's mode, serves no bad value either: the same report."""
    _stdin(monkeypatch, BAD_VALUE)
    assert main(["translate"]) == 2
    captured = capsysbinary.readouterr()
    assert b"<stdin>: line 2, family sglang:zz: invalid value 'abc'" in captured.err
    assert captured.out == b""


@pytest.mark.parametrize(
    ("setting", "argv", "used"),
    [("full", [], "structure"), ("structure", ["--validation", "full"], "full")],
    ids=["config_full_flag_default", "config_structure_flag_full"],
)
def test_validation_flag_overrides_the_rules_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, argv: list[str], used: str
) -> None:
    """The rules file's 'validation' is the service's; translate follows its own flag.

    Both modes serve the same bytes (each holds every family to every rule), so the rules
    translate compiles are what tells them apart.
    """
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"version: 1\nvalidation: {setting}\n")
    compiled: list[str] = []

    def compile_and_record(config: Any) -> Any:
        compiled.append(str(config.validation))
        return compile_rules(config)

    monkeypatch.setattr(offline, "compile_rules", compile_and_record)
    _stdin(monkeypatch, BAD_VALUE)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
    assert main(["translate", "-c", str(rules), *argv]) == 2
    assert compiled == [used]


def test_a_reader_that_went_away_is_not_a_traceback() -> None:
    """`metricbridge translate x.prom | head`: quietly, with the status a shell tool killed by
    SIGPIPE has (141), not 1, which CI would read as "something is missing".

    The pipe's read end is closed before the process starts, so its first write fails for sure.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(  # noqa: S603 - our interpreter, our fixture
            [sys.executable, "-m", "metricbridge", "translate", str(FIXTURES / "tp1.prom")],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")
