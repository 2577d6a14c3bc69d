"""Content negotiation: which format and encoding a scraper gets."""

from __future__ import annotations

import pytest

from helpers.service import PROM2_ACCEPT, PROM3_ACCEPT
from metricbridge.model.family import Format
from metricbridge.service.negotiation import (
    Escaping,
    Negotiated,
    accepts_gzip,
    choose_format,
    content_type,
    negotiate,
)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ("identity", False),
        ("gzip", True),
        ("GZIP", True),
        ("br, gzip;q=0.5, deflate", True),
        ("gzip;q=0", False),
        ("gzip; q=0.000", False),
        ("gzip;Q=0", False),  # RFC 9110: parameter names are case-insensitive
        ("gzip;q = 0", False),
        ("gzip;q=0.001", True),
        ("gzip;q=bogus", True),  # an unreadable weight is no refusal
        ("gzip;level=0", True),
    ],
)
def test_gzip_is_given_unless_refused_with_q_0(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected


@pytest.mark.parametrize(
    ("accept", "fmt", "escaping"),
    [
        (None, Format.TEXT, Escaping.UNDERSCORES),
        (PROM2_ACCEPT, Format.OPENMETRICS, Escaping.UNDERSCORES),
        (PROM3_ACCEPT, Format.OPENMETRICS, Escaping.ALLOW_UTF8),
        ("text/plain;version=0.0.4;escaping=dots", Format.TEXT, Escaping.DOTS),
        (
            "application/openmetrics-text;version=1.0.0;escaping=values",
            Format.OPENMETRICS,
            Escaping.VALUES,
        ),
        ("text/plain;escaping=underscores", Format.TEXT, Escaping.UNDERSCORES),
        ("text/plain;escaping=bogus", Format.TEXT, Escaping.UNDERSCORES),  # unknown: ignored
        # The chosen clause's own escaping, not a less preferred clause's.
        (
            "text/plain;escaping=dots,application/json;escaping=values;q=0.1",
            Format.TEXT,
            Escaping.DOTS,
        ),
        # None on the chosen clause: the last one named before it, in order of preference.
        ("application/json;escaping=dots,text/plain;q=0.5", Format.TEXT, Escaping.DOTS),
        ("text/plain;q=0.5,application/json;escaping=dots", Format.TEXT, Escaping.DOTS),
        # A refused clause (q=0) names nothing.
        ("text/plain,application/json;escaping=dots;q=0", Format.TEXT, Escaping.UNDERSCORES),
    ],
)
def test_escaping_is_settled_as_client_golang_settles_it(
    accept: str | None, fmt: Format, escaping: Escaping
) -> None:
    assert negotiate(accept) == Negotiated(fmt, escaping)
    assert choose_format(accept) is fmt


@pytest.mark.parametrize("escaping", list(Escaping))
def test_content_type_echoes_the_escaping(escaping: Escaping) -> None:
    """As client_golang's: the format's own type, then ``; escaping=`` and the scheme."""
    assert content_type(Format.TEXT, escaping) == (
        f"text/plain; version=0.0.4; charset=utf-8; escaping={escaping.value}"
    )
    assert content_type(Format.OPENMETRICS, escaping) == (
        f"application/openmetrics-text; version=1.0.0; charset=utf-8; escaping={escaping.value}"
    )
