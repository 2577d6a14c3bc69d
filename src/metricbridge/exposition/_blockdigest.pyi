# The compiled pass built from _blockdigest.c; see metricbridge.exposition.block_digest.

from typing import Literal

def digest(
    payload: bytes, start: int, end: int, /
) -> tuple[int, list[bytes], list[bytes]] | Literal[False] | None: ...
