"""The exact parse of a family's sample lines, reusing the lines that did not change."""

from __future__ import annotations

import re
from collections.abc import Mapping

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.caches import LINE_OVERHEAD, PAIR_OVERHEAD, CodecCaches, lines_size
from metricbridge.exposition.sample_line import parse_sample, unescape
from metricbridge.model.family import AnyFamily, Family, Format, Sample

_TEXT_HELP_ESCAPES = {"\\": "\\", "n": "\n"}
_HELP_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def unescape_help(text: str, fmt: Format) -> str:
    r"""HELP text unescaped: ``\\`` and ``\n`` in the text format, also ``\"`` in OpenMetrics.

    Any other backslash pair is kept as the two characters it is, as Prometheus' parsers
    (``helpReplacer``, ``lvalReplacer``) and prometheus_client read it; so is a trailing lone
    backslash. (client_golang's text parser, behind ``promtool check metrics``, refuses such a
    HELP line; the writer doubles the backslash, which every parser reads.)
    """
    if "\\" not in text:
        return text
    if fmt is Format.OPENMETRICS:
        return unescape(text)
    return _HELP_ESCAPE.sub(_text_help_unescaped, text)


def _text_help_unescaped(match: re.Match[str]) -> str:
    return _TEXT_HELP_ESCAPES.get(match.group(1), match.group(0))


def parse_lines(  # noqa: PLR0913 - the lines, where they are, and what helps parse them
    text: str,
    first_line: int,
    fmt: Format,
    previous: Mapping[str, Sample] | None = None,
    seen: dict[str, Sample] | None = None,
    *,
    caches: CodecCaches | None = None,
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
                    sample = parse_sample(line, fmt, caches=caches)
                except LineError as exc:
                    raise ExpositionError(str(exc), line=first_line + offset) from None
            if seen is not None:
                seen[line] = sample
            samples.append(sample)
    return samples


def parse_family(family: AnyFamily, *, caches: CodecCaches | None = None) -> Family:
    """The parsed form of a family; raises ``ExpositionError`` naming the bad line.

    With ``caches``, lines that repeat byte for byte from the family's last parse are taken
    from it (``caches.last_parse``): most lines a rule looks inside (start-up times, token
    capacities, idle gauges) do from one scrape to the next. Exactly the last parse is kept per
    family, so lines that change every scrape leave with the next parse instead of piling up.
    """
    if isinstance(family, Family):
        return family
    key = (family.name, family.source_format)
    cache = caches.last_parse if caches is not None else None
    # A family too big for a cache (10^5 series) is not offered to it: it could only evict
    # everything else and itself, at the cost of sizing every entry it would not keep.
    lines = family.sample_count
    if cache is not None and LINE_OVERHEAD * lines > cache.budget:
        cache = None
    label_caches = caches
    if caches is not None and PAIR_OVERHEAD * lines > caches.read_label_sets.budget:
        label_caches = None
    previous = cache.get(key) if cache is not None else None
    seen: dict[str, Sample] | None = {} if cache is not None else None
    try:
        text = str(family.body, "utf-8")
        samples = parse_lines(text, 1, family.source_format, previous, seen, caches=label_caches)
    except ExpositionError as exc:
        line = None if exc.line is None else exc.line + family.first_line - 1
        raise ExpositionError(exc.message, line=line, family=family.name) from None
    if cache is not None and seen is not None:
        cache.put(key, seen, len(family.name) + lines_size(seen))
    return Family(family.meta, tuple(samples))
