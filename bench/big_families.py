"""Big families through the real service: a family a rule reads, one no rule reads, ``name[]``.

Each payload is the simulated 1 MB engine (bench/payloads.py) with one big family in it, served
by a fake upstream (bench/servers.py) in rotation over a few renderings whose values differ, so
that no fetch sees the bytes of the one before:

- rule-read: ``sglang:cached_tokens_total``, which the shipped rules relabel (and join with the
  L3 families) and two derived hit rates read, with 99,999 series, one under the default
  ``--family-sample-limit``; its label names are SGLang's (``cache_source``, ``engine_type``,
  ``model_name``), with 33,333 model names.
- unread: a gauge no rule reads, with 10^6 series, served as the engine's bytes.

A bridge in its default configuration fetches either one; the figures are the seconds of each
request (``--cache-ttl 0``: each one fetches, translates and renders), whether the answer held
the big family (it does not when the fetch misses the default deadline, ``--upstream-timeout``
10 s), and for ``name[]`` the seconds of each of 8 concurrent requests with the bridge's peak
RSS above its idle RSS, as a multiple of the payload.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from payloads import SHAPES, engine_payload
from servers import Process
from summary import Figure

RULE_READ = b"sglang:cached_tokens_total"
UNREAD = b"bench_unread_series"
SOURCES = (b"device", b"host", b"storage")
DEFAULT_DEADLINE = 10.0  # --upstream-timeout's default, the wait of a request without a header
TEXT_ACCEPT = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity"}
# Generous: a request past the deadline is answered without engine data at about 10 s, but a
# name[] request renders after the fetch and has no such bound.
CLIENT_TIMEOUT = aiohttp.ClientTimeout(total=300)


def with_family(base: bytes, name: bytes, block: bytes) -> bytes:
    """``base`` with family ``name``'s lines replaced by ``block``, where they were (or at the end)."""
    lines = base.rstrip(b"\n").split(b"\n")
    heads = (b"# HELP " + name + b" ", b"# TYPE " + name + b" ")
    kept, at = [], None
    for line in lines:
        if line.startswith(heads) or line.startswith((name + b"{", name + b" ")):
            at = len(kept) if at is None else at
            continue
        kept.append(line)
    at = len(kept) if at is None else at
    return b"\n".join([*kept[:at], block.rstrip(b"\n"), *kept[at:]]) + b"\n"


def rule_read_block(series: int, turn: int) -> bytes:
    """``sglang:cached_tokens_total`` with ``series`` series shaped like SGLang's."""
    head = (
        b"# HELP sglang:cached_tokens_total Number of cached prompt tokens by source "
        b"(device/host/storage).\n# TYPE sglang:cached_tokens_total counter\n"
    )
    lines = [
        b'sglang:cached_tokens_total{cache_source="%s",engine_type="unified",'
        b'model_name="Qwen/Qwen3-30B-A3B-%05d"} %d.0'
        % (SOURCES[index % 3], index // 3, (index * 7 + turn * 131) % 1_000_003)
        for index in range(series)
    ]
    return head + b"\n".join(lines) + b"\n"


def unread_block(series: int, turn: int) -> bytes:
    """A gauge no rule reads, ``series`` short series (10^6 of them are about 31 MB)."""
    head = b"# HELP %s A family no rule reads.\n# TYPE %s gauge\n" % (UNREAD, UNREAD)
    lines = [b'%s{id="%07d"} %d' % (UNREAD, index, (index + turn) % 977) for index in range(series)]
    return head + b"\n".join(lines) + b"\n"


def write_payloads(
    directory: Path, name: bytes, block: Callable[[int, int], bytes], series: int, turns: int
) -> list[Path]:
    """``turns`` renderings of the 1 MB engine holding the big family, one file each."""
    paths = []
    for turn in range(turns):
        base = engine_payload(*SHAPES["1MB"], seconds=60.0 + turn)
        path = directory / f"{name.decode().replace(':', '_')}-{turn}.prom"
        path.write_bytes(with_family(base, name, block(series, turn)))
        paths.append(path)
    return paths


@dataclass(frozen=True, slots=True)
class Fetches:
    """Seconds of each request and how many answers came without the big family."""

    seconds: list[float]
    missed: int
    payload: int

    @property
    def median(self) -> float:
        """Median seconds per request."""
        return statistics.median(self.seconds)


async def _get(session: aiohttp.ClientSession, url: str, marker: bytes) -> tuple[float, bool]:
    started = time.perf_counter()
    async with session.get(url, headers=TEXT_ACCEPT) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, marker in body


async def fetches(paths: list[Path], marker: bytes, count: int) -> Fetches:
    """``count`` sequential uncached scrapes of a default bridge in front of ``paths``."""
    upstream = Process.upstream(files=paths)
    try:
        await upstream.ready("/count")
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=0)
        try:
            await bridge.ready("/-/healthy")
            seconds, missed = [], 0
            async with aiohttp.ClientSession(timeout=CLIENT_TIMEOUT) as session:
                for _ in range(count):
                    spent, held = await _get(session, bridge.url + "/metrics", marker)
                    seconds.append(spent)
                    missed += not held
        finally:
            bridge.stop()
    finally:
        upstream.stop()
    return Fetches(seconds, missed, paths[0].stat().st_size)


