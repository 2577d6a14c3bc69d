"""CI's pure-Python run covers every module whose behaviour depends on the compiled line pass.

`.ci/run` runs the whole suite with the compiled reader, and only a subset of it with
``METRICBRIDGE_PURE_PYTHON=1``. That is sound while the subset holds the tests of every module
that reads ``exposition.line_match`` (its compiled functions, or ``COMPILED``): this test keeps
it so when a new module starts to read it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from helpers.paths import TESTS

ROOT = TESTS.parent
PACKAGE = ROOT / "src" / "metricbridge"


def _subset() -> list[Path]:
    found = re.search(r'^pure_subset="([^"]+)"$', (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    assert found, ".ci/run has no pure_subset"
    return [ROOT / part for part in shlex.split(found.group(1))]


def _readers_of_line_match() -> set[str]:
    """Dotted names of the package's modules that import ``line_match``."""
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "line_match.py":
            continue
        if re.search(
            r"^\s*from metricbridge\.exposition(?:\.line_match)? import .*line_match|"
            r"^\s*from metricbridge\.exposition\.line_match import",
            path.read_text(encoding="utf-8"),
            re.MULTILINE,
        ):
            readers.add(".".join(path.relative_to(ROOT / "src").with_suffix("").parts))
    return readers


def _covered(module: str, subset: list[Path]) -> bool:
    """A test folder of the module's room, or a test file that names the module, is in the run."""
    room = module.split(".")[1]
    files = [p for entry in subset for p in ([entry] if entry.is_file() else entry.rglob("*.py"))]
    return any(entry == TESTS / room for entry in subset) or any(
        module in f.read_text(encoding="utf-8") for f in files
    )


def test_the_pure_run_holds_the_tests_of_every_module_that_reads_the_compiled_pass() -> None:
    readers = _readers_of_line_match()
    assert {"metricbridge.exposition.byte_scan", "metricbridge.exposition.raw_rules"} <= readers
    subset = _subset()
    assert all(path.exists() for path in subset), subset
    uncovered = sorted(module for module in readers if not _covered(module, subset))
    assert not uncovered, f"add their tests to pure_subset in .ci/run: {uncovered}"
