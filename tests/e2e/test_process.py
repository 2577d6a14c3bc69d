"""The real process: SIGTERM drains an in-flight scrape and exits 0; SIGHUP reloads the config.

Also how it starts: refusals with exit 2 and one line, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from helpers.paths import TESTS
from helpers.ports import free_port
from helpers.service import FakeUpstream

pytestmark = pytest.mark.slow


async def _start_bridge(
    upstream_url: str, *extra: str, env_extra: dict[str, str] | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    env = {
        **os.environ,
        "METRICBRIDGE_UPSTREAM": upstream_url,
        "METRICBRIDGE_LISTEN": f"127.0.0.1:{port}",
        **(env_extra or {}),
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
    async with asyncio.timeout(10):  # the start-up check of the upstream comes first
        while upstream.requests < 1:  # noqa: ASYNC110 - another process's request is awaited
            await asyncio.sleep(0.05)
    async with aiohttp.ClientSession() as session:
        scrape = asyncio.ensure_future(session.get(f"{base}/metrics"))
        await asyncio.sleep(0.4)
        assert upstream.requests == 2
        process.send_signal(signal.SIGTERM)
        response = await scrape
        assert response.status == 200
        assert "sglang:request_waiting_time_count" in await response.text()
    assert await asyncio.wait_for(process.wait(), 20) == 0
    stderr = (await process.stderr.read()).decode()  # type: ignore[union-attr]
    assert '"msg": "stopped"' in stderr
    assert "Traceback" not in stderr


async def test_sigterm_with_a_hung_engine_answers_and_exits_within_the_grace_period(
    aiohttp_server: Any,
) -> None:
    """The engine never answers and the fetch may take 60 s: the scrape waiting on it still
    gets its 200 (own metrics, no engine data) and the process exits 0 in about 15 s, not 30."""
    upstream = FakeUpstream(delay=120.0)
    server = await aiohttp_server(upstream.app())
    process, base = await _start_bridge(
        str(server.make_url("/metrics")), "--upstream-timeout", "60", "--no-server-info"
    )
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        scrape = asyncio.ensure_future(session.get(f"{base}/metrics"))
        await asyncio.sleep(0.4)
        process.send_signal(signal.SIGTERM)
        stopped_at = loop.time()
        response = await scrape
        assert response.status == 200
        text = await response.text()
    assert "metricbridge_build_info{" in text
    assert "sglang:" not in text
    assert await asyncio.wait_for(process.wait(), 40) == 0
    assert loop.time() - stopped_at < 17
    assert "Traceback" not in (await process.stderr.read()).decode()  # type: ignore[union-attr]


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


async def test_listen_port_in_use_exits_2_before_claiming_to_serve() -> None:
    """No OSError traceback, and no "serving on" for an address never bound."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "metricbridge",
            "--upstream",
            ":30000",
            "--listen",
            f"127.0.0.1:{port}",
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    start, error = err.decode().splitlines()  # the start-up line, then the one error
    assert " starting: reader " in start
    assert error == f"metricbridge: cannot listen on 127.0.0.1:{port}: address already in use"


async def test_colon_port_upstream_and_variables_in_a_real_process(aiohttp_server: Any) -> None:
    """`--upstream :PORT` scrapes 127.0.0.1:PORT/metrics (the fake serves nothing else);
    METRICBRIDGE_LOG_FORMAT=JSON gives JSON logs, and "serving on" names the bound address."""
    server = await aiohttp_server(FakeUpstream().app(), host="127.0.0.1")
    env = {"METRICBRIDGE_LOG_FORMAT": "JSON", "METRICBRIDGE_NO_SERVER_INFO": "yes"}
    process, base = await _start_bridge("", "--upstream", f":{server.port}", env_extra=env)
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{base}/metrics") as response:
            text = await response.text()
        assert "sglang:request_waiting_time_count" in text
        assert f'metricbridge_upstream_up{{upstream="127.0.0.1:{server.port}/metrics"}} 1' in text
        assert "metricbridge_server_info_up" not in text  # /server_info is not polled
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 20) == 0
    assert process.stderr is not None
    lines = (await process.stderr.read()).decode().splitlines()
    messages = [json.loads(line)["msg"] for line in lines]  # every line is a JSON object
    assert messages[0].startswith("metricbridge ")
    assert " starting: reader " in messages[0]
    assert messages[1] == (
        f"serving on {base.removeprefix('http://')}, upstreams: "
        f"http://127.0.0.1:{server.port}/metrics"
    )
    upstream = f"upstream http://127.0.0.1:{server.port}/metrics answers: "
    assert any(message.startswith(upstream) for message in messages), messages
    assert messages[-1] == "stopped"
