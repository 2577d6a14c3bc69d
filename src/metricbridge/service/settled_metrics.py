"""The settled self-metrics: metrics that count their own changes, and the registry of them.

Every /metrics response carries the settled self-metrics (``SelfMetrics.render_settled``),
rendered once per fetch; most of them do not move from one fetch to the next, but
prometheus_client cannot tell. ``TrackedCounter`` and ``TrackedGauge`` count their changes,
``WithoutCreated`` hands back what it collected while nothing changed, and
``MirroredRegistry.render`` writes each family again only when it moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format
from metricbridge.service.metric_collectors import Written, write_families


class _Tracked:
    """A prometheus_client metric that counts its own changes (mixed into Counter and Gauge).

    Every response carries the settled self-metrics, and most of them do not move from one
    fetch to the next (an upstream's up, the families and samples served, the contract's rows),
    but prometheus_client has no way to tell: collecting them all was most of what a scrape of a
    small engine cost. ``changes`` is one counter shared by the metric and its children, bumped
    by any update that changes a value or adds a series (a gauge set to the value it holds is
    no change), so that ``WithoutCreated`` collects a family again only when it moved.
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
        key: tuple[object, ...] = tuple(map(str, values))
        if named:
            key = tuple(sorted((name, str(value)) for name, value in named.items()))
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
        # Forget every series seen, not just this one: the label values may have been given in
        # another form (named, not strings), and a series made again must count as a change.
        self._seen.clear()
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
        self._moved(changed=self._last != value)  # NaN is never the value it holds
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


class WithoutCreated(Collector):
    """A metric as prometheus_client collects it, less its ``_created`` series.

    They would double the family count and no dashboard reads them. prometheus_client's own
    switch (``disable_created_metrics``) is process-wide: it would change every other registry
    of an embedding process, so the series are left out here, per metric, instead. A tracked
    metric (``_Tracked``) is collected again only once it changed.
    """

    def __init__(self, metric: Collector) -> None:
        self.metric = metric
        self._kept: tuple[int, list[Metric]] | None = None
        if isinstance(metric, _Tracked):
            metric._track()  # noqa: SLF001 - the two work together

    def collect(self) -> Iterator[Metric]:
        """The metric's families without ``<name>_created``: as last collected if unchanged."""
        changes = getattr(self.metric, "changes", None)
        kept = self._kept
        if changes is not None and kept is not None and kept[0] == changes[0]:
            yield from kept[1]
            return
        families = []
        for family in self.metric.collect():
            created = family.name + "_created"
            family.samples = [sample for sample in family.samples if sample.name != created]
            families.append(family)
        if changes is not None:
            self._kept = (changes[0], families)
        yield from families

    def describe(self) -> Iterable[Metric]:
        """The metric's own description, so a restricted registry knows its names."""
        describe = getattr(self.metric, "describe", None)
        return describe() if describe is not None else ()


class MirroredRegistry(CollectorRegistry):
    """A registry whose collectors are registered in a second registry too, without _created."""

    def __init__(self, also: CollectorRegistry) -> None:
        super().__init__(auto_describe=False)
        self._also = also
        self._wrapped: list[WithoutCreated] = []  # in the order registered, as collect goes

    def register(self, collector: Collector) -> None:
        """Register in both (see ``WithoutCreated``)."""
        wrapped = WithoutCreated(collector)
        super().register(wrapped)
        self._also.register(wrapped)
        self._wrapped.append(wrapped)

    def render(
        self,
        fmt: Format,
        caches: CodecCaches,
        written: dict[tuple[Format, str], tuple[Written, str]],
    ) -> bytes:
        """Every family in ``fmt``, as ``generate_families`` writes this registry.

        A collector that writes its own text (``render_text``, the cache figures) is asked for
        it; every other one's families are written from what it collected, each reused from
        ``written`` while it did not change.
        """
        chunks: list[str] = []
        for wrapped in self._wrapped:
            own = getattr(wrapped.metric, "render_text", None)
            if own is not None:
                chunks.append(own(fmt, caches))
            else:
                chunks.extend(write_families(wrapped.collect(), fmt, caches, written))
        return "".join(chunks).encode()
