"""Reads the release catalogues shipped in ``metricbridge/data/engines``."""

from __future__ import annotations

import functools
import json
from importlib import resources
from importlib.abc import Traversable

from .model import Catalogue, catalogue_from_json
from .versions import version_key


def _directory() -> Traversable:
    return resources.files("metricbridge").joinpath("data", "engines")


def available_versions(engine: str = "sglang") -> tuple[str, ...]:
    """The catalogued releases of ``engine``, oldest first (release order, not text order)."""
    prefix = f"{engine}-"
    found = [
        entry.name.removeprefix(prefix).removesuffix(".json")
        for entry in _directory().iterdir()
        if entry.name.startswith(prefix) and entry.name.endswith(".json")
    ]
    return tuple(sorted(found, key=version_key))


def newest_version(engine: str = "sglang") -> str:
    """The newest catalogued release of ``engine``."""
    versions = available_versions(engine)
    if not versions:
        raise LookupError(f"no {engine} release is catalogued")
    return versions[-1]


@functools.cache
def load_catalogue(version: str, engine: str = "sglang") -> Catalogue:
    """The catalogue of one release; LookupError names the catalogued ones if it is absent."""
    entry = _directory().joinpath(f"{engine}-{version}.json")
    if not entry.is_file():
        known = ", ".join(available_versions(engine))
        raise LookupError(f"{engine} {version} is not catalogued (catalogued: {known})")
    return catalogue_from_json(json.loads(entry.read_text(encoding="utf-8")))
