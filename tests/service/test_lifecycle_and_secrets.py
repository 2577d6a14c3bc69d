"""POST /-/reload is opt-in and rate-limited; an upstream's credentials are never shown."""

from __future__ import annotations

import logging
from typing import Any

from helpers.service import FakeUpstream, bridge_app
from metricbridge.service.scrape import parse_upstream, redact_url


async def _client(aiohttp_server: Any, aiohttp_client: Any, url_of: Any, **kwargs: Any) -> Any:
    server = await aiohttp_server(FakeUpstream().app())
    return await aiohttp_client(bridge_app(url_of(server), **kwargs))


def _plain(server: Any) -> str:
    return str(server.make_url("/metrics"))


async def test_reload_over_http_is_refused_unless_enabled(aiohttp_server, aiohttp_client) -> None:
    """Without --web.enable-lifecycle, POST /-/reload is 403 and counted; the rules stay."""
    client = await _client(aiohttp_server, aiohttp_client, _plain, enable_lifecycle=False)
    response = await client.post("/-/reload")
    assert response.status == 403
    assert "--web.enable-lifecycle" in await response.text()
    text = await (await client.get("/metrics")).text()
    assert 'metricbridge_reloads_refused_total{reason="lifecycle_disabled"} 1.0' in text
    assert "disabled (--web.enable-lifecycle)" in await (await client.get("/")).text()


async def test_reloads_closer_than_the_interval_are_refused(aiohttp_server, aiohttp_client) -> None:
    """A second POST /-/reload within the interval is 429 with Retry-After, and counted."""
    client = await _client(
        aiohttp_server, aiohttp_client, _plain, enable_lifecycle=True, reload_min_interval=60.0
    )
    assert (await client.post("/-/reload")).status == 200
    refused = await client.post("/-/reload")
    assert refused.status == 429
    assert 59 <= int(refused.headers["Retry-After"]) <= 60
    text = await (await client.get("/metrics")).text()
    assert 'metricbridge_reloads_refused_total{reason="too_frequent"} 1.0' in text
    assert "metricbridge_config_last_reload_successful 1.0" in text


def test_redact_url_hides_passwords_and_query_values_only() -> None:
    """Go's url.Redacted() spelling for the password; query values too; the rest as given."""
    assert (
        redact_url("http://u:pw@h:1/metrics?token=t&a")
        == "http://u:xxxxx@h:1/metrics?token=xxxxx&a"
    )
    assert redact_url("u:pw@h:1/m") == "u:xxxxx@h:1/m"
    assert redact_url("http://bob@h:1/metrics") == "http://bob@h:1/metrics"
    assert redact_url(":30000") == ":30000"
    upstream = parse_upstream("http://u:pw@h:1/metrics?token=t")
    assert upstream.url == "http://u:pw@h:1/metrics?token=t"  # what is fetched is unchanged
    assert upstream.label == "h:1/metrics"
    assert "pw" not in upstream.shown
    assert "pw" not in str(_error_of("ftp://u:pw@h:1/x"))


def _error_of(spec: str) -> ValueError:
    try:
        parse_upstream(spec)
    except ValueError as exc:
        return exc
    raise AssertionError(spec)


async def test_credentials_in_the_upstream_url_are_shown_nowhere(
    aiohttp_server, aiohttp_client, caplog
) -> None:
    """/, /contract, self-metric labels and logs never show the password or the token."""

    def with_secrets(server: Any) -> str:
        return f"http://alice:s3cret@{server.host}:{server.port}/metrics?token=t0ken"

    with caplog.at_level(logging.DEBUG):
        client = await _client(aiohttp_server, aiohttp_client, with_secrets)
        metrics = await (await client.get("/metrics")).text()
        contract = await (await client.get("/contract")).text()
        index = await (await client.get("/")).text()
    assert "metricbridge_upstream_up{upstream=" in metrics
    assert "alice:xxxxx@" in index
    for shown in (metrics, contract, index, _bridge_log(caplog)):
        assert "s3cret" not in shown
        assert "t0ken" not in shown


async def test_a_failing_upstream_with_credentials_is_logged_redacted(
    aiohttp_client, unused_tcp_port, caplog
) -> None:
    """The connect error aiohttp raises quotes the URL; the bridge logs and serves it redacted."""
    url = f"http://alice:s3cret@127.0.0.1:{unused_tcp_port}/metrics?token=t0ken"
    with caplog.at_level(logging.DEBUG):
        client = await aiohttp_client(bridge_app(url))
        metrics = await (await client.get("/metrics")).text()
        contract = await (await client.get("/contract")).text()
    assert "metricbridge_upstream_up" in metrics
    for shown in (metrics, contract, _bridge_log(caplog)):
        assert "s3cret" not in shown
        assert "t0ken" not in shown


def _bridge_log(caplog: Any) -> str:
    """What the bridge logged (the fake upstream's own access log shows its request line)."""
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("metricbridge"))


async def test_a_slow_reload_does_not_stall_other_requests(
    aiohttp_server, aiohttp_client, monkeypatch
) -> None:
    """Reading and compiling a rules file runs off the event loop: probes answer meanwhile."""
    import asyncio  # noqa: PLC0415
    import time  # noqa: PLC0415

    from metricbridge.service import server as server_module  # noqa: PLC0415

    real = server_module._load_and_compile

    def slow(*args: Any) -> Any:
        time.sleep(3.0)  # what a 5 MB rules file costs, without the file
        return real(*args)

    monkeypatch.setattr(server_module, "_load_and_compile", slow)
    client = await _client(aiohttp_server, aiohttp_client, _plain)
    reload = asyncio.create_task(client.post("/-/reload"))
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    assert (await client.get("/-/healthy")).status == 200
    # Answered while the reload still has 2.8 s to go: the loop was never held for it.
    assert time.perf_counter() - started < 1.5
    assert (await reload).status == 200
