"""Prometheus' label-matcher semantics, for checking queries against served series.

Two rules matter: regex matchers are fully anchored (Prometheus wraps them in ``^(?:...)$``;
here ``fullmatch``), and a series without a label behaves as if it had that label with the
empty value, so ``{x=""}`` and ``{x!="a"}`` match series that lack ``x``. Since Prometheus
3.0, ``.`` matches a newline too (``DOTALL``). Pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from metricbridge.promql import VARIABLE_PLACEHOLDER, LabelMatcher, MatchOp

__all__ = ["accepts", "compile_regex", "matches_empty", "name_pattern", "series_accepts"]


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re.Pattern[str] | None:
    """Compile a PromQL regex anchored as Prometheus does; None if Python cannot read it."""
    try:
        return re.compile(f"(?:{pattern})", re.DOTALL)
    except re.error:
        return None  # RE2 syntax Python lacks (e.g. \pN classes): such matchers are not judged


def accepts(matcher: LabelMatcher, value: str) -> bool:
    """Whether ``matcher`` accepts a series whose label has ``value`` ("" when absent).

    A regex Python cannot compile is treated as accepting everything: unknown is not missing.
    """
    if matcher.op is MatchOp.EQUAL:
        return value == matcher.value
    if matcher.op is MatchOp.NOT_EQUAL:
        return value != matcher.value
    pattern = compile_regex(matcher.value)
    if pattern is None:
        return True
    hit = pattern.fullmatch(value) is not None
    return hit if matcher.op is MatchOp.RE else not hit


def matches_empty(matcher: LabelMatcher) -> bool:
    """Whether the matcher accepts series that lack its label altogether."""
    return accepts(matcher, "")


def series_accepts(matchers: tuple[LabelMatcher, ...], labels: Mapping[str, str]) -> bool:
    """Whether one series (its labels) satisfies every matcher."""
    return all(accepts(m, labels.get(m.name, "")) for m in matchers)


def name_pattern(name: str) -> re.Pattern[str]:
    """A metric name built from a dashboard variable as a pattern; the variable is ``.*``."""
    parts = (re.escape(part) for part in name.split(VARIABLE_PLACEHOLDER))
    return re.compile(".*".join(parts), re.DOTALL)
