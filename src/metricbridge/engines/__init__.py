"""Release catalogues of inference engines.

The metric families each SGLang release defines, read statically from that release's source
(``tools/extract_sglang_catalogue.py``) and shipped as JSON in ``metricbridge/data/engines``. Pure:
the standard library and ``metricbridge.errors`` only, no I/O but reading the packaged files.

``mm_pad_id`` (imported by name, not re-exported here) is the contract's multimodal pad-id
formula, the reference a rebased engine's padded token ids are checked against.
"""

from __future__ import annotations

from metricbridge.errors import CatalogueError

from .diff import CatalogueDiff, HelpChanged, LabelsChanged, Rename, Retyped, diff_catalogues
from .features import feature_switch
from .label_values import value_feature
from .loader import available_versions, load_catalogue, newest_version
from .model import Catalogue, EngineFamily, Lifecycle, OptionalLabel
from .versions import nearest_versions, release_at_or_before, version_key

__all__ = [
    "Catalogue",
    "CatalogueDiff",
    "CatalogueError",
    "EngineFamily",
    "HelpChanged",
    "LabelsChanged",
    "Lifecycle",
    "OptionalLabel",
    "Rename",
    "Retyped",
    "available_versions",
    "diff_catalogues",
    "feature_switch",
    "load_catalogue",
    "nearest_versions",
    "newest_version",
    "release_at_or_before",
    "value_feature",
    "version_key",
]
