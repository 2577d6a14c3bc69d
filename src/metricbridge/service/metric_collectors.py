"""The collectors behind the self-metrics that prometheus_client's own classes cannot be.

Per-scrape counters written by hand, cache figures settled once per fetch, and the registry
that keeps every other metric without its ``_created`` series. ``SelfMetrics`` assembles them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
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


class _Tracked:
    """A prometheus_client metric that counts its own changes (mixed into Counter and Gauge).

    Every response carries the settled self-metrics, and most of them do not move from one
    fetch to the next (an upstream's up, the families and samples served, the contract's rows),
    but prometheus_client has no way to tell: collecting them all was most of what a scrape of a
    small engine cost. ``changes`` is one counter shared by the metric and its children, bumped
    by any update that changes a value or adds a series (a gauge set to the value it holds is
    no change), so that ``_WithoutCreated`` collects a family again only when it moved.
    """

    changes: list[int]
    _seen: set[tuple[object, ...]]
    _last: float | None

    def _track(self) -> None:
        if not hasattr(self, "changes"):
            self.changes, self._seen, self._last = [0], set(), None

    def labels(self, *values: Any, **named: Any) -> Any:  # noqa: ANN401 - prometheus_client's
        """The child for these label values; a new one is a change."""
        self._track()
        child = super().labels(*values, **named)  # type: ignore[misc]
        key = values or tuple(sorted(named.items()))
        if key not in self._seen:
            self._seen.add(key)
            self.changes[0] += 1
        if getattr(child, "changes", None) is not self.changes:  # a child seen for the first time
            child.changes = self.changes
            child._seen, child._last = set(), None  # noqa: SLF001 - its own class's fields
        return child

    def remove(self, *values: Any) -> None:  # noqa: ANN401 - prometheus_client's
        """Drop a series: a change."""
        self._track()
        super().remove(*values)  # type: ignore[misc]
        self._seen.discard(values)
        self.changes[0] += 1

    def clear(self) -> None:
        """Drop every series: a change."""
        self._track()
        super().clear()  # type: ignore[misc]
        self._seen.clear()
        self.changes[0] += 1

    def _moved(self, *, changed: bool = True) -> None:
        self._track()
        if changed:
            self.changes[0] += 1


class TrackedCounter(_Tracked, Counter):
    """A ``Counter`` that counts its changes (``_Tracked``)."""

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        """Add ``amount``; 0 is no change."""
        self._moved(changed=amount != 0)
        super().inc(amount, exemplar)


class TrackedGauge(_Tracked, Gauge):
    """A ``Gauge`` that counts its changes (``_Tracked``); setting the value it holds is none."""

    def set(self, value: float) -> None:
        """Set the value; the one it holds already is no change."""
        self._track()
        self._moved(changed=self._last != value)
        self._last = value
        super().set(value)

    def inc(self, amount: float = 1) -> None:
        """Add ``amount``."""
        self._moved(changed=amount != 0)
        self._last = None
        super().inc(amount)

    def dec(self, amount: float = 1) -> None:
        """Take ``amount`` away."""
        self._moved(changed=amount != 0)
        self._last = None
        super().dec(amount)

    def set_function(self, f: Any) -> None:  # noqa: ANN401, ARG002 - prometheus_client's
        """Refused: a value read at collection time cannot be known unchanged."""
        raise TypeError(f"{type(self).__name__}: set_function cannot be tracked")


class _WithoutCreated(Collector):
    """A metric as prometheus_client collects it, less its ``_created`` series.

    They would double the family count and no dashboard reads them. prometheus_client's own
    switch (``disable_created_metrics``) is process-wide: it would change every other registry
    of an embedding process, so the series are left out here, per metric, instead. A tracked
    metric (``_Tracked``) is collected again only once it changed.
    """

    def __init__(self, metric: Collector) -> None:
        self._metric = metric
        self._kept: tuple[int, list[Metric]] | None = None
        if isinstance(metric, _Tracked):
            metric._track()  # noqa: SLF001 - the two work together

    def collect(self) -> Iterator[Metric]:
        """The metric's families without ``<name>_created``: as last collected if unchanged."""
        changes = getattr(self._metric, "changes", None)
        kept = self._kept
        if changes is not None and kept is not None and kept[0] == changes[0]:
            yield from kept[1]
            return
        families = []
        for family in self._metric.collect():
            created = family.name + "_created"
            family.samples = [sample for sample in family.samples if sample.name != created]
            families.append(family)
        if changes is not None:
            self._kept = (changes[0], families)
        yield from families

    def describe(self) -> Iterable[Metric]:
        """The metric's own description, so a restricted registry knows its names."""
        describe = getattr(self._metric, "describe", None)
        return describe() if describe is not None else ()


class MirroredRegistry(CollectorRegistry):
    """A registry whose collectors are registered in a second registry too, without _created."""

    def __init__(self, also: CollectorRegistry) -> None:
        super().__init__(auto_describe=False)
        self._also = also

    def register(self, collector: Collector) -> None:
        """Register in both (see ``_WithoutCreated``)."""
        wrapped = _WithoutCreated(collector)
        super().register(wrapped)
        self._also.register(wrapped)


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

    def settle(self) -> None:
        """Take the caches' figures as of now: what collect serves until the next call."""
        self._figures = tuple(
            (cache.name, {name: float(getattr(cache, name)) for name in self._FIGURES})
            for cache in self.caches
        )

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
    chunks: list[str] = []
    for metric in registry.collect():
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
    return "".join(chunks).encode()
