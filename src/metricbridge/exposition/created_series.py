"""Text-format ``_created`` gauge families, folded back into the family they belong to."""

from __future__ import annotations

from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.semantics import first_breach
from metricbridge.model.family import (
    AnyFamily,
    Family,
    Format,
    MetricType,
    Sample,
    sample_base,
    series_key,
)


def _interleave_created(
    samples: tuple[Sample, ...], created: tuple[Sample, ...], *, keep_orphans: bool
) -> tuple[tuple[Sample, ...], int]:
    """Each series' ``_created`` sample right after that series' samples, as OpenMetrics wants.

    Returns the samples and how many creation times had no series to go with. A counter keeps
    them at the end (OpenMetrics allows a counter series with no ``_total`` yet); a histogram or
    summary leaves them out, reported: there it would be a series without its +Inf bucket or
    count, which parsers refuse.
    """
    by_series = {series_key(sample.labels): sample for sample in created}
    out: list[Sample] = []
    for index, sample in enumerate(samples):
        out.append(sample)
        key = series_key(sample.labels)
        last_of_series = index + 1 == len(samples) or series_key(samples[index + 1].labels) != key
        if last_of_series and key in by_series:
            out.append(by_series.pop(key))
    if keep_orphans:
        out.extend(by_series.values())
        return tuple(out), 0
    return tuple(out), len(by_series)


def merge_created_families(
    families: list[AnyFamily], *, caches: CodecCaches | None = None
) -> tuple[list[AnyFamily], list[ExpositionError]]:
    """Fold text-format ``X_created`` gauge families into their counter/histogram/summary X.

    prometheus_client writes a counter's creation time as a gauge family of its own in the text
    format; as a separate family it would clash with the counter in OpenMetrics output and be
    left behind when the counter is renamed.
    """
    problems: list[ExpositionError] = []
    if not any(family.name.endswith("_created") for family in families):
        return families, problems
    owners = {
        sample_base(f.name, f.meta.type): i
        for i, f in enumerate(families)
        if f.meta.type in (MetricType.COUNTER, MetricType.HISTOGRAM, MetricType.SUMMARY)
    }
    merged: set[int] = set()
    dropped: set[int] = set()
    for index, family in enumerate(families):
        owner = owners.get(family.name.removesuffix("_created"))
        is_created = family.name.endswith("_created") and family.meta.type is MetricType.GAUGE
        if owner is None or not is_created:
            continue
        try:
            parent = parse_family(families[owner], caches=caches)
            created = parse_family(family, caches=caches)
        except ExpositionError as exc:
            problems.append(exc)
            continue
        counter = parent.meta.type is MetricType.COUNTER
        samples, orphans = _interleave_created(
            parent.samples, created.samples, keep_orphans=counter
        )
        if orphans:
            message = f"{orphans} creation time(s) of no series of {parent.name}; left out"
            problems.append(ExpositionError(message, family=family.name))
        merged.add(index)
        # The parent may have been raw: parsed now, it is held to its type's rules here.
        merged_family = Family(parent.meta, samples)
        breach = first_breach(merged_family, Format.TEXT)
        if breach is None:
            families[owner] = merged_family
        else:
            problems.append(
                ExpositionError(breach.message, family=parent.name, reason=breach.reason)
            )
            dropped.add(owner)
    gone = merged | dropped
    return [f for i, f in enumerate(families) if i not in gone], problems


def created_orphans(mtype: MetricType, samples: tuple[Sample, ...]) -> tuple[Sample, ...]:
    """A histogram's or summary's ``_created`` samples that belong to none of its series.

    In OpenMetrics such a sample is a series without its +Inf bucket or count, which parsers
    refuse; the text reader leaves the same ones out when it folds a ``_created`` gauge family
    in (``merge_created_families``), so both formats read one payload alike.
    """
    if mtype not in (MetricType.HISTOGRAM, MetricType.SUMMARY):
        return ()
    created = [s for s in samples if s.name.endswith("_created")]
    if not created:
        return ()
    series = {series_key(s.labels) for s in samples if not s.name.endswith("_created")}
    return tuple(s for s in created if series_key(s.labels) not in series)
