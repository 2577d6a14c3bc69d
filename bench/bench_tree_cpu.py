"""CPU per scrape of the bridge from two source trees, measured in one window, interleaved.

    python bench/bench_tree_cpu.py --before OTHER_TREE/src [--after src] [--rounds 7] [--scrapes 20]

Each tree's bridge runs as its own process (``python -m metricbridge`` with ``PYTHONPATH`` set
to the tree's ``src``) in front of one shared evolving simulated engine (bench/servers.py), with
``--cache-ttl 0`` so that every scrape really fetches, reads, translates and writes. A round
scrapes each bridge ``--scrapes`` times in turn (the order alternates between rounds) and reads
the bridge process's own CPU time (user + system, /proc/PID/stat) before and after, so the load
of other processes on the machine adds wall time but not CPU time. The figure per tree is the
median over rounds of CPU milliseconds per scrape; the ratio is after / before.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from pathlib import Path

import aiohttp
from servers import Process

TEXT_ACCEPT = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def bridge(src: Path, upstream: str) -> Process:
    """A bridge process importing metricbridge from ``src``."""
    return Process.bridge(upstream, cache_ttl=0, env={"PYTHONPATH": str(src.resolve())})


async def scrape_round(session: aiohttp.ClientSession, process: Process, scrapes: int) -> float:
    """CPU milliseconds per scrape of ``process`` over ``scrapes`` sequential scrapes."""
    before = cpu_seconds(process.popen.pid)
    for _ in range(scrapes):
        async with session.get(process.url + "/metrics", headers=TEXT_ACCEPT) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{process.url}: HTTP {response.status}")
    return (cpu_seconds(process.popen.pid) - before) * 1000 / scrapes


async def measure(size: str, trees: dict[str, Path], rounds: int, scrapes: int) -> dict[str, float]:
    """Median CPU ms per scrape for each tree at payload ``size``."""
    upstream = Process.upstream(size, evolve=True)
    processes: dict[str, Process] = {}
    try:
        await upstream.ready("/count")
        processes = {name: bridge(src, upstream.url + "/metrics") for name, src in trees.items()}
        for process in processes.values():
            await process.ready("/-/ready")
        figures: dict[str, list[float]] = {name: [] for name in trees}
        async with aiohttp.ClientSession() as session:
            for process in processes.values():  # warm up: plans, caches, first-sight work
                await scrape_round(session, process, 5)
            order = list(processes)
            for index in range(rounds):
                for name in order if index % 2 == 0 else reversed(order):
                    figures[name].append(await scrape_round(session, processes[name], scrapes))
        return {name: statistics.median(values) for name, values in figures.items()}
    finally:
        for process in (*processes.values(), upstream):
            process.stop()


def main() -> None:
    """Print CPU ms per scrape for each tree and the ratio, per payload size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the baseline tree's src")
    parser.add_argument("--after", type=Path, default=Path(__file__).parent.parent / "src")
    parser.add_argument("--sizes", nargs="+", default=["1MB", "10MB"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    for size in args.sizes:
        result = asyncio.run(measure(size, trees, args.rounds, args.scrapes))
        ratio = result["after"] / result["before"]
        print(
            f"{size}: before {result['before']:.2f} ms CPU/scrape, "
            f"after {result['after']:.2f} ms, ratio {ratio:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
