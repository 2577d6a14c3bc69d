"""After a large fetch the worker hands the heap's free pages back; after a small one it does not."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pytest

from helpers.service import FakeUpstream, bridge_app
from metricbridge.service import bridge
from metricbridge.service.allocator import TRIM_MIN, TRIM_OVERRIDE, trim_size
from metricbridge.service.server import STATE


async def test_the_worker_trims_the_heap_after_a_large_fetch_only(
    aiohttp_server: Any, aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = FakeUpstream()
    threads: list[str] = []
    monkeypatch.setattr(
        bridge, "release_free_memory", lambda: threads.append(threading.current_thread().name)
    )
    server = await aiohttp_server(upstream.app())
    app = bridge_app(str(server.make_url("/metrics")))
    client = await aiohttp_client(app)
    the_bridge = app[STATE].bridge
    assert the_bridge.trim_after == trim_size()
    assert (await client.get("/metrics")).status == 200
    assert threads == []  # the tp1 fixture is far below the size
    the_bridge.trim_after = len(upstream.body)
    assert (await client.get("/metrics")).status == 200
    assert threads == ["metricbridge-translation"]  # in the worker, off the event loop
    the_bridge.trim_after = 0  # never
    assert (await client.get("/metrics")).status == 200
    assert len(threads) == 1


def test_an_operators_trim_threshold_wins() -> None:
    assert trim_size({TRIM_OVERRIDE: "67108864"}) == 0
    assert trim_size({}) == (TRIM_MIN if hasattr(ctypes.CDLL(None), "malloc_trim") else 0)
