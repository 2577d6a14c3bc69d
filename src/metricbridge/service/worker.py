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
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# sys.setswitchinterval for a process whose event loop shares the GIL with this worker (cli.serve).
SWITCH_INTERVAL = 0.001
# In /proc/thread-self/stat, after the ")" that ends the command name: the CPU the thread last
# ran on (field 39 of proc(5), counted from field 3).
_PROCESSOR_FIELD = 39 - 3
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
                result = job()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                self._ended += 1  # before the loop hears of it: the job touches nothing more
                future.set_exception(exc)
            else:
                self._ended += 1
                future.set_result(result)


def share_one_cpu() -> int | None:
    """Keep the calling thread, and every thread it starts from now on, on the CPU it is on.

    The event loop and the worker take turns at the GIL. On two idle cores they convoy: the
    loop's thread, back from each socket call, finds the worker holding the GIL and waits a
    switch interval to get it back, so an answer of a dozen socket calls crawls. During a
    30,000-series translation one ``/-/healthy`` took 0.7 s and a scrape's deadline answer came
    0.45 s late. On one core the kernel runs the loop's thread as soon as it wakes, and the GIL
    is free again as soon as its socket call returns: the same probes answered within 0.2 s and
    the deadline answers on time. Translation is one Python thread either way; sharing a core
    costs only what runs beside it with the GIL released (gzip, RE2's matching).

    The CPU the thread is on now, where the kernel's balancing put it, and not a fixed one:
    sidecars that all start as PID 1 would otherwise pile onto the same core. Returns the CPU,
    or None when there is nothing to choose (one CPU allowed) or no way to (not Linux).
    """
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2:
        return None
    cpu = _current_cpu()
    if cpu is None or cpu not in allowed:
        cpu = min(allowed)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:  # a cpuset changed under us, or a seccomp profile forbids it
        return None
    return cpu


def _current_cpu() -> int | None:
    with contextlib.suppress(OSError, IndexError, ValueError):
        stat = Path("/proc/thread-self/stat").read_text(encoding="ascii")
        return int(stat.rpartition(")")[2].split()[_PROCESSOR_FIELD])
    return None
