"""Grafana template variables: substituting them into queries, and variable queries as PromQL.

Grafana expands ``$var``, ``${var:fmt}`` and ``[[var]]`` before a query reaches Prometheus, so
a dashboard query is not PromQL until something stands in for them. mimirtool
(``pkg/mimirtool/analyze/grafana.go`` ``replaceVariables``) replaces the time variables with a
string replacer; here each variable is replaced by what fits where it stands, so that any
query Grafana could run still parses, and a variable inside a label matcher stays recognisable
as "any value" (``VARIABLE_PLACEHOLDER``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["VARIABLE_PLACEHOLDER", "substitute_grafana_variables", "variable_query_expr"]

# Valid as a label value, a regex, a label name and part of a metric name, and unlikely in data.
VARIABLE_PLACEHOLDER = "__metricbridge_var__"

# Grafana's own variable syntax (public/app/features/variables/utils.ts `variableRegex`).
_VARIABLE = (
    r"\$(?P<plain>\w+)"
    r"|\[\[(?P<legacy>\w+?)(?::(?P<legacy_fmt>\w+))?\]\]"
    r"|\$\{(?P<braced>\w+)(?:\.[^:}]+)?(?::(?P<fmt>[^}]+))?\}"
)
_VARIABLE_RE = re.compile(_VARIABLE)
_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)"""
    rf"|(?P<var>{_VARIABLE})|(?P<comment>#[^\n]*)|(?P<word>[A-Za-z_][\w:]*)|(?P<other>.)",
    re.DOTALL,
)
_LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_REGEX_SPECIALS = re.compile(r"[\\^$.|?*+()\[\]{}]")

# Grafana's global time variables, as values that keep a query valid wherever they stand.
_BUILTINS = {
    "__interval": "1m",
    "__rate_interval": "5m",
    "__range": "1h",
    "__interval_ms": "60000",
    "__rate_interval_ms": "300000",
    "__range_s": "3600",
    "__range_ms": "3600000",
    "__from": "1700000000000",
    "__to": "1700003600000",
}


class _Slot(StrEnum):
    """Where a variable stands, which decides what may replace it."""

    STRING = "string"
    DURATION = "duration"
    NAME = "name"
    NUMBER = "number"


_UNKNOWN = {
    _Slot.STRING: VARIABLE_PLACEHOLDER,
    _Slot.NAME: VARIABLE_PLACEHOLDER,
    _Slot.DURATION: "5m",
    _Slot.NUMBER: "1",
}


def substitute_grafana_variables(expr: str, variables: Mapping[str, str] | None = None) -> str:
    """Return ``expr`` with Grafana variables replaced so that it parses as plain PromQL.

    CRLF and CR become LF. ``variables`` maps known names to values, used verbatim (escaped
    inside strings; regex-escaped for ``${var:regex}``). Unknown variables become
    ``VARIABLE_PLACEHOLDER`` inside strings and names, ``5m`` inside ``[...]`` and after
    ``offset``, and ``1`` elsewhere (``topk($n, ...)``, ``> $threshold``). ``$1`` and other
    names that start with a digit are ``label_replace`` references, not variables: kept.
    """
    text = normalise_newlines(expr)
    values = dict(variables or {})
    scan = _Scan()
    out: list[str] = []
    for token in _TOKEN.finditer(text):
        kind, chunk = token.lastgroup, token.group()
        if kind == "string":
            chunk = _substitute_in_string(chunk, values)
        elif kind == "var":
            slot = scan.slot(out[-1][-1:] if out else "", text[token.end() :])
            chunk = _replacement(token, slot, values)
        scan.advance(kind, chunk)
        out.append(chunk)
    return "".join(out)


