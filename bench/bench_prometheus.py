"""The bridge's CPU per scrape as a ratio of a real Prometheus' own ingest of the same payload.

    python bench/bench_prometheus.py [--sizes 1MB,10MB] [--seconds 60] [--interval 1s]

For each payload size, an evolving simulated engine (bench/servers.py, new values on every
scrape) is scraped by the ``prometheus`` on PATH (Debian's package), with a config of its own
and a fresh TSDB in a temporary directory:

1. Prometheus scrapes the engine directly for ``--seconds``: its CPU per scrape is the
   baseline, what ingesting the payload costs Prometheus itself;
2. then Prometheus scrapes the bridge (``--cache-ttl 0``: every scrape fetches, translates and
   renders) for ``--seconds``, with its own headers (OpenMetrics, gzip): the bridge's CPU per
   scrape is divided by the baseline.

CPU is each process's user + system time from /proc/<pid>/stat over the window, after
``--warm-up`` seconds in which Prometheus creates its series; scrapes are counted by
Prometheus itself (``prometheus_target_interval_length_seconds_count``, read at
both ends of the window, from its own /metrics) and checked against the requests the engine answered. Prometheus'
CPU per scrape of the bridge is printed too: it ingests a slightly larger payload (the
contract's aliases) and decompresses it. Targets: the bridge at most 0.5x Prometheus' own
ingest (stretch 0.3x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import aiohttp
from servers import Process, Usage, free_port, process_usage, upstream_count

TARGET, STRETCH = 0.5, 0.3


class Prometheus:
    """``prometheus`` scraping one target every ``interval``, in a temporary directory."""

    def __init__(self, target: str, interval: str, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        # No self-scrape: every scrape Prometheus counts is one of the target's.
        config.write_text(
            f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
            f"scrape_configs:\n  - job_name: target\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.popen = subprocess.Popen(
            [
                shutil.which("prometheus") or "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def query(self, session: aiohttp.ClientSession, expr: str) -> float:
        """The value of an instant query with one result (0 when there is none)."""
        url = f"{self.url}/api/v1/query?query={quote(expr)}"
        async with session.get(url) as response:
            result = json.loads(await response.read())["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0

    async def ready(self, timeout: float = 60.0) -> None:
        """Wait for /-/ready."""
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.popen.poll() is not None:
                    raise RuntimeError("prometheus exited")
                try:
                    async with session.get(self.url + "/-/ready") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    async def scrapes(self, session: aiohttp.ClientSession) -> float:
        """Scrapes Prometheus has made, from its own /metrics (it does not scrape itself here)."""
        async with session.get(self.url + "/metrics") as response:
            text = (await response.read()).decode()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("prometheus_target_interval_length_seconds_count")
        )

    def cpu(self) -> Usage:
        """Prometheus' CPU so far."""
        return process_usage(self.popen.pid)

    def stop(self) -> None:
        """Terminate and wait."""
        self.popen.terminate()
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


@dataclass(frozen=True, slots=True)
class Settings:
    """How long, how often, and the bridge's extra environment."""

    seconds: float
    warm_up: float
    interval: str
    env: dict[str, str]


