"""Release order of engine versions (``X.Y.Z`` and ``X.Y.Z.postN``), without ``packaging``."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

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


# A release number at the start of a version string: "0.5.24" of "0.5.24rc0" or "0.5.23+cu128".
_RELEASE_PREFIX = re.compile(r"^\d+\.\d+\.\d+(?:\.post\d+)?")


def nearest_versions(version: str, versions: Sequence[str]) -> tuple[str, ...]:
    """The releases of ``versions`` (release order) nearest to an uncatalogued ``version``.

    The one before it and the one after it in release order; for the start of release numbers
    (``0.5``), the first and last release it starts; for other text, the most similar ones.
    """
    prefix = _RELEASE_PREFIX.match(version.strip())
    if prefix is None:
        series = [v for v in versions if v.startswith(version.strip().rstrip(".") + ".")]
        if series:  # "0.5": the first and the last release of that series
            return tuple(dict.fromkeys((series[0], series[-1])))
        return tuple(difflib.get_close_matches(version, versions, n=3, cutoff=0.5))
    key = version_key(prefix.group())
    before = [v for v in versions if version_key(v) <= key]
    after = [v for v in versions if version_key(v) > key]
    return tuple(([before[-1]] if before else []) + ([after[0]] if after else []))


def release_at_or_before(version: str, versions: Sequence[str]) -> str | None:
    """The newest of ``versions`` (release order) not after ``version``'s release number.

    ``0.5.23`` for ``0.5.24rc0``, ``0.5.23+cu128`` or ``0.5.23``; None when ``version`` starts with
    no release number or every one of ``versions`` is newer.
    """
    prefix = _RELEASE_PREFIX.match(version.strip())
    if prefix is None:
        return None
    key = version_key(prefix.group())
    older = [v for v in versions if version_key(v) <= key]
    return older[-1] if older else None
