"""The wheel carries the reader's compiled line pass, and installs without it where it cannot.

Each test builds the project's wheel as pip does for ``pip install .`` (an isolated build,
``hatch_build.py`` compiling the C file), so it needs the package index for hatchling.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers.paths import TESTS

ROOT = TESTS.parent
pytestmark = pytest.mark.slow


def _build(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``pip wheel`` of the tree into ``out``, with a temporary folder of its own beside it."""
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("METRICBRIDGE_")
    }
    environment["TMPDIR"] = str(_temp(out))
    environment.update(env)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(ROOT)]
    return subprocess.run(  # noqa: S603 - our own interpreter and tree
        command, capture_output=True, text=True, env=environment, timeout=600, check=False
    )


def _wheel(out: Path) -> tuple[str, list[str]]:
    (wheel,) = out.glob("metricbridge-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return wheel.name, archive.namelist()


def _temp(out: Path) -> Path:
    """The build's own temporary folder: only this test's build writes there."""
    temp = out.parent / f"{out.name}-tmp"
    temp.mkdir(exist_ok=True)
    return temp


def test_the_wheel_carries_the_compiled_pass_and_not_its_source(tmp_path: Path) -> None:
    out = tmp_path / "wheel"
    result = _build(out)
    assert result.returncode == 0, result.stderr
    # The hook's scratch directory is gone with the build.
    assert not list(_temp(out).glob("metricbridge-build-*"))
    name, files = _wheel(out)
    assert "-none-any" not in name  # a platform wheel: it holds a C module
    for module in ("_linescan", "_blockdigest"):
        assert any(
            f.startswith(f"metricbridge/exposition/{module}.") and f.endswith(".so") for f in files
        ), module
    assert not [f for f in files if f.endswith(".c")]
    assert "metricbridge/data/aliases.yaml" in files


def test_without_a_compiler_the_wheel_is_pure_python_and_says_so(tmp_path: Path) -> None:
    result = _build(tmp_path, CC="false")
    assert result.returncode == 0, result.stderr
    name, files = _wheel(tmp_path)
    assert name.endswith("-py3-none-any.whl")
    assert not [f for f in files if f.endswith(".so")]
    # pip shows a build's own output with -v (or when it fails).
    output = result.stdout + result.stderr
    assert "the C passes did not build" in output
    assert "pure-Python reader" in output


def test_a_required_compile_that_fails_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, CC="false", METRICBRIDGE_REQUIRE_COMPILED="1")
    assert result.returncode != 0
    assert "the C passes did not build" in result.stdout + result.stderr
    assert not list(tmp_path.glob("*.whl"))
