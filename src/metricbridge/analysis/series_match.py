"""Prometheus' label-matcher semantics, for checking queries against served series.

Two rules matter: regex matchers are fully anchored (Prometheus wraps them in ``^(?:...)$``;
here ``fullmatch``), and a series without a label behaves as if it had that label with the
empty value, so ``{x=""}`` and ``{x!="a"}`` match series that lack ``x``. Since Prometheus
3.0, ``.`` matches a newline too. Regexes are RE2, as in Prometheus (``model.regex``). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from metricbridge.analysis.promql import VARIABLE_PLACEHOLDER, LabelMatcher, MatchOp
from metricbridge.errors import RegexError
from metricbridge.model.regex import Pattern
from metricbridge.model.regex import compile_regex as compile_re2

__all__ = ["accepts", "compile_regex", "matches_empty", "name_pattern", "series_accepts"]


def compile_regex(pattern: str) -> Pattern | None:
    """Compile a PromQL regex as Prometheus does: RE2, anchored, ``.`` matching newlines.

    None if RE2 refuses it (Prometheus would refuse the query; the parser reports that).
    """
    try:
        return compile_re2(f"(?s:{pattern})")
    except RegexError:
        return None


class MatcherRegexes:
    """The PromQL regexes of one check run, each compiled once.

    Owned by the run (``resolve.Resolver``), not the module: what it holds comes from the
    dashboards being checked, and goes with them.
    """

    __slots__ = ("_compiled",)

    def __init__(self) -> None:
        self._compiled: dict[str, Pattern | None] = {}

    def compile(self, pattern: str) -> Pattern | None:
        """``compile_regex(pattern)``, remembered for this run."""
        if pattern not in self._compiled:
            self._compiled[pattern] = compile_regex(pattern)
        return self._compiled[pattern]


def accepts(matcher: LabelMatcher, value: str, regexes: MatcherRegexes | None = None) -> bool:
    """Whether ``matcher`` accepts a series whose label has ``value`` ("" when absent).

    A regex RE2 cannot compile is treated as accepting everything: unknown is not missing.
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
