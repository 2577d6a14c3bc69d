"""Prometheus' label-matcher semantics, for checking queries against served series.

Two rules matter: regex matchers are fully anchored (Prometheus wraps them in ``^(?:...)$``;
here ``fullmatch``), and a series without a label behaves as if it had that label with the
empty value, so ``{x=""}`` and ``{x!="a"}`` match series that lack ``x``. Since Prometheus
3.0, ``.`` matches a newline too (``DOTALL``). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from metricbridge.analysis.promql import VARIABLE_PLACEHOLDER, LabelMatcher, MatchOp

__all__ = ["accepts", "compile_regex", "matches_empty", "name_pattern", "series_accepts"]


# RE2's flag group at the start, e.g. (?i): Python takes global flags only at the very start.
_LEADING_FLAGS = re.compile(r"\(\?[imsU]+\)")
# RE2's POSIX classes, which Python reads as a set of the letters ([:alpha:] as ":ahlp").
_POSIX_CLASSES = {
    "[:alnum:]": "0-9A-Za-z",
    "[:alpha:]": "A-Za-z",
    "[:ascii:]": "\\x00-\\x7f",
    "[:blank:]": "\\t ",
    "[:cntrl:]": "\\x00-\\x1f\\x7f",
    "[:digit:]": "0-9",
    "[:graph:]": "!-~",
    "[:lower:]": "a-z",
    "[:print:]": " -~",
    "[:punct:]": "!-/:-@\\[-`{-~",
    "[:space:]": "\\t\\n\\v\\f\\r ",
    "[:upper:]": "A-Z",
    "[:word:]": "0-9A-Za-z_",
    "[:xdigit:]": "0-9A-Fa-f",
}


def compile_regex(pattern: str) -> re.Pattern[str] | None:
    """Compile a PromQL regex anchored as Prometheus does; None if Python cannot read it."""
    flags = _LEADING_FLAGS.match(pattern)
    head, body = (flags.group(), pattern[flags.end() :]) if flags else ("", pattern)
    for posix, python in _POSIX_CLASSES.items():
        body = body.replace(posix, python)
    # U (ungreedy) changes what a match spans, never whether a whole value matches.
    head = head.replace("U", "").replace("(?)", "")
    try:
        return re.compile(f"{head}(?:{body})", re.DOTALL)
    except re.error:
        return None  # RE2 syntax Python lacks (e.g. \pN classes): such matchers are not judged


class MatcherRegexes:
    """The PromQL regexes of one check run, each compiled once.

    Owned by the run (``resolve.Resolver``), not the module: what it holds comes from the
    dashboards being checked, and goes with them.
    """

    __slots__ = ("_compiled",)

    def __init__(self) -> None:
        self._compiled: dict[str, re.Pattern[str] | None] = {}

    def compile(self, pattern: str) -> re.Pattern[str] | None:
        """``compile_regex(pattern)``, remembered for this run."""
        if pattern not in self._compiled:
            self._compiled[pattern] = compile_regex(pattern)
        return self._compiled[pattern]


def accepts(matcher: LabelMatcher, value: str, regexes: MatcherRegexes | None = None) -> bool:
    """Whether ``matcher`` accepts a series whose label has ``value`` ("" when absent).

    A regex Python cannot compile is treated as accepting everything: unknown is not missing.
    """
    if matcher.op is MatchOp.EQUAL:
        return value == matcher.value
    if matcher.op is MatchOp.NOT_EQUAL:
        return value != matcher.value
    pattern = regexes.compile(matcher.value) if regexes else compile_regex(matcher.value)
    if pattern is None:
        return True
    hit = pattern.fullmatch(value) is not None
    return hit if matcher.op is MatchOp.RE else not hit


def matches_empty(matcher: LabelMatcher) -> bool:
    """Whether the matcher accepts series that lack its label altogether."""
    return accepts(matcher, "")


def series_accepts(
    matchers: tuple[LabelMatcher, ...],
    labels: Mapping[str, str],
    regexes: MatcherRegexes | None = None,
) -> bool:
    """Whether one series (its labels) satisfies every matcher."""
    return all(accepts(m, labels.get(m.name, ""), regexes) for m in matchers)


def name_pattern(name: str) -> re.Pattern[str]:
    """A metric name built from a dashboard variable as a pattern; the variable is ``.*``."""
    parts = (re.escape(part) for part in name.split(VARIABLE_PLACEHOLDER))
    return re.compile(".*".join(parts), re.DOTALL)
