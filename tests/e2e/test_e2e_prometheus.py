"""End to end with a real Prometheus: simulated SGLang -> metricbridge process -> Prometheus.

One module fixture starts the simulated upstream (in a thread), the bridge (``python -m
metricbridge``) and ``prometheus`` scraping it every second. Prometheus also scrapes the
simulator directly (jobs ``sglang-raw*``) through ``metricbridge rules`` output, so the
fleet-scale export is checked against the sidecar on live data. Everything is polled against
deadlines and torn down in the fixture's finaliser, process groups included.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from helpers.paths import TESTS
from helpers.ports import free_port
from helpers.promtool import prometheus_path
from helpers.tls import PASSWORD, USER, Certificates, basic_auth_header, bcrypt_hash
from metricbridge.analysis.dashboards import load_queries
from metricbridge.analysis.promql import substitute_grafana_variables
from metricbridge.analysis.templating import variable_query_expr
from metricbridge.config.load import load_config
from metricbridge.export.prometheus_rules import RuleFormat, export_rules
from metricbridge.simulator.engine import DEFAULT_MODEL
from metricbridge.simulator.server import (
    LoadScript,
    SimulatedEncoder,
    SimulatedEngine,
    start_simulator,
)

# One real Prometheus for the module (the `stack` fixture): its tests share one xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prometheus")]

ROOT = TESTS.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "metricbridge-contract.json"
RAW_JOBS = 'job=~"sglang-raw.*"'
T = TypeVar("T")


@dataclass
class Stack:
    """Addresses of what the fixture started."""

    prometheus: str
    bridge_instance: str
    tls_bridge: str  # the bridge behind --web.config.file: TLS and basic auth
    ca_file: Path


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return bytes(response.read())


def _get_tls(url: str, ca_file: Path, password: str = PASSWORD) -> bytes:
    """GET over TLS, trusting ``ca_file``, with basic auth."""
    context = ssl.create_default_context(cafile=str(ca_file))
    headers = {"Authorization": basic_auth_header(USER, password)}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback https only
    with urllib.request.urlopen(request, timeout=2.0, context=context) as response:  # noqa: S310
        return bytes(response.read())


def _poll(what: str, probe: Callable[[], T | None], deadline: float) -> T:
    """Call ``probe`` until it returns something truthy or ``deadline`` (monotonic) passes."""
    last: object = None
    while True:
        try:
            result = probe()
            if result:
                return result
            last = result
        except (OSError, ValueError, KeyError) as exc:
            last = exc
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; last: {last!r}")
        time.sleep(0.25)


class _Simulator:
    """The simulated SGLang server on its own event loop, in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        script = LoadScript(busy_seconds=3600, idle_seconds=0, rate=8, burst_rate=24)
        engine, encoder = SimulatedEngine(dp_size=2, seed=1), SimulatedEncoder(seed=1)
        coro = start_simulator(
            "127.0.0.1", 0, engine=engine, encoder=encoder, tick_seconds=0.5, script=script
        )
        self.runner = self.loop.run_until_complete(coro)
        self.port = int(self.runner.addresses[0][1])
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # noqa: S603


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def _web_config(tmp: Path) -> tuple[Path, Path]:
    """A web config with TLS (certificates made now) and one user; and the CA's file."""
    certificates = Certificates.make(tmp)
    config = tmp / "web.yml"
    config.write_text(
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
        f"basic_auth_users:\n  {USER}: '{bcrypt_hash(PASSWORD)}'\n"
    )
    return config, certificates.write_ca()


def _tls_jobs(bridge: str, ca_file: Path) -> list[dict[str, Any]]:
    """Prometheus scraping the TLS bridge with the right password, and with a wrong one."""
    return [
        {
            "job_name": job,
            "scheme": "https",
            "basic_auth": {"username": USER, "password": password},
            "tls_config": {"ca_file": str(ca_file)},
            "static_configs": [{"targets": [bridge]}],
        }
        for job, password in (("metricbridge-tls", PASSWORD), ("metricbridge-tls-wrong", "wrong"))
    ]


