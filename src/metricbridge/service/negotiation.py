"""Content negotiation for /metrics: which format, whether gzip, how long the scraper waits."""

from __future__ import annotations

import math
from dataclasses import dataclass

from metricbridge.model.family import Format
from metricbridge.model.names import Escaping

OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _q(params: dict[str, str]) -> float:
    try:
        return float(params.get("q", "1"))
    except ValueError:
        return 0.0


_ESCAPINGS = frozenset(scheme.value for scheme in Escaping)


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What an Accept header asked for: a wire format and an escaping of names."""

    format: Format
    escaping: Escaping


@dataclass(frozen=True, slots=True)
class _Clause:
    media: str
    params: dict[str, str]
    q: float

    @property
    def openmetrics(self) -> bool:
        return self.media == "application/openmetrics-text" and self.params.get(
            "version", "1.0.0"
        ) in ("1.0.0", "0.0.1")

    @property
    def text(self) -> bool:
        return self.media in ("text/plain", "*/*", "text/*")


def _clauses(accept: str | None) -> list[_Clause]:
    """The clauses of an Accept header, most preferred first (a stable sort: ties keep order)."""
    clauses = []
    for entry in (accept or "").split(","):
        media, *raw_params = (part.strip() for part in entry.split(";"))
        params = {
            key.strip().lower(): value.strip()
            for key, _, value in (p.partition("=") for p in raw_params if "=" in p)
        }
        clauses.append(_Clause(media.lower(), params, _q(params)))
    return sorted(clauses, key=lambda clause: -clause.q)


def negotiate(accept: str | None) -> Negotiated:
    """The format (``choose_format``) and the escaping an Accept header asks for.

    The escaping is client_golang's (expfmt ``NegotiateAccept``): the ``escaping`` parameter of
    the clause that chose the format, else of the last clause before it that had a known one,
    in order of preference; ``underscores`` when none did. Every name the bridge serves is a
    legacy name (the reader spells UTF-8 names with underscores; ``sglang:`` names are legacy
    names, colons included), and client_golang escapes only names that are not, so the body is
    the same under every escaping; the Content-Type says which one was negotiated.
    """
    clauses = _clauses(accept)
    fmt = choose_format(accept)
    escaping = Escaping.UNDERSCORES
    for clause in clauses:
        if clause.q <= 0:
            continue
        named = clause.params.get("escaping", "")
        if named in _ESCAPINGS:  # absent or unknown: ignored, as client_golang ignores it
            escaping = Escaping(named)
        if clause.openmetrics if fmt is Format.OPENMETRICS else clause.text:
            break
    return Negotiated(fmt, escaping)


def choose_format(accept: str | None) -> Format:
    """OpenMetrics 1.0.0 when the Accept header prefers it (q-values honoured), else text 0.0.4."""
    best_om = best_text = 0.0
    for clause in _clauses(accept):
        if clause.openmetrics:
            best_om = max(best_om, clause.q)
        elif clause.text:
            best_text = max(best_text, clause.q)
    return Format.OPENMETRICS if best_om > 0 and best_om >= best_text else Format.TEXT


def content_type(fmt: Format, escaping: Escaping = Escaping.UNDERSCORES) -> str:
    """The Content-Type of a response in ``fmt``, echoing the escaping as client_golang does."""
    base = OPENMETRICS_TYPE if fmt is Format.OPENMETRICS else TEXT_TYPE
    return f"{base}; escaping={escaping.value}"


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether the client accepts gzip (and did not refuse it with q=0)."""
    for entry in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in entry.split(";"))
        if coding.lower() == "gzip":
            return not any(_refused(param) for param in params)
    return False


def _refused(param: str) -> bool:
    """Whether an Accept-Encoding parameter is ``q=0`` (RFC 9110: "q" in any case, 0 to 0.000)."""
    key, _, value = param.partition("=")
    if key.strip().lower() != "q":
        return False
    try:
        return float(value.strip()) == 0
    except ValueError:
        return False


def scrape_timeout(header: str | None, *, cap: float, offset: float = 0.5) -> float:
    """How long a scrape may wait for the engine: its scraper's timeout less a margin, <= ``cap``.

    Prometheus sends X-Prometheus-Scrape-Timeout-Seconds and drops the whole scrape, self-metrics
    included, if the answer comes later; the margin leaves time to render and send one with
    upstream_up 0 instead. It is a quarter of the scraper's timeout, at most ``offset``: a fixed
    0.5 s would leave nothing of a 0.5 s timeout, and no margin at all would lose the race.
    Without the header (or with one that is not a positive number) the wait is ``cap`` itself.
    """
    try:
        scraper = float(header) if header else math.inf
    except ValueError:
        scraper = math.inf
    if not 0 < scraper < math.inf:  # also rejects NaN
        return cap
    return min(cap, scraper - min(offset, scraper / 4))
