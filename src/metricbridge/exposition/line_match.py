"""A block of sample lines against the heads proven for it before: the compiled pass, if built.

An engine serves the same label sets scrape after scrape, so ``byte_scan.prove_block`` nearly
always finds a block's heads equal to the ones it proved for that block before. Checking that
in Python means copying the block out of the payload, splitting it into ``2n + 1`` objects and
slicing them into heads and values; ``_linescan`` (C, built with the package when a compiler is
at hand) walks the block once where it lies instead, compares each head in place and makes
objects only for the values a caller keeps. It also settles the values it can: an unsigned
decimal of a canonical shape (``SIMPLE_VALUE``) is proven as it is read, so a block of such
values needs neither the value proof nor the search for negative, NaN or infinite counts.

The same module checks a histogram's values against its layout (``raw_rules.values_agree``:
whole counts, cumulative buckets, ``_count`` equal to the ``+Inf`` bucket) over C doubles,
where Python converted each distinct spelling and compared through iterators.

Without the extension (no compiler at install time, or ``METRICBRIDGE_PURE_PYTHON`` set)
``match_heads`` is None and ``prove_block`` takes its Python path, which is the specification:
the compiled pass answers only when that path would accept the block with these heads, gives
the same values, and otherwise answers None for it to decide. The suite runs on both.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from metricbridge.exposition.native import compiled

# The compiled pass's value check, as a regex: digits with an optional fraction, or a fraction
# alone, then an optional exponent; no sign, no Inf or NaN. Every such value has a canonical shape
# (``model.numbers``): at most 199 digits before the point and a positive exponent of at most two
# digits keep it inside a float's range.
SIMPLE_VALUE = re.compile(
    rb"(?:[0-9]{1,199}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE](?:\+?[0-9]{1,2}|-[0-9]+))?"
)

# (payload, start, end, proven heads, whether the values are wanted) -> None if the block
# payload[start:end] is not those heads each followed by one space, a value and a newline; else
# (every value simple, the values, or None when not wanted and every value simple).
Matcher = Callable[[bytes, int, int, list[bytes], bool], "tuple[bool, list[bytes] | None] | None"]


# (values, whole, lower, upper, counts, infs, summary) -> raw_rules.values_agree's verdict over
# a layout's index lists, or None when a value is not plainly a number (Python decides).
Agreement = Callable[
    [list[bytes], list[int], list[int], list[int], list[int], list[int], bool], "bool | None"
]


_module = compiled("_linescan")
COMPILED = _module is not None
match_heads: Matcher | None = _module.match_heads if _module else None
is_simple_value: Callable[[bytes], bool] | None = _module.is_simple_value if _module else None
values_agree: Agreement | None = _module.values_agree if _module else None
# (payload, headers, heads, wanted) -> layout_walk.walk_python's answer; see layout_walk.
Walk = Callable[
    [bytes, list[bytes], list["list[bytes] | None"], list[bool]],
    "list[tuple[int, bool | None, list[bytes] | None]] | None",
]
walk_layout: Walk | None = _module.walk_layout if _module else None
