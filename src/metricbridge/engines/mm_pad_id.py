"""The contract's multimodal pad id: the token id the engine fills each image or video item with.

The metric contract's row "multimodal image / video hash id" (``docs/contract.md``; in the
Chinese original, "多模态图片 / 视频 hash ID 对齐"): every item is padded with one value,
``1_000_000 + h % 2**30``, where ``h`` is

- for an image, ``md5(model_id + url)`` read as an integer;
- for a video, ``md5(model_id + url + f"{fps:.2f}")``;
- on the EPD path, the item's ``task_id`` read as a hexadecimal integer (no md5).

The online link, P/D and EPD then compute the same token ids. Community SGLang 0.5.23 fills four
values in rotation instead, derived from an identity fingerprint; this module is the reference a
rebased engine is checked against (``metricbridge mm-pad-id``, ``docs/contract.md``).

Decisions the row leaves open, each explained in ``docs/contract.md``:

- text is hashed as UTF-8 (Python's ``str.encode()``); a lone surrogate, which has no UTF-8
  form, is a ValueError, as it is for the engine's own ``encode()``;
- the digest is the whole 128-bit md5 read big-endian, ``int(hexdigest, 16)``: only its last 30
  bits reach the id (not the first 8 bytes, which community's ``data_hash`` took of sha256);
- ``model_id + url`` is plain concatenation, no separator, no normalisation of either;
- fps is a finite number, not negative (``-0.0`` formats as ``"-0.00"`` and is refused too);
  ``f"{fps:.2f}"`` rounds the float's exact binary value, ties to even (0.125 -> ``"0.12"``);
- a task id is hexadecimal digits in either case, after at most one ``0x``/``0X`` prefix (the
  value ``int(task_id, 16)`` gives); signs, spaces and underscores, which ``int`` would also
  take, are refused: no task id is written with them;
- an empty model id, url or task id is refused: it means a missing field, not an input.

Pure: the standard library only.
"""

from __future__ import annotations

import hashlib
import math
import string
from typing import Final

__all__ = [
    "FPS_FORMAT",
    "MM_PAD_SHIFT_VALUE",
    "PAD_ID_MAX",
    "PAD_ID_MIN",
    "PAD_MODULUS",
    "hashed_text",
    "md5_hex",
    "pad_id",
    "pad_id_from_hash",
    "pad_id_from_task_id",
    "task_id_value",
]

MM_PAD_SHIFT_VALUE: Final = 1_000_000
"""Added to every pad id, so that none is a text token id (SGLang's own name for it)."""
PAD_MODULUS: Final = 1 << 30
"""``h % 2**30``: the hash's low 30 bits."""
PAD_ID_MIN: Final = MM_PAD_SHIFT_VALUE
PAD_ID_MAX: Final = MM_PAD_SHIFT_VALUE + PAD_MODULUS - 1
FPS_FORMAT: Final = ".2f"
"""How a video's fps is appended to the hashed text: ``f"{fps:.2f}"``."""

_HEX_DIGITS: Final = frozenset(string.hexdigits)


def hashed_text(model_id: str, url: str, *, fps: float | None = None) -> str:
    """``model_id + url``, and ``f"{fps:.2f}"`` after them for a video: the text md5 reads.

    Raises ValueError for an empty model id or url, or an fps that is negative or not finite.
    """
    if not model_id:
        raise ValueError("the model id is empty")
    if not url:
        raise ValueError("the url is empty")
    if fps is None:
        return model_id + url
    if not math.isfinite(fps) or math.copysign(1.0, fps) < 0:
        raise ValueError(f"invalid fps {fps!r}: expected a finite number >= 0")
    return f"{model_id}{url}{fps:{FPS_FORMAT}}"


def md5_hex(model_id: str, url: str, *, fps: float | None = None) -> str:
    """The md5 hex digest of ``hashed_text``'s UTF-8 bytes; raises ValueError as it does."""
    text = hashed_text(model_id, url, fps=fps)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the text to hash has no UTF-8 form: {exc.reason} at position {exc.start}"
        ) from None
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def pad_id_from_hash(h: int) -> int:
    """``1_000_000 + h % 2**30``; raises ValueError for a negative ``h`` (no digest is)."""
    if h < 0:
        raise ValueError(f"invalid hash {h}: expected an integer >= 0")
    return MM_PAD_SHIFT_VALUE + h % PAD_MODULUS


def pad_id(model_id: str, url: str, *, fps: float | None = None) -> int:
    """The pad id of an image (``fps`` None) or a video item, per the contract row.

    ``1_000_000 + int(md5(model_id + url [+ f"{fps:.2f}"]).hexdigest(), 16) % 2**30``, the text
    encoded as UTF-8. Raises ValueError for an empty model id or url, an fps that is negative
    or not finite, or text with a lone surrogate.
    """
    return pad_id_from_hash(int(md5_hex(model_id, url, fps=fps), 16))


def task_id_value(task_id: str) -> int:
    """The integer an EPD task id's hexadecimal text stands for.

    Hex digits in either case after at most one ``0x``/``0X``; anything else (empty, a sign,
    spaces, underscores, other characters) is a ValueError.
    """
    digits = task_id[2:] if task_id[:2] in ("0x", "0X") else task_id
    if not digits or not _HEX_DIGITS.issuperset(digits):
        raise ValueError(
            f"invalid task id {task_id!r}: expected hexadecimal digits, 0x first or not"
        )
    return int(digits, 16)


def pad_id_from_task_id(task_id: str) -> int:
    """The pad id of an item on the EPD path: ``1_000_000 + int(task_id, 16) % 2**30``.

    Raises ValueError for a task id that is not hexadecimal (``task_id_value``).
    """
    return pad_id_from_hash(task_id_value(task_id))
