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

What a large fetch frees between its buffers (blocks copied, values, joined pieces, a render)
the heap keeps, in holes that the next fetch does not fill the same way: with a 10 MB engine
that was 2-3 MiB of steady RSS. ``release_free_memory`` (glibc's ``malloc_trim``) hands those
free pages back after each fetch of ``TRIM_MIN`` bytes or more: 0.7 ms at 10 MB, for 0.28x the
payload of steady RSS (bench/bench_service.py: 4.18x to 3.90x). Smaller fetches leave too
little to be worth the walk over the heap. An operator who set ``MALLOC_TRIM_THRESHOLD_`` chose
how much free memory the heap keeps (to spare the page faults of getting it back), and is not
overruled.

A mapped buffer still costs a page fault per 4 KiB page on its first write: 2,300 for a 10 MB
body, a fifth of the service's CPU per scrape at that size (system time, measured by
bench/bench_service.py). ``payload_buffer`` asks the kernel for transparent huge pages on such
a buffer before it is written, which makes them a handful of 2 MiB faults; the pages are the
same ones the body needs, so RSS does not change, and they go back when the body is freed.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Mapping
from dataclasses import dataclass

_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
MMAP_THRESHOLD = 4 << 20
ENVIRONMENT_OVERRIDE = "MALLOC_MMAP_THRESHOLD_"  # glibc reads it at start-up
TRIM_OVERRIDE = "MALLOC_TRIM_THRESHOLD_"  # glibc reads it at start-up
# A fetch this big is followed by a trim of the heap (release_free_memory).
TRIM_MIN = MMAP_THRESHOLD
# The symbols the interpreter's process is linked with, libc among them.
_PROCESS = ctypes.CDLL(None, use_errno=True)


def _function(
    name: str, argtypes: tuple[type, ...], *, glibc: bool = False
) -> ctypes._FuncPointer | None:
    """A C function of the interpreter's process (libc among its symbols), set up once.

    None where it is missing, or where ``glibc`` asks for glibc and the C library is another
    (musl in Alpine images has none of glibc's malloc knobs). One handle for every call: a
    payload buffer is advised on every large fetch.
    """
    if glibc and not hasattr(_PROCESS, "gnu_get_libc_version"):
        return None
    function = getattr(_PROCESS, name, None)
    if function is not None:
        function.argtypes = argtypes
        function.restype = ctypes.c_int
    return function


_mallopt = _function("mallopt", (ctypes.c_int, ctypes.c_int), glibc=True)
_malloc_trim = _function("malloc_trim", (ctypes.c_size_t,), glibc=True)
_madvise = _function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))


def tune_malloc(environ: dict[str, str] | None = None) -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD``; False where it cannot or should not.

    An operator who set ``MALLOC_MMAP_THRESHOLD_`` has decided already, and other C libraries
    (musl in Alpine images) have no such knob.
    """
    if ENVIRONMENT_OVERRIDE in (os.environ if environ is None else environ) or _mallopt is None:
        return False
    return bool(_mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def trim_size(environ: Mapping[str, str] | None = None) -> int:
    """The fetched bytes after which to ``release_free_memory``; 0: never (the operator's call)."""
    if TRIM_OVERRIDE in (os.environ if environ is None else environ) or _malloc_trim is None:
        return 0
    return TRIM_MIN


def release_free_memory() -> bool:
    """Give the heap's free pages back to the kernel (``malloc_trim(0)``); False if unsupported.

    ctypes lets go of the GIL for the call, so the event loop runs on meanwhile.
    """
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


# Buffers this big are mapped by glibc (above MMAP_THRESHOLD) and worth advising; below, the
# heap serves them from memory already faulted in.
HUGE_PAGE_ADVICE_MIN = MMAP_THRESHOLD
_PAGE = mmap.PAGESIZE
_bytes_new = ctypes.pythonapi.PyBytes_FromStringAndSize
_bytes_new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
_bytes_new.restype = ctypes.py_object
_bytes_data = ctypes.pythonapi.PyBytes_AsString
_bytes_data.argtypes = (ctypes.py_object,)
_bytes_data.restype = ctypes.c_void_p


@dataclass(frozen=True, slots=True)
class PayloadBuffer:
    """A new ``bytes`` of ``len(view)`` bytes, and a writable view of it to fill before use.

    CPython's own way to build a bytes object of a known size without a second copy
    (``PyBytes_FromStringAndSize(NULL, size)``: "the contents are uninitialized"). Nobody else
    holds ``data`` until it is handed on, and it must not be before every byte is written:
    bytes are immutable once shared (their hash is cached, for one).
    """

    data: bytes
    view: memoryview


def payload_buffer(size: int) -> PayloadBuffer:
    """A bytes object of ``size`` uninitialised bytes to fill through ``.view``."""
    if size <= 0:
        raise ValueError(f"a payload buffer holds at least one byte, not {size}")
    data = _bytes_new(None, size)
    address = _bytes_data(data)
    if size >= HUGE_PAGE_ADVICE_MIN:
        _advise_huge_pages(address, size)
    view = memoryview((ctypes.c_char * size).from_address(address)).cast("B")
    return PayloadBuffer(data, view)


def _advise_huge_pages(address: int, size: int) -> None:
    """MADV_HUGEPAGE on the whole pages of ``[address, address + size)``; a no-op where refused.

    Linux backs the 2 MiB-aligned stretches with huge pages when transparent huge pages are
    ``madvise`` or ``always``; elsewhere (``never``, no THP, another kernel) the call fails and
    the buffer is faulted in 4 KiB pages as before.
    """
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or _madvise is None:
        return
    start = -(-address // _PAGE) * _PAGE
    end = (address + size) // _PAGE * _PAGE
    if end > start:
        _madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), advice)
