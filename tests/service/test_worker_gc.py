"""The translation worker runs each job with the cyclic garbage collector paused."""

from __future__ import annotations

import gc

from metricbridge.service.worker import Worker


def test_a_job_runs_with_the_collector_paused_and_restored_after() -> None:
    """Inside a job the collector is off; after it, on again (a raising job included)."""
    assert gc.isenabled()
    work = Worker("test-gc")
    try:
        assert work.submit(gc.isenabled).result(timeout=10) is False

        def fails() -> None:
            raise ValueError("boom")

        assert isinstance(work.submit(fails).exception(timeout=10), ValueError)
        assert work.submit(lambda: None).result(timeout=10) is None
        assert gc.isenabled()
    finally:
        work.close()


def test_a_collector_already_off_stays_off() -> None:
    """An embedder that turned the collector off keeps it off: the job does not turn it on."""
    work = Worker("test-gc-off")
    gc.disable()
    try:
        work.submit(lambda: None).result(timeout=10)
        assert not gc.isenabled()
    finally:
        gc.enable()
        work.close()
