"""The exact parse of a family's sample lines, reusing the lines that did not change."""

from __future__ import annotations

from collections.abc import Mapping

from metricbridge.errors import ExpositionError
from metricbridge.exposition.sample_line import LineError, parse_sample, unescape
from metricbridge.model.family import AnyFamily, Family, Format, Sample


def unescape_help(text: str, fmt: Format) -> str:
    r"""HELP text unescaped: ``\\`` and ``\n`` in the text format, also ``\"`` in OpenMetrics."""
    if "\\" not in text:
        return text
    if fmt is Format.OPENMETRICS:
        return unescape(text)
    return text.replace("\\\\", "\x00").replace("\\n", "\n").replace("\x00", "\\")


def parse_lines(
    text: str,
    first_line: int,
    fmt: Format,
    previous: Mapping[str, Sample] | None = None,
    seen: dict[str, Sample] | None = None,
) -> list[Sample]:
    """Every non-empty line parsed; the first bad one raises with its line number.

    A line found in ``previous`` (the same family's lines, parsed last time) is not parsed
    again; ``seen`` collects this parse's lines for the next time.
    """
    samples = []
    for offset, line in enumerate(text.split("\n")):
        if line:
            sample = previous.get(line) if previous is not None else None
            if sample is None:
                try:
                    sample = parse_sample(line, fmt)
                except LineError as exc:
                    raise ExpositionError(str(exc), line=first_line + offset) from None
            if seen is not None:
                seen[line] = sample
            samples.append(sample)
    return samples


# Each family's lines as parsed last time, by family name and format: most lines a rule looks
# inside (start-up times, token capacities, idle gauges) repeat byte for byte from one scrape to
# the next. Holding exactly the last parse keeps the memory flat: lines that change every
# scrape leave with the next parse instead of piling up.
_LAST_PARSE: dict[tuple[str, Format], dict[str, Sample]] = {}
_LAST_PARSE_MAX = 4096  # families; more than any engine serves


def parse_family(family: AnyFamily) -> Family:
    """The parsed form of a family; raises ``ExpositionError`` naming the bad line."""
    if isinstance(family, Family):
        return family
    key = (family.name, family.source_format)
    seen: dict[str, Sample] = {}
    try:
        text = str(family.body, "utf-8")
        samples = parse_lines(text, 1, family.source_format, _LAST_PARSE.get(key), seen)
    except ExpositionError as exc:
        line = None if exc.line is None else exc.line + family.first_line - 1
        raise ExpositionError(exc.message, line=line, family=family.name) from None
    if len(_LAST_PARSE) >= _LAST_PARSE_MAX and key not in _LAST_PARSE:
        _LAST_PARSE.clear()  # a crude bound; the next scrape refills it
    _LAST_PARSE[key] = seen
    return Family(family.meta, tuple(samples))
