"""Client connections: at most ``cap`` open at once, each one counted, those over it refused.

A scraper that connects and never reads, or a thousand idle keep-alive connections, must not
exhaust the process's file descriptors (then every accept() fails and no scrape is answered) or
pin a response's buffers for good. The cap is checked when a connection is made, before aiohttp
sees it; idle connections are closed by aiohttp's keep-alive timeout and stalled writes by the
server's write deadline, both counted here.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable, Iterator

from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from metricbridge.exposition.writer import label_set, write_header
from metricbridge.model.family import FamilyMeta, Format, MetricType
from metricbridge.model.numbers import format_value

log = logging.getLogger("metricbridge.server")
# A spell of refusals is logged (a warning, then an info line when it ends) at most this often:
# a client churning one connection at the cap starts a new spell with every connection.
_SPELL_LOG_INTERVAL = 60.0
# File descriptors kept free below the soft limit for upstream connections, the rules file and
# the interpreter's own; the connection cap is lowered to fit under the rest.
_RESERVED_DESCRIPTORS = 64


class ConnectionLimit(Collector):
    """The count of open client connections, and a protocol factory that enforces the cap.

    A collector too, so ``name[]`` and tests see through prometheus_client what ``render``
    writes by hand for every response.
    """

    def __init__(self, cap: int = 512) -> None:
        self.cap = cap
        self.open = 0
        self.refused = 0  # connections closed on arrival because ``cap`` were open
        self.write_timeouts = 0  # responses abandoned because the client stopped reading
        # Requests aiohttp could not parse, by exception class (a handful of aiohttp's own).
        self.bad_requests: dict[str, int] = {}
        self._refusing = False  # log the start of a refusal spell once, not every connection
        self._spell_logged = False  # whether the current spell's start was logged
        self._logged_at = float("-inf")  # monotonic time of the last spell logged

    def protocol_factory(
        self, factory: Callable[[], asyncio.BaseProtocol]
    ) -> Callable[[], asyncio.Protocol]:
        """Wrap aiohttp's protocol factory (``runner.server``) with the cap."""
        return lambda: _Counted(self, factory)

    def _families(self) -> tuple[tuple[str, MetricType, str, int], ...]:
        return (
            (
                "metricbridge_connections_open",
                MetricType.GAUGE,
                "Open client connections.",
                self.open,
            ),
            (
                "metricbridge_connections_max",
                MetricType.GAUGE,
                "The cap on open client connections (--web.max-connections).",
                self.cap,
            ),
            (
                "metricbridge_connections_refused_total",
                MetricType.COUNTER,
                "Client connections closed on arrival because the cap was reached.",
                self.refused,
            ),
            (
                "metricbridge_responses_abandoned_total",
                MetricType.COUNTER,
                "Responses abandoned because the client read nothing for --web.write-timeout.",
                self.write_timeouts,
            ),
        )

    def render(self, fmt: Format) -> bytes:
        """The connection families in ``fmt``, as of now (rendered per response: they move)."""
        lines = []
        for name, mtype, help_text, value in self._families():
            lines.append(write_header(FamilyMeta(name, mtype, help_text), fmt))
            lines.append(f"{name} {format_value(float(value))}\n".encode())
        name, help_text = _BAD_REQUESTS
        lines.append(write_header(FamilyMeta(name, MetricType.COUNTER, help_text), fmt))
        for kind, count in self.bad_requests.items():
            pairs = label_set((("kind", kind),))
            lines.append(f"{name}{pairs} {format_value(float(count))}\n".encode())
        return b"".join(lines)

    def collect(self) -> Iterator[Metric]:
        """The same families for prometheus_client."""
        for name, mtype, help_text, value in self._families():
            if mtype is MetricType.COUNTER:
                yield CounterMetricFamily(name, help_text, value=float(value))
            else:
                yield GaugeMetricFamily(name, help_text, value=float(value))
        bad = CounterMetricFamily(*_BAD_REQUESTS, labels=["kind"])
        for kind, count in self.bad_requests.items():
            bad.add_metric([kind], float(count))
        yield bad

    def log_filter(self) -> logging.Filter:
        """A filter for aiohttp's server log that counts unparsable requests instead.

        aiohttp logs each at error with a traceback: a client sending garbage 2,000 times a
        second wrote 1.5 MB/s of log. Each kind is counted, and logged once, at debug.
        """
        return _BadRequestLog(self)

    def _admit(self) -> bool:
        if self.open >= self.cap:
            self.refused += 1
            if not self._refusing:
                self._refusing = True
                now = time.monotonic()
                self._spell_logged = now - self._logged_at >= _SPELL_LOG_INTERVAL
                if self._spell_logged:
                    self._logged_at = now
                    log.warning(
                        "%d client connections open: refusing new ones (each counted in "
                        "metricbridge_connections_refused_total; logged at most once a minute)",
                        self.open,
                    )
            return False
        self.open += 1
        return True

    def _release(self) -> None:
        self.open -= 1
        if self._refusing and self.open < self.cap:
            if self._spell_logged:
                log.info("client connections below the cap again (%d open)", self.open)
            self._refusing = False


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


def fitted_cap(requested: int) -> int:
    """``requested``, lowered to fit under the process's open-file limit (with a warning)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    room = max(1, soft - _RESERVED_DESCRIPTORS)
    if requested > room:
        log.warning(
            "--web.max-connections %d does not fit the open-file limit %d: using %d",
            requested,
            soft,
            room,
        )
        return room
    return requested


class _Counted(asyncio.Protocol):
    """aiohttp's protocol behind the cap: forwards every call once the connection is admitted."""

    __slots__ = ("_admitted", "_factory", "_inner", "_limit")

    def __init__(self, limit: ConnectionLimit, factory: Callable[[], asyncio.BaseProtocol]) -> None:
        self._limit = limit
        self._factory = factory
        self._inner: asyncio.Protocol | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._limit._admit():  # noqa: SLF001 - the limit's own helper for its protocol
            transport.close()
            return
        self._admitted = True
        inner = self._factory()
        assert isinstance(inner, asyncio.Protocol)  # aiohttp's RequestHandler  # noqa: S101
        self._inner = inner
        inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._inner.connection_lost(exc)
        if self._admitted:
            self._admitted = False
            self._limit._release()  # noqa: SLF001

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()
