"""glibc malloc tuning for the service: payload-sized buffers go back to the kernel when freed.

Every fetch allocates a few buffers the size of the engine's payload (the body, the shape of
its lines, a render). glibc serves anything under its mmap threshold from the heap, and raises
that threshold (up to 32 MiB) each time a mapped buffer is freed, so after a few scrapes the
10 MB buffers live on the heap too, where freed memory is kept and fragments: with a 10 MB
engine the steady RSS measured 7-9x the payload and kept growing (bench/bench_service.py).
A fixed 4 MiB threshold maps only the payload-sized buffers, which are unmapped when freed;
everything smaller stays on the heap and is reused. Measured on the same bench: 3.2-3.5x the
payload, flat. A lower threshold (128 KiB) also maps the socket's receive chunks and the
render's pieces, and the page faults on remapping them added 15-30 ms per 10 MB scrape.
"""

from __future__ import annotations

import ctypes
import os

_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
MMAP_THRESHOLD = 4 << 20
ENVIRONMENT_OVERRIDE = "MALLOC_MMAP_THRESHOLD_"  # glibc reads it at start-up


def tune_malloc(environ: dict[str, str] | None = None) -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD``; False where it cannot or should not.

    An operator who set ``MALLOC_MMAP_THRESHOLD_`` has decided already, and other C libraries
    (musl in Alpine images) have no such knob.
    """
    if ENVIRONMENT_OVERRIDE in (os.environ if environ is None else environ):
        return False
    process = ctypes.CDLL(None)  # the symbols the interpreter is linked with, libc among them
    if not hasattr(process, "gnu_get_libc_version"):
        return False
    mallopt = process.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
