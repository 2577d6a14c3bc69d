"""Whether OpenMetrics can carry a set of families as faithfully as the text format does.

Validity is a property of the output format. The text format 0.0.4 carries, and Prometheus
ingests from it, families that OpenMetrics 1.0 forbids: a counter whose name does not end in
``_total`` (OpenMetrics would have to write it as ``unknown``), a counter ``a_total`` beside a
gauge ``a`` (client_golang's ``go_memstats_alloc_bytes``: one name in OpenMetrics), non-integer
bucket counts, negative or NaN counter-like values, negative quantiles and sums, a histogram
point whose buckets are out of order, not cumulative or without +Inf. A response that
held them in OpenMetrics would be refused by OpenMetrics parsers (prometheus_client's checks
each of these) or would lose a type; so the bridge answers such a snapshot in text 0.0.4, which
Prometheus accepts whatever it asked first (``service.negotiation``).

A ``RawFamily``'s lines were proven by the reader to be valid unchanged in both wire formats
(``exposition.reader``), so only its name and type are looked at here; a ``Family``'s values
are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from metricbridge.exposition.histogram_points import BUCKETED, group_of, point_breaches
from metricbridge.model.family import (
    TYPE_SUFFIXES,
    AnyFamily,
    Family,
    MetricType,
    Sample,
    sample_base,
)
from metricbridge.model.numbers import parse_value


class Misfit(StrEnum):
    """Why OpenMetrics cannot carry a family: the ``reason`` label of the fallback counter."""

    COUNTER_NAME = "counter_name"  # a counter not named ..._total: OpenMetrics would lose its type
    NAME_CLASH = "name_clash"  # two families sharing a name in OpenMetrics, not in text
    COUNTER_VALUE = "counter_value"  # a counter's _total negative or NaN
    COUNT_VALUE = "count_value"  # a bucket or _count not a whole number, negative or NaN
    SUM_VALUE = "sum_value"  # a _sum negative or NaN, or beside a negative bucket
    QUANTILE_VALUE = "quantile_value"  # a summary quantile's value negative
    QUANTILE_LABEL = "quantile_label"  # a quantile label outside [0, 1], or NaN
    LE_LABEL = "le_label"  # an le of +Inf spelled otherwise ("+INF", "inf")
    TIMESTAMPS = "timestamps"  # one metric point's samples mixing or reversing timestamps
    HISTOGRAM_SHAPE = "histogram_shape"  # a point's buckets out of order, not cumulative, ...


# Every name a family of each type takes in OpenMetrics, as suffixes of its sample base
# (family_names.wire_names for OpenMetrics, spelled out: this runs on every fetch).
_OPENMETRICS_NAMES = {mtype: ("", *suffixes) for mtype, suffixes in TYPE_SUFFIXES.items()}


def openmetrics_misfit(families: Iterable[AnyFamily]) -> Misfit | None:
    """The first reason OpenMetrics cannot carry ``families`` faithfully, or None if it can."""
    owners: dict[str, str] = {}
    for family in families:
        name, mtype = family.meta.name, family.meta.type
        base = name
        if mtype is MetricType.COUNTER:
            if not name.endswith("_total"):
                return Misfit.COUNTER_NAME
            base = name[: -len("_total")]
        for suffix in _OPENMETRICS_NAMES[mtype]:
            if owners.setdefault(base + suffix, name) != name:
                return Misfit.NAME_CLASH
        if isinstance(family, Family):
            misfit = values_misfit(family)
            if misfit is not None:
                return misfit
    return None


def before_1970(families: Iterable[AnyFamily]) -> list[Family]:
    """The families a text answer cannot carry: a sample stamped before 1970.

    OpenMetrics carries a negative timestamp and Prometheus' OpenMetrics parser reads it, but
    its text parser takes only digits there and refuses the whole scrape over one. Only a
    parsed family has timestamps (the reader parses every family with one).
    """
    return [
        family
        for family in families
        if isinstance(family, Family)
        and any(s.timestamp is not None and s.timestamp < 0 for s in family.samples)
    ]


def values_misfit(family: Family) -> Misfit | None:
    """Why OpenMetrics forbids one of ``family``'s values, or None.

    prometheus_client's OpenMetrics parser's rules, which the reader lets through because the
    text format carries them (``semantics.Breach.carried``): counter-like samples (``_total``,
    ``_bucket``, ``_count``, ``_gcount``, ``_sum``) neither NaN nor negative, bucket and count
    values whole numbers, ``_gsum`` not NaN, and negative only beside a negative bucket, no
    ``_sum`` in a histogram with a negative bucket, quantiles in [0, 1] and their values not
    negative, +Inf spelled ``+Inf``; and a histogram's points in shape (``histogram_points``).
    """
    mtype = family.meta.type
    base = sample_base(family.meta.name, mtype)
    # Text lets one series carry samples with and without a timestamp; OpenMetrics does not.
    if any(s.timestamp is not None for s in family.samples) and _timestamps_misfit(family, base):
        return Misfit.TIMESTAMPS
    if mtype is MetricType.COUNTER:
        total = base + "_total"
        if any(s.name == total and not s.value >= 0 for s in family.samples):  # NaN fails too
            return Misfit.COUNTER_VALUE
        return None
    if mtype in (MetricType.HISTOGRAM, MetricType.GAUGEHISTOGRAM, MetricType.SUMMARY):
        misfit = _distribution_misfit(family, base)
        if misfit is None and mtype in BUCKETED and _shape_misfit(family, base):
            return Misfit.HISTOGRAM_SHAPE
        return misfit
    return None


# The rules of a histogram's points that OpenMetrics holds and Prometheus does not check.
_SHAPE_RULES = frozenset(
    {"bucket_order", "not_cumulative", "missing_inf_bucket", "count_mismatch", "sum_without_count"}
)


def _shape_misfit(family: Family, base: str) -> bool:
    """Whether one of a histogram's points breaks a rule of its shape that OpenMetrics holds."""
    mtype = family.meta.type
    groups = [group_of(sample, base, mtype) for sample in family.samples]
    return any(b.reason in _SHAPE_RULES for b in point_breaches(family, base, groups))


