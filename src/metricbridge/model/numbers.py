"""Number text as Prometheus clients write it, and as both wire formats accept it.

The one grammar of sample values, for the exact path (``parse_value``, per value) and the fast
path (``canonical_shape``, per distinct shape of a column of values). What is accepted is what
every reader downstream accepts:

- Prometheus (text and OpenMetrics) and promtool read a value with Go's
  ``strconv.ParseFloat`` after refusing ``p``, ``P`` and ``_``: decimal numbers, ``inf`` and
  ``infinity`` in any case with an optional sign, ``nan`` in any case without one. A decimal
  number out of a float's range is an error (``ErrRange``), not an infinity.
- prometheus_client's parsers call Python's ``float``, which also takes ``1_000``, ``+nan``,
  surrounding spaces and non-ASCII digits, and reads ``1e999999`` as infinity.

Where the two differ the stricter wins: ``1_000``, ``+nan``, Arabic-Indic digits and an
out-of-range number are refused (Go refuses them); ``inf``, ``Infinity`` and ``nan`` are read
(both accept them) and written canonically, ``+Inf`` and ``NaN``, the only spellings
OpenMetrics allows. A number that underflows (``1e-999999``) reads as 0 in both and is
accepted. Hexadecimal floats need a ``p`` exponent in Go, which Prometheus refuses, and
Python's ``float`` refuses them all: no reader takes them.
"""

from __future__ import annotations

import math
import re

# Values both wire formats accept verbatim. Go's ParseFloat (the text format) is laxer (``inf``,
# ``nan``); such spellings are normalised with ``format_value`` on read.
CANONICAL_VALUE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN"
)
_LAX_VALUE = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)"
    r"|[Nn][Aa][Nn]"
)

# The fast path's view of a value, its shape: every digit read as 0 and ``E`` as ``e``. An
# engine's thousands of values have a few dozen shapes (``0.0``, ``00.0``, ``0.0e-00``, ...), so
# the fast path judges each distinct shape once, not each value. A shape is canonical if every
# value of that shape is canonical and inside a float's range: at most 199 digits before the
# point and a positive exponent of at most two digits keep a number below 1e299 (a float reaches
# 1.8e308); a value beyond that bound, even a valid one, takes the exact path, which reads it.
VALUE_SHAPE = bytes.maketrans(b"123456789E", b"000000000e")
_CANONICAL_SHAPE = re.compile(
    rb"[+-]?(?:0{1,199}(?:\.0*)?|\.0+)(?:e(?:\+?0{1,2}|-0+))?|[+-]Inf|NaN"
)


def canonical_shape(shape: bytes) -> bool:
    """Whether every value of this shape (see ``VALUE_SHAPE``) is canonical and in range."""
    return _CANONICAL_SHAPE.fullmatch(shape) is not None


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
    """Parse a sample value; return it with a canonical spelling, or None if not a number.

    A decimal number beyond a float's range is not a number: Go's ParseFloat, which Prometheus
    reads values with, refuses it (Python's float would say infinity).
    """
    if CANONICAL_VALUE.fullmatch(text):
        value = float(text)
        if math.isinf(value) and not text.endswith("Inf"):
            return None
        return value, text
    if _LAX_VALUE.fullmatch(text):
        value = float(text)
        if math.isinf(value) and not text[-1:].isalpha():
            return None
        return value, format_value(value)
    return None
