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
from metricbridge.service.server import STATE

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


# Values Prometheus ingests from the engine in either format and OpenMetrics forbids: each
# labelled, as the fast path would serve them unparsed if it did not look at their values.
VALUES_ONLY_TEXT_CARRIES = {
    "counter_value": b'# TYPE errs_total counter\nerrs_total{a="1"} NaN\nerrs_total{a="2"} -1\n',
    "count_value": (
        b'# TYPE lat histogram\nlat_bucket{a="1",le="1"} 0.5\n'
        b'lat_bucket{a="1",le="+Inf"} 1.5\nlat_count{a="1"} 1.5\nlat_sum{a="1"} 2\n'
    ),
    "sum_value": (
        b'# TYPE lat histogram\nlat_bucket{a="1",le="+Inf"} 1\n'
        b'lat_count{a="1"} 1\nlat_sum{a="1"} -2\n'
    ),
    "quantile_value": b'# TYPE t summary\nt{a="1",quantile="0.5"} -4\nt_count{a="1"} 1\nt_sum{a="1"} 1\n',
    "quantile_label": b'# TYPE t summary\nt{a="1",quantile="2"} 4\nt_count{a="1"} 1\nt_sum{a="1"} 1\n',
    "le_label": b'# TYPE lat histogram\nlat_bucket{a="1",le="+INF"} 1\nlat_count{a="1"} 1\nlat_sum{a="1"} 2\n',
}


@pytest.mark.parametrize("reason", list(VALUES_ONLY_TEXT_CARRIES))
async def test_values_only_text_carries_are_served_whole_in_text(
    aiohttp_server, aiohttp_client, reason: str
) -> None:
    """Never dropped, as a direct scrape of the engine keeps them: the answer is text."""
    family = VALUES_ONLY_TEXT_CARRIES[reason]
    body = (FIXTURES / "tp1.prom").read_bytes() + family
    client = await _client(aiohttp_server, aiohttp_client, body)
    response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
    assert response.headers["Content-Type"] == f"{TEXT}; escaping=allow-utf-8"
    served = await response.read()
    promtool_check_metrics(served)
    text = served.decode()
    for line in family.splitlines():
        if not line.startswith(b"#"):
            assert line + b"\n" in served  # as the engine wrote it
    assert _sample(text, "metricbridge_format_fallbacks_total", reason=reason) == 1
    assert _sample(text, "metricbridge_exposition_problems_total", reason="negative_value") in (
        None,
        0,
    )


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


async def test_a_family_stamped_before_1970_is_dropped_from_a_text_answer(
    aiohttp_server, aiohttp_client, caplog
) -> None:
    """OpenMetrics carries a negative timestamp, Prometheus' text parser refuses the scrape over
    it; beside a NaN counter, which only text carries, no format carries both: it goes,
    counted and logged, and the rest is served."""
    body = (
        b"# TYPE old gauge\nold 1 -5\n# TYPE errs counter\nerrs_total NaN\n"
        b"# TYPE ok gauge\nok 2\n# EOF\n"
    )
    engine = FakeUpstream(body=body, content_type="application/openmetrics-text; version=1.0.0")
    upstream = await aiohttp_server(engine.app())
    client = await aiohttp_client(bridge_app(str(upstream.make_url("/metrics"))))
    response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
    assert response.headers["Content-Type"] == f"{TEXT}; escaping=allow-utf-8"
    served = await response.read()
    promtool_check_metrics(served)
    assert b"errs_total NaN\n" in served
    assert b"ok 2\n" in served
    assert b"\nold " not in served
    text = served.decode()
    assert _sample(text, "metricbridge_samples_dropped_total", reason="timestamp") == 1
    assert any("before 1970" in r.getMessage() for r in caplog.records)


async def test_a_family_stamped_before_1970_is_served_in_openmetrics(
    aiohttp_server, aiohttp_client
) -> None:
    """Alone, it is no misfit: OpenMetrics carries it, as Prometheus reads it."""
    body = b"# TYPE old gauge\nold 1 -5\n# EOF\n"
    engine = FakeUpstream(body=body, content_type="application/openmetrics-text; version=1.0.0")
    upstream = await aiohttp_server(engine.app())
    client = await aiohttp_client(bridge_app(str(upstream.make_url("/metrics"))))
    response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
    assert response.headers["Content-Type"] == f"{OPENMETRICS}; escaping=allow-utf-8"
    assert b"\nold 1 -5.0\n" in await response.read()


UTF8_BODY = b'# HELP "my.gauge" A gauge.\n# TYPE "my.gauge" gauge\n{"my.gauge","lab.el"="b"} 1\n'


@pytest.mark.parametrize("gzipped", [False, True])
async def test_utf8_names_are_served_as_the_escaping_asks(
    aiohttp_server, aiohttp_client, gzipped: bool
) -> None:
    """Quoted for Prometheus 3 (allow-utf-8), with underscores for Prometheus 2, in one fetch."""
    client = await _client(
        aiohttp_server, aiohttp_client, (FIXTURES / "tp1.prom").read_bytes() + UTF8_BODY
    )
    encoding = {"Accept-Encoding": "gzip" if gzipped else "identity"}
    bodies = {}
    for accept in (PROM3_ACCEPT, "text/plain;version=0.0.4", "text/plain;escaping=values"):
        headers = {"Accept": accept, **encoding}
        response = await client.get("/metrics", headers=headers, auto_decompress=False)
        body = await response.read()
        if gzipped:
            assert response.headers["Content-Encoding"] == "gzip"
            body = gzip.decompress(body)
        bodies[accept] = body
    utf8 = bodies[PROM3_ACCEPT].decode()
    families = {family.name: family for family in parse_om(utf8)}
    assert families["my.gauge"].samples[0].labels == {"lab.el": "b"}
    assert families["metricbridge_scrapes"]  # the bridge's own metrics follow, as always
    assert utf8.endswith("# EOF\n")
    for legacy, line in (
        ("text/plain;version=0.0.4", b'my_gauge{lab_el="b"} 1\n'),
        ("text/plain;escaping=values", b'U__my_2e_gauge{U__lab_2e_el="b"} 1\n'),
    ):
        promtool_check_metrics(bodies[legacy])
        assert line in bodies[legacy]
    assert b"sglang:num_running_reqs" in bodies[PROM3_ACCEPT]


async def test_renders_in_another_escaping_are_made_once_and_only_for_utf8_names(
    aiohttp_server, aiohttp_client
) -> None:
    """Prometheus 3 scraping a legacy engine gets the fetch's one render; a UTF-8 one, one more."""
    for extra, made in ((b"", 0), (UTF8_BODY, 1)):
        upstream = await aiohttp_server(
            FakeUpstream(body=(FIXTURES / "tp1.prom").read_bytes() + extra).app()
        )
        app = bridge_app(str(upstream.make_url("/metrics")), cache_ttl=60.0)
        client = await aiohttp_client(app)
        for _ in range(3):
            response = await client.get("/metrics", headers={"Accept": PROM3_ACCEPT})
            assert response.status == 200
        bridge = app[STATE].bridge
        assert bridge is not None
        snapshot = await bridge.snapshot(1.0)
        assert snapshot.spelled is bool(extra)
        assert snapshot.filtered.made == made
