"""Through the service: the format each answer is in, and the escaping its Content-Type echoes.

A fetch holding a family OpenMetrics cannot carry (here a counter not named ``..._total``,
which the reader reads and OpenMetrics would serve as ``unknown``) is answered in text to a
scraper that asked for OpenMetrics, counted by reason; every answer passes promtool and
prometheus_client's parser of its format.
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES
from helpers.promtool import promtool_check_metrics
from helpers.service import PROM3_ACCEPT, FakeUpstream, bridge_app

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# What old clients write for a counter: no _total. Text carries it as a counter; OpenMetrics
# would serve it as unknown.
BARE_COUNTER = b'# HELP jobs Jobs run.\n# TYPE jobs counter\njobs{queue="a"} 3\njobs{queue="b"} 4\n'


async def _client(aiohttp_server: Any, aiohttp_client: Any, body: bytes) -> Any:
    upstream = await aiohttp_server(FakeUpstream(body=body).app())
    return await aiohttp_client(bridge_app(str(upstream.make_url("/metrics"))))


def _sample(text: str, name: str, **labels: str) -> float | None:
    for family in parse_text(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


async def test_a_family_openmetrics_cannot_carry_gets_text(aiohttp_server, aiohttp_client) -> None:
    """Prometheus 3 asked for OpenMetrics; the answer is text, the counter keeps its type."""
    client = await _client(
        aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes() + BARE_COUNTER
    )
    for scrape in (1, 2):
        response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
        assert response.headers["Content-Type"] == f"{TEXT}; escaping=allow-utf-8"
        body = await response.read()
        assert b"# EOF" not in body
        assert b"# TYPE jobs counter\n" in body
        promtool_check_metrics(body)
        text = body.decode()
        families = {family.name: family for family in parse_text(text)}
        assert families["jobs"].type == "counter"
        assert {s.labels["queue"]: s.value for s in families["jobs"].samples} == {"a": 3, "b": 4}
        assert "sglang:num_running_reqs" in families  # the engine's families are all there
        fallbacks = _sample(text, "metricbridge_format_fallbacks_total", reason="counter_name")
        assert fallbacks == scrape
        assert _sample(text, "metricbridge_scrapes_total", format="text") == scrape


async def test_the_fallback_holds_gzipped_and_for_plain_scrapes(
    aiohttp_server, aiohttp_client
) -> None:
    """With gzip the worker renders text straight away; a scrape that asked text is no fallback."""
    client = await _client(
        aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes() + BARE_COUNTER
    )
    headers = {"Accept": PROM3_ACCEPT, "Accept-Encoding": "gzip"}
    response = await client.get("/metrics", headers=headers, auto_decompress=False)
    assert response.headers["Content-Type"] == f"{TEXT}; escaping=allow-utf-8"
    body = gzip.decompress(await response.read())
    promtool_check_metrics(body)
    assert {f.name for f in parse_text(body.decode())} >= {"jobs", "sglang:num_running_reqs"}
    plain = await client.get("/metrics")
    assert plain.headers["Content-Type"] == f"{TEXT}; escaping=underscores"
    text = await plain.text()
    assert _sample(text, "metricbridge_format_fallbacks_total", reason="counter_name") == 1


async def test_what_openmetrics_carries_is_served_in_it(aiohttp_server, aiohttp_client) -> None:
    """No misfit: OpenMetrics as asked, and the fallback counter has no series."""
    client = await _client(aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes())
    response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
    assert response.headers["Content-Type"] == f"{OPENMETRICS}; escaping=allow-utf-8"
    text = await response.text()
    families = {family.name: family for family in parse_om(text)}
    assert families["metricbridge_format_fallbacks"].samples == []


@pytest.mark.parametrize("escaping", ["allow-utf-8", "underscores", "dots", "values"])
@pytest.mark.parametrize("media", ["application/openmetrics-text;version=1.0.0", "text/plain"])
async def test_every_escaping_is_echoed_and_sglang_names_stay(
    aiohttp_server, aiohttp_client, escaping: str, media: str
) -> None:
    """Each escaping Prometheus may ask: echoed, and the engine's lines the same under each."""
    client = await _client(aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes())
    bodies = {}
    for asked in (escaping, None):  # None: no escaping asked, client_golang's underscores
        accept = media if asked is None else f"{media};escaping={asked}"
        response = await client.get("/metrics", headers={"Accept": accept})
        openmetrics = media.startswith("application/openmetrics-text")
        kind = OPENMETRICS if openmetrics else TEXT
        assert response.headers["Content-Type"] == f"{kind}; escaping={asked or 'underscores'}"
        body = await response.read()
        list((parse_om if openmetrics else parse_text)(body.decode()))
        if not openmetrics:
            promtool_check_metrics(body)
        bodies[asked] = [line for line in body.splitlines() if line.startswith(b"sglang:")]
    assert bodies[escaping] == bodies[None]
    assert any(line.startswith(b"sglang:num_running_reqs") for line in bodies[escaping])


async def test_name_filter_follows_the_snapshots_format(aiohttp_server, aiohttp_client) -> None:
    """``?name[]=`` answers from the same fetch, so in the same format as its whole answer."""
    client = await _client(
        aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes() + BARE_COUNTER
    )
    response = await client.get("/metrics?name[]=jobs", headers={"Accept": PROM3_ACCEPT})
    assert response.headers["Content-Type"] == f"{TEXT}; escaping=allow-utf-8"
    body = await response.read()
    promtool_check_metrics(body)
    assert [f.name for f in parse_text(body.decode())] == ["jobs"]
