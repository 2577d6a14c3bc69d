"""Timestamps out of a float's range are a located problem, never an exception out of the reader.

Found by test_properties' mutated-exposition property: an OpenMetrics ``1e999`` read as
infinity and then failed the text writer (OverflowError), and a text timestamp of 400 digits
failed the reader itself.
"""

from __future__ import annotations

import pytest

from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format, Verify
from metricbridge.model.names import quoted

LONG = "1" + "0" * 400


@pytest.mark.parametrize(
    ("payload", "fmt", "timestamp"),
    [
        pytest.param(
            b'# TYPE a gauge\na{b="1"} 1 1e999\n# EOF\n', Format.OPENMETRICS, "1e999", id="om_inf"
        ),
        pytest.param(
            b'# TYPE a gauge\na{b="1"} 1 -1e999\n# EOF\n',
            Format.OPENMETRICS,
            "-1e999",
            id="om_-inf",
        ),
        pytest.param(
            f'# TYPE a gauge\na{{b="1"}} 1 {LONG}\n'.encode(),
            Format.TEXT,
            LONG,
            id="text_400_digits",
        ),
    ],
)
@pytest.mark.parametrize("verify", list(Verify))
def test_a_timestamp_out_of_range_drops_its_family_with_the_line(
    payload: bytes, fmt: Format, timestamp: str, verify: Verify
) -> None:
    exposition = read_exposition(payload, fmt, verify)
    assert [str(problem) for problem in exposition.problems] == [
        f"line 2, family a: invalid timestamp {quoted(timestamp)}: out of range"
    ]
    assert exposition.families == []


# Prometheus keeps timestamps as int64 milliseconds. Its text parser reads them with
# strconv.ParseInt(s, 10, 64) (model/textparse/promparse.go parseMetricSuffix), so a 20-digit
# timestamp fails the whole scrape; its OpenMetrics parser converts int64(ts * 1000), which wraps
# past the bounds. Either way such a timestamp is refused, and the largest that fits is kept.
@pytest.mark.parametrize(
    ("payload", "fmt", "timestamp"),
    [
        pytest.param(
            b'# TYPE a gauge\na{b="1"} 1 100000000000000000000\n',
            Format.TEXT,
            "100000000000000000000",
            id="text_20_digits",
        ),
        pytest.param(
            b'# TYPE a gauge\na{b="1"} 1 1e300\n# EOF\n',
            Format.OPENMETRICS,
            "1e300",
            id="om_1e300",
        ),
        pytest.param(
            b'# TYPE a gauge\na{b="1"} 1 1e17\n# EOF\n',
            Format.OPENMETRICS,
            "1e17",
            id="om_1e17_seconds",
        ),
    ],
)
@pytest.mark.parametrize("verify", list(Verify))
def test_a_timestamp_past_int64_milliseconds_is_refused(
    payload: bytes, fmt: Format, timestamp: str, verify: Verify
) -> None:
    """A timestamp Prometheus cannot keep as int64 milliseconds is refused, never re-served."""
    exposition = read_exposition(payload, fmt, verify)
    assert [str(problem) for problem in exposition.problems] == [
        f"line 2, family a: invalid timestamp {timestamp!r}: out of range"
    ]
    assert exposition.families == []


def test_a_timestamp_inside_int64_milliseconds_is_written_in_both_formats() -> None:
    """The largest timestamps that fit are kept and written as a number in both formats."""
    payload = b'# TYPE a gauge\na{b="1"} 1 9e15\n# EOF\n'
    (family,) = read_exposition(payload, Format.OPENMETRICS).families
    assert b'a{b="1"} 1 9000000000000000000\n' in write_exposition([family], Format.TEXT)
    before_1970 = b'# TYPE a gauge\na{b="1"} 1 -9e15\n# EOF\n'
    (family,) = read_exposition(before_1970, Format.OPENMETRICS).families
    assert b'a{b="1"} 1 -9000000000000000.0\n' in write_exposition([family], Format.OPENMETRICS)


@pytest.mark.parametrize("timestamp", ["-2", "-9223372036854775809", "+5"])
@pytest.mark.parametrize("verify", list(Verify))
def test_a_signed_text_timestamp_is_refused_as_prometheus_refuses_it(
    timestamp: str, verify: Verify
) -> None:
    """Prometheus' scrape parser takes digits only there (promlex.l) and fails the whole scrape
    over a sign, which expfmt would read: the bridge follows the scrape path."""
    payload = f'# TYPE a gauge\na{{b="1"}} 1 {timestamp}\nz 1\n'.encode()
    exposition = read_exposition(payload, Format.TEXT, verify)
    wants = "the text format wants milliseconds in digits"
    assert [str(problem) for problem in exposition.problems] == [
        f"line 2, family a: invalid timestamp {timestamp!r}: {wants}"
    ]
    assert [family.name for family in exposition.families] == ["z"]
