"""Differential checks: every output the golden suite records is read by independent parsers.

prometheus_client's parsers (text and OpenMetrics) and Prometheus' own ``promtool check metrics``
must accept each output, and no series may appear twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import TESTS
from helpers.promtool import promtool_check_metrics

OUTPUTS = sorted((TESTS / "golden").rglob("out.*")) + sorted(
    (TESTS / "golden" / "fixtures").glob("*")
)
TEXT_OUTPUTS = [p for p in OUTPUTS if p.name.endswith(".prom")]
OM_OUTPUTS = [p for p in OUTPUTS if p.name.endswith(".om.txt")]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(TESTS / "golden")) for p in paths]


def _series(families: object) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    return Counter(
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in families  # type: ignore[attr-defined]
        for sample in family.samples
    )


@pytest.mark.parametrize("path", TEXT_OUTPUTS, ids=_ids(TEXT_OUTPUTS))
def test_text_output_parses_with_prometheus_client(path: Path) -> None:
    """prometheus_client's text parser reads the output, and no series repeats."""
    series = _series(parse_text(path.read_text()))
    assert series, "no samples parsed"
    assert max(series.values()) == 1, [key for key, n in series.items() if n > 1][:3]


@pytest.mark.parametrize("path", OM_OUTPUTS, ids=_ids(OM_OUTPUTS))
def test_openmetrics_output_parses_with_prometheus_client(path: Path) -> None:
    """prometheus_client's OpenMetrics parser reads the output, and no series repeats."""
    families = list(parse_openmetrics(path.read_text()))
    series = _series(families)
    assert series
    assert max(series.values()) == 1


@pytest.mark.integration
@pytest.mark.parametrize("path", TEXT_OUTPUTS, ids=_ids(TEXT_OUTPUTS))
def test_text_output_passes_promtool(path: Path) -> None:
    """Prometheus' own parser (promtool check metrics) reads the output without a parse error."""
    promtool_check_metrics(path.read_bytes())
