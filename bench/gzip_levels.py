"""Part 0b of bench/bench_service.py: gzip compressors and levels for the bridge's answer."""

from __future__ import annotations

import functools
import statistics
import time
import zlib
from collections.abc import Callable

import aiohttp
from client import PROMETHEUS_HEADERS, running, timed_get
from servers import Process

from metricbridge.service import gzip_framing


async def gzip_levels(size: str, runs: int) -> None:
    """Compress the bridge's own OpenMetrics answer with each compressor and level, taking turns.

    The bridge's compressor (ISA-L, levels 0-3) against zlib's levels 1 and 6, as ratios to
    zlib's level 1; ms and compression ratio. The answer is fetched from a bridge in front of
    the evolving engine, so the bytes are what Prometheus would be sent; each compresses the
    same bytes, ``runs`` x 3 times.
    """
    upstream = Process.upstream(size, evolve=True)
    with running(upstream):
        await upstream.ready("/count")
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=0)
        with running(bridge):
            await bridge.ready("/")
            headers = {**PROMETHEUS_HEADERS, "Accept-Encoding": "identity"}
            async with aiohttp.ClientSession() as session:
                await timed_get(session, bridge.url + "/metrics", headers)
                async with session.get(bridge.url + "/metrics", headers=headers) as response:
                    body = await response.read()
    compressors: dict[str, Callable[[], bytes]] = {
        f"zlib {level}": functools.partial(_zlib_gzip, body, level) for level in (1, 6)
    }
    for level in gzip_framing.LEVELS:
        compressors[f"isal {level}"] = functools.partial(gzip_framing.gzip_member, body, level)
    names = list(compressors)
    spent: dict[str, list[float]] = {name: [] for name in names}
    sizes: dict[str, int] = {}
    for turn in range(runs * 3):
        for index in range(len(names)):
            name = names[(turn + index) % len(names)]
            started = time.perf_counter()
            sizes[name] = len(compressors[name]())
            spent[name].append(time.perf_counter() - started)
    base = statistics.median(spent["zlib 1"])
    shown = ", ".join(
        f"{name}: {statistics.median(spent[name]) * 1e3:.1f} ms ({statistics.median(spent[name]) / base:.2f}x)"
        f" {len(body) / sizes[name]:.1f}:1"
        for name in names
    )
    print(f"  {size} ({len(body):,} B answer): {shown}")


def _zlib_gzip(body: bytes, level: int) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    return packer.compress(body) + packer.flush()
