"""Translation with and without scrape plans, against split+join, in one run and taking turns.

    python bench/bench_plans.py

Each payload size is read once per path (each path with caches of its own: one keeps plans,
the other has no room for any), then the baseline and the two translations of every payload
take turns in a rotating order, timed by this process's CPU time, so a machine shared with
other jobs skews them alike. Only ``translate`` is timed: reading and writing do not depend on
plans. Payloads as in ``bench_translate.py``: the 100 KB row repeats one real scrape, the 1 MB
and 10 MB rows are successive scrapes of one simulated engine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from bench_translate import SplitJoin
from payloads import FIXTURE, SHAPES, evolving_payloads

from metricbridge.config.load import load_config
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.translate import translate


def ratios(payloads: list[bytes], rules: CompiledRules) -> tuple[float, float, float]:
    """Median CPU seconds of split+join and of translating without and with plans."""
    planned, full = CodecCaches(), CodecCaches()
    remembered, none = TranslationCaches(), TranslationCaches({"translation_plans": 0})
    read_planned = [
        read_exposition(p, Format.TEXT, rules.validation, caches=planned) for p in payloads
    ]
    read_full = [read_exposition(p, Format.TEXT, rules.validation, caches=full) for p in payloads]
    baseline = SplitJoin()
    actions: list[Callable[[int], object]] = [
        lambda i: baseline(payloads[i]),
        lambda i: translate(read_full[i].families, rules, caches=full, remembered=none),
        lambda i: translate(read_planned[i].families, rules, caches=planned, remembered=remembered),
    ]
    for action in actions:
        action(0)  # warm-up: the first payload makes the plan
    times: list[list[float]] = [[], [], []]
    for i in range(1, len(payloads)):
        for turn in range(len(actions)):
            which = (i + turn) % len(actions)
            started = time.process_time()
            actions[which](i)
            times[which].append(time.process_time() - started)
    base, without, with_plans = (statistics.median(spent) for spent in times)
    return base, without, with_plans


def main() -> None:
    """Print, per payload size, the two translations' CPU time as multiples of split+join."""
    rules = compile_rules(load_config())
    series = {"100KB(tp1 fixture)": [FIXTURE.read_bytes()] * 31}
    for name, (dp, tp) in SHAPES.items():
        series[name] = evolving_payloads(dp, tp, 21 if dp * tp <= 64 else 9)
    for name, payloads in series.items():
        base, without, with_plans = ratios(payloads, rules)
        print(
            f"{name:>20}: split+join {base * 1e3:.2f} ms; translate without plans "
            f"{without * 1e3:.2f} ms = {without / base:.2f}x, with plans {with_plans * 1e3:.2f} ms "
            f"= {with_plans / base:.2f}x"
        )


if __name__ == "__main__":
    main()
