"""Reading values back out of families prometheus_client parsed from a served body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Key = tuple[tuple[str, str], ...]


def sample_values(
    families: Mapping[str, Any], family: str, sample: str | None = None
) -> dict[Key, float]:
    """A family's sample values keyed by sorted labels (one sample name if given); {} if absent."""
    found = families.get(family)
    if found is None:
        return {}
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in found.samples
        if sample is None or s.name == sample
    }
