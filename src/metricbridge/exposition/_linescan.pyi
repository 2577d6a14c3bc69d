# The compiled pass built from _linescan.c; see metricbridge.exposition.line_match.

def match_heads(
    payload: bytes, start: int, end: int, heads: list[bytes], want_values: bool, /
) -> tuple[bool, list[bytes] | None] | None: ...
def is_simple_value(value: bytes, /) -> bool: ...
def values_agree(
    values: list[bytes],
    whole: list[int],
    lower: list[int],
    upper: list[int],
    counts: list[int],
    infs: list[int],
    summary: bool,
    /,
) -> bool | None: ...
def walk_layout(
    payload: bytes,
    headers: list[bytes],
    heads: list[list[bytes] | None],
    wanted: list[bool],
    /,
) -> list[tuple[int, bool | None, list[bytes] | None]] | None: ...
