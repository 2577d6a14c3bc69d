"""One line per catalogued engine release: its family count and the feature switches it knows.

What ``metricbridge engines`` prints. Pure: reads the shipped catalogues, no I/O of its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from metricbridge.engines.features import feature_switch
from metricbridge.engines.loader import available_versions, load_catalogue

__all__ = ["ReleaseSummary", "release_summaries"]


@dataclass(frozen=True, slots=True)
class ReleaseSummary:
    """A catalogued release: its families, how many are created lazily, and its features.

    ``features``: (tag, the switch that turns it on, how many families need it).
    """

    engine: str
    version: str
    families: int
    lazy: int
    features: tuple[tuple[str, str, int], ...]


def release_summaries(engine: str = "sglang") -> tuple[ReleaseSummary, ...]:
    """Every catalogued release of ``engine``, oldest first."""
    out = []
    for version in available_versions(engine):
        catalogue = load_catalogue(version, engine)
        tags: Counter[str] = Counter(t for f in catalogue.families for t in f.features)
        lazy = sum(f.lifecycle.kind == "lazy" for f in catalogue.families)
        features = tuple((tag, feature_switch(tag), tags[tag]) for tag in sorted(tags))
        out.append(ReleaseSummary(engine, version, len(catalogue.families), lazy, features))
    return tuple(out)
