"""Every error metricbridge raises on purpose.

    MetricbridgeError
     ├── ConfigError          a rules file that cannot be used; carries every ConfigIssue found
     │    └── UnknownProfileError  a --profile that is not shipped; printed as one line
     ├── TemplateError        (config) a replacement template names a group its regex lacks;
     │                        the config checks turn it into a ConfigIssue of its rule
     ├── ExpositionError      an exposition that cannot be read; names the line and what is wrong
     ├── LineError            (exposition) one sample line breaks the grammar; the reader
     │                        re-raises it as an ExpositionError that names the line
     ├── ScaleError           (translation) a histogram bound that is not a number cannot be
     │                        scaled; translation reports it as an ExpositionError of its family
     ├── RegexError           (model) a relabel regex RE2, and so Prometheus, refuses
     ├── UpstreamError        the engine could not be scraped; carries a short reason label
     ├── InputError           (analysis) a dashboard, rule file or snapshot that cannot be used
     ├── PromQLError          (analysis) an expression the PromQL parser rejects; inside a readable
     │                        file it becomes an InputProblem of that query, not an InputError
     ├── NeedsServerInfoError (export) a derivation reads /server_info, which no scrape has
     ├── CatalogueError       (engines) a release catalogue file not in the layout this reads
     └── CommandLineError     (cli) the command cannot run as asked; printed as one line, exit 2
          ├── EnvError        a METRICBRIDGE_* variable the command reads holds an unusable value
          ├── ListenError     the address cannot be listened on; names it and the OS's reason
          └── OutputError     the output file cannot be written; the message is the reason

Code outside this package catches ``MetricbridgeError``. The hot path lets none escape per
sample (it skips and counts instead), so they only leave the package at load and fetch time.
LineError, TemplateError, ScaleError, NeedsServerInfoError and CatalogueError are ValueErrors
too, as they were before they moved here. An exception that never leaves the module raising it
(control flow inside one command or one exporter) stays in that module, with a comment saying so.
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


class UnknownProfileError(ConfigError):
    """A profile asked for on the command line is not one of the shipped ones: one issue."""


class TemplateError(MetricbridgeError, ValueError):
    """A replacement template refers to a group its regex does not have."""


class ExpositionError(MetricbridgeError):
    """An exposition could not be read; ``line`` is 1-based, ``family`` set when known.

    ``reason`` is a short fixed word for a self-metric's label: ``malformed`` for anything the
    grammar refuses, else the semantic rule broken (``exposition.breach.REASONS``).
    ``family_kept``: only a line was left out and the family is served all the same (a series
    repeated at one timestamp, of which Prometheus too keeps the first sample).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        family: str | None = None,
        reason: str = "malformed",
        family_kept: bool = False,
    ) -> None:
        self.message = message
        self.line = line
        self.family = family
        self.reason = reason
        self.family_kept = family_kept
        parts = []
        if line is not None:
            parts.append(f"line {line}")
        if family is not None:
            parts.append(f"family {family}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class LineError(MetricbridgeError, ValueError):
    """A sample line broke the grammar; the message says where in the line and how."""


class ScaleError(MetricbridgeError, ValueError):
    """A histogram bound that is not a number cannot be scaled."""


class RegexError(MetricbridgeError, ValueError):
    """A regex RE2 refuses, as Prometheus would; the message is RE2's reason."""


class UpstreamError(MetricbridgeError):
    """Fetching an upstream failed; ``reason`` is a short label value such as ``timeout``."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class InputError(MetricbridgeError):
    """A file that cannot be used at all: unreadable, not JSON or YAML, or mid-merge."""

    def __init__(
        self, file: str, message: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        """Locate ``message`` in ``file`` by 1-based line and column where known."""
        self.file = file
        self.message = message
        self.line = line
        self.column = column
        where = "" if line is None else f"line {line}"
        where += "" if column is None else f", column {column}"
        super().__init__(f"{file}: {where}: {message}" if where else f"{file}: {message}")


class PromQLError(MetricbridgeError):
    """An expression did not parse; ``message`` is the parser's own words."""

    def __init__(self, message: str, expr: str) -> None:
        """Keep the parser's message and the expression that failed."""
        self.message = message
        self.expr = expr
        super().__init__(f"cannot parse PromQL: {message}")


class NeedsServerInfoError(MetricbridgeError, ValueError):
    """The derivation reads /server_info, which Prometheus does not scrape."""


class CatalogueError(MetricbridgeError, ValueError):
    """A catalogue file that does not have the layout this package reads."""


class CommandLineError(MetricbridgeError):
    """A command cannot run as asked; the message is the one line to print (exit status 2)."""


class EnvError(CommandLineError):
    """A ``METRICBRIDGE_*`` variable the command reads holds an unusable value."""


class ListenError(CommandLineError):
    """The address cannot be listened on; the message names it and the OS's reason."""


class OutputError(CommandLineError):
    """The output file cannot be written; the message is the reason, lower-case."""