def _distribution_misfit(family: Family, base: str) -> Misfit | None:
    """``values_misfit`` for a histogram, gauge histogram or summary."""
    mtype = family.meta.type
    checks = {
        base + "_bucket": _bucket_misfit,
        base + "_count": _count_misfit,
        base + "_gcount": _count_misfit,
        base + "_sum": _sum_misfit,
        base + "_gsum": _gsum_misfit,
    }
    if mtype is MetricType.SUMMARY:
        checks[base] = _quantile_misfit
    signs = _Signs()
    for sample in family.samples:
        check = checks.get(sample.name)
        misfit = check(sample, signs) if check is not None else None
        if misfit is not None:
            return misfit
    if signs.negative_bucket and signs.has_sum and mtype is MetricType.HISTOGRAM:
        return Misfit.SUM_VALUE
    if signs.negative_gsum and not signs.negative_bucket:
        return Misfit.SUM_VALUE
    return None


@dataclass(slots=True)
class _Signs:
    """What decides whether a family's sums fit beside its buckets, as its samples are read."""

    negative_bucket: bool = False
    has_sum: bool = False
    negative_gsum: bool = False


def _bucket_misfit(sample: Sample, signs: _Signs) -> Misfit | None:
    if not _whole(sample.value):
        return Misfit.COUNT_VALUE
    le = _bound(sample.labels, "le")
    if le is None:
        return None
    if le[0] == math.inf and le[1] != "+Inf":
        return Misfit.LE_LABEL
    signs.negative_bucket = signs.negative_bucket or le[0] < 0
    return None


def _count_misfit(sample: Sample, _signs: _Signs) -> Misfit | None:
    return None if _whole(sample.value) else Misfit.COUNT_VALUE


def _sum_misfit(sample: Sample, signs: _Signs) -> Misfit | None:
    signs.has_sum = True
    return None if sample.value >= 0 else Misfit.SUM_VALUE  # NaN fails too


def _gsum_misfit(sample: Sample, signs: _Signs) -> Misfit | None:
    # A gauge histogram's sum is a gauge: negative beside a negative bucket, never NaN.
    signs.negative_gsum = signs.negative_gsum or sample.value < 0
    return Misfit.SUM_VALUE if math.isnan(sample.value) else None


def _quantile_misfit(sample: Sample, _signs: _Signs) -> Misfit | None:
    if sample.value < 0:
        return Misfit.QUANTILE_VALUE
    quantile = _bound(sample.labels, "quantile")
    if quantile is not None and not 0 <= quantile[0] <= 1:  # NaN fails too
        return Misfit.QUANTILE_LABEL
    return None


def _timestamps_misfit(family: Family, base: str) -> bool:
    """Whether one metric point's run of samples mixes or reverses timestamps.

    A metric point is a series' labels less ``le`` in a bucket and ``quantile`` in a quantile;
    prometheus_client's OpenMetrics parser refuses samples with and without a timestamp in one
    run, and timestamps that go back. A ``_created`` sample without one is left out, as the
    reader takes it beside a timestamped total as Prometheus does (``docs/conformance.md``).
    """
    mtype = family.meta.type
    point_label = {f"{base}_bucket": "le"} if mtype in BUCKETED else {}
    if mtype is MetricType.SUMMARY:
        point_label[base] = "quantile"
    elif mtype is MetricType.STATESET:
        point_label[base] = family.meta.name
    created = f"{base}_created"
    point: object = None
    last: float | None = None
    for sample in family.samples:
        stamp = sample.timestamp
        if stamp is None and sample.name == created:
            continue  # a time itself, read without one beside a timestamped total (Prometheus)
        drop = point_label.get(sample.name)
        labels = sample.labels
        key = () if mtype is MetricType.INFO else tuple(kv for kv in labels if kv[0] != drop)
        if key == point:
            if (stamp is None) != (last is None):
                return True
            if (
                stamp is not None
                and last is not None
                and stamp < last
                and mtype is not MetricType.INFO
            ):
                return True
        point, last = key, stamp
    return False


_INF = (math.inf, "+Inf")


def _whole(value: float) -> bool:
    """A count OpenMetrics allows: a whole number, not negative (so neither NaN nor infinite)."""
    return value >= 0 and math.isfinite(value) and value.is_integer()


def _bound(labels: tuple[tuple[str, str], ...], name: str) -> tuple[float, str] | None:
    """The number an ``le`` or ``quantile`` label holds, with its text.

    None without one: the reader refused a family whose bound is missing or no number.
    """
    for key, text in labels:
        if key == name:
            if text == "+Inf":
                return _INF
            parsed = parse_value(text)
            return None if parsed is None else (parsed[0], text)
    return None
