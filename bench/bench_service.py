"""Service speed and memory against baselines measured in the same run, in one command.

    python bench/bench_service.py [--quick] [--runs 3] [--prometheus] [--skip PARTS] [--sizes 1MB,10MB]

Upstream, proxy and bridge each run as a separate process (bench/servers.py), on 127.0.0.1.
The simulated SGLang engine is ~1 MB (dp8 x tp2) or ~10 MB (dp88 x tp2), serving successive
scrapes (rendered at start-up, in rotation) so that consecutive scrapes never see the same
values ("evolving"); or, with ``--upstream fixed``, the same bytes.

0. Translation: bench/bench_translate.py in a process of its own (translation against
   ``split`` + ``join`` and prometheus_client's parser, at 100 KB, 1 MB and 10 MB).
   Then gzip: the bridge's own OpenMetrics answer compressed at levels 1 to 6, taking turns.
1. Added latency. One client scrapes the engine directly, through a plain pass-through aiohttp
   proxy (streaming, and buffering the whole body), and through the bridge (``--cache-ttl 0``:
   every scrape really fetches and translates), round-robin, one request at a time. Added
   latency is a path's median minus the direct median; the figure is the median over
   ``--runs`` runs.
2. CPU per scrape. The bridge (``--cache-ttl 0``) and the buffering proxy, scraped in turns,
   each one's user + system time from /proc over ``--cpu-scrapes`` scrapes, with plain
   headers (text, identity) and with Prometheus' (OpenMetrics, gzip). Targets, plain headers:
   the bridge at most 3x the proxy at 1 MB, 2.5x at 10 MB. The bridge's CPU is also shown
   against ``split`` + ``join`` of the same payloads in this process.
3. Cached throughput. The bridge with ``--cache-ttl 3600`` serving its translated 1 MB response,
   against an aiohttp server serving the same bytes from memory, with ``wrk`` (or an aiohttp
   client when wrk is missing). Target: at least 75 %.
4. Memory. The bridge scraping the evolving 10 MB engine ``--memory-scrapes`` times: RSS above
   the idle process (target at most 4x the payload) and growth from scrape 100 to the last
   (target at most 5 %).
5. Big families (bench/big_families.py): a family a rule reads with 99,999 series and one no
   rule reads with 10^6, seconds per fetch through a default bridge; ``?name[]=`` on the
   latter, 8 concurrent requests.
6. With ``--prometheus``: bench/bench_prometheus.py, a real Prometheus scraping the engine and
   then the bridge for ``--prometheus-seconds`` each; the bridge's CPU per scrape as a ratio
   of Prometheus' own ingest (target at most 0.5x).

The run ends with a table of every figure that has a target: figure, measured, target, met.
``--quick`` runs every part at small counts (one run each, fewer scrapes), in a few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import bench_prometheus
import big_families
from bench_translate import SplitJoin
from client import HEADER_SETS, TEXT_ACCEPT, running, timed_get
from gzip_levels import gzip_levels
from latency import latency_part
from servers import BENCH, Process, Usage
from summary import Figure, load, print_table

# Bridge CPU per scrape over a buffered proxy's, plain headers. With Prometheus' headers the
# yardstick is Prometheus' own ingest of the payload: bench/bench_prometheus.py.
CPU_TARGETS = {("1MB", "plain"): 3.0, ("10MB", "plain"): 2.5}

# --- 2. CPU per scrape ---------------------------------------------------------------------


async def cpu_per_scrape(
    size: str, runs: int, scrapes: int, headers: dict[str, str], env: dict[str, str]
) -> tuple[dict[str, list[Usage]], float]:
    """Per run, each server's CPU and page faults per scrape, the two scraped in turns.

    Also the median CPU seconds of ``split`` + ``join`` over the upstream's payloads, in this
    process: the issue's second yardstick, the cost of touching every line once.

    The buffered proxy and the bridge (``--cache-ttl 0``: every scrape fetches, translates and
    renders) are scraped alternately, one request at a time, so that both see the same machine
    over the same window; each one's CPU is read from /proc before and after the run.
    """
    upstream = Process.upstream(size, evolve=True)
    with running(upstream):
        await upstream.ready("/count")
        paths = {
            "proxy": Process.proxy(upstream.url + "/metrics", buffered=True),
            "bridge": Process.bridge(upstream.url + "/metrics", cache_ttl=0, env=env),
        }
        with running(*paths.values()):
            for process in paths.values():
                await process.ready("/")
            usage: dict[str, list[Usage]] = {name: [] for name in paths}
            rss: list[int] = []
            async with aiohttp.ClientSession() as session:
                for _ in range(5):  # warm-up: connections, caches, the allocator's pools
                    for process in paths.values():
                        await timed_get(session, process.url + "/metrics", headers)
                split_join = await split_join_seconds(session, upstream.url + "/metrics")
                for _ in range(runs):
                    before = {name: process.cpu() for name, process in paths.items()}
                    for _ in range(scrapes):
                        for process in paths.values():
                            await timed_get(session, process.url + "/metrics", headers)
                    rss.append(paths["bridge"].rss_kib())
                    for name, process in paths.items():
                        spent = process.cpu() - before[name]
                        usage[name].append(
                            Usage(
                                spent.user / scrapes,
                                spent.system / scrapes,
                                spent.faults // scrapes,
                            )
                        )
            peak = paths["bridge"].peak_rss_kib()
    print(
        f"    {size} bridge RSS after each run: "
        + ", ".join(f"{r / 1024:.0f}" for r in rss)
        + f" MiB; peak {peak / 1024:.0f} MiB; split+join of the payload {split_join * 1e3:.2f} ms CPU"
    )
    return usage, split_join


async def split_join_seconds(session: aiohttp.ClientSession, url: str, count: int = 9) -> float:
    """Median CPU seconds of ``split`` + ``join`` over ``count`` successive upstream payloads."""
    bodies = []
    for _ in range(count):
        async with session.get(url, headers=TEXT_ACCEPT) as response:
            bodies.append(await response.read())
    baseline, spent = SplitJoin(), []
    baseline(bodies[0])
    for body in bodies:
        started = time.process_time()
        baseline(body)
        spent.append(time.process_time() - started)
    return statistics.median(spent)


def report_cpu(size: str, which: str, usage: dict[str, list[Usage]], target: float | None) -> float:
    """Print CPU per scrape per server and the bridge/proxy ratio; return the median ratio."""
    ratios = [
        b.total / p.total for b, p in zip(usage["bridge"], usage["proxy"], strict=True) if p.total
    ]
    for name, runs in usage.items():
        shown = ", ".join(f"{u.total * 1e3:.2f}" for u in runs)
        user = statistics.median(u.user for u in runs) * 1e3
        system = statistics.median(u.system for u in runs) * 1e3
        faults = statistics.median(u.faults for u in runs)
        print(
            f"    {size} {which:>10} {name:>6}: {statistics.median(u.total for u in runs) * 1e3:6.2f} ms"
            f" CPU per scrape (user {user:.2f}, system {system:.2f}; {faults:,.0f} minor faults)"
            f"  (runs: {shown})"
        )
    median = statistics.median(ratios) if ratios else float("nan")
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(
        f"    {size} {which:>10} bridge/buffered proxy CPU per scrape: {median:.2f}x "
        f"(runs: {shown}" + (f"; target <= {target:g}x)" if target is not None else ")")
    )
    return median


# --- 3. cached throughput -----------------------------------------------------------------


def wrk_rps(url: str, seconds: int, connections: int) -> float:
    """Requests per second measured by wrk (one thread, so the servers keep the other CPU)."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url]
    for key, value in TEXT_ACCEPT.items():
        command += ["-H", f"{key}: {value}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out.stdout)
    if errors:
        raise RuntimeError(f"wrk saw errors against {url}:\n{out.stdout}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
    if match is None:
        raise RuntimeError(out.stdout + out.stderr)
    return float(match.group(1))


async def aiohttp_rps(url: str, seconds: int, connections: int) -> float:
    """Requests per second from ``connections`` aiohttp client loops (when wrk is missing)."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await timed_get(session, url)
            done += 1

    started = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(loop(session) for _ in range(connections)))
    return done / (time.perf_counter() - started)


async def throughput(runs: int, seconds: int, connections: int, env: dict[str, str]) -> None:
    """Cached bridge vs the same bytes served from memory, alternating, medians of ``runs``."""
    upstream = Process.upstream("1MB")
    with running(upstream):
        await upstream.ready("/count")
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=3600, env=env)
        with running(bridge), tempfile.TemporaryDirectory() as tmp:
            await bridge.ready("/")
            async with aiohttp.ClientSession() as session:
                for _ in range(3):
                    await timed_get(session, bridge.url + "/metrics")
                async with session.get(bridge.url + "/metrics", headers=TEXT_ACCEPT) as response:
                    body = await response.read()
            translated = Path(tmp) / "translated.prom"
            translated.write_bytes(body)
            static = Process.upstream(file=translated)
            with running(static):
                await static.ready("/count")
                use_wrk = shutil.which("wrk") is not None
                tool = "wrk" if use_wrk else "aiohttp client"
                results: dict[str, list[float]] = {"static": [], "bridge": []}
                for _ in range(runs):
                    for name, process in (("static", static), ("bridge", bridge)):
                        url = process.url + "/metrics"
                        rps = (
                            wrk_rps(url, seconds, connections)
                            if use_wrk
                            else await aiohttp_rps(url, seconds, connections)
                        )
                        results[name].append(rps)
    ratios = [b / s for b, s in zip(results["bridge"], results["static"], strict=True)]
    print(
        f"  cached 1 MB response ({len(body):,} B), {tool}, {connections} connections, {seconds} s:"
    )
    for name, values in results.items():
        print(
            f"    {name:>7}: {statistics.median(values):8.1f} req/s  (runs: {', '.join(f'{v:.0f}' for v in values)})"
        )
    shown = ", ".join(f"{r:.0%}" for r in ratios)
    print(f"    bridge/static: {statistics.median(ratios):.0%} (runs: {shown}; target >= 75%)")


# --- 3. memory ----------------------------------------------------------------------------


async def memory(scrapes: int, env: dict[str, str]) -> None:
    """RSS of the bridge scraping an evolving 10 MB engine, against its idle RSS.

    RSS is read after every scrape; a window's figure is its median (the allocator makes RSS
    wobble by tens of MiB from scrape to scrape at this payload size).
    """
    upstream = Process.upstream("10MB", evolve=True)
    with running(upstream):
        await upstream.ready("/count")
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=0, env=env)
        if env:
            print(f"  bridge environment: {env}")
        with running(bridge):
            await bridge.ready("/-/healthy")
            await asyncio.sleep(1.0)
            idle = bridge.rss_kib()
            rss: list[int] = []
            started = time.perf_counter()
            async with aiohttp.ClientSession() as session:
                for _ in range(scrapes):
                    await timed_get(session, bridge.url + "/metrics")
                    rss.append(bridge.rss_kib())
                async with session.get(upstream.url + "/metrics", headers=TEXT_ACCEPT) as response:
                    size = len(await response.read())
            peak = bridge.peak_rss_kib()
    elapsed = time.perf_counter() - started
    mib, window = 1024.0, max(1, scrapes // 10)
    early = statistics.median(rss[min(100, scrapes - window) :][:window])
    late = statistics.median(rss[-window:])
    print(
        f"  {scrapes} scrapes of an evolving {size / 1e6:.1f} MB engine in {elapsed:.0f} s; bridge RSS (MiB):"
    )
    marks = ", ".join(
        f"{i}: {rss[i - 1] / mib:.0f}" for i in (1, 10, 100, 250, 500, 750, scrapes) if i <= scrapes
    )
    print(
        f"    idle {idle / mib:.1f}; after scrape {marks}; min {min(rss) / mib:.0f}, max {max(rss) / mib:.0f}, peak (VmHWM) {peak / mib:.0f}"
    )
    steady = late - idle
    print(
        f"    steady RSS above idle (median of the last {window} scrapes): {steady / mib:.1f} MiB = {steady * 1024 / size:.2f}x the payload (target <= 4x); peak above idle {(peak - idle) * 1024 / size:.2f}x"
    )
    print(
        f"    growth, median of scrapes 100-{100 + window} to median of the last {window}: {(late - early) / early:+.1%} (target <= 5%)"
    )


# What --quick changes, where the option was left at its default: every part in a few minutes.
# Not --cpu-scrapes: CPU time is read in clock ticks (10 ms), so fewer scrapes blur 1 MB's.
QUICK = {
    "runs": 1,
    "requests": 10,
    "upstream": "evolving",
    "headers": "plain",
    "throughput_seconds": 3,
    "memory_scrapes": 60,
    "repeat": 3,
    "big_fetches": 2,
    "big_rounds": 1,
}


async def main() -> None:
    """Run every part and print figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small counts, every part: " + str(QUICK)
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=60, help="requests per path per run")
    parser.add_argument("--sizes", default="1MB,10MB")
    parser.add_argument(
        "--upstream",
        default="evolving,fixed",
        help="evolving: new values every scrape (realistic; the bridge's parse cache misses); "
        "fixed: the same bytes every time (no render jitter; cache hits)",
    )
    parser.add_argument(
        "--bridge-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the bridge, in every part (e.g. MALLOC_MMAP_THRESHOLD_)",
    )
    parser.add_argument(
        "--headers",
        default="plain,prometheus",
        help="CPU part: plain (text, identity) and/or prometheus (OpenMetrics, gzip)",
    )
    parser.add_argument("--cpu-scrapes", type=int, default=100, help="per server per run")
    parser.add_argument("--throughput-seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--memory-scrapes", type=int, default=1000)
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated: translation,gzip,latency,cpu,throughput,memory,big",
    )
    parser.add_argument("--big-fetches", type=int, default=4, help="big families: per payload")
    parser.add_argument("--big-rounds", type=int, default=2, help="big families: name[] bursts")
    parser.add_argument("--repeat", type=int, default=7, help="bench_translate.py's --repeat")
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also run Prometheus against the engine and the bridge (bench_prometheus.py)",
    )
    parser.add_argument("--prometheus-seconds", type=float, default=60.0, help="each window")
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    figures = await run_parts(args, set(args.skip.split(",")))
    print_table(figures)


