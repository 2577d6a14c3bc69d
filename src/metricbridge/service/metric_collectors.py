"""The collectors behind the self-metrics that prometheus_client's own classes cannot be.

Per-scrape counters written by hand, cache figures settled once per fetch, and the writer of
collected families in the bridge's own wire code. ``settled_metrics`` holds the metrics that
count their changes and the registry of them; ``SelfMetrics`` assembles both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
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


class CacheMetrics(Collector):
    """Each of the bridge's caches: what it holds, its budget, and how it has been used.

    A settled family like the others: it serves the figures ``settle`` took at the latest
    ``SelfMetrics.changed()`` (the end of the latest fetch; the engine part's writing counts
    with the next one), never live ones, so the plain and the gzip render of one generation
    agree byte for byte. Nothing until ``SelfMetrics.track_caches``.
    """

    _FIGURES = ("entries", "bytes", "budget", "hits", "misses", "evictions")
    _figure_of: ClassVar[dict[str, str]] = {
        "metricbridge_cache_entries": "entries",
        "metricbridge_cache_bytes": "bytes",
        "metricbridge_cache_budget_bytes": "budget",
        "metricbridge_cache_hits": "hits",
        "metricbridge_cache_misses": "misses",
        "metricbridge_cache_evictions": "evictions",
    }

    def __init__(self) -> None:
        self.caches: tuple[ByteLRU[Any, Any], ...] = ()
        self._figures: tuple[tuple[str, dict[str, float]], ...] = ()
        self._texts: dict[Format, str] = {}

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
        two renders equal).
        """
        text = self._texts.get(fmt)
        if text is None:
            chunks: list[str] = []
            for family in self._families(samples=False) if self._figures else ():
                counter = family.type == "counter"
                name = family.name + "_total" if counter else family.name
                meta = FamilyMeta(name, MetricType.COUNTER if counter else MetricType.GAUGE)
                meta = FamilyMeta(meta.name, meta.type, family.documentation)
                chunks.append(write_header(meta, fmt, caches=caches).decode())
                figure = self._figure_of[family.name]
                for cache, values in self._figures:
                    labels = label_set((("cache", cache),), caches=caches)
                    chunks.append(f"{name}{labels} {format_value(values[figure])}\n")
            text = self._texts[fmt] = "".join(chunks)
        return text

    def _families(self, *, samples: bool) -> Iterator[Metric]:
        gauges = (
            ("metricbridge_cache_entries", "Entries the cache holds.", "entries"),
            (
                "metricbridge_cache_bytes",
                (
                    "Bytes the cache holds (estimated: lengths of keys and values, plus a "
                    "per-entry overhead)."
                ),
                "bytes",
            ),
            (
                "metricbridge_cache_budget_bytes",
                "The most bytes the cache holds; least recently used entries leave first.",
                "budget",
            ),
        )
        counters = (
            ("metricbridge_cache_hits", "Lookups that found their entry.", "hits"),
            ("metricbridge_cache_misses", "Lookups that did not.", "misses"),
            (
                "metricbridge_cache_evictions",
                "Entries dropped to make room for newer ones.",
                "evictions",
            ),
        )
        figures = self._figures if samples else ()
        for name, documentation, figure in gauges:
            gauge = GaugeMetricFamily(name, documentation, labels=["cache"])
            for cache, values in figures:
                gauge.add_metric([cache], values[figure])
            yield gauge
        for name, documentation, figure in counters:
            counter = CounterMetricFamily(name, documentation, labels=["cache"])
            for cache, values in figures:
                counter.add_metric([cache], values[figure])
            yield counter

    def collect(self) -> Iterator[Metric]:
        """Every cache's figures as last settled; no families while there are no caches."""
        if self._figures:
            yield from self._families(samples=True)

    def describe(self) -> Iterator[Metric]:
        """The families' names and types, so a restricted registry knows which names it serves."""
        yield from self._families(samples=False)


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
