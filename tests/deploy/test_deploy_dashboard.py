"""deploy/grafana: every query parses and reads only what the shipped deployment serves.

The shipped deployment is the default contract with the profile the Kubernetes manifests set
(``METRICBRIDGE_PROFILE``), in front of the demo: the simulated engine (two DP ranks) and EPD
encoder after a minute of traffic. A panel that reads an approximate row says so in its title
and description, and no panel reads a row only an instrumented engine serves.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import yaml

from helpers.paths import TESTS
from metricbridge.analysis.dashboards import Query, load_queries
from metricbridge.analysis.promql import LabelUseKind
from metricbridge.config.load import load_config
from metricbridge.config.schema import Disposition
from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import Format
from metricbridge.simulator.server import SimulatedEncoder, SimulatedEngine
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import run_pipeline

DASHBOARD = TESTS.parent / "deploy" / "grafana" / "metricbridge-contract.json"
MANIFESTS = TESTS.parent / "deploy" / "kubernetes"
# Served only because the contract marks them warm-zero (no event happens in the demo, or not
# reliably): they must be served all the same, from the first scrape on.
WARM_ZERO_ONLY = (
    "sglang:num_bootstrap_failed_reqs_total",
    "sglang:num_transfer_failed_reqs_total",
)
TARGET_LABELS = {"instance", "job"}  # added by Prometheus at scrape time


@cache
def _deployed_profiles() -> tuple[str, ...]:
    """The profiles the shipped Deployments run the bridge with (METRICBRIDGE_PROFILE)."""
    found = set()
    for path in sorted(MANIFESTS.glob("sglang-*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = doc["spec"]["template"]["spec"]
            containers = spec.get("initContainers", []) + spec["containers"]
            bridge = next(c for c in containers if c["name"] == "metricbridge")
            env = {e["name"]: e.get("value", "") for e in bridge.get("env", [])}
            found.add(tuple(n for n in env.get("METRICBRIDGE_PROFILE", "").split(",") if n))
    assert len(found) == 1, f"the Deployments disagree on METRICBRIDGE_PROFILE: {found}"
    return found.pop()


@cache
def _served() -> dict[str, frozenset[str]]:
    """Series name to label names, as the deployed bridge serves the demo after 60 s at 8 req/s."""
    engine = SimulatedEngine(dp_size=2)
    engine.advance(60, arrivals_per_second=8)
    encoder = SimulatedEncoder()
    encoder.advance(60, arrivals_per_second=8)
    rules = compile_rules(load_config(None, _deployed_profiles()))
    outcome = run_pipeline(engine.render() + encoder.render(), Format.TEXT, rules)
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


def _row_of(name: str) -> str:
    """The contract row a selected sample name belongs to (``x_bucket`` -> ``x``)."""
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def test_panels_of_approximate_rows_say_so_and_no_panel_needs_an_instrumented_engine() -> None:
    """Title "(approximation)" and a description "Approximation ..." exactly where a row is one."""
    dispositions = {rule.name: rule.disposition for rule in load_config().families}
    board = json.loads(DASHBOARD.read_text())
    panels = {panel["title"]: panel for panel in board["panels"]}
    reads: dict[str, set[Disposition]] = {}
    for query in _queries():
        if " > panel " not in query.location:
            continue
        title = query.location.split(' > panel "', 1)[1].split('"', 1)[0]
        for name in query.usage.metric_names:
            disposition = dispositions.get(_row_of(name))
            if disposition is not None:
                reads.setdefault(title, set()).add(disposition)
    assert not [t for t, d in reads.items() if Disposition.ENGINE in d]
    approximate = {t for t, d in reads.items() if Disposition.APPROXIMATE in d}
    assert approximate  # the shipped board has such panels: the test below is not vacuous
    for title in approximate:
        assert reads[title] == {Disposition.APPROXIMATE}, f"{title}: mixes exact and approximate"
        assert title.endswith("(approximation)"), title
        assert panels[title]["description"].startswith("Approximation"), title
    labelled = {t for t in panels if "approximation" in t.lower()}
    assert labelled == approximate


def _check_against_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], profiles: tuple[str, ...]
) -> tuple[int, str]:
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
            *(f"--profile={name}" for name in profiles),
        ]
    )
    output = capsys.readouterr()
    return code, output.out + output.err


def test_dashboard_passes_metricbridge_check_against_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`metricbridge check` of the dashboard against the demo, as deployed: exit 0."""
    code, output = _check_against_the_demo(tmp_path, capsys, _deployed_profiles())
    assert code == 0, output


def test_without_the_deployed_profile_the_approximate_panels_fail_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bridge run without the approximations profile does not serve those panels' rows."""
    assert "approximations" in _deployed_profiles()
    code, output = _check_against_the_demo(tmp_path, capsys, ())
    assert code == 1
    assert "sglang:prealloc_token_usage is not served" in output
    assert "an approximation is served with --profile approximations" in output
