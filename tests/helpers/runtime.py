"""The process's own families (``process_*``, ``python_*``) in a render, values masked.

Their values move between two renders (CPU seconds, memory, GC counts), so a byte-for-byte
comparison of two renders masks them; the digits are masked, the shape of each number is kept.
"""

from __future__ import annotations

import re

# The bridge's own families: its metricbridge_* and its process's (prometheus_client's names).
OWN_PREFIXES = ("metricbridge_", "process_", "python_")
_RUNTIME_SAMPLE = re.compile(rb"^((?:process|python)_[^ {]*(?:\{[^}]*\})?) (\S+)$", re.MULTILINE)
_DIGITS = re.compile(rb"[0-9]+")


def mask_runtime_values(render: bytes) -> bytes:
    """``render`` with each digit run of a runtime sample's value replaced by one ``9``."""
    return _RUNTIME_SAMPLE.sub(lambda m: m[1] + b" " + _DIGITS.sub(b"9", m[2]), render)
