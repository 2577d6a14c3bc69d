"""The name grammar: which metric and label names are legal, and their legacy spelling."""

from __future__ import annotations

import re

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NOT_LEGACY = re.compile(r"[^a-zA-Z0-9_:]")


def legacy_name(name: str, *, label: bool = False) -> str:
    """Map a UTF-8 name to the legacy charset with underscores, as Prometheus' escaping does."""
    escaped = _NOT_LEGACY.sub("_", name)
    if label:
        escaped = escaped.replace(":", "_")
    if not escaped or escaped[0].isdigit():
        escaped = "_" + escaped
    return escaped


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
