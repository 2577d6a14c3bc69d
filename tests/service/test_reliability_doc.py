"""docs/reliability.md against the code: every bounding flag is listed, every metric it names exists."""

from __future__ import annotations

import argparse
import re

from helpers.paths import TESTS
from metricbridge.cli.serve_options import add_service_options
from metricbridge.exposition.caches import CodecCaches
from metricbridge.service.selfmetrics import SelfMetrics

DOC = (TESTS.parent / "docs" / "reliability.md").read_text()
# Flags that choose what is served, how (TLS, authentication) or how it is logged, not how much
# anything may take; each with its old spelling.
NOT_BOUNDS = {
    "--upstream",
    "--web.listen-address",
    "--listen",
    "--web.config.file",
    "--config",
    "--profile",
    "--log.level",
    "--log-level",
    "--log.format",
    "--log-format",
}


def served_families() -> set[str]:
    """Every metricbridge_* family name the bridge can serve (counters without ``_total``)."""
    metrics = SelfMetrics()
    metrics.track_caches(CodecCaches())
    metrics.server_info_polled(ok=True, size=1)
    return {family.name for family in metrics.registry.collect()}


def test_every_flag_that_changes_a_bound_is_in_the_reliability_page() -> None:
    """Each serve flag but those choosing what is served is named in docs/reliability.md."""
    parser = argparse.ArgumentParser()
    add_service_options(parser)
    flags = {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert "--web.write-timeout" in flags
    missing = sorted(flag for flag in flags - NOT_BOUNDS if f"`{flag}`" not in DOC)
    assert not missing


def test_every_metric_the_page_names_is_served() -> None:
    """No name in docs/reliability.md is a metric the bridge does not have."""
    families = served_families()
    named = set(re.findall(r"`(metricbridge_\w+?)(?:_total)?[`{]", DOC))
    assert "metricbridge_connections_max" in named
    unknown = sorted(named - families)
    assert not unknown


def test_every_bound_in_the_how_close_table_is_served_beside_its_figure() -> None:
    """Each row of "How close the bridge is to each bound" names two served families."""
    section = DOC.split("## How close the bridge is to each bound", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) >= 5
    families = served_families()
    for row in rows:
        figure, bound = re.findall(r"`(metricbridge_\w+?)(?:_total)?[`{]", row)[:2]
        assert {figure, bound} <= families, row
