"""Which SGLang releases get a catalogue, and fetching one release's archive with pip."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# The oldest PyPI release whose source defines `sglang:` metrics (0.3.5 and every earlier
# release have no prometheus_client code at all; checked with this tool).
FIRST_WITH_METRICS = "0.3.5.post1"
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def version_key(version: str) -> tuple[int, int, int, int]:
    """Release order of a final release (``X.Y.Z`` or ``X.Y.Z.postN``)."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"not a final release version: {version!r}")
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch), int(post or -1) + 1


def is_final(version: str) -> bool:
    """True for ``X.Y.Z`` and ``X.Y.Z.postN``; False for pre-releases (rc, dev...)."""
    return _VERSION.match(version) is not None


def policy(versions: list[str], first: str = FIRST_WITH_METRICS) -> list[str]:
    """The releases to catalogue, oldest first.

    Every final release of the newest minor; for older minors (from ``first`` on), the first
    and the last release of each patch version (``0.4.1`` and ``0.4.1.post7``).
    """
    final = sorted((v for v in versions if is_final(v)), key=version_key)
    final = [v for v in final if version_key(v) >= version_key(first)]
    if not final:
        return []
    newest_minor = version_key(final[-1])[:2]
    keys = [version_key(v) for v in final]
    return [
        version
        for index, version in enumerate(final)
        if keys[index][:2] == newest_minor
        or _edge(keys[index], keys[index - 1] if index else None, keys[index + 1 : index + 2])
    ]


def _edge(
    key: tuple[int, ...], previous: tuple[int, ...] | None, following: Sequence[tuple[int, ...]]
) -> bool:
    """The first or the last release of its patch version."""
    first_of_patch = previous is None or previous[:3] != key[:3]
    last_of_patch = not following or following[0][:3] != key[:3]
    return first_of_patch or last_of_patch


def available(package: str = "sglang") -> list[str]:
    """The package's releases, as ``pip index versions`` lists them (one registry query)."""
    command = [sys.executable, "-m", "pip", "index", "versions", package]
    result = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603  # noqa: S603
    for line in result.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise RuntimeError(f"`pip index versions {package}` listed no versions")


def download(version: str, directory: Path) -> Path:
    """Download one release's wheel (its sdist if no wheel fits) into ``directory``."""
    base = [sys.executable, "-m", "pip", "download", f"sglang=={version}", "--no-deps", "-d"]
    for extra in ([], ["--no-binary", ":all:"]):
        command = [*base, str(directory), *extra]
        result = subprocess.run(  # noqa: S603 - pip, with arguments built here
            command, capture_output=True, text=True, check=False
        )
        found = find_archive(directory, version)
        if result.returncode == 0 and found is not None:
            return found
    raise RuntimeError(f"pip could not download sglang=={version}: {result.stderr.strip()[-400:]}")


def find_archive(where: Path, version: str) -> Path | None:
    """The wheel (preferred) or sdist of ``version`` at ``where`` (a file or a directory)."""
    if where.is_file():
        ours = (
            where.name.startswith(f"sglang-{version}-") or where.name == f"sglang-{version}.tar.gz"
        )
        return where if ours else None
    candidates = sorted(where.glob(f"sglang-{version}-*.whl")) + sorted(
        where.glob(f"sglang-{version}.tar.gz")
    )
    if not candidates and where.is_dir():
        candidates = sorted(where.glob(f"*/sglang-{version}-*.whl")) + sorted(
            where.glob(f"*/sglang-{version}.tar.gz")
        )
    return candidates[0] if candidates else None
