"""The image builds from pinned inputs: exact base image tags, and every Python package it
installs at a locked version with its file's hash (deploy/*.lock, from deploy/generate_lock.py).

The locks are checked against what they lock: the closure of pyproject.toml's dependencies (the
runtime lock) and of its build requirements (the build lock), resolved from the metadata of the
packages installed here at constraints.txt's pins, under the image's Python (3.11 on Linux).
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from helpers.paths import TESTS

ROOT = TESTS.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
LOCKS = {
    "runtime": ROOT / "deploy" / "requirements.lock",
    "build": ROOT / "deploy" / "build-requirements.lock",
}
ENTRY = re.compile(
    r"^(?P<name>[a-z0-9-]+)==(?P<version>\S+) \\\n(?P<hashes>(?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)",
    re.MULTILINE,
)
IMAGE_ENVIRONMENT = {**default_environment(), "python_version": "3.11", "sys_platform": "linux"}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked(kind: str) -> dict[str, str]:
    """Name -> version of a lock file, every entry checked to carry a sha256 hash."""
    text = LOCKS[kind].read_text()
    body = "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))
    entries = {m["name"]: m["version"] for m in ENTRY.finditer(body)}
    assert sum(len(m[0]) for m in ENTRY.finditer(body)) == len(body), "a line that is no entry"
    return entries


def _closure(requirements: list[str]) -> dict[str, str]:
    """Installed name -> version of ``requirements`` and all they require, in the image."""
    found: dict[str, str] = {}
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = _normalised(requirement.name)
        marker = requirement.marker
        if name in found or (marker and not marker.evaluate({**IMAGE_ENVIRONMENT, "extra": ""})):
            continue
        found[name] = metadata.version(name)
        pending += [Requirement(r) for r in metadata.requires(name) or []]
    return found


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("kind", sorted(LOCKS))
def test_each_lock_holds_exactly_the_closure_at_the_pinned_versions(kind: str) -> None:
    """Every package the image installs is locked, at the version installed here (the
    constraints.txt pin), and nothing else is."""
    project = _pyproject()
    wanted = (
        project["project"]["dependencies"]  # type: ignore[index]
        if kind == "runtime"
        else project["build-system"]["requires"]  # type: ignore[index]
    )
    assert _locked(kind) == _closure(list(wanted))


def test_base_images_are_exact_versions() -> None:
    """Both stages start from an exact Python release on a named Debian release."""
    defaults = re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert [name for name, _ in defaults] == ["PYTHON_IMAGE", "BUILD_IMAGE"]
    for _, image in defaults:
        assert re.fullmatch(r"python:3\.11\.\d+(-slim)?-bookworm(@sha256:[0-9a-f]{64})?", image)


def test_every_pip_install_is_locked() -> None:
    """Each pip install in the Dockerfile takes a lock with --require-hashes, or installs the
    project's own wheel without resolving anything (--no-deps); the wheel is built without
    build isolation, so with the locked hatchling."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install [^&\n]*", text)
    assert len(installs) == 3
    for install in installs:
        assert "--no-deps" in install, install
        locked = "--require-hashes" in install and " -r " in install
        assert locked or "/dist/metricbridge-" in install, install
    assert "pip wheel --no-deps --no-build-isolation" in text
