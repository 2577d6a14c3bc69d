"""The real process: SIGTERM drains an in-flight scrape and exits 0; SIGHUP reloads the config."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import TESTS, free_port
from service_helpers import FakeUpstream

pytestmark = pytest.mark.slow


async def _start_bridge(upstream_url: str, *extra: str) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    env = {
        **os.environ,
        "METRICBRIDGE_UPSTREAM": upstream_url,
        "METRICBRIDGE_LISTEN": f"127.0.0.1:{port}",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "metricbridge",
        "--cache-ttl",
        "0",
        *extra,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            try:
                async with session.get(f"{base}/-/ready") as response:
                    if response.status == 200:
                        return process, base
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.1)
    process.kill()
    raise AssertionError("bridge did not become ready: " + (await process.stderr.read()).decode())  # type: ignore[union-attr]


async def test_sigterm_drains_in_flight_scrape_and_exits_zero(aiohttp_server: Any) -> None:
    """A scrape that is mid-fetch when SIGTERM arrives still gets its full answer."""
    upstream = FakeUpstream(delay=1.0)
    server = await aiohttp_server(upstream.app())
    process, base = await _start_bridge(str(server.make_url("/metrics")), "--log-format", "json")
    async with aiohttp.ClientSession() as session:
        scrape = asyncio.ensure_future(session.get(f"{base}/metrics"))
        await asyncio.sleep(0.4)
        assert upstream.requests == 1
        process.send_signal(signal.SIGTERM)
        response = await scrape
        assert response.status == 200
        assert "sglang:request_waiting_time_count" in await response.text()
    assert await asyncio.wait_for(process.wait(), 20) == 0
    stderr = (await process.stderr.read()).decode()  # type: ignore[union-attr]
    assert '"msg": "stopped"' in stderr
    assert "Traceback" not in stderr


async def test_sighup_reloads_and_rejects_broken_config(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    """SIGHUP swaps in a new valid config; a broken one is logged and the old one kept."""
    config = tmp_path / "aliases.yaml"
    config.write_text("version: 1\n")
    server = await aiohttp_server(FakeUpstream().app())
    process, base = await _start_bridge(str(server.make_url("/metrics")), "-c", str(config))
    try:
        async with aiohttp.ClientSession() as session:

            async def body() -> str:
                async with session.get(f"{base}/metrics") as response:
                    return await response.text()

            assert "sglang:engine_startup_time" not in await body()
            config.write_text(
                (TESTS / "golden" / "select-drops-selecting-label" / "aliases.yaml").read_text()
            )
            process.send_signal(signal.SIGHUP)
            for _ in range(50):
                if "sglang:engine_startup_time{" in await body():
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("SIGHUP did not reload the config")
            config.write_text("version: 1\nfamilies: [\n")
            process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.5)
            text = await body()
            assert "sglang:engine_startup_time{" in text
            assert "metricbridge_config_last_reload_successful 0.0" in text
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 20) == 0
    assert "config reload rejected" in (await process.stderr.read()).decode()  # type: ignore[union-attr]


async def test_bad_flags_and_config_exit_2(tmp_path: Path) -> None:
    """An unusable upstream or config stops start-up with exit 2 and a clear message."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nfamilies: {x: {disposition: nope}}\n")
    for args, message in (
        (["--upstream", "ftp://x:1"], "cannot use upstream 'ftp://x:1'"),
        (["--upstream", ":30000", "-c", str(bad)], "unknown value 'nope'"),
        (["--upstream", ":30000", "--listen", "nowhere"], "cannot listen on 'nowhere'"),
    ):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "metricbridge", *args, stderr=asyncio.subprocess.PIPE
        )
        _, err = await process.communicate()
        assert process.returncode == 2, args
        assert message in err.decode(), err.decode()
