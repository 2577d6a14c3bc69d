"""The collectors behind the self-metrics that prometheus_client's own classes cannot be.

Per-scrape counters written by hand, cache figures settled once per fetch, and the writer of
collected families in the bridge's own wire code. ``settled_metrics`` holds the metrics that
count their changes and the registry of them; ``SelfMetrics`` assembles both.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, RestrictedRegistry
from prometheus_client.samples import Sample

from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.writer import label_set, write_header
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import FamilyMeta, Format, MetricType
from metricbridge.model.family_names import TEXT_TYPES
from metricbridge.model.numbers import format_value

# What a family's text was written from: its help, type, unit and samples.
Written = tuple[str, str, str, list[Sample]]


class ScrapeCounter(Collector):
    """A counter with one label, bumped by every scrape and written out by hand.

    Byte for byte what prometheus_client writes for a ``Counter`` with created series disabled
    (a test checks it); it is also a collector, so ``name[]`` filtering and
    ``get_sample_value`` work through the registry.
    """

    def __init__(self, name: str, documentation: str, label: str) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        meta = FamilyMeta(name, MetricType.COUNTER, documentation)
        self._headers = {fmt: write_header(meta, fmt).decode() for fmt in Format}
        self._counts: dict[str, float] = {}
        self._prefixes: dict[str, str] = {}  # label value -> 'name{label="value"} '

    def inc(self, value: str) -> None:
        """Count one scrape under ``label=value``."""
        if value not in self._counts:
            self._prefixes[value] = f"{self.name}{label_set(((self.label, value),))} "
            self._counts[value] = 0.0
        self._counts[value] += 1.0

    def render(self, fmt: Format) -> str:
        """The family in ``fmt``: HELP, TYPE and one line per label value seen."""
        lines = [self._headers[fmt]]
        for value, count in self._counts.items():
            lines.append(f"{self._prefixes[value]}{format_value(count)}\n")
        return "".join(lines)

    def _family(self, *, samples: bool) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, count in self._counts.items() if samples else ():
            family.add_metric([value], count)
        return family

    def collect(self) -> Iterator[CounterMetricFamily]:
        """The family with its samples, for prometheus_client."""
        yield self._family(samples=True)

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The family's name and type, so a restricted registry knows which names it serves."""
        yield self._family(samples=False)


class _HistogramSeries:
    """One series of a ``TextHistogram``: its bucket counts, sum, and line prefixes per format."""

    __slots__ = ("counts", "prefixes", "total", "values")

    def __init__(self, values: tuple[str, ...], buckets: int) -> None:
        self.values = values
        self.counts = [0] * buckets
        self.total = 0.0
        self.prefixes: dict[Format, tuple[list[str], str, str]] = {}

    def observe(self, bounds: tuple[float, ...], value: float) -> None:
        """Count ``value`` in the first bucket whose bound is at least it, as prometheus_client.

        NaN is at most no bound: prometheus_client counts it in no bucket, and adds it to the sum.
        """
        if value == value:  # noqa: PLR0124 - False for NaN alone
            self.counts[bisect_left(bounds, value)] += 1
        self.total += value


class _Child:
    """What ``TextHistogram.labels`` returns: the series' ``observe``."""

    __slots__ = ("_bounds", "_series")

    def __init__(self, series: _HistogramSeries, bounds: tuple[float, ...]) -> None:
        self._series, self._bounds = series, bounds

    def observe(self, value: float) -> None:
        """Count one observation."""
        self._series.observe(self._bounds, value)


