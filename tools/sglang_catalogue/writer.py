"""Stable, reviewable JSON: sorted keys, one key a line, short scalar lists kept on one line."""

from __future__ import annotations

import json
from typing import Any

_INDENT = "  "


def dumps(value: Any, depth: int = 0) -> str:  # noqa: ANN401 - any JSON value
    """JSON text that diffs well between two releases' catalogues."""
    pad = _INDENT * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {dumps(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + _INDENT * depth + "}"
    if isinstance(value, list) and value and not all(_scalar(v) for v in value):
        items = [pad + dumps(v, depth + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + _INDENT * depth + "]"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
