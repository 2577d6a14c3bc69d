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


def test_a_large_finite_timestamp_is_still_written_in_both_formats() -> None:
    payload = b'# TYPE a gauge\na{b="1"} 1 1e300\n# EOF\n'
    (family,) = read_exposition(payload, Format.OPENMETRICS).families
    for fmt in Format:
        assert b'a{b="1"} 1 1' in write_exposition([family], fmt)