class TextHistogram(Collector):
    """A histogram written by hand, as prometheus_client's ``Histogram`` writes (less _created).

    The fetch durations move on every fetch, so they are written for every response that
    follows one: prometheus_client's collection and the writing of its samples took 60 us per
    histogram, where the lines' prefixes, made once per series, leave the counts to format.
    A test holds ``render_text`` to what ``generate_families`` writes from ``collect``.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        buckets: Iterable[float],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        bounds = tuple(float(bound) for bound in buckets)
        self.bounds = bounds if bounds[-1] == math.inf else (*bounds, math.inf)
        self._les = tuple(format_value(bound) for bound in self.bounds)  # floatToGoString's
        self._series: dict[tuple[str, ...], _HistogramSeries] = {}
        if not self.labelnames:
            self._series[()] = _HistogramSeries((), len(self.bounds))
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> _Child:
        """The series of these label values (made, empty, on first use)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values, not {len(values)}")
        key = tuple(str(value) for value in values)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _HistogramSeries(key, len(self.bounds))
        return _Child(series, self.bounds)

    def observe(self, value: float) -> None:
        """Count one observation (a histogram without labels)."""
        if self.labelnames:
            raise ValueError(f"{self.name}: observe through labels()")
        self._series[()].observe(self.bounds, value)

    def _family(self, *, samples: bool) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for series in self._series.values() if samples else ():
            cumulative = list(accumulate(series.counts))
            buckets = [(le, float(count)) for le, count in zip(self._les, cumulative, strict=True)]
            family.add_metric(list(series.values), buckets, series.total)
        return family

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The family with its samples, for prometheus_client (name[], tests)."""
        yield self._family(samples=True)

    def describe(self) -> Iterator[HistogramMetricFamily]:
        """The family's name and type, so a restricted registry knows which names it serves."""
        yield self._family(samples=False)

    def render_text(self, fmt: Format, caches: CodecCaches) -> str:
        """The family in ``fmt``, as ``generate_families`` writes what ``collect`` yields."""
        meta = FamilyMeta(self.name, MetricType.HISTOGRAM, self.documentation)
        chunks = [write_header(meta, fmt, caches=caches).decode()]
        for series in self._series.values():
            buckets, count, total = series.prefixes.get(fmt) or self._prefixes(series, fmt, caches)
            for prefix, cumulative in zip(buckets, accumulate(series.counts), strict=True):
                chunks.append(f"{prefix}{format_value(float(cumulative))}\n")
            chunks.append(f"{count}{format_value(float(sum(series.counts)))}\n")
            chunks.append(f"{total}{format_value(series.total)}\n")
        return "".join(chunks)

    def _prefixes(
        self, series: _HistogramSeries, fmt: Format, caches: CodecCaches
    ) -> tuple[list[str], str, str]:
        pairs = tuple(zip(self.labelnames, series.values, strict=True))

        def prefix(suffix: str, labels: tuple[tuple[str, str], ...]) -> str:
            text = label_set(tuple(sorted(labels)), caches=caches) if labels else ""
            return f"{self.name}{suffix}{text} "

        made = (
            [prefix("_bucket", (*pairs, ("le", le))) for le in self._les],
            prefix("_count", pairs),
            prefix("_sum", pairs),
        )
        series.prefixes[fmt] = made
        return made


# The cache families: (type, name, help, the cache figure each sample is).
_CACHE_FAMILIES = (
    (MetricType.GAUGE, "metricbridge_cache_entries", "Entries the cache holds.", "entries"),
    (
        MetricType.GAUGE,
        "metricbridge_cache_bytes",
        "Bytes the cache holds (estimated: lengths of keys and values, plus a per-entry overhead).",
        "bytes",
    ),
    (
        MetricType.GAUGE,
        "metricbridge_cache_budget_bytes",
        "The most bytes the cache holds; least recently used entries leave first.",
        "budget",
    ),
    (MetricType.COUNTER, "metricbridge_cache_hits", "Lookups that found their entry.", "hits"),
    (MetricType.COUNTER, "metricbridge_cache_misses", "Lookups that did not.", "misses"),
    (
        MetricType.COUNTER,
        "metricbridge_cache_evictions",
        "Entries dropped to make room for newer ones.",
        "evictions",
    ),
)


