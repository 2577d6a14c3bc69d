"""Prometheus as the oracle: what it ingests from the engine, it ingests the same through the bridge.

One real Prometheus scrapes, for each case of ``helpers.oracle_cases``, a fake engine serving
the case (job ``direct-N``) and a bridge in front of that engine with a pass-through rules file
(job ``bridge-N``). Its TSDB, read through the HTTP API, is then compared job against job:

- a case Prometheus ingests directly has the same series, with the same values, through the
  bridge, the same exemplars, and the same timestamps where the case writes them;
- a case Prometheus refuses directly is refused, or re-served valid, by the bridge: its target
  stays up, because a payload Prometheus cannot parse fails the whole scrape and loses every
  other family with it.

Every case is scraped in one Prometheus start, one engine path and one bridge port each, every
second, so the module costs a few seconds beyond Prometheus' start-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from helpers.oracle_cases import CASES, OPENMETRICS, OracleCase
from helpers.ports import free_port
from helpers.promtool import prometheus_path
from helpers.service import bridge_app

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prometheus")]

# Prometheus' own series for every target, and the bridge's self-metrics: not the engine's.
OWN_NAMES = ("up", "scrape_")
BRIDGE_PREFIXES = ("metricbridge_", "process_", "python_")
Series = tuple[tuple[str, str], ...]


@dataclass
class Oracle:
    """The running Prometheus and the instant the cases' timestamps were set to."""

    url: str
    now_ms: int


