"""One client connection in front of aiohttp's protocol: where it stands, and its deadlines.

A connection is, in turn: ``WAITING`` (accepted while every slot was busy: nothing read yet,
aiohttp has not seen it), ``HEAD`` (admitted, its request head not yet dispatched: the
header-read deadline runs, as Go's ``http.Server.ReadHeaderTimeout``), ``BUSY`` (a request
being answered), ``IDLE`` (a keep-alive connection between requests: aiohttp's keep-alive
timeout runs), or ``REFUSED`` (answered 503 because there was no room at all). The policy,
which connection to admit, keep waiting or close, is ``ConnectionLimit``'s; this class only
does what it is told and tells it what happened.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Protocol

# After a 503 the request is read and dropped until the client closes, at most this long:
# closing a socket with unread bytes makes the kernel send a reset, and the client then often
# loses the answer that was already on its way.
_LINGER_SECONDS = 2.0
# Bytes a waiting connection may have delivered before it is admitted (a TLS transport can hand
# over what it decrypted before pausing): more is refused rather than buffered.
_WAITING_BUFFER = 64 << 10
_RETRY_AFTER_SECONDS = 1
_BUSY_TEXT = b"every connection slot is busy; retry shortly\n"
BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: %d\r\n"
    b"Connection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
) % (_RETRY_AFTER_SECONDS, len(_BUSY_TEXT), _BUSY_TEXT)


class Stage(enum.Enum):
    """Where a connection stands (see the module docstring)."""

    NEW = enum.auto()
    WAITING = enum.auto()
    HEAD = enum.auto()
    BUSY = enum.auto()
    IDLE = enum.auto()
    REFUSED = enum.auto()
    CLOSED = enum.auto()


class Slots(Protocol):
    """What a connection tells the limit (``ConnectionLimit`` implements it)."""

    header_timeout: float

    def arrived(self, conn: ClientConnection) -> None:
        """A new connection: admit it, keep it waiting, or refuse it."""

    def moved(self, conn: ClientConnection, before: Stage) -> None:
        """``conn`` went from ``before`` to ``conn.stage``."""

    def timed_out(self, conn: ClientConnection) -> None:
        """``conn`` ran out of time for its request head (or for a slot, while waiting)."""

    def lost(self, conn: ClientConnection, before: Stage) -> None:
        """``conn`` closed while it was at ``before``."""


class ClientConnection(asyncio.Protocol):
    """A client connection; forwards everything to aiohttp's protocol once admitted."""

    __slots__ = ("_early", "_factory", "_inner", "_slots", "_timer", "since", "stage", "transport")

    def __init__(self, slots: Slots, factory: Callable[[], asyncio.BaseProtocol]) -> None:
        self._slots = slots
        self._factory = factory
        self._inner: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._early: list[bytes] = []  # what a waiting connection delivered before admission
        self.stage = Stage.NEW
        self.since = 0.0  # event-loop time it entered its stage
        self.transport: asyncio.Transport | None = None

    # --- what the limit tells it -----------------------------------------------------------

    def admit(self) -> None:
        """Hand the connection to aiohttp; its request head is due within the header timeout."""
        transport = self.transport
        assert transport is not None  # noqa: S101 - only ever called after connection_made
        waited = self.stage is Stage.WAITING
        self._move(Stage.HEAD)
        inner = self._factory()
        assert isinstance(inner, asyncio.Protocol)  # aiohttp's RequestHandler  # noqa: S101
        self._inner = inner
        inner.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            inner.data_received(data)
        if waited and not transport.is_closing():
            transport.resume_reading()

    def wait(self) -> None:
        """Read nothing until a slot frees (``admit``) or the header timeout ends (503)."""
        assert self.transport is not None  # noqa: S101
        self.transport.pause_reading()
        self._move(Stage.WAITING)

    def refuse(self) -> None:
        """Answer 503 with Retry-After, read what the client sends, then close."""
        transport = self.transport
        assert transport is not None  # noqa: S101
        was_waiting = self.stage is Stage.WAITING
        self._early = []
        self._move(Stage.REFUSED)
        if was_waiting:
            transport.resume_reading()
        transport.write(BUSY_ANSWER)
        if transport.can_write_eof():
            transport.write_eof()  # the client reads the answer, then closes: no reset
        self._timer = asyncio.get_running_loop().call_later(_LINGER_SECONDS, transport.close)

    def evict(self) -> None:
        """Close at once (idle, or still sending its head, when another needs the slot)."""
        self._cancel_timer()
        self.stage = Stage.CLOSED  # the limit has already given the slot away
        self._close()

    # --- what aiohttp's side tells it (the limit's middleware) -----------------------------

    def dispatched(self) -> None:
        """Aiohttp read a whole request head and is answering it."""
        if self.stage in (Stage.HEAD, Stage.IDLE):
            self._move(Stage.BUSY)

    def answered(self) -> None:
        """The answer is written: the connection is idle until its next request."""
        if self.stage is Stage.BUSY:
            self._move(Stage.IDLE)

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Ask the limit what to do with the new connection."""
        assert isinstance(transport, asyncio.Transport)  # noqa: S101 - a stream server's
        self.transport = transport
        self._slots.arrived(self)

    def connection_lost(self, exc: Exception | None) -> None:
        """Tell aiohttp, then the limit (which may admit a waiting connection in its place)."""
        self._cancel_timer()
        before, self.stage = self.stage, Stage.CLOSED
        if self._inner is not None:
            self._inner.connection_lost(exc)
            self._inner = None
        self._early = []
        self._slots.lost(self, before)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        """Forward to aiohttp; the first byte of a new request starts its header deadline."""
        if self.stage is Stage.IDLE:
            self._move(Stage.HEAD)
        if self._inner is not None:
            self._inner.data_received(data)
        elif self.stage is Stage.WAITING:
            self._early.append(data)
            if sum(map(len, self._early)) > _WAITING_BUFFER:
                self._slots.timed_out(self)
        # REFUSED: the request is read and dropped (see _LINGER_SECONDS)

    def eof_received(self) -> bool | None:
        """Forward to aiohttp; a refused client's end closes the connection."""
        if self.stage is Stage.REFUSED and self.transport is not None:
            self.transport.close()
            return None
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        """Forward to aiohttp (a slow reader's flow control)."""
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        """Forward to aiohttp."""
        if self._inner is not None:
            self._inner.resume_writing()

    # --- inside ----------------------------------------------------------------------------

    def _move(self, stage: Stage) -> None:
        before, self.stage = self.stage, stage
        self._cancel_timer()
        loop = asyncio.get_running_loop()
        self.since = loop.time()
        if stage in (Stage.HEAD, Stage.WAITING):
            timeout = self._slots.header_timeout
            self._timer = loop.call_later(timeout, self._slots.timed_out, self)
        self._slots.moved(self, before)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _close(self) -> None:
        inner = self._inner
        # aiohttp's own way to drop a connection: it closes the transport and ends its task
        # (RequestHandler.close() would leave an idle one open).
        force_close = getattr(inner, "force_close", None)
        if callable(force_close):
            force_close()
        elif self.transport is not None:
            self.transport.close()