class CacheMetrics(Collector):
    """Each of the bridge's caches: what it holds, its budget, and how it has been used.

    A settled family like the others: it serves the figures ``settle`` took at the latest
    ``SelfMetrics.changed()`` (the end of the latest fetch; the engine part's writing counts
    with the next one), never live ones, so the plain and the gzip render of one generation
    agree byte for byte. Nothing until ``SelfMetrics.track_caches``.
    """

    _FIGURES = ("entries", "bytes", "budget", "hits", "misses", "evictions")

    def __init__(self) -> None:
        self.caches: tuple[ByteLRU[Any, Any], ...] = ()
        self._figures: tuple[tuple[str, dict[str, float]], ...] = ()
        self._texts: dict[Format, str] = {}
        # Each family's samples, (cache, value) by cache, and text as last written, per format.
        self._written: dict[tuple[Format, str], tuple[tuple[tuple[str, float], ...], str]] = {}

    def settle(self) -> None:
        """Take the caches' figures as of now: what collect serves until the next call."""
        self._figures = tuple(
            (cache.name, {name: float(getattr(cache, name)) for name in self._FIGURES})
            for cache in self.caches
        )
        self._texts = {}

    def render_text(self, fmt: Format, caches: CodecCaches) -> str:
        """The families as ``generate_families`` writes them from ``collect``, written straight.

        They change on every fetch (a cache's hits), so they are written on every fetch: from
        the figures, without the Metric objects and the samples' label dicts (a test holds the
        two renders equal). A family whose samples stand still (budgets, often entries and
        bytes) keeps its text.
        """
        text = self._texts.get(fmt)
        if text is None:
            chunks: list[str] = []
            for mtype, name, documentation, figure in _CACHE_FAMILIES if self._figures else ():
                samples = tuple((cache, values[figure]) for cache, values in self._figures)
                last = self._written.get((fmt, name))
                if last is None or last[0] != samples:
                    written = _write_cache_family(mtype, name, documentation, samples, fmt, caches)
                    last = self._written[(fmt, name)] = (samples, written)
                chunks.append(last[1])
            text = self._texts[fmt] = "".join(chunks)
        return text

    def _families(self, *, samples: bool) -> Iterator[Metric]:
        figures = self._figures if samples else ()
        for mtype, name, documentation, figure in _CACHE_FAMILIES:
            kind = GaugeMetricFamily if mtype is MetricType.GAUGE else CounterMetricFamily
            family = kind(name, documentation, labels=["cache"])
            for cache, values in figures:
                family.add_metric([cache], values[figure])
            yield family

    def collect(self) -> Iterator[Metric]:
        """Every cache's figures as last settled; no families while there are no caches."""
        if self._figures:
            yield from self._families(samples=True)

    def describe(self) -> Iterator[Metric]:
        """The families' names and types, so a restricted registry knows which names it serves."""
        yield from self._families(samples=False)


def _write_cache_family(  # noqa: PLR0913, PLR0917 - a family's parts, written out
    mtype: MetricType,
    name: str,
    documentation: str,
    samples: tuple[tuple[str, float], ...],
    fmt: Format,
    caches: CodecCaches,
) -> str:
    # The model names a counter by its _total sample, as generate_families does.
    named = name + "_total" if mtype is MetricType.COUNTER else name
    chunks = [write_header(FamilyMeta(named, mtype, documentation), fmt, caches=caches).decode()]
    for cache, value in samples:
        labels = label_set((("cache", cache),), caches=caches)
        chunks.append(f"{named}{labels} {format_value(value)}\n")
    return "".join(chunks)


def generate_families(
    registry: CollectorRegistry | RestrictedRegistry,
    fmt: Format,
    caches: CodecCaches,
    written: dict[tuple[Format, str], tuple[Written, str]] | None = None,
) -> bytes:
    """The registry in ``fmt``, without ``# EOF``, in the bridge's own wire code.

    prometheus_client collects (its public API); the lines are written here, with the writer's
    header and label-set caches: a third of prometheus_client's OpenMetrics encoder's time and
    most of its text encoder's, paid once per fetch. A test holds the bytes to prometheus_client's.
    ``written`` keeps each family's text with what it was written from: a family whose help,
    type, unit and samples (names, labels, values) compare equal to those is not written again.
    """
    return "".join(write_families(registry.collect(), fmt, caches, written)).encode()


def write_families(
    metrics: Iterable[Metric],
    fmt: Format,
    caches: CodecCaches,
    written: dict[tuple[Format, str], tuple[Written, str]] | None = None,
) -> list[str]:
    """Each family's text, as ``generate_families`` writes it (``written``: its memo)."""
    chunks: list[str] = []
    for metric in metrics:
        key = (fmt, metric.name)
        signature = (metric.documentation, metric.type, metric.unit, metric.samples)
        last = written.get(key) if written is not None else None
        if last is not None and last[0] == signature:
            chunks.append(last[1])
            continue
        mtype = TEXT_TYPES[metric.type]
        # The model names a counter by its _total sample, as the text format's HELP line does.
        name = metric.name + "_total" if mtype is MetricType.COUNTER else metric.name
        lines = [
            write_header(
                FamilyMeta(name, mtype, metric.documentation, metric.unit or None),
                fmt,
                caches=caches,
            ).decode()
        ]
        for sample in metric.samples:
            pairs = tuple(sorted(sample.labels.items()))
            labels = label_set(pairs, caches=caches) if sample.labels else ""
            # float(): prometheus_client writes an int value (the process collector's open
            # files, the GC counts) as a float, "6.0".
            lines.append(f"{sample.name}{labels} {format_value(float(sample.value))}\n")
        text = "".join(lines)
        if written is not None:
            written[key] = (signature, text)
        chunks.append(text)
    return chunks