@dataclass(frozen=True, slots=True)
class Filtered:
    """``name[]``: seconds of each concurrent request, and peak RSS above idle."""

    seconds: list[float]
    incomplete: int
    rss_over_payload: float


async def filtered(paths: list[Path], rounds: int, concurrent: int = 8) -> Filtered:
    """``rounds`` bursts of ``concurrent`` ``?name[]=`` requests for the unread family.

    The bridge keeps its default ``--cache-ttl``, so each burst shares one fetch, as scrapers
    arriving together do. An answer is complete when it holds the family's last series.
    """
    last = b'%s{id="%07d"}' % (UNREAD, 10**6 - 1)
    upstream = Process.upstream(files=paths)
    try:
        await upstream.ready("/count")
        bridge = Process.bridge(upstream.url + "/metrics", cache_ttl=1.0)
        try:
            await bridge.ready("/-/healthy")
            await asyncio.sleep(1.0)
            idle = bridge.rss_kib()
            url = f"{bridge.url}/metrics?name[]={UNREAD.decode()}"
            seconds, incomplete = [], 0
            connector = aiohttp.TCPConnector(limit=concurrent)
            async with aiohttp.ClientSession(connector=connector, timeout=CLIENT_TIMEOUT) as s:
                for _ in range(rounds):
                    burst = await asyncio.gather(*(_get(s, url, last) for _ in range(concurrent)))
                    seconds += [spent for spent, _ in burst]
                    incomplete += sum(not held for _, held in burst)
            peak = bridge.peak_rss_kib()
        finally:
            bridge.stop()
    finally:
        upstream.stop()
    return Filtered(seconds, incomplete, (peak - idle) * 1024 / paths[0].stat().st_size)


async def run(fetch_count: int, rounds: int) -> list[Figure]:
    """Every big-family figure, printed as measured and returned for the final table."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        read_paths = write_payloads(directory, RULE_READ, rule_read_block, 99_999, 3)
        marker = b'model_name="Qwen/Qwen3-30B-A3B-33332"'
        read = await fetches(read_paths, marker, fetch_count)
        _print("rule-read family, 99,999 series", read)
        figures.append(
            Figure.at_most("rule-read family, 99,999 series: s per fetch", read.median, 2.0, " s")
        )
        figures.append(
            Figure(
                "rule-read family: answers past the default deadline (10 s)",
                f"{read.missed} of {len(read.seconds)}",
                "0",
                read.missed == 0,
            )
        )
        for path in read_paths:
            path.unlink()
        unread_paths = write_payloads(directory, UNREAD, unread_block, 10**6, 2)
        unread = await fetches(unread_paths, b'%s{id="%07d"}' % (UNREAD, 10**6 - 1), fetch_count)
        _print("family no rule reads, 10^6 series", unread)
        figures.append(
            Figure.at_most("unread family, 10^6 series: s per fetch", unread.median, 1.0, " s")
        )
        names = await filtered(unread_paths, rounds)
        shown = ", ".join(f"{s:.2f}" for s in names.seconds)
        print(
            f"  name[] on that family, 8 concurrent x {rounds}: {shown} s each; "
            f"{names.incomplete} incomplete; peak RSS above idle {names.rss_over_payload:.2f}x the payload"
        )
        figures.append(
            Figure.at_most(
                "name[] on it, 8 concurrent: s each (slowest)", max(names.seconds), 3.0, " s"
            )
        )
        figures.append(
            Figure.at_most(
                "name[] on it: peak RSS above idle / payload", names.rss_over_payload, 4.0, "x"
            )
        )
        figures.append(
            Figure(
                "name[] on it: answers without the whole family",
                f"{names.incomplete} of {len(names.seconds)}",
                "0",
                names.incomplete == 0,
            )
        )
    return figures


def _print(what: str, result: Fetches) -> None:
    shown = ", ".join(f"{s:.2f}" for s in result.seconds)
    print(
        f"  {what} ({result.payload / 1e6:.1f} MB payload): {result.median:.2f} s per fetch "
        f"(requests: {shown}); {result.missed} answered without the family"
    )
