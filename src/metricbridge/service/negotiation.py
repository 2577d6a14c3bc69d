"""Content negotiation for /metrics: which format, whether gzip, how long the scraper waits."""

from __future__ import annotations

import math

from metricbridge.model.family import Format

OPENMETRICS_TYPE = (
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
)
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _q(params: dict[str, str]) -> float:
    try:
        return float(params.get("q", "1"))
    except ValueError:
        return 0.0


def choose_format(accept: str | None) -> Format:
    """OpenMetrics 1.0.0 when the Accept header prefers it (q-values honoured), else text 0.0.4.

    Every name the bridge serves fits the legacy charset (colons included), so the answer is
    the same whatever ``escaping`` a Prometheus 3 scraper asks for.
    """
    best_om = best_text = 0.0
    for entry in (accept or "").split(","):
        media, *raw_params = (part.strip() for part in entry.split(";"))
        params = dict(p.split("=", 1) for p in raw_params if "=" in p)
        q = _q(params)
        if media.lower() == "application/openmetrics-text" and params.get("version", "1.0.0") in (
            "1.0.0",
            "0.0.1",
        ):
            best_om = max(best_om, q)
        elif media.lower() in ("text/plain", "*/*", "text/*"):
            best_text = max(best_text, q)
    return Format.OPENMETRICS if best_om > 0 and best_om >= best_text else Format.TEXT


def content_type(fmt: Format) -> str:
    """The Content-Type of a response in ``fmt``."""
    return OPENMETRICS_TYPE if fmt is Format.OPENMETRICS else TEXT_TYPE


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
