"""Series storage and a text-format 0.0.4 writer that reproduces SGLang 0.5.23's byte layout.

SGLang serves ``/metrics`` through prometheus_client's ``MultiProcessCollector``, whose output
differs from a single-process registry in ways a parser must survive and the simulator must
therefore reproduce (CATALOGUE.md section 5): labels in alphabetical order, histogram ``_sum``
before its buckets, no ``_created`` samples, no timestamps, and numbers written by
``floatToGoString``. ``Registry`` keeps series in creation order; a series exists only once
something created it, which is how lazily created counters stay absent until their first event.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metricbridge.simulator.families import FamilySpec, Kind

if TYPE_CHECKING:
    from collections.abc import Iterable

Labels = tuple[tuple[str, str], ...]
"""Label pairs sorted by name, the form every series key takes."""


def format_value(value: float) -> str:
    """Format a sample value or bucket bound exactly as prometheus_client's floatToGoString."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    # Go switches to exponent form sooner than Python: 1183744.0 -> 1.183744e+06 (only for
    # positive values, as in prometheus_client 0.26.0; negative ones keep Python's repr).
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def labels(**pairs: object) -> Labels:
    """Build a sorted label tuple from keyword arguments, stringifying the values."""
    return tuple(sorted((key, str(value)) for key, value in pairs.items()))


def with_labels(base: Labels, extra: Labels) -> Labels:
    """Merge extra pairs into a sorted label tuple."""
    return tuple(sorted(base + extra))


@dataclass(slots=True)
class Histogram:
    """A classic histogram: per-bucket counts (not cumulative; the last is ``+Inf``) and a sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(init=False)
    total: float = 0.0

    def __post_init__(self) -> None:
        """Start with every bucket empty."""
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, count: int = 1) -> None:
        """Record ``count`` observations of ``value`` (``le`` buckets include their bound)."""
        self.counts[bisect_left(self.bounds, value)] += count
        self.total += value * count


Series = dict[Labels, float | Histogram]


class Registry:
    """Every series of one simulated server, keyed by family name, in creation order."""

    def __init__(self, specs: Iterable[FamilySpec]) -> None:
        """Serve the given families; naming any other family is a programming error."""
        self.specs = {spec.name: spec for spec in specs}
        self.series: dict[str, Series] = {name: {} for name in self.specs}

    def ensure(self, name: str, key: Labels) -> None:
        """Create a series at zero (or empty) if it does not exist yet: a pre-seeded child."""
        family = self.series[name]
        if key not in family:
            spec = self.specs[name]
            family[key] = Histogram(spec.buckets) if spec.kind is Kind.HISTOGRAM else 0.0

    def inc(self, name: str, key: Labels, amount: float = 1.0) -> None:
        """Add to a counter or gauge; a zero amount does not create a missing series."""
        family = self.series[name]
        current = family.get(key)
        if isinstance(current, Histogram):
            raise TypeError(f"{name} is a histogram; use observe()")
        if current is None and amount == 0:
            return
        family[key] = (current or 0.0) + amount

    def set(self, name: str, key: Labels, value: float) -> None:
        """Set a gauge, creating it if needed."""
        self.series[name][key] = float(value)

    def get(self, name: str, key: Labels) -> float | None:
        """Return a counter or gauge value, or None if the series does not exist."""
        value = self.series[name].get(key)
        return value if isinstance(value, float) else None

    def observe(self, name: str, key: Labels, value: float, count: int = 1) -> None:
        """Record observations in a histogram series, creating it if needed."""
        family = self.series[name]
        hist = family.get(key)
        if not isinstance(hist, Histogram):
            hist = family[key] = Histogram(self.specs[name].buckets)
        hist.observe(value, count)

    def render(self) -> bytes:
        """Write every non-empty family in table order as a text format 0.0.4 exposition."""
        out: list[str] = []
        for name, spec in self.specs.items():
            family = self.series[name]
            if not family:
                continue
            out.append(f"# HELP {name} {spec.help}\n# TYPE {name} {spec.kind}\n")
            for key, value in family.items():
                if isinstance(value, Histogram):
                    _write_histogram(out, name, key, value)
                else:
                    out.append(f"{name}{_label_text(key)} {format_value(value)}\n")
        return "".join(out).encode()


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _label_text(key: Labels) -> str:
    if not key:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in key) + "}"


def _bucket_affixes(key: Labels) -> tuple[str, str]:
    """Return the label text before and after ``le``, which sorts into the middle of the set."""
    before = "".join(f'{k}="{_escape(v)}",' for k, v in key if k < "le")
    after = "".join(f',{k}="{_escape(v)}"' for k, v in key if k > "le")
    return "{" + before, after + "}"


def _le_texts(bounds: tuple[float, ...]) -> tuple[str, ...]:
    return (*(format_value(bound) for bound in bounds), "+Inf")


def _write_histogram(out: list[str], name: str, key: Labels, hist: Histogram) -> None:
    plain = _label_text(key)
    before, after = _bucket_affixes(key)
    out.append(f"{name}_sum{plain} {format_value(hist.total)}\n")
    cumulative = 0
    for le, count in zip(_le_texts(hist.bounds), hist.counts, strict=True):
        cumulative += count
        out.append(f'{name}_bucket{before}le="{le}"{after} {format_value(cumulative)}\n')
    out.append(f"{name}_count{plain} {format_value(cumulative)}\n")
