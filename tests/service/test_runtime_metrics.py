"""The runtime families written by hand are the lines prometheus_client's collectors make."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector

from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format
from metricbridge.service.metric_collectors import generate_families
from metricbridge.service.runtime_metrics import RuntimeMetrics, RuntimeText

# /proc/<pid>/stat of a process whose name holds a space and a parenthesis, as a kernel writes it.
STAT = (
    "4242 (metric bridge) S 1 4242 4242 0 -1 4194560 90000 0 12 0 1234 567 0 0 20 0 3 0 "
    "987654 123456789 45678 18446744073709551615 1 1 0 0 0 0 0 16781312 17922 0 0 0 17 1 0 0 "
    "0 0 0 0 0 0 0 0 0 0\n"
)
LIMITS = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            20000                1048576              files     \n"
)
GC_STATS = [
    {"collections": 43, "collected": 406, "uncollectable": 0},
    {"collections": 3, "collected": 138, "uncollectable": 1},
    {"collections": 0, "collected": 0, "uncollectable": 0},
]


def made_up_proc(root: Path, *, limits: str = LIMITS, fds: int = 7) -> Path:
    (root / "self" / "fd").mkdir(parents=True)
    (root / "stat").write_text("cpu  1 2 3\nbtime 1790000000\nprocesses 9\n")
    (root / "self" / "stat").write_text(STAT)
    (root / "self" / "limits").write_text(limits)
    for fd in range(fds):
        (root / "self" / "fd" / str(fd)).write_text("")
    return root


def collectors_render(proc: Path, fmt: Format) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProcessCollector(proc=str(proc), registry=None))
    GCCollector(registry=registry)
    return generate_families(registry, fmt, CodecCaches())


@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize(
    ("limits", "case"),
    [(LIMITS, "all"), (LIMITS.replace("Max open files", "Max files open"), "no fd limit")],
    ids=["all", "no fd limit"],
)
def test_the_lines_are_the_collectors_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: Format, limits: str, case: str
) -> None:
    proc = made_up_proc(tmp_path, limits=limits)
    monkeypatch.setattr(gc, "get_stats", lambda: GC_STATS)
    text = RuntimeText(proc=str(proc))
    ours = "".join(text.process(fmt) + text.garbage_collector(fmt)).encode()
    if case == "all":
        assert ours == collectors_render(proc, fmt)
        return
    # prometheus_client fails on it (max_fds unbound); the bridge leaves both fd families out.
    full = collectors_render(made_up_proc(tmp_path / "full"), fmt)
    expected = b"".join(line for line in full.splitlines(keepends=True) if b"_fds" not in line)
    assert ours == expected


def test_without_proc_there_are_no_process_families(tmp_path: Path) -> None:
    text = RuntimeText(proc=str(tmp_path / "absent"))
    assert text.process(Format.TEXT) == []
    assert collectors_render(tmp_path / "absent", Format.TEXT).count(b"process_") == 0


def test_an_unreadable_fd_directory_leaves_out_both_fd_families(tmp_path: Path) -> None:
    proc = made_up_proc(tmp_path)
    (proc / "self" / "fd" / "0").unlink()
    for fd in (proc / "self" / "fd").iterdir():
        fd.unlink()
    (proc / "self" / "fd").rmdir()
    lines = "".join(RuntimeText(proc=str(proc)).process(Format.TEXT))
    assert "process_open_fds" not in lines
    assert "process_max_fds" not in lines
    assert "process_resident_memory_bytes 1.87097088e+08" in lines  # 45678 pages of 4 KiB


@pytest.mark.parametrize("fmt", list(Format))
def test_the_service_render_is_every_collector_in_order(fmt: Format) -> None:
    """Against the real /proc: the same families, in the collectors' order."""
    registry = CollectorRegistry(auto_describe=False)
    ours = RuntimeMetrics(registry).render(fmt).decode()
    theirs = generate_families(registry, fmt, CodecCaches()).decode()

    def families(text: str) -> list[str]:
        return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]

    assert families(ours) == families(theirs)
    assert families(ours)[:7] == [
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_cpu_seconds" if fmt is Format.OPENMETRICS else "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "python_info",
    ]


def test_without_a_clock_tick_figure_a_tick_is_a_hundredth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_sysconf(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr("os.sysconf", no_sysconf)
    lines = "".join(RuntimeText(proc=str(made_up_proc(tmp_path))).process(Format.TEXT))
    assert "process_cpu_seconds_total 18.009999999999998\n" in lines  # (1234 + 567) / 100