async def phase(
    target: str, upstream: Process, bridge: Process | None, args: Settings
) -> dict[str, float]:
    """One window of Prometheus scraping ``target``: CPU per scrape of Prometheus and the bridge."""
    with tempfile.TemporaryDirectory() as tmp:
        prometheus = Prometheus(target, args.interval, Path(tmp))
        try:
            await prometheus.ready()
            await asyncio.sleep(args.warm_up)
            async with aiohttp.ClientSession() as session:
                scraped_before = await prometheus.scrapes(session)
                served_before = await upstream_count(upstream)
                prom_before = prometheus.cpu()
                bridge_before = bridge.cpu() if bridge else None
                await asyncio.sleep(args.seconds)
                prom_spent = prometheus.cpu() - prom_before
                bridge_spent = bridge.cpu() - bridge_before if bridge and bridge_before else None
                scraped = await prometheus.scrapes(session) - scraped_before
                served = await upstream_count(upstream) - served_before
                up = await prometheus.query(session, "avg_over_time(up[1m])")
                samples = await prometheus.query(session, "scrape_samples_scraped")
        finally:
            prometheus.stop()
    if not scraped or abs(served - scraped) > max(2, scraped * 0.05):
        raise RuntimeError(f"Prometheus counted {scraped:.0f} scrapes, the engine {served}")
    out = {
        "scrapes": scraped,
        "up": up,
        "samples": samples,
        "prometheus": prom_spent.total / scraped,
    }
    if bridge_spent is not None:
        out["bridge"] = bridge_spent.total / scraped
    return out


async def measure(size: str, args: Settings) -> tuple[dict[str, float], dict[str, float]]:
    """The direct window, then the bridged one, for one payload size."""
    upstream = Process.upstream(size, evolve=True)
    bridge = None
    try:
        await upstream.ready("/count")
        direct = await phase(f"127.0.0.1:{upstream.port}", upstream, None, args)
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=0, env=args.env)
        await bridge.ready("/-/ready")
        bridged = await phase(f"127.0.0.1:{bridge.port}", upstream, bridge, args)
    finally:
        if bridge is not None:
            bridge.stop()
        upstream.stop()
    return direct, bridged


async def run(sizes: str, repeat: int, settings: Settings) -> None:
    """Measure every size ``repeat`` times and print per-scrape CPU and the ratios."""
    if shutil.which("prometheus") is None:
        print("  skipped: no prometheus on PATH (Debian: apt-get install prometheus)")
        return
    out = await asyncio.to_thread(
        subprocess.run,
        ["prometheus", "--version"],  # the one on PATH is the one measured
        capture_output=True,
        text=True,
        check=False,
    )
    version = (out.stdout or out.stderr).split("\n")[0]
    print(f"  {version}; scrape_interval {settings.interval}; windows of {settings.seconds:g} s")
    for size in sizes.split(","):
        ratios = []
        for _ in range(repeat):
            direct, bridged = await measure(size, settings)
            ratio = bridged["bridge"] / direct["prometheus"]
            ratios.append(ratio)
            print(
                f"  {size}: Prometheus scraping the engine: {direct['prometheus'] * 1e3:.2f} ms CPU"
                f" per scrape ({direct['scrapes']:.0f} scrapes, {direct['samples']:,.0f} samples,"
                f" up {direct['up']:.2f})\n"
                f"  {size}: through the bridge: bridge {bridged['bridge'] * 1e3:.2f} ms per scrape,"
                f" Prometheus {bridged['prometheus'] * 1e3:.2f} ms ({bridged['scrapes']:.0f}"
                f" scrapes, {bridged['samples']:,.0f} samples, up {bridged['up']:.2f})\n"
                f"  {size}: bridge CPU per scrape / Prometheus' own ingest: {ratio:.2f}x"
            )
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(
            f"  {size}: median {statistics.median(ratios):.2f}x (runs: {shown}; "
            f"target <= {TARGET:g}x, stretch {STRETCH:g}x)"
        )


def main() -> None:
    """Parse the command line and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1MB,10MB")
    parser.add_argument("--seconds", type=float, default=60.0, help="each window")
    parser.add_argument("--warm-up", type=float, default=10.0)
    parser.add_argument("--interval", default="1s", help="Prometheus' scrape_interval")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of windows per size")
    parser.add_argument(
        "--bridge-env", action="append", default=[], metavar="KEY=VALUE", help="for the bridge"
    )
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.bridge_env)
    settings = Settings(args.seconds, args.warm_up, args.interval, env)
    asyncio.run(run(args.sizes, args.repeat, settings))


if __name__ == "__main__":
    main()
