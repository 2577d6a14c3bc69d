"""Naming determinism: one contract spelling whatever the scraper asks or the upstream wrote."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES
from helpers.service import PROM2_ACCEPT, PROM3_ACCEPT, FakeUpstream, bridge_app
from metricbridge.config.load import load_config, parse_config
from metricbridge.model.family import Format, Verify
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import render, run_pipeline

TP1 = (FIXTURES / "tp1.prom").read_bytes()
# Escape the names only (HELP texts mention other families by name and stay as written).
ESCAPED_TP1 = re.sub(rb"(?m)^(# (?:HELP|TYPE) )?sglang:", rb"\1sglang_", TP1)


def _names(text: str, parser: Any = parse_text) -> list[str]:
    return [family.name for family in parser(text)]


def test_upstream_escaped_names_are_served_in_the_contract_spelling() -> None:
    """An upstream that already wrote sglang_x (a router, an older bridge) is mapped back."""
    rules = compile_rules(load_config())
    outcome = run_pipeline(ESCAPED_TP1, Format.TEXT, rules)
    assert outcome.translation.stats.names_restored == 88
    escaped = render(outcome, Format.TEXT).decode()
    plain = render(run_pipeline(TP1, Format.TEXT, rules), Format.TEXT).decode()
    assert escaped == plain


def test_a_name_present_in_both_spellings_is_not_merged() -> None:
    """Both spellings upstream: neither is renamed onto the other, so no duplicate family."""
    payload = b"# TYPE sglang:x gauge\nsglang:x 1\n# TYPE sglang_x gauge\nsglang_x 2\n"
    text = render(
        run_pipeline(payload, Format.TEXT, compile_rules(parse_config("version: 1\n", "t"))),
        Format.TEXT,
    ).decode()
    assert sorted(_names(text)) == ["sglang:x", "sglang_x"]


ALSO_ESCAPED = """
version: 1
naming: {also_serve_escaped: true}
families:
  sglang:request_waiting_time: {disposition: alias, type: histogram, source: sglang:queue_time_seconds}
"""


@pytest.mark.parametrize("fmt", list(Format))
def test_opt_in_serves_both_spellings_without_duplicates(fmt: Format) -> None:
    """naming.also_serve_escaped adds sglang_x copies of every sglang:x family, once each."""
    outcome = run_pipeline(TP1, Format.TEXT, compile_rules(parse_config(ALSO_ESCAPED, "t")))
    text = render(outcome, fmt).decode()
    names = Counter(_names(text, parse_openmetrics if fmt is Format.OPENMETRICS else parse_text))
    assert max(names.values()) == 1
    assert "sglang:request_waiting_time" in names
    assert "sglang_request_waiting_time" in names
    assert sum(n.startswith("sglang_") for n in names) == sum(
        n.startswith("sglang:") for n in names
    )


ACCEPTS = {
    "none": None,
    "prometheus2": PROM2_ACCEPT,
    "prometheus3": PROM3_ACCEPT,
    "text-1.0.0-utf8": "text/plain;version=1.0.0;escaping=allow-utf-8",
    "om-underscores": "application/openmetrics-text;version=1.0.0;escaping=underscores",
}


async def test_every_accept_header_gets_the_same_names(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    """Text or OpenMetrics, escaping asked or not: the family names served are identical."""
    server = await aiohttp_server(FakeUpstream().app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics")), cache_ttl=60))
    seen = {}
    for label, accept in ACCEPTS.items():
        response = await client.get("/metrics", headers={"Accept": accept} if accept else {})
        body = await response.text()
        om = response.headers["Content-Type"].startswith("application/openmetrics-text")
        names = {
            n.removesuffix("_total") for n in _names(body, parse_openmetrics if om else parse_text)
        }
        seen[label] = names
        assert not any(n.startswith("sglang_") for n in names), label
    assert len({frozenset(v) for v in seen.values()}) == 1


def test_a_text_read_of_an_openmetrics_fixture_round_trips_through_openmetrics() -> None:
    """test_fuzz_contract's find: dp8.om.txt read as text, written as OpenMetrics and read
    again gives the same bytes (the escaped _created, _sum, ... families restored alike)."""
    payload = (FIXTURES / "dp8.om.txt").read_bytes()
    rules = dataclasses.replace(
        compile_rules(parse_config("version: 1\nfamilies: {}\n", "t.yaml")),
        validation=Verify.STRUCTURE,
    )
    first = render(run_pipeline(payload, Format.TEXT, rules), Format.OPENMETRICS)
    again = run_pipeline(first, Format.OPENMETRICS, rules)
    assert not again.problems
    assert render(again, Format.OPENMETRICS) == first
