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


# Parsed lines by their text, per format: most lines a rule looks inside (start-up times, token
# capacities, idle gauges) repeat byte for byte from one scrape to the next.
_LINES: dict[Format, dict[str, Sample]] = {fmt: {} for fmt in Format}
_LINES_MAX = 8192


def parse_lines(text: str, first_line: int, fmt: Format) -> list[Sample]:
    """Every non-empty line parsed; the first bad one raises with its line number."""
    samples = []
    known = _LINES[fmt]
    for offset, line in enumerate(text.split("\n")):
        if line:
            sample = known.get(line)
            if sample is None:
                try:
                    sample = parse_sample(line, fmt)
                except LineError as exc:
                    raise ExpositionError(str(exc), line=first_line + offset) from None
                if len(known) >= _LINES_MAX:
                    known.clear()  # a crude bound; the next scrape refills it
                known[line] = sample
            samples.append(sample)
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
            # A bytes key: a view would keep its whole upstream payload alive in the cache.
            samples = _cached_samples(bytes(family.body), family.source_format)
        else:
            samples = tuple(parse_lines(str(family.body, "utf-8"), 1, family.source_format))
    except ExpositionError as exc:
        line = None if exc.line is None else exc.line + family.first_line - 1
        raise ExpositionError(exc.message, line=line, family=family.name) from None
    return Family(family.meta, samples)
