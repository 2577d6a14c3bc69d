"""The bridge's one translation thread: reading, translating and rendering, off the event loop.

A fetch's payload costs CPU in proportion to what the engine sends: a family a rule reads, with
100,000 series, took seconds to translate, and on the event loop nothing else answered
meanwhile, ``/-/healthy`` included. Here that work runs in a thread of its own, and the loop
gets the GIL back at every switch interval, so it keeps answering: promptly only when both
threads share a CPU (``share_one_cpu``).

One thread, and jobs run in the order given: the bridge's translation state and codec caches
are not thread-safe, and every job that touches them runs here, one at a time. A daemon thread,
not a ``ThreadPoolExecutor``: the interpreter joins an executor's threads at exit, so a
translation still running at SIGTERM would hold the process past its 15 s stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import os
import queue
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("metricbridge.worker")

# sys.setswitchinterval for a process whose event loop shares the GIL with this worker (cli.serve).
SWITCH_INTERVAL = 0.001
# How long CPU load is sampled before choosing a core (it delays the start by as much), and how
# much busier than the least busy one a core may be and still count as quiet: /proc/stat counts
# in ticks of 10 ms, so 0.2 s gives each core 20, and 0.25 is 5 of them.
_SAMPLE_SECONDS = 0.2
_QUIET_MARGIN = 0.25
_BUSY_EVERYWHERE = 0.5
_Job = tuple[concurrent.futures.Future[Any], Callable[[], Any]]


class Worker:
    """Runs jobs one after the other in one daemon thread, started on the first job."""

    def __init__(self, name: str = "metricbridge-translation") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Jobs given (counted by the event loop's thread) and ended (by the worker's): each
        # count has one writer, so comparing them needs no lock.
        self._given = self._ended = 0

    @property
    def idle(self) -> bool:
        """No job is queued or running: the loop may touch what jobs use, until it gives one."""
        return self._given == self._ended

    def run(self, job: Callable[[], T]) -> asyncio.Future[T]:
        """``job()``'s result, computed in the thread; awaiting it never blocks the loop.

        Cancelling the await does not stop the job: it runs to its end (what it leaves behind,
        a memoised render or the caches' contents, stays consistent), and its result is dropped.
        """
        return asyncio.wrap_future(self.submit(job))

    def submit(self, job: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Queue ``job`` behind those already given; its future holds the result."""
        if self._closed:
            raise RuntimeError("the translation worker is closed")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        self._given += 1
        self._jobs.put((future, job))
        return future

    def close(self) -> None:
        """Let the thread end after the jobs already queued; later ``submit`` calls fail."""
        if not self._closed:
            self._closed = True
            self._jobs.put(None)

    async def wait_closed(self, timeout: float) -> bool:
        """After ``close``: wait up to ``timeout`` s for the thread to end; whether it has.

        A job still running when the interpreter exits can abort the process: a daemon thread
        inside a C extension (RE2's matcher) when finalisation stops it ends in
        ``std::terminate``, exit status 134.
        """
        thread = self._thread
        if thread is None:
            return True
        await asyncio.to_thread(thread.join, timeout)
        return not thread.is_alive()

    def _serve(self) -> None:
        while (item := self._jobs.get()) is not None:
            future, job = item
            if not future.set_running_or_notify_cancel():
                self._ended += 1
                continue
            try:
                with collector_paused():
                    result = job()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                self._ended += 1  # before the loop hears of it: the job touches nothing more
                future.set_exception(exc)
            else:
                self._ended += 1
                future.set_result(result)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a job runs, as it was before after it.

    A job builds a payload's worth of objects that are all alive until it ends (a family of
    100,000 series is 100,000 samples and their label tuples), and the collector, triggered by
    allocation counts, walks every live object again at each older-generation pass: 0.3-0.7 s of
    a 1.8-2.3 s translation of such a family, finding next to no garbage: what a job drops is
    freed by reference counting as it goes. The few cycles made meanwhile (by the event loop's
    thread too) wait for the first pass after the job.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def share_one_cpu(sample_seconds: float = _SAMPLE_SECONDS) -> int | None:
    """Keep the calling thread, and every thread it starts from now on, on one quiet CPU.

    The event loop and the worker take turns at the GIL. On two idle cores they convoy: the
    loop's thread, back from each socket call, finds the worker holding the GIL and waits a
    switch interval to get it back, so an answer of a dozen socket calls crawls. During a
    30,000-series translation one ``/-/healthy`` took 0.7 s and a scrape's deadline answer came
    0.45 s late. On one core the kernel runs the loop's thread as soon as it wakes, and the GIL
    is free again as soon as its socket call returns: the same probes answered within 0.2 s and
    the deadline answers on time. Translation is one Python thread either way; sharing a core
    costs only what runs beside it with the GIL released (gzip, RE2's matching).

    Which core: one of the allowed CPUs that were least busy over ``sample_seconds``
    (``/proc/stat``), so a core another process keeps busy is avoided, and among those the one a
    key of this process picks (its host name and PID), so sidecars started together spread
    instead of all taking the core their parent ran on (four started at once had all taken
    CPU 0). Returns the CPU, or None when there is nothing to choose (one CPU allowed), no way
    to (not Linux), or no quiet core (every allowed one was more than half busy).
    """
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2:
        return None
    before = _cpu_ticks()
    time.sleep(sample_seconds)
    busy = _busy_shares(before, _cpu_ticks())
    cpu = choose_cpu(sorted(allowed), busy, _spread_key())
    if cpu is None:
        log.debug("every allowed CPU was more than half busy: the threads are left unpinned")
        return None
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:  # a cpuset changed under us, or a seccomp profile forbids it
        return None
    return cpu


def choose_cpu(allowed: list[int], busy: dict[int, float], key: int) -> int | None:
    """Among ``allowed``, those within ``_QUIET_MARGIN`` of the least busy; ``key`` picks one.

    ``busy`` is each CPU's busy share over the sample (0 to 1); a CPU it lacks counts as idle.
    None when even the least busy was busier than ``_BUSY_EVERYWHERE``: pinned to a core that
    another process keeps busy, both threads wait for it, where the kernel would move them.
    """
    shares = {cpu: busy.get(cpu, 0.0) for cpu in allowed}
    least = min(shares.values())
    if least > _BUSY_EVERYWHERE:
        return None
    quiet = [cpu for cpu in allowed if shares[cpu] <= least + _QUIET_MARGIN]
    return quiet[key % len(quiet)]


def _spread_key() -> int:
    # Sidecars in containers are all PID 1: the host name (the pod's name) tells them apart;
    # processes on one host have PIDs in sequence, which the sum spreads one by one.
    return zlib.crc32(socket.gethostname().encode()) + os.getpid()


def _cpu_ticks() -> dict[int, tuple[int, int]]:
    """Each CPU's (busy, total) ticks since boot, from ``/proc/stat``; empty if unreadable."""
    ticks: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
            name, _, rest = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu":
                continue
            fields = [int(field) for field in rest.split()]
            idle = sum(fields[3:5])  # idle and iowait
            ticks[int(name[3:])] = (sum(fields[:8]) - idle, sum(fields[:8]))
    return ticks


def _busy_shares(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
) -> dict[int, float]:
    shares = {}
    for cpu, (busy, total) in after.items():
        if cpu in before and total > before[cpu][1]:
            shares[cpu] = (busy - before[cpu][0]) / (total - before[cpu][1])
    return shares
