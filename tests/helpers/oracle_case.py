"""One case of the Prometheus-oracle test, and how the case lists are written.

The inputs are those of Prometheus' parser tests (``model/textparse/promparse_test.go`` and
``openmetricsparse_test.go`` in prometheus/prometheus), split into one case per rule so that a
line Prometheus refuses does not hide the lines around it, plus the inputs the issue about
tolerance listed. ``valid`` is what the installed Prometheus (2.42) does with the case when it
scrapes it directly: the oracle test checks that too, so a case that says the wrong thing fails.

Timestamps are written ``@MS@`` (milliseconds) or ``@S@`` (seconds, three decimals) and
replaced by one recent instant when the test starts: a timestamp of 1970 or 2018, as the Go
tests write, would be out of the TSDB's bounds and dropped by both paths, proving nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass(frozen=True)
class OracleCase:
    """One exposition, how the engine labels it, and whether Prometheus ingests it."""

    name: str
    body: bytes
    content_type: str
    valid: bool
    # Why the bridge cannot pass the case yet (an xfail, strict); None when it must pass.
    gap: str | None = None
    # Prometheus ingests the scrape but keeps none of its samples (a timestamp out of the TSDB's
    # bounds): the bridge must then store nothing either.
    stores_nothing: bool = False
    # Prometheus stores the samples but refuses the exemplars (labels past 128 characters).
    exemplars_refused: bool = False

    def render(self, now_ms: int) -> bytes:
        """The body with its timestamps placeholders set to ``now_ms``."""
        seconds = f"{now_ms // 1000}.{now_ms % 1000:03d}"
        return self.body.replace(b"@MS@", str(now_ms).encode()).replace(b"@S@", seconds.encode())


def text_case(
    name: str, body: bytes, *, valid: bool = True, gap: str | None = None, empty: bool = False
) -> OracleCase:
    return OracleCase(f"text_{name}", body, TEXT, valid, gap, empty)


def om_case(  # noqa: PLR0913 - the case's fields, by keyword
    name: str,
    body: bytes,
    *,
    valid: bool = True,
    gap: str | None = None,
    empty: bool = False,
    exemplars_refused: bool = False,
) -> OracleCase:
    return OracleCase(f"om_{name}", body, OPENMETRICS, valid, gap, empty, exemplars_refused)
