"""Release order of engine versions (``X.Y.Z`` and ``X.Y.Z.postN``), without ``packaging``."""

from __future__ import annotations

import re

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def version_key(version: str) -> tuple[int, int, int, int]:
    """A sort key in release order: ``0.5.9 < 0.5.10 < 0.5.10.post1 < 0.5.11``.

    Raises ValueError for anything but a final release (catalogues hold no pre-releases).
    """
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"not a final release version: {version!r}")
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch), 0 if post is None else int(post) + 1
