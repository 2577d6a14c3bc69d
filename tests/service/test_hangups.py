"""A scraper that hangs up mid-answer leaves nothing behind: no reference cycle holds the
answer's parts, so they are freed at once, without waiting for a full garbage collection."""

from __future__ import annotations

import asyncio
import gc
import types

import pytest
from aiohttp import web

from helpers.hangups import hang_up, padded
from helpers.service import FakeUpstream
from metricbridge.cli.serve import listen_capped
from metricbridge.config.load import load_config
from metricbridge.service.scrape import parse_upstream
from metricbridge.service.server import ServiceSettings, make_app
from metricbridge.service.snapshot import FetchSettings
from metricbridge.service.tracebacks import release_frames

# Few readers here; the hostile campaign runs 4 rounds of 20 against the real process and checks
# its RSS (test_hostile_campaign.py). The payload must outlast loopback's socket buffers (up to
# 4 MiB each way), or the answer is all written before the reader hangs up.
SIZES = [pytest.param(12.0, 3, id="12MB-3readers")]


def _big_in_cycles(garbage: list[object], least: int) -> list[tuple[str, int]]:
    """Buffers of ``least`` bytes or more, and frames of the bridge's server, among garbage."""
    found = [
        (type(obj).__name__, len(obj))
        for obj in garbage
        if isinstance(obj, bytes | bytearray | memoryview) and len(obj) >= least
    ]
    found += [
        (f"frame {obj.f_code.co_name}", 0)
        for obj in garbage
        if isinstance(obj, types.FrameType) and "metricbridge" in obj.f_code.co_filename
    ]
    return found


@pytest.mark.parametrize(("megabytes", "readers"), SIZES)
async def test_a_scraper_hanging_up_mid_answer_leaves_no_cycle_holding_it(
    megabytes: float, readers: int
) -> None:
    """With the collector off, readers hang up in the middle of a large answer; then a
    collection that saves what it finds finds no buffer of the answer and no bridge frame."""
    upstream = FakeUpstream(body=padded(megabytes))
    upstream_runner = web.AppRunner(upstream.app())
    await upstream_runner.setup()
    await web.TCPSite(upstream_runner, "127.0.0.1", 0).start()
    url = f"127.0.0.1:{upstream_runner.addresses[0][1]}"
    settings = ServiceSettings(
        (parse_upstream(url),), None, FetchSettings(cache_ttl=0.0), server_info=False
    )
    runner = web.AppRunner(make_app(settings, load_config(None)), access_log=None)
    await runner.setup()
    listener = await listen_capped(runner, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        await hang_up(port, 1 << 16)  # the first fetch's one-off allocations, before counting
        gc.collect()
        gc.disable()
        try:
            for _ in range(readers):
                read = await hang_up(port, 1 << 20)
                assert read < len(upstream.body) // 2  # it did hang up mid-answer
            await asyncio.sleep(0.3)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            found = _big_in_cycles(gc.garbage, least=1 << 20)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    finally:
        listener.close()
        await runner.cleanup()
        await upstream_runner.cleanup()
    assert found == []


def test_release_frames_clears_the_finished_frames_of_the_whole_chain() -> None:
    """A chained exception: each traceback is cut and the locals of its finished frames go."""
    buffers: list[bytes] = []

    def deep() -> None:
        data = b"x" * 100
        buffers.append(data)
        raise ConnectionResetError("reset")

    def outer() -> None:
        try:
            deep()
        except ConnectionResetError as inner:
            raise ConnectionError("connection lost") from inner

    try:
        outer()
    except ConnectionError as exc:
        caught = exc
    cause = caught.__cause__
    assert cause is not None
    frame = cause.__traceback__.tb_next.tb_frame  # deep()'s, finished
    assert "data" in frame.f_locals
    release_frames(caught)
    assert caught.__traceback__ is None
    assert cause.__traceback__ is None
    assert frame.f_locals == {}
