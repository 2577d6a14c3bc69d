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
    """OpenMetrics if the payload ends with its ``# EOF`` marker, else the text format."""
    tail = payload[-7:].rstrip(b"\n")
    return Format.OPENMETRICS if tail.endswith(b"# EOF") else Format.TEXT


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
