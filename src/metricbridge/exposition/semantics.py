"""What each family type promises about its values, checked before a family is served.

The line grammar (``sample_line``) says whether a line can be read; this module says whether a
family of parsed lines means what its type says, as OpenMetrics 1.0 ("Metric Types") and
prometheus_client's OpenMetrics parser, which refuses a whole exposition over one breach,
require.

Prometheus' own parsers check none of these rules: it ingests a NaN counter or a fractional
bucket from the engine, in either format. So a breach the text format can carry (``Breach.
carried``: a value OpenMetrics forbids, a quantile outside [0, 1], +Inf spelled otherwise, in
the text format a series mixing timestamps) does not cost the family: ``first_breach`` passes
over it, and the answer falls back to text (``openmetrics_fit``), which carries it as it came.
What neither format can carry, or the text format's own readers refuse (``promtool check
metrics`` wants ``le`` and ``quantile`` to be numbers), is refused, and the family with it.

``first_breach`` is pure: a ``Family`` in, the first rule it breaks that costs it (or None). A
breach's ``reason`` is one of ``REASONS``, a short fixed word for the self-metric's label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.openmetrics_fit import values_misfit
from metricbridge.exposition.raw_rules import BlockSplit, needs_parse
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    Labels,
    MetricType,
    RawFamily,
    Sample,
    sample_base,
)
from metricbridge.model.names import quoted
from metricbridge.model.numbers import parse_value

REASONS = frozenset(
    {
        "nan_value",  # a counter-like sample (total, sum, count, bucket, gsum, gcount) is NaN
        "negative_value",  # a counter-like sample or a quantile is negative
        "non_integer_count",  # a bucket, _count or _gcount that is not a whole number
        "le_label",  # a bucket without le, or le not a number, NaN, or +Inf spelled otherwise
        "bucket_order",  # buckets not in increasing le order, or an le repeated
        "not_cumulative",  # a bucket smaller than the one before
        "missing_inf_bucket",  # a histogram point without its le="+Inf" bucket
        "count_mismatch",  # _count (_gcount) different from the +Inf bucket
        "sum_without_count",  # _sum without _count, or _count without _sum (g-forms alike)
        "sum_with_negative_buckets",  # _sum beside negative le, or negative _gsum without them
        "quantile_label",  # a quantile sample without quantile, or outside [0, 1], or NaN
        "info_value",  # an info sample other than 1
        "stateset_value",  # a stateset sample other than 0 or 1
        "stateset_label",  # a stateset sample without the label named after its family
        "unit",  # a UNIT on info or stateset, or one that is not the name's suffix
        "exemplar",  # an exemplar on a sample that may not carry one
        "interleaved_series",  # a series' samples split by another series' (OpenMetrics)
        "timestamps",  # a series mixing samples with and without timestamps, or going back
    }
)

# Per type, the sample suffixes that are counters underneath (OpenMetrics: "Semantically, Sum,
# and buckets values are counters so MUST NOT be NaN or negative"), each with whether it may
# be negative and whether it must be a whole number. A gauge histogram's _gsum is a gauge that
# is only not NaN; a summary's quantiles are checked on their own (``_quantile_breach``).
_COUNTER_LIKE: dict[MetricType, dict[str, tuple[bool, bool]]] = {
    MetricType.COUNTER: {"_total": (False, False)},
    MetricType.HISTOGRAM: {
        "_bucket": (False, True),
        "_count": (False, True),
        "_sum": (False, False),
    },
    MetricType.GAUGEHISTOGRAM: {
        "_bucket": (False, True),
        "_gcount": (False, True),
        "_gsum": (True, False),
    },
    MetricType.SUMMARY: {"_count": (False, True), "_sum": (False, False)},
}


@dataclass(frozen=True, slots=True)
class Breach:
    """A rule a family breaks: which, where (the sample's index) and how, in words.

    ``carried``: the text format carries the family as it is and Prometheus ingests it, so the
    family is kept and answered in text; OpenMetrics cannot carry it (``openmetrics_fit``).
    """

    reason: str
    index: int | None  # the sample's, or None for the family's header
    message: str
    carried: bool = False


def first_breach(family: Family, fmt: Format) -> Breach | None:
    """The first rule ``family`` breaks that costs it, or None; ``fmt``: the format it came in."""
    for breach in breaches(family, fmt):
        if not breach.carried:
            return breach
    return None


def breaches(family: Family, fmt: Format) -> Iterator[Breach]:
    """Every rule ``family`` breaks, carried or not, in sample order (but a histogram's points)."""
    meta = family.meta
    base = sample_base(meta.name, meta.type)
    if fmt is Format.OPENMETRICS and meta.unit:
        if meta.type in (MetricType.INFO, MetricType.STATESET):
            yield Breach("unit", None, f"{meta.type} families may not have a unit")
        elif not base.endswith("_" + meta.unit):
            yield Breach("unit", None, f"unit {quoted(meta.unit)} is not the suffix of {base!r}")
    mtype, samples, start = meta.type, family.samples, len(base)
    plain = mtype in (MetricType.GAUGE, MetricType.UNKNOWN)  # only an exemplar can be wrong
    for index, sample in enumerate(samples):
        if plain and sample.exemplar is None:
            continue
        for reason, message, carried in _sample_breaches(sample, sample.name[start:], mtype, base):
            yield Breach(reason, index, message, carried)
    if len(samples) < 2 and mtype not in _BUCKETED:
        return
    groups = [group_of(sample, base, mtype) for sample in samples]
    yield from _grouping(family, groups, fmt)
    if mtype in _BUCKETED:
        yield from _histogram_points(family, base, groups)


# (reason, message, carried) of a rule one sample breaks on its own.
_SampleBreach = tuple[str, str, bool]


def _sample_breaches(
    sample: Sample, suffix: str, mtype: MetricType, base: str
) -> Iterator[_SampleBreach]:
    """The rules one sample breaks on its own, each as (reason, message, carried).

    All of them: a value the text format carries must not hide a breach that is refused (an
    exemplar on a NaN ``_sum``).
    """
    if mtype is MetricType.COUNTER and suffix == "":
        suffix = "_total"  # a text-format counter not named *_total: its samples are totals
    rule = _COUNTER_LIKE.get(mtype, {}).get(suffix)
    breach = _counter_like_breach(sample, suffix, mtype, rule) if rule is not None else None
    if breach is not None:
        yield breach
    if sample.exemplar is not None and not _may_carry_exemplar(mtype, suffix):
        what = suffix or "value"
        yield "exemplar", f"{sample.name} may not carry an exemplar (a {mtype}'s {what})", False
    if mtype is MetricType.SUMMARY and suffix == "":
        breach = _quantile_breach(sample)
        if breach is not None:
            yield breach
    if mtype in (MetricType.INFO, MetricType.STATESET):
        yield from _state_breaches(sample, mtype, base)


def _state_breaches(sample: Sample, mtype: MetricType, base: str) -> Iterator[_SampleBreach]:
    """The rules of an info's or a stateset's sample, which only OpenMetrics has."""
    value, shown = sample.value, sample.raw_value
    if mtype is MetricType.INFO:
        if value != 1:
            yield "info_value", f"{sample.name} is {shown}; an info sample is always 1", False
        return
    if value not in (0, 1):
        yield "stateset_value", f"{sample.name} is {shown}; a state is 0 or 1", False
    if not any(key == base for key, _ in sample.labels):
        yield "stateset_label", f"{sample.name} has no {base!r} label naming its state", False


def _counter_like_breach(
    sample: Sample, suffix: str, mtype: MetricType, rule: tuple[bool, bool]
) -> _SampleBreach | None:
    """A value OpenMetrics forbids in a counter-like sample: the text format carries it."""
    may_be_negative, whole = rule
    value = sample.value
    if math.isnan(value):
        return "nan_value", f"{sample.name} is NaN; a {mtype}'s {suffix} cannot be NaN", True
    if value < 0 and not may_be_negative:
        return "negative_value", f"{sample.name} is {sample.raw_value}; it cannot be negative", True
    if whole and not value.is_integer():
        message = f"{sample.name} is {sample.raw_value}, not a whole number"
        return "non_integer_count", message, True
    return None


def _may_carry_exemplar(mtype: MetricType, suffix: str) -> bool:
    """OpenMetrics: a counter's total and a histogram's buckets; nothing else."""
    if mtype is MetricType.COUNTER:
        return suffix == "_total"
    return mtype in (MetricType.HISTOGRAM, MetricType.GAUGEHISTOGRAM) and suffix == "_bucket"


def _quantile_breach(sample: Sample) -> _SampleBreach | None:
    quantile = _label(sample.labels, "quantile")
    number = _number(quantile) if quantile is not None else None
    if (
        quantile is None or number is None
    ):  # promtool check metrics refuses it: the text format cannot carry it
        shown = "no quantile label" if quantile is None else f"quantile={quoted(quantile)}"
        return "quantile_label", f"{sample.name} has {shown}; a quantile is a number", False
    if math.isnan(number) or not 0 <= number <= 1:  # Prometheus stores it as written
        message = f"{sample.name} has quantile={quoted(quantile)}; a quantile is in [0, 1]"
        return "quantile_label", message, True
    if sample.value < 0:
        shown = quoted(str(quantile))
        message = f"{sample.name}{{quantile={shown}}} is {sample.raw_value}; it cannot be negative"
        return "negative_value", message, True
    return None


def _label(labels: Labels, name: str) -> str | None:
    return dict(labels).get(name)


def _number(text: str) -> float | None:
    # Go's ParseFloat, not Python's float: expfmt refuses " 0.5" and "1_0" as a bound.
    parsed = parse_value(text)
    return None if parsed is None else parsed[0]


Group = frozenset[tuple[str, str]]


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
    elif mtype in _BUCKETED and sample.name == base + "_bucket":
        drop = "le"
    else:
        return frozenset(labels)
    value = dict(labels).get(drop)  # C calls only: this runs once per sample
    group = frozenset(labels)
    return group if value is None else group - {(drop, value)}


_BUCKETED = (MetricType.HISTOGRAM, MetricType.GAUGEHISTOGRAM)


def _grouping(family: Family, groups: list[Group], fmt: Format) -> Iterator[Breach]:
    """Each series' samples together, timestamps on all or none of them, never going back."""
    mtype = family.meta.type
    # A _created sample's value is itself a timestamp, and Prometheus reads it without one
    # beside a timestamped _total (openmetricsparse_test.go's `foo_total 17.0 1520879607.789`
    # then `foo_created 1520872607.123`): it is left out of the timestamp rules.
    created = sample_base(family.meta.name, mtype) + "_created"
    # Prometheus' text parser takes each sample as it comes, stamped or not, and the text
    # format carries them so: only an OpenMetrics reader refuses it.
    text = fmt is Format.TEXT
    seen: set[Group] = set()
    group: Group | None = None
    stamp: float | None = None
    for index, (sample, key) in enumerate(zip(family.samples, groups, strict=True)):
        if sample.name == created and key == group:
            continue
        if key != group:
            if key in seen and fmt is Format.OPENMETRICS:
                message = f"{sample.name}: its series' samples are split by another series'"
                yield Breach("interleaved_series", index, message)
            seen.add(key)
        elif (sample.timestamp is None) != (stamp is None):
            message = f"{sample.name}: samples of one series with and without timestamps"
            yield Breach("timestamps", index, message, text)
        elif _goes_back(stamp, sample.timestamp) and mtype is not MetricType.INFO:
            message = f"{sample.name}: timestamps of one series go back"
            yield Breach("timestamps", index, message, text)
        group, stamp = key, sample.timestamp


def _goes_back(before: float | None, now: float | None) -> bool:
    return before is not None and now is not None and now < before


def grouped_order(samples: Sequence[Sample], base: str, mtype: MetricType) -> list[int]:
    """Sample indexes with each series' together, in order of first appearance, order kept within.

    For the text format, which does not ask for grouping: OpenMetrics does, and the same
    samples in that order mean the same to every reader.
    """
    order: dict[Group, list[int]] = {}
    for index, sample in enumerate(samples):
        order.setdefault(group_of(sample, base, mtype), []).append(index)
    return [index for group in order.values() for index in group]


@dataclass(slots=True)
class _Point:
    """One histogram point (a series at one timestamp) as its samples are read."""

    start: int
    last_le: float | None = None
    last_value: float = 0.0
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


def _histogram_points(family: Family, base: str, groups: list[Group]) -> Iterator[Breach]:
    """Bucket order, cumulativity, +Inf, and _count/_sum agreement, point by point."""
    point: _Point | None = None
    key: tuple[Group, float | None] | None = None
    start = len(base)
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
            for breach in _bucket(point, sample, index):
                yield breach
                if not breach.carried:
                    return  # the point's later checks would only repeat it
        else:
            point.take(suffix, sample.value)
    if point is not None:
        yield from _close_point(point, family)


def _bucket(point: _Point, sample: Sample, index: int) -> Iterator[Breach]:
    le = _label(sample.labels, "le")
    bound = _number(le) if le is not None else None
    if le is None or bound is None or math.isnan(bound):
        shown = "no le label" if le is None else f"le={quoted(le)}"
        yield Breach("le_label", index, f"{sample.name} has {shown}; le is a number, not NaN")
        return
    if bound == math.inf and le != "+Inf":  # Prometheus stores le as it is written
        message = f"{sample.name} has le={quoted(le)}; OpenMetrics spells it +Inf"
        yield Breach("le_label", index, message, carried=True)
    if point.last_le is not None and bound <= point.last_le:
        message = f"{sample.name}: le={quoted(le)} after a bucket as large"
        yield Breach("bucket_order", index, message)
        return
    # The first bucket has none before it: below zero, it breaks negative_value (carried).
    if point.last_le is not None and sample.value < point.last_value:
        message = f"{sample.name}{{le={quoted(le)}}} is below the bucket before"
        yield Breach("not_cumulative", index, message)
        return
    point.last_le, point.last_value = bound, sample.value
    point.negative_buckets |= bound < 0


def _close_point(point: _Point, family: Family) -> Iterator[Breach]:
    index = point.start
    gauge = family.meta.type is MetricType.GAUGEHISTOGRAM
    count, total = ("_gcount", "_gsum") if gauge else ("_count", "_sum")
    if point.last_le != math.inf:
        yield Breach("missing_inf_bucket", index, 'a histogram point without its le="+Inf" bucket')
    elif point.count is not None and _differ(point.count, point.last_value):
        message = (
            f"{count} is {point.count!r}, the +Inf bucket {point.last_value!r}; they must agree"
        )
        yield Breach("count_mismatch", index, message)
    elif point.has_sum != (point.count is not None):
        present, missing = (total, count) if point.has_sum else (count, total)
        yield Breach(
            "sum_without_count", index, f"a histogram point with {present} but no {missing}"
        )
    elif not gauge and point.has_sum and point.negative_buckets:
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


# --- where the rules are applied -------------------------------------------------------------


def checked(
    meta: FamilyMeta, samples: Sequence[Sample], lines: Sequence[int], fmt: Format, declared: str
) -> tuple[Family | None, ExpositionError | None]:
    """A parsed family as it is served (each series' samples together), or its problem.

    ``lines`` are the samples' line numbers, for the problem's location. Series are regrouped
    in both formats: OpenMetrics asks for them grouped, but Prometheus' parser reads them
    interleaved (openmetricsparse_test.go's summary, whose `_count` comes after the series
    with `a="b"`), so the bridge serves them together rather than dropping the family.
    """
    order = grouped_order(samples, sample_base(meta.name, meta.type), meta.type)
    samples = [samples[i] for i in order]
    lines = [lines[i] for i in order]
    family = Family(meta, tuple(samples))
    breach = first_breach(family, fmt)
    if breach is None:
        return family, None
    line = lines[breach.index] if breach.index is not None else None
    return None, ExpositionError(breach.message, line=line, family=declared, reason=breach.reason)


# A value right after a label set that starts like a negative, NaN or infinite number: the only
# bytes the fast path lets through that a counter, histogram or summary may not have.
_SUSPECT_VALUE = re.compile(rb"\} [-+NnIi]")
SCANNED_TYPES = frozenset({MetricType.COUNTER, MetricType.HISTOGRAM, MetricType.SUMMARY})


def screen_raw(
    families: list[AnyFamily],
    fmt: Format,
    *,
    caches: CodecCaches | None = None,
    splits: Mapping[int, BlockSplit] | None = None,
    signed: bool = True,
) -> tuple[list[AnyFamily], list[ExpositionError]]:
    """The fast path's unparsed families held to the rules, without parsing most of them.

    A raw body is labelled lines that each end ``} VALUE`` (the reader's invariant 4), so one
    regex search finds any value that is negative, NaN or infinite; a raw histogram or summary
    is also held to its rules across samples (``raw_rules``). Only a family either may break is
    parsed and held to every rule, as the exact path holds it (a text family's series
    regrouped); a header-only rule (UNIT) is checked on every family. ``splits``: the bodies
    the reader split already, by ``id()`` of their family. ``signed`` False: the reader saw
    every raw value of these types and none may be negative, NaN or infinite, so no body is
    searched for one.
    """
    kept: list[AnyFamily] = []
    problems: list[ExpositionError] = []
    splits = splits or {}
    for family in families:
        if isinstance(family, RawFamily):
            split = splits.get(id(family))
            if split is not None and split.family is not family:
                split = None
            served, problem = _screened(family, fmt, caches, split, signed=signed)
        else:
            served, problem = family, None
        if served is not None:
            kept.append(served)
        if problem is not None:
            problems.append(problem)
    return kept, problems


def _screened(
    family: RawFamily,
    fmt: Format,
    caches: CodecCaches | None,
    split: BlockSplit | None,
    *,
    signed: bool,
) -> tuple[AnyFamily | None, ExpositionError | None]:
    meta = family.meta
    # Named as its TYPE line names it, as the reader names the families it drops.
    declared = sample_base(meta.name, meta.type) if fmt is Format.OPENMETRICS else meta.name
    suspect = (
        signed and meta.type in SCANNED_TYPES and _SUSPECT_VALUE.search(family.body) is not None
    )
    if suspect or needs_parse(family, fmt, caches, split):
        parsed = parse_family(family, caches=caches)
        lines = range(family.first_line, family.first_line + len(parsed.samples))
        served, problem = checked(meta, parsed.samples, lines, fmt, declared)
        if (
            served is not None
            and served.samples == parsed.samples
            and values_misfit(served) is None
        ):
            return family, None  # the bytes as they came are what a parse would write
        # Else served parsed: regrouped, or with values that only the text format carries,
        # which openmetrics_misfit looks for in parsed families alone.
        return served, problem
    if not (meta.unit and fmt is Format.OPENMETRICS):
        return family, None
    breach = first_breach(Family(meta, ()), fmt)
    if breach is None:
        return family, None
    return None, ExpositionError(breach.message, family=declared, reason=breach.reason)
