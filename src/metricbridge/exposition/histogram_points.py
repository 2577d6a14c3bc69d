"""The rules of a histogram's points: bucket order, cumulativity, +Inf, _count and _sum.

OpenMetrics 1.0 asks every point of a histogram (a series at one timestamp) for buckets in
increasing ``le`` order, cumulative, ending in ``le="+Inf"``, with a ``_count`` equal to that
bucket and ``_sum`` and ``_count`` together; prometheus_client's OpenMetrics parser refuses a
whole exposition over one breach. Prometheus' own parsers check none of them: each bucket is a
series of its own, ingested as it came, in either format. So every breach here is carried (the
family kept and answered in text, which carries it as it is) but an ``le`` that is no number,
which ``promtool check metrics`` refuses in text too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from metricbridge.exposition.breach import Breach
from metricbridge.model.family import Family, Labels, MetricType, Sample
from metricbridge.model.names import quoted
from metricbridge.model.numbers import parse_value

Group = frozenset[tuple[str, str]]
BUCKETED = (MetricType.HISTOGRAM, MetricType.GAUGEHISTOGRAM)


def group_of(sample: Sample, base: str, mtype: MetricType) -> Group:
    """The labels that name a sample's series in its family (prometheus_client's grouping).

    A set: the same labels in another order are the same series.
    """
    labels = sample.labels
    if mtype is MetricType.INFO:
        return frozenset()
    if mtype is MetricType.STATESET:
        drop = base
    elif mtype is MetricType.SUMMARY and sample.name == base:
        drop = "quantile"
    elif mtype in BUCKETED and sample.name == base + "_bucket":
        drop = "le"
    else:
        return frozenset(labels)
    value = dict(labels).get(drop)  # C calls only: this runs once per sample
    group = frozenset(labels)
    return group if value is None else group - {(drop, value)}


def label_value(labels: Labels, name: str) -> str | None:
    """The value of the label ``name``, or None without one."""
    return dict(labels).get(name)


def bound_of(text: str) -> float | None:
    """The number an ``le`` or ``quantile`` label holds, or None if it is no number."""
    # Go's ParseFloat, not Python's float: expfmt refuses " 0.5" and "1_0" as a bound.
    parsed = parse_value(text)
    return None if parsed is None else parsed[0]


@dataclass(slots=True)
class _Point:
    """One histogram point (a series at one timestamp) as its samples are read."""

    start: int
    last_le: float | None = None
    last_value: float = 0.0
    inf_value: float | None = None  # the +Inf bucket's, once read
    count: float | None = None
    has_sum: bool = False
    negative_buckets: bool = False
    negative_gsum: bool = False

    def take(self, suffix: str, value: float) -> None:
        """A sample of the point other than a bucket."""
        if suffix in ("_count", "_gcount"):
            self.count = value
        elif suffix in ("_sum", "_gsum"):
            self.has_sum = True
            self.negative_gsum = suffix == "_gsum" and value < 0


def point_breaches(family: Family, base: str, groups: list[Group]) -> Iterator[Breach]:
    """Every rule of its points that a histogram or gauge histogram breaks, point by point.

    ``groups``: each sample's ``group_of``. A refused breach (an ``le`` that is no number)
    ends the walk: the point's later checks would only repeat it.
    """
    point: _Point | None = None
    key: tuple[Group, float | None] | None = None
    start = len(base)
    # A family repeats a few bounds over all its series: each spelling is read once.
    bounds: dict[str, float | None] = {}
    for index, (sample, group) in enumerate(zip(family.samples, groups, strict=True)):
        suffix = sample.name[start:]
        if suffix == "_created":
            continue
        this = (group, sample.timestamp)
        if this != key:
            if point is not None:
                yield from _close_point(point, family)
            point, key = _Point(index), this
        assert point is not None  # noqa: S101 - set on the first sample
        if suffix == "_bucket":
            for breach in _bucket(point, sample, index, bounds):
                yield breach
                if not breach.carried:
                    return
        else:
            point.take(suffix, sample.value)
    if point is not None:
        yield from _close_point(point, family)


def _bucket(
    point: _Point, sample: Sample, index: int, bounds: dict[str, float | None]
) -> Iterator[Breach]:
    le = label_value(sample.labels, "le")
    bound = None
    if le is not None:
        bound = bounds[le] if le in bounds else bounds.setdefault(le, bound_of(le))
    if le is None or bound is None or math.isnan(bound):
        shown = "no le label" if le is None else f"le={quoted(le)}"
        yield Breach("le_label", index, f"{sample.name} has {shown}; le is a number, not NaN")
        return
    if bound == math.inf:
        point.inf_value = sample.value
        if le != "+Inf":  # Prometheus stores le as it is written
            message = f"{sample.name} has le={quoted(le)}; OpenMetrics spells it +Inf"
            yield Breach("le_label", index, message, carried=True)
    if point.last_le is not None and bound <= point.last_le:
        message = f"{sample.name}: le={quoted(le)} after a bucket as large"
        yield Breach("bucket_order", index, message, carried=True)
    # The first bucket has none before it: below zero, it breaks negative_value (carried).
    elif point.last_le is not None and sample.value < point.last_value:
        message = f"{sample.name}{{le={quoted(le)}}} is below the bucket before"
        yield Breach("not_cumulative", index, message, carried=True)
    point.last_le, point.last_value = bound, sample.value
    point.negative_buckets |= bound < 0


def _close_point(point: _Point, family: Family) -> Iterator[Breach]:
    index = point.start
    gauge = family.meta.type is MetricType.GAUGEHISTOGRAM
    count, total = ("_gcount", "_gsum") if gauge else ("_count", "_sum")
    if point.inf_value is None:
        message = 'a histogram point without its le="+Inf" bucket'
        yield Breach("missing_inf_bucket", index, message, carried=True)
    elif point.count is not None and _differ(point.count, point.inf_value):
        shown = f"{count} is {point.count!r}, the +Inf bucket {point.inf_value!r}"
        message = f"{shown}; they must agree"
        yield Breach("count_mismatch", index, message, carried=True)
    if point.has_sum != (point.count is not None):
        present, missing = (total, count) if point.has_sum else (count, total)
        message = f"a histogram point with {present} but no {missing}"
        yield Breach("sum_without_count", index, message, carried=True)
    if not gauge and point.has_sum and point.negative_buckets:
        message = "_sum beside buckets below zero (the sum is then no counter)"
        yield Breach("sum_with_negative_buckets", index, message, carried=True)
    elif gauge and point.negative_gsum and not point.negative_buckets:
        message = "_gsum below zero without a bucket below zero"
        yield Breach("sum_with_negative_buckets", index, message, carried=True)


def _differ(count: float, inf_bucket: float) -> bool:
    """Whether a point's count and +Inf bucket disagree.

    A NaN in either is a value breach of its own (carried), not a disagreement.
    """
    return count != inf_bucket and not (math.isnan(count) or math.isnan(inf_bucket))
