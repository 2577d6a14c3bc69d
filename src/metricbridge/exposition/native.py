"""The reader's optional compiled modules: imported when built, unless told not to.

``hatch_build.py`` compiles them at install time when a C compiler is at hand; without them
(or with ``METRICBRIDGE_PURE_PYTHON`` set) the reader takes its Python paths, which are the
specifications the compiled ones agree with.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def compiled(name: str) -> ModuleType | None:
    """``metricbridge.exposition.<name>`` if it was built and the pure path is not asked for."""
    if os.environ.get("METRICBRIDGE_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"metricbridge.exposition.{name}")
    except ImportError:
        return None