class _World:
    """The fake engine and one bridge per case on an event loop in a thread of their own."""

    def __init__(self, bodies: dict[str, bytes], rules: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []
        self.bodies = bodies
        self.engine_port = self._start(self._engine_app())
        self.bridge_ports = {
            case.name: self._start(
                bridge_app(
                    f"127.0.0.1:{self.engine_port}/case/{case.name}",
                    config=str(rules),
                    server_info=False,
                    enable_lifecycle=False,
                )
            )
            for case in CASES
        }

    def _engine_app(self) -> web.Application:
        types = {case.name: case.content_type for case in CASES}

        async def handle(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            return web.Response(body=self.bodies[name], headers={"Content-Type": types[name]})

        app = web.Application()
        app.router.add_get("/case/{name}", handle)
        return app

    def _start(self, app: web.Application) -> int:
        async def start() -> int:
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self.runners.append(runner)
            return int(runner.addresses[0][1])

        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def close(self) -> None:
        async def stop() -> None:
            for runner in reversed(self.runners):
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())


def _prometheus_config(tmp: Path, world: _World) -> Path:
    jobs = []
    for index, case in enumerate(CASES):
        jobs.append(
            {
                "job_name": f"direct-{index}",
                "metrics_path": f"/case/{case.name}",
                "static_configs": [{"targets": [f"127.0.0.1:{world.engine_port}"]}],
            }
        )
        jobs.append(
            {
                "job_name": f"bridge-{index}",
                "static_configs": [{"targets": [f"127.0.0.1:{world.bridge_ports[case.name]}"]}],
            }
        )
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": jobs,
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    """Engine, bridges and Prometheus, all on loopback; stopped whatever happens."""
    binary = prometheus_path()
    tmp = tmp_path_factory.mktemp("oracle")
    rules = tmp / "rules.yml"
    rules.write_text("version: 1\n")  # pass-through: no family rules
    now_ms = int(time.time() * 1000) - 5000
    world = _World({case.name: case.render(now_ms) for case in CASES}, rules)
    process: subprocess.Popen[bytes] | None = None
    try:
        web_address = f"127.0.0.1:{free_port()}"
        args = [
            binary,
            f"--config.file={_prometheus_config(tmp, world)}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address={web_address}",
            "--enable-feature=exemplar-storage",
        ]
        with (tmp / "prometheus.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: S603 - the binary found above, our arguments
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        url = f"http://{web_address}"
        _wait_scraped(url, len(CASES) * 2, time.monotonic() + 40)
        yield Oracle(url, now_ms)
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        world.close()


def _targets(url: str) -> dict[str, dict[str, Any]]:
    active = _get(f"{url}/api/v1/targets")["data"]["activeTargets"]
    return {target["labels"]["job"]: target for target in active}


def _wait_scraped(url: str, count: int, deadline: float) -> None:
    """Until every target has been scraped twice (health known, then a second scrape)."""
    first: dict[str, str] = {}
    while True:
        try:
            targets = _targets(url)
        except OSError:
            targets = {}
        for job, target in targets.items():
            if target["health"] != "unknown":
                first.setdefault(job, target["lastScrape"])
        done = [job for job, at in first.items() if targets[job]["lastScrape"] != at]
        if len(done) >= count:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"only {len(done)} of {count} targets scraped twice")
        time.sleep(0.5)


def _samples(
    url: str, job: str, written_before: float
) -> dict[Series, set[tuple[str, float | None]]]:
    """Every stored sample of ``job``: series (without job/instance) to (value, timestamp).

    A timestamp is kept only where it is older than the scrapes (the case wrote it); scrape
    times differ between the two jobs and say nothing about the bridge.
    """
    query = urllib.parse.urlencode({"query": f'{{job="{job}"}}[1h]'})
    result = _get(f"{url}/api/v1/query?{query}")["data"]["result"]
    out: dict[Series, set[tuple[str, float | None]]] = {}
    for series in result:
        name = series["metric"]["__name__"]
        if name in OWN_NAMES or name.startswith(OWN_NAMES[1:]) or name.startswith(BRIDGE_PREFIXES):
            continue
        labels = tuple(
            sorted((k, v) for k, v in series["metric"].items() if k not in ("job", "instance"))
        )
        out[labels] = {(value, None) for _, value in series["values"]}
        out[labels] |= {(value, at) for at, value in series["values"] if at < written_before}
    return out


Exemplar = tuple[Series, Series, str, float | None]


def _exemplars(url: str, job: str, written_before: float) -> set[Exemplar]:
    """Every stored exemplar of ``job``: its series, its labels, value and written timestamp."""
    query = {"query": f'{{job="{job}"}}', "start": "0", "end": str(time.time() + 60)}
    result = _get(f"{url}/api/v1/query_exemplars?{urllib.parse.urlencode(query)}")["data"]
    out: set[Exemplar] = set()
    for series in result:
        labels = tuple(
            sorted(
                (k, v) for k, v in series["seriesLabels"].items() if k not in ("job", "instance")
            )
        )
        for exemplar in series["exemplars"]:
            at = exemplar["timestamp"]
            written = at if at < written_before else None
            own = tuple(sorted(exemplar["labels"].items()))
            out.add((labels, own, exemplar["value"], written))
    return out


def _up(targets: dict[str, dict[str, Any]], job: str) -> str:
    return str(targets[job]["health"])


def _params() -> list[Any]:
    out = []
    for index, case in enumerate(CASES):
        marks = [pytest.mark.xfail(strict=True, reason=case.gap)] if case.gap else []
        out.append(pytest.param(index, case, id=case.name, marks=marks))
    return out


@pytest.mark.parametrize(("index", "case"), _params())
def test_prometheus_ingests_the_same_through_the_bridge(
    oracle: Oracle, index: int, case: OracleCase
) -> None:
    """Direct and through the bridge, Prometheus stores the same series, values, timestamps."""
    # Polled: on a busy machine a scrape may time out now and then, and the next one is a
    # second away. A known gap fails every time: it is not waited for.
    deadline = time.monotonic() + (0 if case.gap else 30)
    while True:
        try:
            _agrees(oracle, index, case)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        else:
            return


def _agrees(oracle: Oracle, index: int, case: OracleCase) -> None:
    written_before = oracle.now_ms / 1000 + 0.001
    targets = _targets(oracle.url)
    direct, bridged = f"direct-{index}", f"bridge-{index}"
    direct_health = _up(targets, direct)
    assert direct_health == ("up" if case.valid else "down"), targets[direct]["lastError"]
    assert _up(targets, bridged) == "up", targets[bridged]["lastError"]
    if not case.valid:
        return
    expected = _samples(oracle.url, direct, written_before)
    # A case Prometheus stores nothing of proves nothing, unless that is what it is about.
    assert bool(expected) != case.stores_nothing, expected
    got = _samples(oracle.url, bridged, written_before)
    assert got == expected
    exemplars = _exemplars(oracle.url, direct, written_before)
    # Exemplars are compared only if Prometheus stored those the case writes.
    writes = case.content_type == OPENMETRICS and b" # {" in case.body
    assert bool(exemplars) == (writes and not case.exemplars_refused)
    assert _exemplars(oracle.url, bridged, written_before) == exemplars
