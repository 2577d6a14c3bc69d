"""Client connections: a cap on those served at once, and who gives way when it is reached.

A scraper that connects and never sends a request, or a thousand idle keep-alive connections,
must neither exhaust the process's file descriptors (then every accept() fails and no scrape is
answered) nor lock every scrape out until they time out. At most ``cap`` connections are handed
to aiohttp. When one more arrives, the connection that has been idle the longest between two
requests gives way, else the oldest one still sending its request head; when every slot is busy
answering, the newcomer waits, unread, for a slot, up to the header-read timeout, and is then
answered 503 with ``Retry-After``; when the waiting room is full too, it is answered 503 at once.
A request head is due within ``header_timeout`` of the connection (or of the request's first
byte on a kept-alive one), as Go's ``http.Server.ReadHeaderTimeout``. Idle connections are
closed by aiohttp's keep-alive timeout and stalled writes by the server's write deadline. Each
of these is counted here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from metricbridge.exposition.writer import label_set, write_header
from metricbridge.model.family import FamilyMeta, Format, MetricType
from metricbridge.model.numbers import format_value
from metricbridge.service.client_connection import ClientConnection, Stage
from metricbridge.service.tracebacks import release_frames

log = logging.getLogger("metricbridge.server")
# A spell of refusals is logged (a warning, then an info line when it ends) at most this often:
# a client churning one connection at the cap starts a new spell with every connection.
_SPELL_LOG_INTERVAL = 60.0
# A connection still sending its request head gives way to a newcomer only once it has had this
# long (or half the header timeout, if shorter): in a burst of connections, aiohttp reads each
# one's request a moment after accepting it, and those moments must not be mistaken for
# silence. Until then a newcomer waits.
_HEAD_GRACE_SECONDS = 1.0
# Why a connection was closed to make room, as metricbridge_connections_evicted_total{state}.
_EVICTED_STATES = {Stage.IDLE: "idle", Stage.HEAD: "reading_head"}


async def _write_quietly(answer: web.StreamResponse, request: web.Request) -> None:
    """Write an error answer; a client that already left gets none, without a traceback."""
    try:
        await answer.prepare(request)
        await answer.write_eof()
    except ConnectionError as exc:
        release_frames(exc)
        log.debug("client disconnected before its error answer was written")


class ConnectionLimit(Collector):
    """The client connections, their cap and its policy (see the module docstring).

    A collector too, so ``name[]`` and tests see through prometheus_client what ``render``
    writes by hand for every response.
    """

    def __init__(self, cap: int = 512, header_timeout: float = 10.0) -> None:
        self.cap = cap
        self.waiting_cap = cap  # connections kept unread while every slot is busy
        self.header_timeout = header_timeout
        self.open = 0  # connections handed to aiohttp
        self.refused = 0  # connections answered 503: every slot busy, no room to wait
        self.write_timeouts = 0  # responses abandoned because the client stopped reading
        self.header_timeouts = 0  # connections closed without a request head in time
        self.evicted = dict.fromkeys(_EVICTED_STATES.values(), 0)  # closed to make room
        # Per format, the figures last rendered and their text (``render``).
        self._rendered: dict[Format, tuple[object, bytes]] = {}
        # Requests aiohttp could not parse, by exception class (a handful of aiohttp's own).
        self.bad_requests: dict[str, int] = {}
        # Admitted connections by transport (the middleware's way back to them), and those a
        # newcomer may displace or that wait for a slot, each oldest first (dicts keep order).
        self._by_transport: dict[asyncio.BaseTransport, ClientConnection] = {}
        self._idle: dict[ClientConnection, None] = {}
        self._heading: dict[ClientConnection, None] = {}
        self._waiting: dict[ClientConnection, None] = {}
        self._room_check: asyncio.TimerHandle | None = None  # see _schedule_room_check
        self._refusing = False  # log the start of a refusal spell once, not every connection
        self._spell_logged = False  # whether the current spell's start was logged
        self._logged_at = float("-inf")  # monotonic time of the last spell logged

    @property
    def waiting(self) -> int:
        """Connections accepted and kept unread until a slot frees."""
        return len(self._waiting)

    def protocol_factory(
        self, factory: Callable[[], asyncio.BaseProtocol]
    ) -> Callable[[], asyncio.Protocol]:
        """Wrap aiohttp's protocol factory (``runner.server``) with the cap."""
        return lambda: ClientConnection(self, factory)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Mark the connection busy while its request is answered, idle once it is written.

        The answer is written here, not after the middleware as aiohttp would: a connection
        marked idle may be closed at once to make room, and its answer must be out by then.
        """
        conn = self._by_transport.get(request.transport) if request.transport else None
        if conn is None:
            return await handler(request)
        conn.dispatched()
        try:
            response = await handler(request)
            if not response.prepared:
                await response.prepare(request)
                await response.write_eof()
        except web.HTTPException as exc:
            if isinstance(exc, web.StreamResponse) and not exc.prepared:
                await _write_quietly(exc, request)
            raise
        except ConnectionError as exc:
            # The client left before its answer was out (a probe past its own timeout, a
            # connection evicted for a newcomer): nobody is left to answer, and it is not the
            # bridge's error, so no traceback in the log.
            release_frames(exc)
            log.debug("client disconnected before its answer was written")
            return response
        finally:
            conn.answered()
        return response

    # --- the policy (Slots, for ClientConnection) ------------------------------------------

    def arrived(self, conn: ClientConnection) -> None:
        """Admit ``conn`` if there is a slot or one can be freed; else let it wait, or refuse."""
        self._fill_from_waiting()  # those waiting first, into any slot that can be freed now
        if self.open < self.cap and not self._waiting:
            self._admit(conn)
        elif len(self._waiting) < self.waiting_cap:
            conn.wait()  # behind those waiting already, if a slot can be freed for one
            self._fill_from_waiting()
        elif not self._waiting and self._make_room():
            self._admit(conn)
        else:
            self._refuse(conn)

    def moved(self, conn: ClientConnection, before: Stage) -> None:
        """Keep the idle, heading and waiting sets in step with ``conn``'s stage."""
        self._index(before).pop(conn, None)
        self._index(conn.stage)[conn] = None
        if conn.stage is Stage.IDLE and self._waiting:
            self._fill_from_waiting()  # an idle connection gives way to one waiting

    def timed_out(self, conn: ClientConnection) -> None:
        """No request head in time: close it; a waiting one is answered 503 instead."""
        if conn.stage is Stage.WAITING:
            self._waiting.pop(conn, None)
            self._refuse(conn)
            self._note_room()
            return
        self.header_timeouts += 1
        self._heading.pop(conn, None)
        self._release(conn)  # evict() marks it closed: lost() will not free the slot again
        conn.evict()
        self._fill_from_waiting()
        self._note_room()

    def lost(self, conn: ClientConnection, before: Stage) -> None:
        """``conn`` closed: free its slot (unless it was given away already) for a waiter."""
        self._index(before).pop(conn, None)
        if before in (Stage.HEAD, Stage.BUSY, Stage.IDLE):
            self._release(conn)
            self._fill_from_waiting()
        self._note_room()

    # --- inside ----------------------------------------------------------------------------

    def _index(self, stage: Stage) -> dict[ClientConnection, None]:
        if stage is Stage.IDLE:
            return self._idle
        if stage is Stage.HEAD:
            return self._heading
        if stage is Stage.WAITING:
            return self._waiting
        return {}

    def _make_room(self) -> bool:
        """Close the longest idle connection, else the oldest still sending its head."""
        if self._idle:
            self._evict(next(iter(self._idle)))
            return True
        if self._heading:
            oldest = next(iter(self._heading))
            if asyncio.get_running_loop().time() - oldest.since >= self._head_grace():
                self._evict(oldest)
                return True
        return False

    def _head_grace(self) -> float:
        return min(_HEAD_GRACE_SECONDS, self.header_timeout / 2)

    def _schedule_room_check(self) -> None:
        """While some wait, look again when the oldest connection sending its head is due."""
        if self._room_check is not None or not self._waiting or not self._heading:
            return
        due = next(iter(self._heading)).since + self._head_grace()
        self._room_check = asyncio.get_running_loop().call_at(due, self._check_room)

    def _check_room(self) -> None:
        self._room_check = None
        self._fill_from_waiting()

    def _evict(self, conn: ClientConnection) -> None:
        self.evicted[_EVICTED_STATES[conn.stage]] += 1
        self._index(conn.stage).pop(conn, None)
        self._release(conn)
        conn.evict()

    def _admit(self, conn: ClientConnection) -> None:
        self.open += 1
        assert conn.transport is not None  # noqa: S101 - only ever after connection_made
        self._by_transport[conn.transport] = conn
        conn.admit()

    def _fill_from_waiting(self) -> None:
        """Admit those waiting, oldest first, into free slots or slots that can be freed."""
        while self._waiting and (self.open < self.cap or self._make_room()):
            self._admit(next(iter(self._waiting)))  # its move to HEAD takes it out of the room
        self._schedule_room_check()

    def _release(self, conn: ClientConnection) -> None:
        if conn.transport is not None:
            self._by_transport.pop(conn.transport, None)
        self.open -= 1

    def _note_room(self) -> None:
        """End a spell of refusals once a newcomer would be admitted or let wait again."""
        if self._refusing and (self.open < self.cap or len(self._waiting) < self.waiting_cap):
            if self._spell_logged:
                log.info(
                    "client connections below the cap again (%d open, %d waiting)",
                    self.open,
                    len(self._waiting),
                )
            self._refusing = False

    def _refuse(self, conn: ClientConnection) -> None:
        self.refused += 1
        if not self._refusing:
            self._refusing = True
            now = time.monotonic()
            self._spell_logged = now - self._logged_at >= _SPELL_LOG_INTERVAL
            if self._spell_logged:
                self._logged_at = now
                log.warning(
                    "%d client connections busy and %d waiting: answering 503 to new ones "
                    "(each counted in metricbridge_connections_refused_total; logged at most "
                    "once a minute)",
                    self.open,
                    len(self._waiting),
                )
        conn.refuse()

    # --- self-metrics ----------------------------------------------------------------------

    def _families(self) -> tuple[tuple[str, MetricType, str, int], ...]:
        return (
            (
                "metricbridge_connections_open",
                MetricType.GAUGE,
                "Client connections being served (idle keep-alive ones included).",
                self.open,
            ),
            (
                "metricbridge_connections_max",
                MetricType.GAUGE,
                "The cap on client connections served at once (--web.max-connections).",
                self.cap,
            ),
            (
                "metricbridge_connections_waiting",
                MetricType.GAUGE,
                "Client connections accepted but not read yet: every slot is busy.",
                len(self._waiting),
            ),
            (
                "metricbridge_connections_refused_total",
                MetricType.COUNTER,
                "Client connections answered 503: every slot busy and no room to wait.",
                self.refused,
            ),
            (
                "metricbridge_connections_header_timeouts_total",
                MetricType.COUNTER,
                "Client connections closed without a request head in --web.read-header-timeout.",
                self.header_timeouts,
            ),
            (
                "metricbridge_responses_abandoned_total",
                MetricType.COUNTER,
                "Responses abandoned because the client read nothing for --web.write-timeout.",
                self.write_timeouts,
            ),
        )

    def render(self, fmt: Format) -> bytes:
        """The connection families in ``fmt``, as of now; written again only once one moved.

        Asked for by every response, where they mostly read as they did for the last one:
        comparing the figures costs a microsecond, writing the families forty.
        """
        families = self._families()
        figures = (
            tuple(family[3] for family in families),
            tuple(tuple(counts.items()) for _, _, counts in self._labelled()),
        )
        last = self._rendered.get(fmt)
        if last is not None and last[0] == figures:
            return last[1]
        text = self._render(families, fmt)
        self._rendered[fmt] = (figures, text)
        return text

    def _render(self, families: tuple[tuple[str, MetricType, str, int], ...], fmt: Format) -> bytes:
        lines = []
        for name, mtype, help_text, value in families:
            lines.append(write_header(FamilyMeta(name, mtype, help_text), fmt))
            lines.append(f"{name} {format_value(float(value))}\n".encode())
        for (name, help_text), label, counts in self._labelled():
            lines.append(write_header(FamilyMeta(name, MetricType.COUNTER, help_text), fmt))
            for key, count in counts.items():
                pairs = label_set(((label, key),))
                lines.append(f"{name}{pairs} {format_value(float(count))}\n".encode())
        return b"".join(lines)

    def collect(self) -> Iterator[Metric]:
        """The same families for prometheus_client."""
        for name, mtype, help_text, value in self._families():
            if mtype is MetricType.COUNTER:
                yield CounterMetricFamily(name, help_text, value=float(value))
            else:
                yield GaugeMetricFamily(name, help_text, value=float(value))
        for (name, help_text), label, counts in self._labelled():
            family = CounterMetricFamily(name, help_text, labels=[label])
            for key, count in counts.items():
                family.add_metric([key], float(count))
            yield family

    def _labelled(self) -> tuple[tuple[tuple[str, str], str, dict[str, int]], ...]:
        return ((_EVICTED, "state", self.evicted), (_BAD_REQUESTS, "kind", self.bad_requests))

    def log_filter(self) -> logging.Filter:
        """A filter for aiohttp's server log that counts unparsable requests instead.

        aiohttp logs each at error with a traceback: a client sending garbage 2,000 times a
        second wrote 1.5 MB/s of log. Each kind is counted, and logged once, at debug.
        """
        return _BadRequestLog(self)


_EVICTED = (
    "metricbridge_connections_evicted_total",
    (
        "Client connections closed to make room for a new one at the cap, by the state they "
        "were in (idle between requests, or still sending a request head)."
    ),
)
_BAD_REQUESTS = (
    "metricbridge_bad_requests_total",
    "Client requests that could not be parsed as HTTP, by kind (aiohttp's exception class).",
)


class _BadRequestLog(logging.Filter):
    def __init__(self, limit: ConnectionLimit) -> None:
        super().__init__()
        self._limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        kind = type(exc).__name__
        counts = self._limit.bad_requests
        first = kind not in counts
        counts[kind] = counts.get(kind, 0) + 1
        if first:
            log.debug("unparsable client request (%s), counted from now on: %.80s", kind, exc)
        return False
