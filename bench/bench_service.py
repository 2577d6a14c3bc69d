"""Service speed and memory against baselines measured in the same run (issue 3, "Speed").

    python bench/bench_service.py [--runs 3] [--requests 40] [--memory-scrapes 1000]

Upstream, proxy and bridge each run as a separate process (bench/servers.py), on 127.0.0.1.

1. Added latency. A simulated SGLang engine at ~1 MB (dp8 x tp2) and ~10 MB (dp88 x tp2),
   serving successive scrapes (rendered at start-up, in rotation) so that consecutive scrapes
   never see the same values; or, with ``--upstream fixed``, the same bytes. One client scrapes
   it directly, through a plain pass-through aiohttp proxy (streaming, and buffering the whole
   body), and through the bridge (``--cache-ttl 0``: every scrape really fetches and
   translates), round-robin, one request at a time. Added latency is a path's median minus the
   direct median; the figure is the median over ``--runs`` runs. Target: the bridge adds at most
   3x what the proxy adds.
2. Cached throughput. The bridge with ``--cache-ttl 3600`` serving its translated 1 MB response,
   against an aiohttp server serving the same bytes from memory, with ``wrk`` (or an aiohttp
   client when wrk is missing). Target: at least 75 %.
3. Memory. The bridge scraping the evolving 10 MB engine ``--memory-scrapes`` times: RSS above
   the idle process (target at most 4x the payload) and growth from scrape 100 to the last
   (target at most 5 %).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
from servers import Process

TEXT_ACCEPT = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity"}


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[None]:
    """Stop every process on the way out, whatever happened."""
    try:
        yield
    finally:
        for process in processes:
            process.stop()


async def timed_get(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    """Seconds to fetch and read one whole response, and its size."""
    started = time.perf_counter()
    async with session.get(url, headers=TEXT_ACCEPT) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, len(body)


# --- 1. added latency ---------------------------------------------------------------------


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


# --- 2. cached throughput -----------------------------------------------------------------


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


async def main() -> None:
    """Run every part and print figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument("--throughput-seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--memory-scrapes", type=int, default=1000)
    parser.add_argument("--skip", default="", help="comma-separated: latency,throughput,memory")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    env = dict(item.split("=", 1) for item in args.bridge_env)
    if "latency" not in skip:
        print("1. added latency (sequential scrapes, one at a time, round-robin over the paths):")
        for mode in args.upstream.split(","):
            for size in args.sizes.split(","):
                medians = await latency(
                    size, args.runs, args.requests, evolve=mode == "evolving", env=env
                )
                report_latency(size, medians)
    if "throughput" not in skip:
        print("2. cached-response throughput:")
        await throughput(args.runs, args.throughput_seconds, args.connections, env)
    if "memory" not in skip:
        print("3. memory:")
        await memory(args.memory_scrapes, env)


if __name__ == "__main__":
    asyncio.run(main())
