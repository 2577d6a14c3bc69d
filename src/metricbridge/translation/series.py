"""Small helpers over parsed families: label sets, lookups, zero samples."""

from __future__ import annotations

from collections.abc import Iterable

from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import (
    AnyFamily,
    Family,
    Labels,
    MetricType,
    Sample,
    sample_base,
    series_key,
)
from metricbridge.model.numbers import format_value


def by_name(families: Iterable[AnyFamily]) -> dict[str, AnyFamily]:
    """Families keyed by name."""
    return {family.meta.name: family for family in families}  # not .name: a call per family


def series_labels(family: Family) -> list[Labels]:
    """Distinct label sets of a family's series, without ``le``/``quantile``, sorted by name."""
    seen: dict[Labels, None] = {}
    for sample in family.samples:
        seen.setdefault(series_key(sample.labels), None)
    return list(seen)


def value_samples(family: Family) -> list[Sample]:
    """The samples that carry a family's value: a counter's ``_total``, a gauge's own name."""
    return [s for s in family.samples if s.name == family.name]


def gauge_sample(name: str, labels: Labels, value: float) -> Sample:
    """A sample with a canonical value spelling."""
    return Sample(name, labels, value, format_value(value))


def zero_series(
    name: str, mtype: MetricType, labels: Labels, buckets: tuple[float, ...] = ()
) -> tuple[Sample, ...]:
    """The samples of one series that has seen no event: counter 0, or an empty histogram."""
    if mtype is MetricType.COUNTER:
        return (gauge_sample(name, labels, 0.0),)
    base = sample_base(name, mtype)
    samples = [gauge_sample(base + "_sum", labels, 0.0)]
    for bound in (*buckets, float("inf")):
        le = tuple(sorted((*labels, ("le", format_value(bound)))))
        samples.append(gauge_sample(base + "_bucket", le, 0.0))
    samples.append(gauge_sample(base + "_count", labels, 0.0))
    return tuple(samples)


def parsed_or_none(family: AnyFamily | None) -> Family | None:
    """The parsed family, or None when absent or unreadable (the translator reported it)."""
    if family is None:
        return None
    try:
        return parse_family(family)
    except Exception:  # noqa: BLE001 - any failure here was already counted by translate
        return None
