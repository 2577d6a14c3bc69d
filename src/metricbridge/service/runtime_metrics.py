"""The process's own figures: ``process_*``, ``python_info`` and ``python_gc_*``.

Named, described and valued as prometheus_client's ``ProcessCollector``, ``PlatformCollector``
and ``GCCollector`` serve them, as every Python exporter does. Their values move between two
scrapes (CPU seconds, resident memory, open files), so they are written for every response
with the per-scrape counters.

Every response writes them, so they are written here by hand (``RuntimeText``): the same files
read and the same lines written, without a ``Metric`` object per family or Python's file
objects. Through prometheus_client's collectors they took 64 us per scrape, a twentieth of a
one-family engine's scrape; written here, 39 us, and a test holds them to the collectors'
render over the same files. The collectors themselves stay registered in the bridge's
registry, on its own rather than the global ``REGISTRY`` (which an embedding process may serve
itself), where ``name[]`` requests find them.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
from collections.abc import Iterable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.writer import write_header
from metricbridge.model.family import FamilyMeta, Format, MetricType
from metricbridge.model.numbers import format_value
from metricbridge.service.metric_collectors import generate_families

# (name, type, help) of each family, in the collectors' order and words.
_STAT_FAMILIES = (
    ("process_virtual_memory_bytes", MetricType.GAUGE, "Virtual memory size in bytes."),
    ("process_resident_memory_bytes", MetricType.GAUGE, "Resident memory size in bytes."),
    (
        "process_start_time_seconds",
        MetricType.GAUGE,
        "Start time of the process since unix epoch in seconds.",
    ),
    (
        "process_cpu_seconds_total",
        MetricType.COUNTER,
        "Total user and system CPU time spent in seconds.",
    ),
)
_FD_FAMILIES = (
    ("process_open_fds", MetricType.GAUGE, "Number of open file descriptors."),
    ("process_max_fds", MetricType.GAUGE, "Maximum number of open file descriptors."),
)
_GC_FAMILIES = (
    ("python_gc_objects_collected_total", "collected", "Objects collected during gc"),
    (
        "python_gc_objects_uncollectable_total",
        "uncollectable",
        "Uncollectable objects found during GC",
    ),
    ("python_gc_collections_total", "collections", "Number of times this generation was collected"),
)


_PER_PID = ("stat", "limits", "fd")


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


def _read(path: str) -> bytes:
    """A whole file, in the fewest system calls: open, read to the end, close."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _boot_time(proc: str) -> float:
    """The kernel's boot time (``btime``), 0 when /proc cannot say, as ``ProcessCollector``."""
    try:
        for line in _read(str(Path(proc, "stat"))).splitlines():
            if line.startswith(b"btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0.0


def _clock_ticks() -> float:
    """Clock ticks per second, 100 where the system cannot say (as ``ProcessCollector``)."""
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, TypeError, AttributeError, OSError):
        return 100.0


class RuntimeText:
    """The lines of ``process_*``, ``python_info`` and ``python_gc_*``, as the collectors'.

    ``proc`` and ``pid`` as ``ProcessCollector`` takes them (tests read a made-up /proc).
    """

    def __init__(self, proc: str = "/proc", pid: str = "self") -> None:
        # Strings, joined once: these are read on every scrape.
        self._stat, self._limits, self._fd = (str(Path(proc, pid, part)) for part in _PER_PID)
        self._btime = _boot_time(proc)
        self._ticks = _clock_ticks()
        self._pagesize = resource.getpagesize()
        self._gc = platform.python_implementation() == "CPython"  # as GCCollector collects
        self._headers: dict[Format, tuple[list[str], list[str], list[str]]] = {}
        caches = CodecCaches()
        for fmt in Format:
            heads = [
                [write_header(FamilyMeta(n, t, h), fmt, caches=caches).decode() for n, t, h in kind]
                for kind in (_STAT_FAMILIES, _FD_FAMILIES)
            ]
            gc_heads = [
                write_header(FamilyMeta(n, MetricType.COUNTER, h), fmt, caches=caches).decode()
                for n, _, h in _GC_FAMILIES
            ]
            self._headers[fmt] = (heads[0], heads[1], gc_heads)

    def process(self, fmt: Format) -> list[str]:
        """The ``process_*`` families in ``fmt``, as of now, one string per family."""
        if not self._btime:  # as ProcessCollector: no /proc (or no btime in it), no process_*
            return []
        stat, fds, _ = self._headers[fmt]
        return self._stat_lines(stat) + self._fd_lines(fds)

    def garbage_collector(self, fmt: Format) -> list[str]:
        """The ``python_gc_*`` families in ``fmt``, as of now (none but on CPython)."""
        return _gc_lines(self._headers[fmt][2]) if self._gc else []

    def _stat_lines(self, heads: list[str]) -> list[str]:
        try:
            parts = _read(self._stat).split(b")")[-1].split()
        except OSError:
            return []
        ticks = self._ticks
        values = (
            float(parts[20]),
            float(parts[21]) * self._pagesize,
            float(parts[19]) / ticks + self._btime,
            float(parts[11]) / ticks + float(parts[12]) / ticks,
        )
        return _lines(heads, _STAT_FAMILIES, values)

    def _fd_lines(self, heads: list[str]) -> list[str]:
        # One try for both, as ProcessCollector: a failure of either leaves out the two.
        try:
            limits = _read(self._limits)
            open_fds = len(os.listdir(self._fd))  # noqa: PTH208 - names only, no Path per file
        except OSError:
            return []
        for line in limits.splitlines():
            if line.startswith(b"Max open file"):
                values = (float(open_fds), float(line.split()[3]))
                return _lines(heads, _FD_FAMILIES, values)
        return []


def _lines(
    heads: list[str], families: tuple[tuple[str, MetricType, str], ...], values: tuple[float, ...]
) -> list[str]:
    return [
        f"{head}{name} {format_value(value)}\n"
        for head, (name, _, _), value in zip(heads, families, values, strict=True)
    ]


def _gc_lines(heads: list[str]) -> list[str]:
    stats = gc.get_stats()
    return [
        head
        + "".join(
            f'{name}{{generation="{generation}"}} {format_value(float(stat[field]))}\n'
            for generation, stat in enumerate(stats)
        )
        for head, (name, field, _) in zip(heads, _GC_FAMILIES, strict=True)
    ]


class RuntimeMetrics:
    """The runtime families for every response; their collectors in ``registry``, for name[]."""

    def __init__(self, registry: CollectorRegistry) -> None:
        collectors: list[Collector] = [ProcessCollector(registry=None), PlatformCollector(None)]
        if platform.python_implementation() == "CPython":  # the only one it collects on
            # It takes no None: it registers itself in a registry of its own, never used.
            collectors.append(GCCollector(registry=CollectorRegistry(auto_describe=False)))
        for collector in collectors:
            registry.register(_Described(collector))
        self._text = RuntimeText()
        # python_info does not change while the process runs: written once per format.
        platform_only = CollectorRegistry(auto_describe=False)
        platform_only.register(_Described(collectors[1]))
        self._platform = {
            fmt: generate_families(platform_only, fmt, CodecCaches()).decode() for fmt in Format
        }

    def render(self, fmt: Format) -> bytes:
        """Every family in ``fmt``, as of now, in the collectors' order."""
        text = self._text
        return "".join(
            [*text.process(fmt), self._platform[fmt], *text.garbage_collector(fmt)]
        ).encode()