def _prometheus_config(
    tmp: Path, bridge: str, simulator: int, tls_jobs: list[dict[str, Any]]
) -> Path:
    config = load_config()
    (tmp / "rules.yml").write_text(export_rules(config, RuleFormat.PROMETHEUS_RULES, RAW_JOBS))
    relabel = yaml.safe_load(export_rules(config, RuleFormat.RELABEL))["metric_relabel_configs"]
    raw = f"127.0.0.1:{simulator}"
    jobs = [
        {"job_name": "metricbridge", "static_configs": [{"targets": [bridge]}]},
        {
            "job_name": "sglang-raw",
            "static_configs": [{"targets": [raw]}],
            "metric_relabel_configs": relabel,
        },
        {
            "job_name": "sglang-raw-encoder",
            "metrics_path": "/encoder/metrics",
            "static_configs": [{"targets": [raw]}],
            "metric_relabel_configs": relabel,
        },
        *tls_jobs,
    ]
    prometheus = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": jobs,
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(prometheus, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Simulator, bridge and Prometheus, all on loopback; stopped whatever happens."""
    binary = prometheus_path()
    tmp = tmp_path_factory.mktemp("e2e")
    started = time.monotonic()
    processes: list[subprocess.Popen[bytes]] = []
    simulator = _Simulator()
    try:
        bridge = f"127.0.0.1:{free_port()}"
        upstreams = [
            f"127.0.0.1:{simulator.port}/metrics",
            f"127.0.0.1:{simulator.port}/encoder/metrics",
        ]
        # With the profile the shipped Deployments run, which the dashboard's approximation
        # panels read.
        args = [sys.executable, "-m", "metricbridge", "--listen", bridge, "--log-format", "json"]
        args.append("--profile=approximations")
        processes.append(
            _spawn([*args, *(f"--upstream={u}" for u in upstreams)], tmp / "bridge.log")
        )
        _poll("the bridge", lambda: _get(f"http://{bridge}/-/ready"), time.monotonic() + 20)
        tls_bridge = f"127.0.0.1:{free_port()}"
        web_config, ca_file = _web_config(tmp)
        tls_args = [sys.executable, "-m", "metricbridge", "--web.listen-address", tls_bridge]
        tls_args += ["--web.config.file", str(web_config), "--log.format", "logfmt"]
        processes.append(_spawn([*tls_args, f"--upstream={upstreams[0]}"], tmp / "tls.log"))
        _poll(
            "the TLS bridge",
            lambda: _get_tls(f"https://{tls_bridge}/-/ready", ca_file),
            time.monotonic() + 20,
        )
        web = f"127.0.0.1:{free_port()}"
        config = _prometheus_config(tmp, bridge, simulator.port, _tls_jobs(tls_bridge, ca_file))
        processes.append(
            _spawn(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address={web}",
                ],
                tmp / "prometheus.log",
            )
        )
        _poll("Prometheus", lambda: _get(f"http://{web}/-/ready"), time.monotonic() + 30)
        yield Stack(f"http://{web}", bridge, tls_bridge, ca_file)
    finally:
        for process in reversed(processes):
            _stop(process)
        simulator.stop()
        sys.stderr.write(f"e2e stack lived {time.monotonic() - started:.1f} s\n")


def _query(stack: Stack, expr: str) -> list[dict[str, Any]]:
    url = f"{stack.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(_get(url))
    if body["status"] != "success":
        raise ValueError(body)
    return list(body["data"]["result"])


def _deadline(seconds: float = 20) -> float:
    return time.monotonic() + seconds


def test_bridge_target_is_up(stack: Stack) -> None:
    """Prometheus reports the bridge's scrape target healthy."""

    def up() -> bool:
        targets = json.loads(_get(f"{stack.prometheus}/api/v1/targets"))["data"]["activeTargets"]
        return any(t["labels"]["job"] == "metricbridge" and t["health"] == "up" for t in targets)

    _poll("the metricbridge target to be up", up, _deadline())


def _targets(stack: Stack, job: str) -> list[dict[str, Any]]:
    targets = json.loads(_get(f"{stack.prometheus}/api/v1/targets"))["data"]["activeTargets"]
    return [t for t in targets if t["labels"]["job"] == job]


def test_prometheus_scrapes_the_bridge_over_tls_with_basic_auth(stack: Stack) -> None:
    """scheme https, basic_auth and tls_config.ca_file: the target is up and its data stored."""
    _poll(
        "the TLS target to be up",
        lambda: all(t["health"] == "up" for t in _targets(stack, "metricbridge-tls")),
        _deadline(),
    )
    expr = 'sglang:num_running_reqs{job="metricbridge-tls"}'
    assert _poll("data scraped over TLS", lambda: _query(stack, expr), _deadline())
    expr = 'process_resident_memory_bytes{job="metricbridge-tls"}'
    (rss,) = _poll("the bridge's own RSS", lambda: _query(stack, expr), _deadline())
    assert float(rss["value"][1]) > 1 << 20


def test_a_wrong_password_is_401_and_the_target_down(stack: Stack) -> None:
    """The bridge answers 401; Prometheus reports the target down, saying why."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get_tls(f"https://{stack.tls_bridge}/metrics", stack.ca_file, "wrong")
    refused.value.close()  # it holds the connection
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"] == "Basic"

    def down() -> list[dict[str, Any]]:
        return [t for t in _targets(stack, "metricbridge-tls-wrong") if t["health"] == "down"]

    (target,) = _poll("the wrong-password target to be down", down, _deadline())
    assert "401" in target["lastError"]


def test_contract_families_carry_the_expected_labels(stack: Stack) -> None:
    """An alias keeps model_name; a select drops the label it selected on."""
    waiting = _poll(
        "request_waiting_time_count",
        lambda: _query(stack, 'sglang:request_waiting_time_count{job="metricbridge"}'),
        _deadline(),
    )
    assert all(r["metric"]["model_name"] == DEFAULT_MODEL for r in waiting)
    startup = _query(stack, 'sglang:engine_startup_time{job="metricbridge"}')
    assert startup
    assert all("phase" not in r["metric"] for r in startup)


def test_renamed_counter_rate_is_positive_under_traffic(stack: Stack) -> None:
    """The encoder counter the contract renames grows: its rate over 5 s is above 0."""
    expr = 'sum(rate(sglang:encoder_num_requests_total{job="metricbridge"}[5s]))'
    _poll(
        "a positive rate",
        lambda: [r for r in _query(stack, expr) if float(r["value"][1]) > 0],
        _deadline(30),
    )


def test_warm_zero_counter_exists_before_any_event(stack: Stack) -> None:
    """PD bootstrap failures never happen in the simulator, yet the counter is served at 0."""
    expr = 'sglang:num_bootstrap_failed_reqs_total{job="metricbridge"}'
    result = _poll("the warm-zero counter", lambda: _query(stack, expr), _deadline())
    assert {float(r["value"][1]) for r in result} == {0.0}


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    """Each panel and variable query, variables set to the demo's values, returns series."""
    # Both models selected (engine and encoder name theirs), as Grafana renders a multi-value.
    models = f"{DEFAULT_MODEL}|{SimulatedEncoder().model_name}"
    variables = {"model_name": models, "instance": stack.bridge_instance}
    pending = {}
    for query in load_queries(DASHBOARD).queries:
        raw = query.raw
        if query.kind.value == "template variable":
            raw = variable_query_expr(raw) or raw
        pending[query.location] = substitute_grafana_variables(raw, variables)

    def all_answered() -> bool:
        for location, expr in list(pending.items()):
            if _query(stack, expr):
                del pending[location]
        if pending:
            raise ValueError(f"no data for: {json.dumps(pending, indent=1)}")
        return True

    _poll("data for every dashboard query", all_answered, _deadline(30))


def _label_sets(stack: Stack, name: str, jobs: str) -> set[tuple[tuple[str, str], ...]]:
    result = _query(stack, f'{{__name__="{name}", {jobs}}}')
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("job", "instance")))
        for r in result
    }


