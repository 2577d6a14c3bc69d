"""Logging set-up: logfmt or one JSON object per line, as Prometheus' exporters log (promslog).

Both formats carry the same keys in the same order: ``ts`` (RFC 3339, UTC, milliseconds),
``level``, ``logger``, ``msg``, and ``exc`` when a traceback is attached. ``text``, the
format's old name, is logfmt.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time

LOG_FORMATS = ("logfmt", "json")
# A logfmt value is written bare only if it is all of these: no space, quote, '=' or control.
_BARE = re.compile(r"[^\s\"=\\\x00-\x1f\x7f]+")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')


def timestamp(created: float) -> str:
    """``2026-12-02T06:11:02.231Z``: RFC 3339 in UTC, to the millisecond."""
    millis = int(created * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{millis:03d}Z"


def _fields(formatter: logging.Formatter, record: logging.LogRecord) -> dict[str, str]:
    entry = {
        "ts": timestamp(record.created),
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    if record.exc_info:
        entry["exc"] = formatter.formatException(record.exc_info)
    return entry


def logfmt_value(value: str) -> str:
    """``value`` bare when it can be, else quoted with backslash escapes (as go-logfmt writes)."""
    if _BARE.fullmatch(value):
        return value
    escaped = _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m[0], f"\\u{ord(m[0]):04x}"), value)
    return f'"{escaped}"'


class LogfmtFormatter(logging.Formatter):
    """One ``key=value`` line per record: ``ts=... level=info logger=... msg="..."``."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a logfmt line."""
        fields = _fields(self, record)
        return " ".join(f"{key}={logfmt_value(value)}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the keys log collectors expect."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a JSON line."""
        return json.dumps(_fields(self, record), ensure_ascii=False)


def log_format(text: str) -> str:
    """``logfmt`` or ``json`` in any letter case; ``text`` (the old name) is ``logfmt``."""
    value = text.strip().lower()
    if value == "text":
        return "logfmt"
    if value not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: expected one of logfmt, json (text is logfmt)"
        )
    return value


def configure_logging(level: str, fmt: str) -> None:
    """Send metricbridge's (and aiohttp's) logs to stderr at ``level`` in ``fmt`` (logfmt|json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp.access logs every scrape at INFO; that is noise next to every GPU.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