async def cpu_part(args: argparse.Namespace, env: dict[str, str]) -> list[Figure]:
    """Part 2, every size with every header set; the figures of the plain-header runs."""
    print("2. CPU per scrape, bridge (--cache-ttl 0) vs a buffered pass-through proxy:")
    figures = []
    for size in args.sizes.split(","):
        for which in args.headers.split(","):
            headers = HEADER_SETS[which]
            usage, split_join = await cpu_per_scrape(
                size, args.runs, args.cpu_scrapes, headers, env
            )
            target = CPU_TARGETS.get((size, which))
            ratio = report_cpu(size, which, usage, target)
            bridge = statistics.median(u.total for u in usage["bridge"])
            print(f"    {size} {which:>10} bridge / split+join: {bridge / split_join:.1f}x")
            if target is not None:
                name = f"CPU per uncached scrape, {size}, vs buffered proxy"
                figures.append(Figure.at_most(name, ratio, target, "x"))
                figures.append(
                    Figure("  same, vs split+join", f"{bridge / split_join:.1f}x", "-", None)
                )
    return figures


async def run_parts(args: argparse.Namespace, skip: set[str]) -> list[Figure]:
    """Every part not in ``skip``, in order (Prometheus' only with ``--prometheus``).

    Returns the figures that have targets, for the final table.
    """
    env = dict(item.split("=", 1) for item in args.bridge_env)
    figures: list[Figure] = []
    if "translation" not in skip:
        print("0. translation (bench/bench_translate.py, in a process of its own):", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            summary = Path(tmp) / "translate.json"
            command = [
                sys.executable,
                str(BENCH / "bench_translate.py"),
                "--repeat",
                str(args.repeat),
            ]
            command += ["--cpu-time", "--summary", str(summary)]
            await asyncio.to_thread(subprocess.run, command, check=True)
            figures += load(summary)
    if "gzip" not in skip:
        print("0b. gzip compressors and levels for the bridge's answer (Prometheus asks for gzip):")
        for size in args.sizes.split(","):
            await gzip_levels(size, args.runs)
    if "latency" not in skip:
        await latency_part(args, env)
    if "cpu" not in skip:
        figures += await cpu_part(args, env)
    if "throughput" not in skip:
        print("3. cached-response throughput:")
        await throughput(args.runs, args.throughput_seconds, args.connections, env)
    if "memory" not in skip:
        print("4. memory:")
        await memory(args.memory_scrapes, env)
    if "big" not in skip:
        print("5. big families through the service (bench/big_families.py):", flush=True)
        figures += await big_families.run(args.big_fetches, args.big_rounds)
    if args.prometheus:
        print("6. against a real Prometheus (bench/bench_prometheus.py):")
        settings = bench_prometheus.Settings(args.prometheus_seconds, 10.0, "1s", env)
        await bench_prometheus.run(args.sizes, 1, settings)
    return figures


if __name__ == "__main__":
    asyncio.run(main())
