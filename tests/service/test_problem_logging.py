"""What an upstream sends wrong is logged once when it appears, briefly, and always counted."""

from __future__ import annotations

import logging

import pytest

from helpers.paths import FIXTURES
from helpers.service import FakeUpstream, bridge_app
from metricbridge.model.names import MESSAGE_MAX, QUOTED_MAX, quoted, shortened

BAD_TYPE = "x" * 100_000
BODY = (
    b"# TYPE sglang:good gauge\nsglang:good 1\n"
    + f"# TYPE sglang:bad {BAD_TYPE}\nsglang:bad 1\n".encode()
)


async def test_a_repeated_bad_family_is_logged_at_warning_once_then_at_debug(
    aiohttp_server, aiohttp_client, caplog
) -> None:
    """Three fetches of the same bad family: one warning, two debug lines, three counts."""
    server = await aiohttp_server(FakeUpstream(body=BODY).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    with caplog.at_level(logging.DEBUG, logger="metricbridge.bridge"):
        for _ in range(3):
            text = await (await client.get("/metrics")).text()
    dropped = [r for r in caplog.records if "dropped a family" in r.getMessage()]
    assert [r.levelno for r in dropped] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert 'metricbridge_exposition_problems_total{reason="malformed"} 3.0' in text
    assert "sglang:good 1" in text


async def test_a_family_breaking_its_type_is_counted_by_reason_and_logged_once(
    aiohttp_server, aiohttp_client, caplog
) -> None:
    """A histogram bucket whose le is no number is dropped, counted as le_label, and logged at
    warning once for its family and reason, though its le (and so the message) changes every
    fetch."""
    upstream = FakeUpstream(body=b"")
    server = await aiohttp_server(upstream.app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    with caplog.at_level(logging.DEBUG, logger="metricbridge.bridge"):
        for value in (1, 2, 3):
            upstream.body = (
                b"# TYPE sglang:good gauge\nsglang:good 1\n# TYPE sglang:bad histogram\n"
                + f'sglang:bad_bucket{{a="x",le="x{value}"}} 0\n'.encode()
                + b'sglang:bad_bucket{a="x",le="+Inf"} 0\n'
                + b'sglang:bad_count{a="x"} 0\nsglang:bad_sum{a="x"} 0\n'
            )
            text = await (await client.get("/metrics")).text()
    dropped = [r for r in caplog.records if "dropped a family" in r.getMessage()]
    assert [r.levelno for r in dropped] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "has le='x3'; le is a number" in dropped[-1].getMessage()
    assert 'metricbridge_exposition_problems_total{reason="le_label"} 3.0' in text
    assert "sglang:good 1" in text
    assert "sglang:bad_bucket{" not in text


async def test_untrusted_text_is_quoted_short_in_logs_and_contract(
    aiohttp_server, aiohttp_client, caplog
) -> None:
    """A 100,000-character type is quoted as its first characters and its length."""
    server = await aiohttp_server(FakeUpstream(body=BODY).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    with caplog.at_level(logging.DEBUG, logger="metricbridge.bridge"):
        await client.get("/metrics")
        contract = await (await client.get("/contract")).text()
    message = next(r.getMessage() for r in caplog.records if "dropped a family" in r.getMessage())
    assert len(message) < 300
    assert "(100,000 characters)" in message
    assert BAD_TYPE not in contract


def test_quoted_keeps_short_text_as_repr() -> None:
    """Short text is quoted exactly as repr would; long text is cut at QUOTED_MAX."""
    assert quoted("histogramm") == "'histogramm'"
    assert quoted("y" * (QUOTED_MAX + 1)).startswith(repr("y" * QUOTED_MAX))


MIB = "v" * (1 << 20)
SCALED_HISTOGRAM = "sglang:kv_transfer_latency_ms"  # the shipped contract scales its le bounds
ONE_MIB_VALUES = {
    "sample_value": f"# TYPE hostile:bad gauge\nhostile:bad {MIB}\n",
    "timestamp": f"# TYPE hostile:bad gauge\nhostile:bad 1 {MIB}\n",
    "text_after_value": f"# TYPE hostile:bad gauge\nhostile:bad 1 2 {MIB}\n",
    "type": f"# TYPE hostile:bad {MIB}\nhostile:bad 1\n",
    "scaled_le": (
        f"# TYPE {SCALED_HISTOGRAM} histogram\n"
        f'{SCALED_HISTOGRAM}_bucket{{le="{MIB}"}} 1\n{SCALED_HISTOGRAM}_bucket{{le="+Inf"}} 1\n'
        f"{SCALED_HISTOGRAM}_count 1\n{SCALED_HISTOGRAM}_sum 1\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(ONE_MIB_VALUES))
async def test_a_one_mebibyte_invalid_value_is_logged_cut_with_its_length(
    aiohttp_server, aiohttp_client, caplog, kind: str
) -> None:
    """An engine's 1 MiB invalid value, wherever it sits: each log line stays short and says
    how long the value was; the family is still dropped and counted."""
    body = (FIXTURES / "tp1.prom").read_bytes() + ONE_MIB_VALUES[kind].encode()
    server = await aiohttp_server(FakeUpstream(body=body).app())
    client = await aiohttp_client(bridge_app(str(server.make_url("/metrics"))))
    with caplog.at_level(logging.DEBUG):
        for path in ("/metrics", f"/metrics?name[]={SCALED_HISTOGRAM}", "/contract"):
            assert (await client.get(path)).status == 200
    messages = [r.getMessage() for r in caplog.records]
    assert max(map(len, messages)) < 2 * MESSAGE_MAX
    dropped = [m for m in messages if "dropped a family" in m]
    assert dropped
    assert "characters)" in dropped[0]


def test_shortened_cuts_a_message_and_says_its_length() -> None:
    """A message over the limit keeps its first characters and its full length."""
    assert shortened("short") == "short"
    cut = shortened("m" * (1 << 20))
    assert cut == "m" * MESSAGE_MAX + "... (1,048,576 characters)"
