"""The event loop's thread and the translation worker share one quiet CPU, so neither convoys
the other at the GIL; sidecars started together spread over the allowed CPUs and avoid a busy
one; ``--no-cpu-pinning`` leaves them where the kernel puts them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from helpers.hostile import BridgeProcess
from helpers.ports import free_port
from helpers.service import FakeUpstream
from metricbridge.service import worker

ALLOWED = sorted(os.sched_getaffinity(0))
several_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="one CPU allowed: nothing to share")

# Run in a child: pinning this test process would pin every process it starts after.
SHARE = """
import json, os, sys, threading
from metricbridge.service import worker
from metricbridge.service.worker import share_one_cpu
worker._cpu_ticks = dict  # every CPU idle: what is tested here is the pinning, not the choice
if sys.argv[1:] == ["one"]:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
before = sorted(os.sched_getaffinity(0))
cpu = share_one_cpu()
seen = {}
thread = threading.Thread(target=lambda: seen.update(thread=sorted(os.sched_getaffinity(0))))
thread.start()
thread.join()
print(json.dumps({"before": before, "cpu": cpu, "main": sorted(os.sched_getaffinity(0)), **seen}))
"""


def _shared(*args: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", SHARE, *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@several_cpus
def test_the_calling_thread_and_the_threads_it_starts_share_one_allowed_cpu() -> None:
    seen = _shared()
    assert seen["before"] == ALLOWED
    assert seen["cpu"] in ALLOWED
    assert seen["main"] == seen["thread"] == [seen["cpu"]]


def test_with_one_cpu_allowed_nothing_is_changed() -> None:
    seen = _shared("one")
    assert seen["cpu"] is None
    assert seen["main"] == seen["thread"] == seen["before"] == ALLOWED[:1]


def _thread_cpus(pid: int) -> list[str]:
    """Each thread's allowed CPUs (``Cpus_allowed_list``), from /proc."""
    return [
        line.split(":", 1)[1].strip()
        for task in Path(f"/proc/{pid}/task").iterdir()
        for line in (task / "status").read_text().splitlines()
        if line.startswith("Cpus_allowed_list:")
    ]


async def _served_threads(aiohttp_server: Any, tmp_path: Path, *flags: str) -> list[str]:
    up = await aiohttp_server(FakeUpstream().app())
    bridge = BridgeProcess(
        free_port(),
        tmp_path / "bridge.log",
        "--upstream", str(up.make_url("/metrics")),
        "--no-server-info",
        *flags,
    )  # fmt: skip
    try:
        await asyncio.to_thread(bridge.wait_ready)
        async with (  # the first translation starts the worker's thread
            aiohttp.ClientSession() as session,
            session.get(bridge.base + "/metrics") as response,
        ):
            assert response.status == 200
        return _thread_cpus(bridge.popen.pid)
    finally:
        await asyncio.to_thread(bridge.stop)


def _cpu_list(cpus: list[int]) -> str:
    """The kernel's list form, as in ``Cpus_allowed_list`` (``0-3,6``)."""
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and runs[-1][-1] == cpu - 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


UNPINNED = "every allowed CPU was more than half busy"


@several_cpus
@pytest.mark.slow
async def test_serve_runs_its_loop_and_its_worker_on_one_cpu(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    """Both threads on one allowed CPU (or on all, when the bridge said every one was busy)."""
    threads = await _served_threads(aiohttp_server, tmp_path, "--log-level", "debug")
    assert len(threads) >= 2, "the loop's and the worker's threads"
    (cpus,) = set(threads)
    if UNPINNED in (tmp_path / "bridge.log").read_text():
        assert cpus == _cpu_list(ALLOWED)
    else:
        assert cpus.isdigit()
        assert int(cpus) in ALLOWED


def test_sidecars_with_keys_in_sequence_spread_over_equally_quiet_cpus() -> None:
    """Four processes with PIDs in a row, every CPU idle: each CPU is taken in turn."""
    picked = [worker.choose_cpu([0, 1, 2, 3], {}, key) for key in range(1000, 1004)]
    assert sorted(picked) == [0, 1, 2, 3]
    picked = [worker.choose_cpu([0, 1], {0: 0.02, 1: 0.05}, key) for key in range(7, 11)]
    assert sorted(picked) == [0, 0, 1, 1]


def test_a_busy_cpu_is_avoided_and_none_is_pinned_when_all_are_busy() -> None:
    """A CPU a busy loop keeps at 100 % is never chosen; when every CPU is more than half busy
    nothing is pinned (None)."""
    busy = {0: 1.0, 1: 0.1, 2: 0.2, 3: 0.9}
    assert {worker.choose_cpu([0, 1, 2, 3], busy, key) for key in range(20)} == {1, 2}
    assert worker.choose_cpu([0, 1], {0: 0.9, 1: 0.6}, 0) is None


BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
CHOOSE = """
import json
from metricbridge.service.worker import share_one_cpu
print(json.dumps(share_one_cpu()))
"""


@several_cpus
@pytest.mark.slow
def test_a_cpu_a_busy_loop_holds_is_not_chosen() -> None:
    """A busy loop on one allowed CPU: a process choosing a CPU picks another one (or none,
    when the machine's other CPUs were more than half busy too)."""
    hog = ALLOWED[0]
    loop = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(hog)])  # noqa: S603
    try:
        chosen = [
            json.loads(
                subprocess.run(  # noqa: S603 - our own interpreter
                    [sys.executable, "-c", CHOOSE], capture_output=True, text=True, check=True
                ).stdout
            )
            for _ in range(4)
        ]
    finally:
        loop.kill()
        loop.wait()
    assert hog not in chosen, chosen


@several_cpus
@pytest.mark.slow
async def test_no_cpu_pinning_leaves_every_thread_every_allowed_cpu(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    threads = await _served_threads(aiohttp_server, tmp_path, "--no-cpu-pinning")
    assert len(threads) >= 2, "the loop's and the worker's threads"
    assert set(threads) == {_cpu_list(ALLOWED)}
