"""Part 1 of bench/bench_service.py: the latency a scrape adds, against direct and proxied paths."""

from __future__ import annotations

import argparse
import statistics

import aiohttp
from client import running, timed_get
from servers import Process


async def latency(
    size: str, runs: int, requests: int, *, evolve: bool, env: dict[str, str]
) -> dict[str, list[float]]:
    """Per-run median seconds for each path; also prints sizes."""
    upstream = Process.upstream(size, evolve=evolve)
    with running(upstream):
        await upstream.ready("/count")
        paths = {
            "direct": upstream,
            "proxy": Process.proxy(upstream.url + "/metrics"),
            "proxy-buffered": Process.proxy(upstream.url + "/metrics", buffered=True),
            "bridge": Process.bridge(upstream.url + "/metrics", cache_ttl=0, env=env),
        }
        with running(*paths.values()):
            for process in paths.values():
                await process.ready("/")
            medians: dict[str, list[float]] = {name: [] for name in paths}
            sizes: dict[str, int] = {}
            async with aiohttp.ClientSession() as session:
                for _ in range(3):  # warm-up: connections, header caches, first translation
                    for process in paths.values():
                        await timed_get(session, process.url + "/metrics")
                for _ in range(runs):
                    times: dict[str, list[float]] = {name: [] for name in paths}
                    for _ in range(requests):
                        for name, process in paths.items():
                            seconds, sizes[name] = await timed_get(
                                session, process.url + "/metrics"
                            )
                            times[name].append(seconds)
                    for name, values in times.items():
                        medians[name].append(statistics.median(values))
    kind = "evolving" if evolve else "fixed"
    print(
        f"  {size} ({kind}): upstream body {sizes['direct']:,} B, bridge response {sizes['bridge']:,} B"
    )
    return medians


def report_latency(size: str, medians: dict[str, list[float]]) -> None:
    """Print added latency per path and the bridge/proxy ratios, per run and as medians."""
    direct = medians["direct"]
    added = {
        name: [m - d for m, d in zip(values, direct, strict=True)]
        for name, values in medians.items()
        if name != "direct"
    }
    print(f"  {size}: direct scrape median {statistics.median(direct) * 1e3:.2f} ms")
    for name, values in added.items():
        runs = ", ".join(f"{v * 1e3:.2f}" for v in values)
        print(f"    {name:>15} adds {statistics.median(values) * 1e3:7.2f} ms  (runs: {runs})")
    for baseline in ("proxy", "proxy-buffered"):
        ratios = [b / p for b, p in zip(added["bridge"], added[baseline], strict=True) if p > 0]
        shown = ", ".join(f"{r:.1f}" for r in ratios)
        print(
            f"    bridge/{baseline} added-latency ratio: {statistics.median(ratios):.1f}x "
            f"(runs: {shown}; target <= 3x)"
        )


async def latency_part(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Part 1, every upstream mode and size."""
    print("1. added latency (sequential scrapes, one at a time, round-robin over the paths):")
    for mode in args.upstream.split(","):
        for size in args.sizes.split(","):
            medians = await latency(
                size, args.runs, args.requests, evolve=mode == "evolving", env=env
            )
            report_latency(size, medians)
