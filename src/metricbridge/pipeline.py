"""Bytes in, bytes out: read, translate, write; the one sequence the CLI and the service run."""

from __future__ import annotations

from dataclasses import dataclass

from metricbridge.errors import ExpositionError
from metricbridge.exposition_reader import read_exposition
from metricbridge.exposition_writer import write_exposition
from metricbridge.model import Format
from metricbridge.rules import CompiledRules
from metricbridge.translate import Translation, translate


def detect_format(payload: bytes) -> Format:
    """OpenMetrics if any line is exactly ``# EOF``, else the text format.

    Anywhere, not only at the end: lines after the ``# EOF`` make an OpenMetrics file invalid,
    and read as text they would pass unchecked (a text-format comment may be ``# EOF`` too, but
    a file carrying one is far likelier cut-and-pasted OpenMetrics; ``--input-format text``
    reads it as text).
    """
    at_start = payload.startswith(b"# EOF\n") or payload == b"# EOF"
    inside = b"\n# EOF\n" in payload or payload.endswith(b"\n# EOF")
    return Format.OPENMETRICS if at_start or inside else Format.TEXT


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
