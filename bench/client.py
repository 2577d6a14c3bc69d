"""What every service benchmark's client shares: the request headers, one timed GET, clean-up."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import aiohttp
from servers import Process

TEXT_ACCEPT = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity"}
# What Prometheus 3 sends (scrape_protocols' default order, gzip): OpenMetrics first.
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,"
    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=1.0.0;"
    "escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}
HEADER_SETS = {"plain": TEXT_ACCEPT, "prometheus": PROMETHEUS_HEADERS}


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[None]:
    """Stop every process on the way out, whatever happened."""
    try:
        yield
    finally:
        for process in processes:
            process.stop()


async def timed_get(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] = TEXT_ACCEPT
) -> tuple[float, int]:
    """Seconds to fetch and read one whole response, and its size (decompressed)."""
    started = time.perf_counter()
    async with session.get(url, headers=headers) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, len(body)
