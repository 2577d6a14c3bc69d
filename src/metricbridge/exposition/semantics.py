"""What each family type promises about its values, checked before a family is served.

The line grammar (``sample_line``) says whether a line can be read; this module says whether a
family of parsed lines means what its type says, as OpenMetrics 1.0 ("Metric Types") and
prometheus_client's OpenMetrics parser, which refuses a whole exposition over one breach,
require.

Prometheus' own parsers check none of these rules: it ingests a NaN counter or a fractional
bucket from the engine, in either format. So a breach the text format can carry (``Breach.
carried``: a value OpenMetrics forbids, a quantile outside [0, 1], a histogram point's shape
(``histogram_points``), in the text format a series mixing timestamps) does not cost the
family: ``first_breach`` passes over it, and the answer falls back to text
(``openmetrics_fit``), which carries it as it came.
What neither format can carry, or the text format's own readers refuse (``promtool check
metrics`` wants ``le`` and ``quantile`` to be numbers), is refused, and the family with it.

``first_breach`` is pure: a ``Family`` in, the first rule it breaks that costs it (or None). A
breach's ``reason`` is one of ``REASONS``, a short fixed word for the self-metric's label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence

from metricbridge.errors import ExpositionError
from metricbridge.exposition.breach import Breach
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.histogram_points import (
    BUCKETED,
    Group,
    bound_of,
    group_of,
    label_value,
    point_breaches,
)
from metricbridge.exposition.openmetrics_fit import values_misfit
from metricbridge.exposition.raw_rules import BlockSplit, needs_parse
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
    Sample,
    sample_base,
)
from metricbridge.model.names import quoted

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
    if len(samples) < 2 and mtype not in BUCKETED:
        return
    groups = [group_of(sample, base, mtype) for sample in samples]
    yield from _grouping(family, groups, fmt)
    if mtype in BUCKETED:
        yield from point_breaches(family, base, groups)


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
    quantile = label_value(sample.labels, "quantile")
    number = bound_of(quantile) if quantile is not None else None
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
