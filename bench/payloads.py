"""SGLang-shaped benchmark payloads from the built-in simulator, at a chosen size."""

from __future__ import annotations

from pathlib import Path

from metricbridge.simulator.engine import SimulatedEngine

FIXTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sglang-0.5.23" / "tp1.prom"
)

# name -> (DP ranks, TP size); every (dp, tp) pair is a scheduler process with its own series.
# 64 x 2 (the size the issue names) renders ~7 MB with real per-rank bytes; 88 x 2 reaches ~9.4 MB.
SHAPES = {"1MB": (8, 2), "10MB": (88, 2)}


def engine_payload(dp: int, tp: int, seconds: float = 60.0) -> bytes:
    """A simulated engine after ``seconds`` of traffic, so lazy families and histograms exist."""
    engine = SimulatedEngine(dp_size=dp, tp_size=tp, seed=7)
    engine.advance(seconds, arrivals_per_second=40.0)
    return engine.render()


def evolving_payloads(dp: int, tp: int, count: int, interval: float = 5.0) -> list[bytes]:
    """``count`` successive scrapes of one simulated engine, ``interval`` seconds apart.

    Counters grow, histograms fill and gauges move between them, as between real scrapes, so a
    benchmark that translates each one once measures no cache of a previous identical payload.
    """
    engine = SimulatedEngine(dp_size=dp, tp_size=tp, seed=7)
    engine.advance(60.0, arrivals_per_second=40.0)
    out = []
    for _ in range(count):
        engine.advance(interval, arrivals_per_second=40.0)
        out.append(engine.render())
    return out


def payloads() -> dict[str, bytes]:
    """The small real fixture plus the 1 MB and 10 MB simulated payloads."""
    out = {"100KB(tp1 fixture)": FIXTURE.read_bytes()}
    for name, (dp, tp) in SHAPES.items():
        out[name] = engine_payload(dp, tp)
    return out
