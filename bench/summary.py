"""The benchmarks' final table: each figure of the performance targets beside its target.

Every part of bench/bench_service.py (and bench/bench_translate.py, in its own process, through
a JSON file) adds the figures it measured; the table is printed once at the end, so one run
answers "which targets hold" without reading the parts' logs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure and its target; ``met`` is None when the figure has no target."""

    name: str
    measured: str
    target: str
    met: bool | None

    @classmethod
    def at_most(cls, name: str, value: float, limit: float, unit: str) -> Figure:
        """A figure whose target is an upper bound (a NaN, a failed measurement, misses it)."""
        return cls(name, _shown(value, unit), f"<= {limit:g}{unit}", value <= limit)

    @classmethod
    def at_least(cls, name: str, value: float, floor: float, unit: str) -> Figure:
        """A figure whose target is a lower bound."""
        return cls(name, _shown(value, unit), f">= {floor:g}{unit}", value >= floor)


def _shown(value: float, unit: str) -> str:
    if math.isnan(value):
        return "failed"
    return f"{value:.2f}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"


def save(figures: list[Figure], path: Path) -> None:
    """Write ``figures`` for another process's table."""
    path.write_text(json.dumps([dataclasses.asdict(f) for f in figures]))


def load(path: Path) -> list[Figure]:
    """The figures :func:`save` wrote; none when the file was never written."""
    if not path.exists() or not path.read_text():
        return []
    return [Figure(**item) for item in json.loads(path.read_text())]


def print_table(figures: list[Figure]) -> None:
    """The table "figure | measured | target | met", then how many targets hold."""
    rows = [("figure", "measured", "target", "met")]
    rows += [(f.name, f.measured, f.target, _met(f.met)) for f in figures]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    print("\nsummary (ratios are to baselines measured in this run):")
    for index, row in enumerate(rows):
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("-+-".join("-" * width for width in widths))
    judged = [f for f in figures if f.met is not None]
    print(f"{sum(bool(f.met) for f in judged)} of {len(judged)} targets met")


def _met(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "NO")
