"""deploy/grafana: every query parses and reads only what the bridge serves in front of the demo.

The demo is the simulated engine (two DP ranks) and EPD encoder after a minute of traffic,
translated by the default contract. ``metricbridge check`` (issue 5) checks the same file more
thoroughly; this test keeps the dashboard honest meanwhile.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from helpers.paths import TESTS
from metricbridge.analysis.dashboards import Query, load_queries
from metricbridge.analysis.promql import LabelUseKind
from metricbridge.config.load import load_config
from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import Format
from metricbridge.simulator.server import SimulatedEncoder, SimulatedEngine
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import run_pipeline

DASHBOARD = TESTS.parent / "deploy" / "grafana" / "metricbridge-contract.json"
# Served only because the contract marks them warm-zero (no event happens in the demo, or not
# reliably): they must be served all the same, from the first scrape on.
WARM_ZERO_ONLY = (
    "sglang:num_bootstrap_failed_reqs_total",
    "sglang:num_transfer_failed_reqs_total",
    "sglang:num_mm_requests_total",
    "sglang:encoder_num_aborted_requests_total",
)
TARGET_LABELS = {"instance", "job"}  # added by Prometheus at scrape time


@cache
def _served() -> dict[str, frozenset[str]]:
    """Series name to label names, as the bridge serves the demo after 60 s at 8 req/s."""
    engine = SimulatedEngine(dp_size=2)
    engine.advance(60, arrivals_per_second=8)
    encoder = SimulatedEncoder()
    encoder.advance(60, arrivals_per_second=8)
    outcome = run_pipeline(
        engine.render() + encoder.render(), Format.TEXT, compile_rules(load_config())
    )
    assert not outcome.problems
    out: dict[str, set[str]] = {}
    for family in outcome.translation.families:
        for sample in parse_family(family).samples:
            out.setdefault(sample.name, set()).update(name for name, _ in sample.labels)
    return {name: frozenset(labels) for name, labels in out.items()}


@cache
def _queries() -> tuple[Query, ...]:
    result = load_queries(DASHBOARD)
    assert not result.problems, [str(p) for p in result.problems]
    return result.queries


def test_every_query_parses() -> None:
    """load_queries finds every panel target and variable query, and none fails to parse."""
    queries = _queries()
    assert len(queries) >= 30
    assert {q.kind.value for q in queries} == {"panel target", "template variable"}


def test_every_family_is_served_by_the_bridge_in_front_of_the_demo() -> None:
    """Each metric a query names is a series the bridge serves (warm-zero ones included)."""
    served = _served()
    missing = sorted(
        {(q.location, n) for q in _queries() for n in q.usage.metric_names if n not in served}
    )
    assert not missing


def test_warm_zero_families_are_served_before_any_event() -> None:
    """The warm-zero families the PD and encoder panels read are synthesised at 0."""
    served = _served()
    for name in WARM_ZERO_ONLY:
        assert name in served, name


@pytest.mark.parametrize(
    "area", ["Latency", "Throughput", "Queueing", "KV cache", "PD", "Encoder", "Start-up"]
)
def test_dashboard_covers_each_contract_area(area: str) -> None:
    """A row per area of the contract, each with queries."""
    assert any(q.location.startswith(f'row "{area}') for q in _queries())


def test_labels_read_by_queries_exist_on_their_series() -> None:
    """Matchers, ``by`` lists and legends read labels the series carry (or Prometheus adds)."""
    served = _served()
    wrong = []
    for query in _queries():
        for selector in query.usage.selectors:
            labels = served.get(selector.metric or "", frozenset()) | TARGET_LABELS
            wrong += [
                (query.location, selector.metric, m.name)
                for m in selector.matchers
                if m.name not in labels
            ]
        for use in query.usage.label_uses:
            if use.kind is not LabelUseKind.BY:
                continue
            labels = frozenset.union(
                *(served.get(s.metric or "", frozenset()) for s in use.selectors)
            )
            wrong += [
                (query.location, "by", label)
                for label in use.labels
                if label not in labels | TARGET_LABELS
            ]
    assert not wrong


def test_template_variables() -> None:
    """datasource, model_name and instance; every panel uses the datasource variable."""
    board = json.loads(DASHBOARD.read_text())
    assert [v["name"] for v in board["templating"]["list"]] == [
        "datasource",
        "model_name",
        "instance",
    ]
    for panel in board["panels"]:
        if panel["type"] not in ("row", "text"):
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_passes_metricbridge_check_against_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`metricbridge check` on the shipped dashboard against the demo's two endpoints: exit 0."""
    from metricbridge.cli.main import main  # noqa: PLC0415

    engine = SimulatedEngine(dp_size=2)
    engine.advance(60, arrivals_per_second=8)
    encoder = SimulatedEncoder()
    encoder.advance(60, arrivals_per_second=8)
    llm, enc, info = tmp_path / "llm.prom", tmp_path / "encoder.prom", tmp_path / "server_info.json"
    llm.write_bytes(engine.render())
    enc.write_bytes(encoder.render())
    info.write_text(json.dumps(engine.server_info()))
    code = main(
        [
            "check",
            str(DASHBOARD),
            "--snapshot",
            str(llm),
            "--snapshot",
            str(enc),
            "--server-info",
            str(info),
        ]
    )
    output = capsys.readouterr()
    assert code == 0, output.out + output.err
