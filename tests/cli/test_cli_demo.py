"""``metricbridge demo``: starts, says where to look, serves translated metrics, stops cleanly."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import sys

import aiohttp
import pytest

from helpers.ports import free_port

pytestmark = pytest.mark.slow


async def _demo(*argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "metricbridge",
        "demo",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _where_to_look(process: asyncio.subprocess.Process) -> tuple[str, str]:
    """The engine's and the bridge's /metrics URLs from the demo's first lines."""
    assert process.stdout is not None
    engine = bridge = ""
    while not bridge:
        line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        assert line, "the demo ended before saying where to look"
        if found := re.match(r"simulated SGLang engine: (http://\S+/metrics)", line):
            engine = found.group(1)
        if found := re.match(r"metricbridge: +(http://\S+/metrics)", line):
            bridge = found.group(1)
    return engine, bridge


async def test_demo_serves_translated_metrics_and_stops_on_ctrl_c() -> None:
    """The bridge serves contract names the engine does not emit; SIGINT ends it with exit 0."""
    port = free_port()
    process = await _demo("--listen", f"127.0.0.1:{port}")
    try:
        engine, bridge = await _where_to_look(process)
        assert bridge == f"http://127.0.0.1:{port}/metrics"
        # The engine's port is picked by the system: never SGLang's own 30000.
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", engine)
        assert not engine.startswith("http://127.0.0.1:30000/")
        async with aiohttp.ClientSession() as session:
            async with session.get(engine) as response:
                upstream = await response.text()
            async with session.get(bridge) as response:
                assert response.status == 200
                served = await response.text()
        # A contract row selected from a community family: only the translation makes it.
        assert "\n# TYPE sglang:engine_startup_time gauge\n" in served
        assert "sglang:engine_startup_time" not in upstream
        assert "sglang:startup_time_seconds{" in upstream
        assert 'metricbridge_upstream_up{upstream="127.0.0.1:' in served
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 20) == 0
    assert process.stderr is not None
    assert "Traceback" not in (await process.stderr.read()).decode()


@pytest.mark.parametrize("which", ["--engine-port", "--listen"])
async def test_demo_on_a_taken_port_exits_2_with_one_line(which: str) -> None:
    """No OSError traceback: the address and the reason, exit 2, nothing printed to look at."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        value = str(port) if which == "--engine-port" else f"127.0.0.1:{port}"
        other = ["--listen", f"127.0.0.1:{free_port()}"] if which == "--engine-port" else []
        process = await _demo(which, value, *other)
        out, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    assert err.decode() == (
        f"metricbridge demo: cannot listen on 127.0.0.1:{port}: address already in use\n"
    )
    assert out == b""
