"""The examples of README.md, docs/ and deploy/README.md, run as the pages show them.

A page that shows output a command no longer prints fails here, naming the page, the line and
the difference. The block grammar (sessions, elisions, declared files, ``not run`` markers) is
``helpers.doc_examples``.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import doc_examples
from helpers.doc_examples import (
    RUNNABLE,
    Block,
    declared_files,
    output_matches,
    python_assertions,
    steps,
)
from helpers.paths import TESTS

ROOT = TESTS.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
BLOCKS = [block for page in PAGES for block in doc_examples.blocks(page) if block.lang in RUNNABLE]
# What a session prints between two commands, so that one shell runs the whole block.
SEPARATOR = "@@metricbridge-doc-example-step@@"
# The repository's folders a page's commands name (tests/fixtures/..., deploy/grafana/...).
LINKED = ("config", "deploy", "docs", "src", "tests", "bench", "tools")
BLOCK_TIMEOUT = 300  # seconds; a block is a few commands of a second or two each


def _environment(tmp: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("METRICBRIDGE_")
        or key in {"METRICBRIDGE_PURE_PYTHON", "METRICBRIDGE_REQUIRE_COMPILED"}
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp)
    env["LC_ALL"] = "C.UTF-8"
    env["COLUMNS"] = "100"
    return env


def _workdir(block: Block, tmp_path: Path) -> Path:
    """A folder that looks like the repository root, holding the files the page declares."""
    work = tmp_path / "work"
    work.mkdir()
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    page_blocks = doc_examples.blocks(block.page)
    for name, text in declared_files(page_blocks, ROOT).items():
        (work / name).write_text(text, encoding="utf-8")
    return work


def _run(argv: list[str], work: Path, env: dict[str, str], *, merged: bool) -> tuple[int, str]:
    """Run ``argv`` in its own session, and end whatever it left running in the background."""
    process = subprocess.Popen(  # noqa: S603 - bash or our interpreter, running the docs' text
        argv,
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=BLOCK_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode, out if merged else f"{out}{err}"


def _needs(command: str) -> None:
    for tool in ("promtool", "jq", "curl", "kubectl"):
        if f"{tool} " in command and shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_the_example_does_what_the_page_shows(block: Block, tmp_path: Path) -> None:
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    work = _workdir(block, tmp_path)
    env = _environment(tmp_path)
    if block.lang == "python":
        status, printed = _run(
            [sys.executable, "-c", python_assertions(block.text)], work, env, merged=False
        )
        assert status == 0, f"{block.where}:\n{printed}"
        return
    if block.lang != "console":
        _needs(block.text)
        status, printed = _run(
            ["bash", "-euo", "pipefail", "-c", block.text], work, env, merged=False
        )
        assert status == 0, f"{block.where}: exit {status}\n{printed}"
        return
    session = steps(block)
    script = ["set +e"]
    for step in session:
        _needs(step.command)
        script += [step.command, "__status=$?", f"echo {SEPARATOR}", "(exit $__status)"]
    _, output = _run(["bash", "-c", "\n".join(script) + "\n"], work, env, merged=True)
    printed = output.split(f"{SEPARATOR}\n")
    assert len(printed) == len(session) + 1, output
    for step, actual in zip(session, printed, strict=False):
        lines = actual.splitlines()
        if not output_matches(step.expected, lines):
            diff = "\n".join(
                difflib.unified_diff(list(step.expected), lines, "page", "printed", lineterm="")
            )
            pytest.fail(f"{block.where}: `$ {step.command}` printed otherwise:\n{diff}")


def test_every_shell_block_runs_or_says_why_not() -> None:
    """A shell block with no marker runs; a marker without a reason is no marker."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "<!-- not run -->" not in text, f"{page.name}: a 'not run' marker needs its reason"


@pytest.mark.parametrize(
    ("expected", "actual", "matches"),
    [
        (("a", "b"), ["a", "b"], True),
        (("a", "b"), ["a", "c"], False),
        (("a", "[...]", "d"), ["a", "b", "c", "d"], True),
        (("a", "[...]", "d"), ["a", "d"], True),
        (("a", "[... two more ...]", "d"), ["a", "b", "c"], False),
        (("a", ""), ["a"], True),
        (("a",), ["a", "b"], False),
    ],
)
def test_elisions_stand_for_any_lines_and_nothing_else(expected, actual, matches) -> None:
    assert output_matches(expected, actual) is matches


def test_python_value_comments_become_assertions() -> None:
    source = "x = 2\nx + 1  # 3\nprint(x)  # a remark\n"
    checked = python_assertions(source)
    assert "assert (x + 1) == (3)" in checked
    assert "print(x)  # a remark" in checked
    status, printed = _run(
        [sys.executable, "-c", python_assertions("1 + 1  # 3\n")], Path(), {}, merged=True
    )
    assert status == 1
    assert "AssertionError" in printed


# A path of the repository that a page names in backticks.
_REPOSITORY_PATH = re.compile(r"`((?:bench|config|deploy|docs|src|tests|tools)/[^`\s:]*)`")


# A path written as a pattern (``profiles/NAME.yaml``, ``sglang-<version>.json``) names no file.
_PATTERN = re.compile(r"<|\b[A-Z]{3,}\b")


def _exists(path: str) -> bool:
    """A path from the repository root, or a module named from the package (``config/load.py``)."""
    return (ROOT / path).exists() or (ROOT / "src" / "metricbridge" / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = {path for path in _REPOSITORY_PATH.findall(text) if not _PATTERN.search(path)}
    missing = sorted(path for path in named if not _exists(path))
    assert not missing, f"{page.name} names paths the repository does not hold: {missing}"


# A relative Markdown link: [text](path) or [text](path#anchor) or [text](#anchor).
_LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s]*?)(?:#([^)\s]+))?\)")


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation gone, '-' for ' '."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_link_between_pages_reaches_its_page_and_heading(page: Path) -> None:
    broken = []
    for target, anchor in _LINK.findall(page.read_text(encoding="utf-8")):
        linked = (page.parent / target).resolve() if target else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}#{anchor}")
    assert not broken, f"{page.name}: broken links {broken}"


def test_the_readme_flag_table_lists_every_serve_flag_and_its_variable() -> None:
    """Each flag of `metricbridge serve` is a row of the README's table, with its variable."""
    import argparse  # noqa: PLC0415 - this test alone builds the parser

    from metricbridge.cli.serve_options import add_service_options  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    add_service_options(parser)
    flags = {
        max(action.option_strings, key=len)
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    }
    rows = [
        line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `-")
    ]
    cells = [re.split(r"(?<!\\)\|", row)[1] for row in rows]  # a \| inside a cell is no border
    spans = [span for cell in cells for span in re.findall(r"`([^`]+)`", cell)]
    documented = {flag for span in spans for flag in re.findall(r"--[\w.-]+", span)}
    assert flags <= documented, f"not in the README's table: {sorted(flags - documented)}"
    variables = set(re.findall(r"METRICBRIDGE_[A-Z_]+", " ".join(rows)))
    for action in parser._actions:
        named = re.findall(r"env (METRICBRIDGE_[A-Z_]+)", " ".join((action.help or "").split()))
        assert set(named) <= variables, (action.option_strings, named)
