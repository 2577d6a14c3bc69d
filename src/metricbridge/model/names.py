"""The name grammar: which metric and label names are legal, and their legacy spelling."""

from __future__ import annotations

import re
from enum import StrEnum

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class Escaping(StrEnum):
    """How a scraper wants names outside the legacy charset written (its ``escaping`` in Accept).

    Prometheus 3 and client_golang's names. ``allow-utf-8`` writes them as they are, quoted
    where the grammar needs it; the others map them into the legacy charset.
    """

    ALLOW_UTF8 = "allow-utf-8"
    UNDERSCORES = "underscores"
    DOTS = "dots"
    VALUES = "values"


def _legacy_rune(char: str, position: int) -> bool:
    # client_golang's isValidLegacyRune: a digit is legal anywhere but first.
    return (
        "a" <= char <= "z"
        or "A" <= char <= "Z"
        or char in "_:"
        or ("0" <= char <= "9" and position > 0)
    )


def escape_name(name: str, scheme: Escaping, *, label: bool = False) -> str:
    """``name`` as ``scheme`` writes it, as client_golang's ``EscapeName`` does.

    Only a name outside the legacy charset is escaped (client_golang's ``EscapeMetricFamily``
    leaves legal names alone, which keeps ``sglang:`` names spelled the same under every
    scheme). A label name may not hold ``:``, which every scheme but ``allow-utf-8`` keeps:
    it becomes ``_``, so that what is served is a legal label name.
    """
    legal = (LABEL_NAME if label else METRIC_NAME).fullmatch(name) is not None
    if legal or not name or scheme is Escaping.ALLOW_UTF8:
        return name
    pieces: list[str] = []
    if scheme is Escaping.VALUES:
        pieces.append("U__")
    for position, char in enumerate(name):
        if char == "_" and scheme is not Escaping.UNDERSCORES:
            pieces.append("__")
        elif char == "." and scheme is Escaping.DOTS:
            pieces.append("_dot_")
        elif _legacy_rune(char, position):
            pieces.append(char)
        elif scheme is Escaping.VALUES:
            pieces.append(f"_{ord(char):x}_")
        else:
            pieces.append("__" if scheme is Escaping.DOTS else "_")
    escaped = "".join(pieces)
    return escaped.replace(":", "_") if label else escaped


def legacy_name(name: str, *, label: bool = False) -> str:
    """A UTF-8 name in the legacy charset, as the ``underscores`` escaping writes it."""
    return escape_name(name, Escaping.UNDERSCORES, label=label)


# Untrusted text quoted in a message (a name, a type, a header value): at most this many
# characters, so one hostile line cannot make every log line and /contract answer megabytes.
QUOTED_MAX = 64


def quoted(text: str) -> str:
    """``repr(text)``, cut to ``QUOTED_MAX`` characters with the full length said."""
    if len(text) <= QUOTED_MAX:
        return repr(text)
    return f"{text[:QUOTED_MAX]!r}... ({len(text):,} characters)"


# A whole message built from untrusted parts (an engine's error, a rules file's issue), as it is
# logged: a guard behind ``quoted``, for the parts no one quoted.
MESSAGE_MAX = 1024


def shortened(message: str, limit: int = MESSAGE_MAX) -> str:
    """``message``, cut to ``limit`` characters with its full length said."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message):,} characters)"
