"""Whether OpenMetrics can carry a set of families as faithfully as the text format does.

Validity is a property of the output format. The text format 0.0.4 carries, and Prometheus
ingests from it, families that OpenMetrics 1.0 forbids: a counter whose name does not end in
``_total`` (OpenMetrics would have to write it as ``unknown``), a counter ``a_total`` beside a
gauge ``a`` (client_golang's ``go_memstats_alloc_bytes``: one name in OpenMetrics), non-integer
bucket counts, negative or NaN counter-like values, negative quantiles and sums. A response that
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
from enum import StrEnum

from metricbridge.model.family import TYPE_SUFFIXES, AnyFamily, Family, MetricType, sample_base


class Misfit(StrEnum):
    """Why OpenMetrics cannot carry a family: the ``reason`` label of the fallback counter."""

    COUNTER_NAME = "counter_name"  # a counter not named ..._total: OpenMetrics would lose its type
    NAME_CLASH = "name_clash"  # two families sharing a name in OpenMetrics, not in text
    COUNTER_VALUE = "counter_value"  # a counter's _total negative or NaN
    COUNT_VALUE = "count_value"  # a bucket or _count not a whole number, negative or NaN
    SUM_VALUE = "sum_value"  # a _sum negative or NaN, or beside a negative bucket
    QUANTILE_VALUE = "quantile_value"  # a summary quantile's value negative
    TIMESTAMPS = "timestamps"  # one metric point's samples mixing or reversing timestamps


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


def values_misfit(family: Family) -> Misfit | None:
    """Why OpenMetrics forbids one of ``family``'s values, or None.

    prometheus_client's OpenMetrics parser's rules: counter-like samples (``_total``,
    ``_bucket``, ``_count``, ``_gcount``, ``_sum``) neither NaN nor negative, bucket and count
    values whole numbers, quantile values not negative, no ``_sum`` in a histogram with a
    negative bucket.
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
        return _distribution_misfit(family, base)
    return None


def _distribution_misfit(family: Family, base: str) -> Misfit | None:
    """``values_misfit`` for a histogram, gauge histogram or summary."""
    mtype = family.meta.type
    bucket, counts, sums = base + "_bucket", {base + "_count", base + "_gcount"}, base + "_sum"
    negative_bucket = has_sum = False
    for sample in family.samples:
        name, value = sample.name, sample.value
        if name == bucket or name in counts:
            if not _whole(value):
                return Misfit.COUNT_VALUE
            negative_bucket = negative_bucket or (name == bucket and _negative_le(sample.labels))
        elif name == sums:
            has_sum = True
            if not value >= 0:
                return Misfit.SUM_VALUE
        elif mtype is MetricType.SUMMARY and name == base and value < 0:
            return Misfit.QUANTILE_VALUE
    if negative_bucket and has_sum and mtype is MetricType.HISTOGRAM:
        return Misfit.SUM_VALUE
    return None


def _timestamps_misfit(family: Family, base: str) -> bool:
    """Whether one metric point's run of samples mixes or reverses timestamps.

    A metric point is a series' labels less ``le`` in a bucket and ``quantile`` in a quantile;
    prometheus_client's OpenMetrics parser refuses samples with and without a timestamp in one
    run, and timestamps that go back. A ``_created`` sample without one is left out, as the
    reader takes it beside a timestamped total as Prometheus does (``docs/conformance.md``).
    """
    mtype = family.meta.type
    point_label = {f"{base}_bucket": "le"} if mtype in _BUCKETED else {}
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


_BUCKETED = (MetricType.HISTOGRAM, MetricType.GAUGEHISTOGRAM)


def _whole(value: float) -> bool:
    """A count OpenMetrics allows: a whole number, not negative (so neither NaN nor infinite)."""
    return value >= 0 and math.isfinite(value) and value.is_integer()


def _negative_le(labels: tuple[tuple[str, str], ...]) -> bool:
    for key, value in labels:
        if key == "le":
            try:
                return float(value) < 0
            except ValueError:
                return False
    return False
