"""After a large fetch the worker hands the heap's free pages back; after a small one it does not."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from helpers.service import FakeUpstream, bridge_app
from metricbridge.service import bridge


async def test_the_worker_trims_the_heap_after_a_large_fetch_only(
    aiohttp_server: Any, aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = FakeUpstream()
    threads: list[str] = []
    monkeypatch.setattr(
        bridge, "release_free_memory", lambda: threads.append(threading.current_thread().name)
    )
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    assert (await client.get("/metrics")).status == 200
    assert threads == []  # the tp1 fixture is far below TRIM_MIN
    monkeypatch.setattr(bridge, "TRIM_MIN", len(upstream.body))
    assert (await client.get("/metrics")).status == 200
    assert threads == ["metricbridge-translation"]  # in the worker, off the event loop
