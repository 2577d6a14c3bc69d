"""Label values a family carries only when a feature is on, which a static catalogue cannot see.

SGLang reports every tier of ``sglang:cached_tokens{cache_source}`` from one call
(``report_cache_source("host", cached_tokens_details.get("host", 0))`` in 0.5.23's
``observability/metrics_collector.py``), and skips a tier whose count is 0. Only HiCache fills
the host tier, and only a HiCache storage backend the storage tier: the values depend on data,
not on code the extractor reads, so they are listed here with the feature tag
(``features.FEATURE_SWITCHES``) that turns them on.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["VALUE_FEATURES", "value_feature"]

# catalogue family name -> label -> value -> feature tag
VALUE_FEATURES: Mapping[str, Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "sglang:cached_tokens": MappingProxyType(
            {
                "cache_source": MappingProxyType({"host": "hicache", "storage": "hicache-storage"}),
            }
        ),
    }
)


def value_feature(family: str, label: str, value: str) -> str | None:
    """The feature tag a family's ``label="value"`` series needs, or None when none is known."""
    return VALUE_FEATURES.get(family, {}).get(label, {}).get(value)
