"""Every error metricbridge raises on purpose.

    MetricbridgeError
     ├── ConfigError        a rules file that cannot be used; carries every issue found
     ├── ExpositionError    an exposition that cannot be read; names the line and what is wrong
     ├── UpstreamError      the engine could not be scraped; carries a short machine-readable reason
     ├── InputError         (dashboards) a dashboard or rule file that cannot be read at all
     └── PromQLError        (promql) an expression the PromQL parser rejects

Code outside this package catches ``MetricbridgeError``; the hot path never raises per sample
(it skips and counts instead), so these only cross module boundaries at load and fetch time.
"""

from __future__ import annotations

from dataclasses import dataclass


class MetricbridgeError(Exception):
    """Base class of the errors metricbridge raises deliberately."""


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a rules file, located by file, line and the rule it belongs to."""

    source: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(MetricbridgeError):
    """A rules file failed to load; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class ExpositionError(MetricbridgeError):
    """An exposition could not be read; ``line`` is 1-based, ``family`` set when known."""

    def __init__(self, message: str, *, line: int | None = None, family: str | None = None) -> None:
        self.message = message
        self.line = line
        self.family = family
        parts = []
        if line is not None:
            parts.append(f"line {line}")
        if family is not None:
            parts.append(f"family {family}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class UpstreamError(MetricbridgeError):
    """Fetching an upstream failed; ``reason`` is a short label value such as ``timeout``."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)
