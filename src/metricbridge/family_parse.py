"""The exact parse of a family's sample lines, cached for small repeated families."""

from __future__ import annotations

import functools

from metricbridge.errors import ExpositionError
from metricbridge.model import AnyFamily, Family, Format, Sample
from metricbridge.sample_line import LineError, parse_sample, unescape


def unescape_help(text: str, fmt: Format) -> str:
    r"""HELP text unescaped: ``\\`` and ``\n`` in the text format, also ``\"`` in OpenMetrics."""
    if "\\" not in text:
        return text
    if fmt is Format.OPENMETRICS:
        return unescape(text)
    return text.replace("\\\\", "\x00").replace("\\n", "\n").replace("\x00", "\\")


def parse_lines(text: str, first_line: int, fmt: Format) -> list[Sample]:
    """Every non-empty line parsed; the first bad one raises with its line number."""
    samples = []
    for offset, line in enumerate(text.split("\n")):
        if line:
            try:
                samples.append(parse_sample(line, fmt))
            except LineError as exc:
                raise ExpositionError(str(exc), line=first_line + offset) from None
    return samples


_PARSE_CACHE_MAX_BODY = 16 << 10  # with maxsize 64: a few MiB at worst


@functools.lru_cache(maxsize=64)
def _cached_samples(body: bytes, fmt: Format) -> tuple[Sample, ...]:
    return tuple(parse_lines(body.decode(), 1, fmt))


def parse_family(family: AnyFamily) -> Family:
    """The parsed form of a family; raises ``ExpositionError`` naming the bad line.

    Small families that rules look inside (start-up times, warm-zero references) repeat their
    bytes scrape after scrape, so their parse is cached by content.
    """
    if isinstance(family, Family):
        return family
    try:
        if len(family.body) <= _PARSE_CACHE_MAX_BODY:
            samples = _cached_samples(family.body, family.source_format)
        else:
            samples = tuple(parse_lines(family.body.decode(), 1, family.source_format))
    except ExpositionError as exc:
        line = None if exc.line is None else exc.line + family.first_line - 1
        raise ExpositionError(exc.message, line=line, family=family.name) from None
    return Family(family.meta, samples)
