"""``?name[]=`` filtering of translated families, with prometheus_client's semantics."""

from __future__ import annotations

from collections.abc import Iterable

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.sample_line import parse_sample
from metricbridge.model.family import AnyFamily, Family, RawFamily, Sample
from metricbridge.model.family_names import served_names


def select_samples(
    families: Iterable[AnyFamily], names: set[str]
) -> tuple[list[Family], list[ExpositionError]]:
    """The samples whose sample names are in ``names``, in their families; none left, no family.

    ``name[]`` lists sample names, as in prometheus_client (its ``RestrictedRegistry``): so
    ``x_count`` is a histogram's counts alone, and ``x`` itself selects nothing. A raw family
    with a line that does not parse cannot be filtered and is left out, reported.
    """
    selected: list[Family] = []
    problems: list[ExpositionError] = []
    for family in families:
        if isinstance(family, Family):
            samples = tuple(sample for sample in family.samples if sample.name in names)
        elif not _may_hold(family, names):
            continue
        else:
            try:
                samples = _picked(family, names)
            except ExpositionError as exc:
                problems.append(exc)
                continue
        if samples:
            selected.append(Family(family.meta, samples))
    return selected, problems


def _picked(family: RawFamily, names: set[str]) -> tuple[Sample, ...]:
    """The family's samples named in ``names``; only their lines are parsed.

    A raw family's lines start with their sample name and then "{" or a space (the reader
    checked), so the name is cut there, one set lookup per line: x_count is one line in 43 of a
    41-bucket histogram, and a thousand names cost no more than one.
    """
    # Not parse_family: it parses every line, where only the named ones are needed. No caches
    # either: this runs in a thread, and the request is rare.
    picked: list[Sample] = []
    for number, line in enumerate(str(family.body, "utf-8").split("\n"), family.first_line):
        space, brace = line.find(" "), line.find("{")
        end = brace if 0 <= brace < space or space < 0 else space  # a "{" after: an exemplar's
        if line[:end] in names:
            try:
                picked.append(parse_sample(line, family.source_format))
            except LineError as exc:
                raise ExpositionError(str(exc), line=number, family=family.name) from None
    return tuple(picked)


def _may_hold(family: RawFamily, names: set[str]) -> bool:
    """Whether ``names`` holds a name the family's samples could have: a cheap test by name.

    A raw family only ever holds lines that start with its sample base and a suffix its type
    allows (the reader checked), so one that fails here has no sample named in ``names`` and
    its body is never decoded. Passing is not matching: the caller still picks sample by sample.
    """
    return not served_names(family.meta.name, family.meta.type).isdisjoint(names)
