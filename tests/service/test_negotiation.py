"""Content negotiation: which format and encoding a scraper gets."""

from __future__ import annotations

import pytest

from metricbridge.service.negotiation import accepts_gzip


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
