"""Regular expressions as Prometheus reads them: RE2 syntax, matched in linear time.

Prometheus compiles relabel regexes with Go's ``regexp``, which is RE2: no backtracking, so no
input makes a match slow, and no look-arounds or back-references. Python's ``re`` backtracks
(``(a+)+$`` against thirty ``a`` and a ``b`` took a scrape to 24 s) and reads some syntax
differently (``[[:digit:]]`` is a set of the characters ``:digt`` there, a POSIX class in RE2).
So relabel regexes are compiled here, by Google's RE2 binding, and mean in the bridge what the
same rule exported by ``metricbridge rules`` means in Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

import re2  # google-re2: no type information of its own

from metricbridge.errors import RegexError

# Configured once at import and never changed: RE2 otherwise writes every syntax error to
# stderr through absl's log, beside the ConfigIssue that reports it properly.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class Match(Protocol):
    """A successful match: what relabel templates read."""

    def group(self, index: int | str, /) -> str | None:
        """The text of group ``index`` (0: the whole match), None if it took no part."""


class Pattern(Protocol):
    """A compiled regex, as relabel uses it."""

    @property
    def pattern(self) -> str:
        """The source text."""

    @property
    def groups(self) -> int:
        """The number of capturing groups."""

    @property
    def groupindex(self) -> Mapping[str, int]:
        """Named groups by name."""

    def fullmatch(self, text: str, /) -> Match | None:
        """The match of the whole of ``text``, or None."""


def compile_regex(pattern: str) -> Pattern:
    """Compile ``pattern`` as RE2; ``RegexError`` says why RE2 (and so Prometheus) refuses it."""
    try:
        return cast("Pattern", re2.compile(pattern, _OPTIONS))
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid regex"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RegexError(str(detail)) from None
