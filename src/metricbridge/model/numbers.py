"""Number text as Prometheus clients write it, and as both wire formats accept it."""

from __future__ import annotations

import math
import re

# Values both wire formats accept verbatim. Go's ParseFloat (the text format) is laxer (``inf``,
# ``nan``, hex floats); such spellings are normalised with ``format_value`` on read.
CANONICAL_VALUE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN"
)
_LAX_VALUE = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)"
    r"|[Nn][Aa][Nn]"
)


def format_value(value: float) -> str:
    """Render a float the way prometheus_client does (Go-style exponent for large magnitudes)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    dot = text.find(".")
    # prometheus_client (after Go's %g) switches positive values to an exponent once the integer
    # part has more than 6 digits; engine output diffed against ours should spell them the same.
    if value > 0 and dot > 6 and "e" not in text:
        mantissa = (text[0] + "." + text[1:dot] + text[dot + 1 :]).rstrip("0").rstrip(".")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def parse_value(text: str) -> tuple[float, str] | None:
    """Parse a sample value; return it with a canonical spelling, or None if not a number."""
    if CANONICAL_VALUE.fullmatch(text):
        return float(text), text
    if _LAX_VALUE.fullmatch(text):
        value = float(text)
        return value, format_value(value)
    return None
