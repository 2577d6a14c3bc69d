"""The service's malloc tuning: payload-sized buffers are returned to the kernel when freed."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from metricbridge.service.allocator import ENVIRONMENT_OVERRIDE, tune_malloc

GLIBC = hasattr(ctypes.CDLL(None), "gnu_get_libc_version")

# Allocates and frees a 10 MB buffer a few times, then prints how far RSS stayed above where it
# started, in MiB. Untuned, glibc moves such buffers onto the heap after the first free and
# keeps the freed heap; tuned, each is mapped and unmapped.
PROBE = """
import os, sys
from metricbridge.service.allocator import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc({})
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
for _ in range(4):
    buffer = bytes(10 << 20)
    del buffer
print((rss() - before) / (1 << 20))
"""


def retained_mib(mode: str) -> float:
    out = subprocess.run(  # noqa: S603 - our interpreter, our probe
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return float(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="mallopt tuning is glibc's")
def test_tuned_malloc_returns_freed_payload_buffers_to_the_kernel() -> None:
    """The measured effect, in a fresh process each way."""
    assert retained_mib("untuned") >= 9  # the freed 10 MB buffer stays resident
    assert retained_mib("tuned") < 2


@pytest.mark.skipif(not GLIBC, reason="mallopt tuning is glibc's")
def test_an_operators_setting_wins() -> None:
    """MALLOC_MMAP_THRESHOLD_ in the environment: glibc applied it already; leave it."""
    assert tune_malloc({ENVIRONMENT_OVERRIDE: "131072"}) is False
    assert tune_malloc({}) is True


# Frees 20 MiB of 1 KiB blocks (malloc's, not pymalloc's) under one still in use, so the heap
# cannot shrink from its top, then prints RSS in MiB before and after release_free_memory.
TRIM_PROBE = """
import os
from metricbridge.service.allocator import release_free_memory
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
blocks = [bytes(1024) + bytes([i % 256]) for i in range(20 * 1024)]
pinned = bytes(1024) + b"pin"
del blocks
before = rss()
assert release_free_memory()
print(before, rss())
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_release_free_memory_hands_freed_heap_pages_back() -> None:
    out = subprocess.run(  # noqa: S603 - our interpreter, our probe
        [sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, check=True
    )
    before, after = map(float, out.stdout.split())
    assert before - after >= 10


# Fills a 16 MiB payload buffer (advised) or a plain bytearray of that size, and prints the
# huge pages, in KiB, of the mapping that holds its middle.
HUGE_PAGE_PROBE = """
import ctypes, sys
from metricbridge.service.allocator import payload_buffer
size = 16 << 20
if sys.argv[1] == "advised":
    buffer = payload_buffer(size)
    buffer.view[:] = b"x" * size
    address = ctypes.cast(ctypes.c_char_p(buffer.data), ctypes.c_void_p).value
else:
    data = bytearray(b"x" * size)
    address = ctypes.addressof(ctypes.c_char.from_buffer(data))
address += size // 2  # madvise splits the mapping at whole pages: look inside the buffer
inside = False
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and ":" not in head:
        low, high = (int(part, 16) for part in head.split("-"))
        inside = low <= address < high
    elif inside and line.startswith("AnonHugePages:"):
        print(int(line.split()[1]))
        break
"""


def huge_kib(mode: str) -> int:
    out = subprocess.run(  # noqa: S603 - our interpreter, our probe
        [sys.executable, "-c", HUGE_PAGE_PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def _thp_mode() -> str:
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        return setting.split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "none"


@pytest.mark.skipif(_thp_mode() != "madvise", reason="needs transparent huge pages on madvise")
def test_a_payload_buffer_is_backed_by_huge_pages_where_advised() -> None:
    """Only the advised buffer gets them: the advice is what makes its faults 2 MiB at a time."""
    assert huge_kib("advised") >= 2048
    assert huge_kib("plain") == 0
