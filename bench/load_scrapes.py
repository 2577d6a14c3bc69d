"""Bounded load test: hundreds of concurrent scrapers, one bridge, a 1 MB engine.

    python bench/load_scrapes.py [--scrapers 400] [--seconds 20] [--cache-ttl 1] [--client wrk]

Upstream (a simulated SGLang engine, dp8 x tp2, ~0.9 MB, new values on every fetch) and the
bridge run as separate processes on 127.0.0.1. ``--scrapers`` clients scrape the bridge back to
back for ``--seconds``, with Prometheus 3's headers (OpenMetrics preferred, gzip). Reported:
scrapes and errors, latency percentiles, upstream fetches (coalescing: each fetch serves every
scrape that arrives while it is in flight or within ``--cache-ttl``), and the bridge's RSS
sampled every half second. Exits 1 if any scrape failed or fetches were not coalesced.

The aiohttp client (default) measures every request; ``--client wrk`` uses wrk's C client,
which loads the bridge harder on a small machine (wrk reports latency percentiles itself).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import shutil
import subprocess
import sys
import time

import aiohttp
from servers import Process, upstream_count

PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,"
    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=1.0.0;"
    "escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}


async def sample_rss(bridge: Process, samples: list[int], stop: asyncio.Event) -> None:
    """Append the bridge's RSS (KiB) every half second until ``stop``."""
    while not stop.is_set():
        samples.append(bridge.rss_kib())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def aiohttp_load(url: str, scrapers: int, seconds: float) -> tuple[list[float], int, int]:
    """Latencies of successful scrapes, the number of errors, and bytes received."""
    latencies: list[float] = []
    errors = received = 0
    deadline = time.perf_counter() + seconds

    async def scraper(session: aiohttp.ClientSession) -> None:
        nonlocal errors, received
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                async with session.get(url, headers=PROMETHEUS_HEADERS) as response:
                    body = await response.read()
                    ok = response.status == 200 and body.endswith(b"# EOF\n")
            except aiohttp.ClientError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - started)
                received += len(body)
            else:
                errors += 1

    connector = aiohttp.TCPConnector(limit=scrapers)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(scraper(session) for _ in range(scrapers)))
    return latencies, errors, received


def wrk_load(url: str, scrapers: int, seconds: float) -> tuple[dict[str, float], int, int]:
    """Wrk's latency percentiles (seconds), its request count and its error count."""
    command = ["wrk", "-t2", f"-c{scrapers}", f"-d{int(seconds)}s", "--latency", url]
    for key, value in PROMETHEUS_HEADERS.items():
        command += ["-H", f"{key}: {value}"]
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=seconds + 60
    ).stdout
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    percentiles = {
        p: float(v) * units[u] for p, v, u in re.findall(r"\n\s+(\d+)%\s+([\d.]+)(us|ms|s)", out)
    }
    thread_stats = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out)
    if thread_stats:
        percentiles["max"] = float(thread_stats.group(1)) * units[thread_stats.group(2)]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    if socket_errors:
        errors += sum(int(n) for n in socket_errors.groups())
    return percentiles, requests, errors


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def coalescing_counters(bridge: Process) -> dict[str, float]:
    """The bridge's metricbridge_coalesced_scrapes_total by ``how``."""
    async with aiohttp.ClientSession() as session, session.get(bridge.url + "/metrics") as response:
        text = await response.text()
    return {
        how: float(value)
        for how, value in re.findall(
            r'metricbridge_coalesced_scrapes_total\{how="(\w+)"\} (\S+)', text
        )
    }


async def main() -> int:
    """Run the load, print the figures, return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapers", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--cache-ttl", type=float, default=1.0, help="the bridge's (default 1, as shipped)"
    )
    parser.add_argument("--client", choices=["aiohttp", "wrk"], default="aiohttp")
    args = parser.parse_args()
    if args.client == "wrk" and shutil.which("wrk") is None:
        parser.error("wrk is not installed (Debian: apt-get install wrk)")
    upstream = Process.upstream("1MB", evolve=True)
    bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=args.cache_ttl)
    try:
        await upstream.ready("/count")
        await bridge.ready("/-/ready")
        async with (
            aiohttp.ClientSession() as session,
            session.get(upstream.url + "/metrics") as response,
        ):
            size = len(await response.read())
        fetches_before = await upstream_count(upstream)
        idle_rss = bridge.rss_kib()
        rss: list[int] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_rss(bridge, rss, stop))
        started = time.perf_counter()
        url = bridge.url + "/metrics"
        if args.client == "wrk":
            percentiles, scrapes, errors = await asyncio.to_thread(
                wrk_load, url, args.scrapers, args.seconds
            )
            p50, p90, p99, slowest = (
                percentiles.get(p, float("nan")) for p in ("50", "90", "99", "max")
            )
            received = 0
        else:
            latencies, errors, received = await aiohttp_load(url, args.scrapers, args.seconds)
            scrapes = len(latencies) + errors
            p50, p90, p99 = (percentile(latencies, q) for q in (0.5, 0.9, 0.99))
            slowest = max(latencies, default=float("nan"))
        elapsed = time.perf_counter() - started
        stop.set()
        await sampler
        fetches = await upstream_count(upstream) - fetches_before
        coalesced = await coalescing_counters(bridge)
    finally:
        bridge.stop()
        upstream.stop()
    mib = 1024.0
    print(
        f"{args.scrapers} concurrent scrapers ({args.client}), {elapsed:.1f} s, bridge --cache-ttl {args.cache_ttl}, upstream {size:,} B (evolving)"
    )
    print(
        f"  scrapes: {scrapes:,} ({scrapes / elapsed:.0f}/s), errors: {errors}"
        + (f", {received / 1e6:.0f} MB received after gunzip" if received else "")
    )
    print(
        f"  latency: p50 {p50 * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {slowest * 1e3:.1f} ms"
    )
    print(
        f"  upstream fetches: {fetches} for {scrapes:,} scrapes ({scrapes / max(fetches, 1):.0f} scrapes per fetch); bridge counters: {coalesced}"
    )
    print(
        f"  bridge RSS: idle {idle_rss / mib:.1f} MiB; during load min {min(rss) / mib:.1f}, max {max(rss) / mib:.1f}, last {rss[-1] / mib:.1f} MiB ({len(rss)} samples)"
    )
    ok = errors == 0 and fetches * 10 <= scrapes
    print("OK" if ok else "FAIL: errors, or fewer than 10 scrapes per upstream fetch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