def test_exported_rules_reproduce_the_sidecar_series(stack: Stack) -> None:
    """On the raw SGLang scrape, relabel configs plus recording rules give the bridge's series."""
    rules = yaml.safe_load(export_rules(load_config(), RuleFormat.PROMETHEUS_RULES, RAW_JOBS))
    names = [rule["record"] for rule in rules["groups"][0]["rules"]] + [
        "sglang:cached_tokens_total"
    ]
    # The default contract's 18 recording rules (approximations are not exported by default)
    # and the relabelled family: a comparison of that many series cannot pass by being empty.
    assert len(names) >= 19
    # Warm-zero cannot be done centrally (the export's header says so): the sidecar serves extra
    # zero series there, so the central series must be a subset.
    warm = {rule.name for rule in load_config().families if rule.warm_zero is not None}

    def same() -> bool:
        mismatched: dict[str, object] = {}
        for name in names:
            central = _label_sets(stack, name, RAW_JOBS)
            sidecar = _label_sets(stack, name, 'job="metricbridge"')
            expected = central <= sidecar if name in warm else central == sidecar
            if not central or not expected:
                mismatched[name] = {
                    "central only": sorted(central - sidecar)[:3],
                    "sidecar only": sorted(sidecar - central)[:3],
                }
        if mismatched:
            raise ValueError(f"series differ: {json.dumps(mismatched, indent=1)}")
        return True

    _poll("central and sidecar series to agree", same, _deadline(30))