def normalise_newlines(expr: str) -> str:
    """Turn CRLF and lone CR (dashboards edited on Windows) into LF."""
    return expr.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class _Scan:
    """Where the scanner stands: inside ``[...]`` or ``{...}``, which ``(`` open label lists."""

    brackets: int = 0
    braces: int = 0
    label_lists: tuple[bool, ...] = ()
    last_word: str = ""

    def advance(self, kind: str | None, chunk: str) -> None:
        """Account for one token already emitted."""
        if kind == "word":
            self.last_word = chunk.lower()
            return
        if kind == "comment" or chunk.isspace():
            return
        if kind == "other":
            self._nest(chunk)
        self.last_word = ""

    def _nest(self, char: str) -> None:
        if char == "[":
            self.brackets += 1
        elif char == "]":
            self.brackets = max(0, self.brackets - 1)
        elif char == "{":
            self.braces += 1
        elif char == "}":
            self.braces = max(0, self.braces - 1)
        elif char == "(":
            self.label_lists = (*self.label_lists, self.last_word in _LABEL_LIST_KEYWORDS)
        elif char == ")":
            self.label_lists = self.label_lists[:-1]

    def slot(self, before: str, after: str) -> _Slot:
        """Classify a variable from the scanner state and the characters around it."""
        if self.brackets:
            return _Slot.DURATION
        if self.braces or (self.label_lists and self.label_lists[-1]):
            return _Slot.NAME
        if _is_name_char(before) or _is_name_char(after[:1]) or after.lstrip()[:1] in {"{", "["}:
            return _Slot.NAME
        return _Slot.DURATION if self.last_word == "offset" else _Slot.NUMBER


def _is_name_char(char: str) -> bool:
    return bool(char) and (char.isalnum() or char in "_:")


def _replacement(match: re.Match[str], slot: _Slot, values: Mapping[str, str]) -> str:
    """Choose the text that replaces one variable reference standing in ``slot``."""
    name = match["plain"] or match["legacy"] or match["braced"] or ""
    fmt = match["legacy_fmt"] or match["fmt"] or ""
    if name[:1].isdigit():
        return match.group()
    if name in values:
        value = values[name]
        return _REGEX_SPECIALS.sub(r"\\\g<0>", value) if fmt == "regex" else value
    if name in {"__from", "__to"} and fmt.startswith("date"):
        return _BUILTINS[name][:-3]  # `${__from:date:seconds}`: seconds, not milliseconds
    return _BUILTINS.get(name, _UNKNOWN[slot])


def _substitute_in_string(literal: str, values: Mapping[str, str]) -> str:
    """Substitute variables inside one quoted string, escaping for its quote character."""
    quote, body = literal[0], literal[1:-1]

    def replace(match: re.Match[str]) -> str:
        value = _replacement(match, _Slot.STRING, values)
        if quote == "`":
            return value
        return value.replace("\\", "\\\\").replace(quote, "\\" + quote)

    return quote + _VARIABLE_RE.sub(replace, body) + quote


# Grafana's Prometheus variable query functions (public/app/plugins/datasource/prometheus
# `metric_find_query.ts`); the last argument of label_values is the label.
_LABEL_VALUES = re.compile(
    r"(?s)^\s*label_values\(\s*(?:(?P<query>.+),)?\s*(?P<label>[^,()]+?)\s*\)\s*$"
)
_QUERY_RESULT = re.compile(r"(?s)^\s*query_result\((?P<query>.+)\)\s*$")
_METRICS = re.compile(r"(?s)^\s*metrics\((?P<regex>.+)\)\s*$")
_LABEL_NAMES = re.compile(r"(?s)^\s*label_names\(.*\)\s*$")


def variable_query_expr(query: str) -> str | None:
    """Turn a Grafana Prometheus variable query into PromQL that needs the same data.

    ``label_values(m, l)`` needs label ``l`` on ``m``: ``count by (l) (m)``;
    ``label_values(l)`` needs some series with ``l``; ``query_result(e)`` is ``e``;
    ``metrics(re)`` needs a metric name matching ``re`` anywhere, as Grafana searches it
    unanchored; ``label_names()`` needs nothing (None). Anything else Grafana sends to the
    series API as a selector, so it is returned as it is.
    """
    if _LABEL_NAMES.match(query):
        return None
    if match := _LABEL_VALUES.match(query):
        label = match["label"]
        selector = match["query"] or f'{{{label}!=""}}'
        return f"count by ({label}) ({selector.strip()})"
    if match := _QUERY_RESULT.match(query):
        return match["query"].strip()
    if match := _METRICS.match(query):
        regex = match["regex"].strip().replace("\\", "\\\\").replace('"', '\\"')
        return f'{{__name__=~".*(?:{regex}).*"}}'
    return query.strip()
