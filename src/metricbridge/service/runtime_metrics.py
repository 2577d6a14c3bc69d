"""The process's own figures: ``process_*``, ``python_info`` and ``python_gc_*``.

prometheus_client's ``ProcessCollector``, ``PlatformCollector`` and ``GCCollector``, named as
every Python exporter serves them, on the bridge's registries rather than the global
``REGISTRY`` (which an embedding process may serve itself). Their values move between two
scrapes (CPU seconds, resident memory, open files), so they are written for every response
with the per-scrape counters; a family whose samples did not change reuses its last text.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format
from metricbridge.service.metric_collectors import Written, generate_families


class _Described(Collector):
    """A collector whose description is what it collects, so ``name[]`` finds its names.

    The three collectors have no ``describe``; a registry built without auto-describe would
    then know none of their names, and a restricted registry would never serve them.
    """

    def __init__(self, collector: Collector) -> None:
        self._collector = collector

    def collect(self) -> Iterable[Metric]:
        """The collector's families, collected afresh."""
        return self._collector.collect()

    def describe(self) -> Iterator[Metric]:
        """The families as collected now: their names do not change from one call to the next."""
        yield from self._collector.collect()


class RuntimeMetrics:
    """The process, platform and GC collectors, registered in ``registry`` too (for name[])."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        collectors: list[Collector] = [ProcessCollector(registry=None), PlatformCollector(None)]
        if platform.python_implementation() == "CPython":  # the only one it collects on
            # It takes no None: it registers itself in a registry of its own, never used.
            collectors.append(GCCollector(registry=CollectorRegistry(auto_describe=False)))
        for collector in collectors:
            described = _Described(collector)
            self._registry.register(described)
            registry.register(described)
        self._codec = CodecCaches()  # its own: these few families never reach the bridge's
        self._written: dict[tuple[Format, str], tuple[Written, str]] = {}

    def render(self, fmt: Format) -> bytes:
        """Every family in ``fmt``, as of now."""
        return generate_families(self._registry, fmt, self._codec, self._written)
