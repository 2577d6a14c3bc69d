"""Bytes in, bytes out: read, translate, write; the one sequence the CLI and the service run."""

from __future__ import annotations

from dataclasses import dataclass

from metricbridge.errors import ExpositionError
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.translate import Translation, translate


def detect_format(payload: bytes) -> Format:
    """OpenMetrics if the last line that is not blank is exactly ``# EOF``, else the text format.

    Only the last: elsewhere, ``# EOF`` is as likely a text-format comment, and reading a text
    file as OpenMetrics would change it (timestamps are seconds there, counters must end in
    ``_total``). ``stray_eof_line`` finds the ambiguous case so that callers can say so.
    """
    end = _content_end(payload)
    start = payload.rfind(b"\n", 0, end) + 1
    return Format.OPENMETRICS if payload[start:end] == b"# EOF" else Format.TEXT


def stray_eof_line(payload: bytes) -> int | None:
    """The line number of a ``# EOF`` line that more lines follow, if there is one."""
    end = _content_end(payload)
    if payload.startswith(b"# EOF\n") and end > len(b"# EOF"):
        return 1
    at = payload.find(b"\n# EOF\n", 0, end)
    return None if at < 0 else payload.count(b"\n", 0, at) + 2


def _content_end(payload: bytes) -> int:
    """Where the payload ends but for trailing newlines (no copy: payloads reach 10 MB)."""
    end = len(payload)
    while end and payload[end - 1] == 0x0A:
        end -= 1
    return end


@dataclass(frozen=True, slots=True)
class Outcome:
    """A translated payload and everything learned on the way."""

    translation: Translation
    problems: tuple[ExpositionError, ...]  # reader and rule problems; those families were dropped
    renamed_samples: int


def run_pipeline(payload: bytes, fmt: Format, rules: CompiledRules) -> Outcome:
    """Read and translate one payload; raise ``ExpositionError`` only if none of it is usable."""
    exposition = read_exposition(payload, fmt, rules.validation)
    translation = translate(exposition.families, rules)
    problems = (*exposition.problems, *translation.problems)
    return Outcome(translation, problems, exposition.renamed_samples)


def render(outcome: Outcome, fmt: Format) -> bytes:
    """The translated families in the requested wire format."""
    return write_exposition(outcome.translation.families, fmt)
