"""/metrics with gzip and name[]: one gzip member per response, prometheus_client's name[] rules.

A gzip body of several members is valid, but ``curl --compressed`` shows only the first one, so
every response must be a single member; the decoders here stop where the first member ends.
``name[]`` must select samples exactly as prometheus_client's ``restricted_registry`` does,
for the engine's families as for the bridge's own.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.registry import Collector

from helpers.paths import FIXTURES
from helpers.runtime import OWN_PREFIXES
from helpers.service import FakeUpstream, bridge_app
from metricbridge.exposition import line_match
from metricbridge.service import name_filter
from metricbridge.service.gzip_framing import (
    GZIP_HEADER,
    LEVELS,
    close_gzip,
    gzip_member,
    open_gzip,
)

OM_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
ACCEPT = {"text": "text/plain", "openmetrics": OM_ACCEPT}
# Names whose samples do not move while one fetch is reused: a name[] body is the same twice.
STABLE_NAMES = (
    "sglang:request_waiting_time_count",
    "sglang:num_requests_total",
    "sglang:cached_tokens_total",
    "metricbridge_upstream_up",
)
Key = tuple[str, str, tuple[tuple[str, str], ...]]  # family, sample name, labels


def _first_member(body: bytes) -> bytes:
    """What a decoder that stops after the first gzip member (as curl does) makes of ``body``."""
    decoder = zlib.decompressobj(31)
    out = decoder.decompress(body)
    assert decoder.eof, "the gzip member is not finished"
    assert decoder.unused_data == b"", f"{len(decoder.unused_data)} bytes after the first member"
    return out


async def _client(aiohttp_server: Any, aiohttp_client: Any, upstream: FakeUpstream) -> Any:
    server = await aiohttp_server(upstream.app())
    return await aiohttp_client(bridge_app(str(server.make_url("/metrics")), cache_ttl=60))


async def _get(client: Any, fmt: str, encoding: str, names: tuple[str, ...] = ()) -> bytes:
    response = await client.get(
        "/metrics",
        params=[("name[]", name) for name in names],
        headers={"Accept": ACCEPT[fmt], "Accept-Encoding": encoding},
        auto_decompress=False,
    )
    assert response.status == 200
    assert response.headers.get("Content-Encoding") == ("gzip" if encoding == "gzip" else None)
    body: bytes = await response.read()
    assert response.content_length == len(body)
    return body


def _samples(body: bytes, fmt: str) -> dict[Key, float]:
    parse = parse_om if fmt == "openmetrics" else parse_text
    return {
        (family.name, sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parse(body.decode())
        for sample in family.samples
    }


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
async def test_gzip_response_is_one_member(aiohttp_server, aiohttp_client, fmt: str) -> None:
    """The whole response, self-metrics and # EOF included, is in the first gzip member."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    plain = await _get(client, fmt, "identity")
    zipped = await _get(client, fmt, "gzip")
    assert len(zipped) < len(plain) / 4  # the engine part, the bulk, is compressed
    body = _first_member(zipped)
    engine = plain[: plain.index(b"# HELP metricbridge_")]
    assert body.startswith(engine + b"# HELP metricbridge_scrapes")
    samples = {key[1:]: value for key, value in _samples(body, fmt).items()}
    assert samples["metricbridge_scrapes_total", (("format", fmt),)] == 2.0  # this one counted
    (build,) = [labels for name, labels in samples if name == "metricbridge_build_info"]
    assert dict(build)["reader"] == ("compiled" if line_match.COMPILED else "python")
    assert body.count(b"# EOF") == (fmt == "openmetrics")
    assert body.endswith(b"# EOF\n") is (fmt == "openmetrics")


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
async def test_gzip_stays_one_member_across_scrapes_and_changes(
    aiohttp_server, aiohttp_client, fmt: str
) -> None:
    """A reused engine part is closed afresh by every response, with its own counters."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    for count in (1.0, 2.0, 3.0):
        samples = _samples(_first_member(await _get(client, fmt, "gzip")), fmt)
        scrapes = [v for k, v in samples.items() if k[1] == "metricbridge_scrapes_total"]
        assert scrapes == [count]
    await client.post("/-/reload")  # new self-metrics (a new generation) and a fresh fetch
    body = _first_member(await _get(client, fmt, "gzip"))
    assert b"\nmetricbridge_config_last_reload_successful 1.0\n" in body
    assert b'metricbridge_scrapes_total{format="%s"} 4.0\n' % fmt.encode() in body


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
async def test_gzip_with_the_engine_down_is_one_member(
    aiohttp_server, aiohttp_client, fmt: str
) -> None:
    """No engine part at all: the member still opens, and closes after the self-metrics."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream(status=500))
    body = _first_member(await _get(client, fmt, "gzip"))
    assert body.startswith(b"# HELP metricbridge_scrapes")
    assert b"metricbridge_upstream_up{" in body
    assert body.endswith(b"# EOF\n") is (fmt == "openmetrics")


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
async def test_gzip_name_filtered_response_is_one_member(
    aiohttp_server, aiohttp_client, fmt: str
) -> None:
    """A name[] response decodes, from its only member, to the identity response."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    plain = await _get(client, fmt, "identity", STABLE_NAMES)
    assert _first_member(await _get(client, fmt, "gzip", STABLE_NAMES)) == plain


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
@pytest.mark.parametrize("filtered", [False, True], ids=["whole", "name[]"])
async def test_curl_compressed_sees_the_whole_response(
    aiohttp_server, aiohttp_client, tmp_path: Path, fmt: str, *, filtered: bool
) -> None:
    """What users debug with: ``curl --compressed`` gets every byte, self-metrics and # EOF."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl not installed")
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    names = STABLE_NAMES if filtered else ()
    plain = await _get(client, fmt, "identity", names)
    query = "?" + "&".join(f"name[]={name}" for name in names) if filtered else ""
    headers = tmp_path / "headers"
    process = await asyncio.create_subprocess_exec(  # not run(): the server shares this loop
        curl, "-sS", "--globoff", "--compressed", "-H", f"Accept: {ACCEPT[fmt]}",
        "-D", str(headers), str(client.make_url("/metrics")) + query,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    body, _ = await process.communicate()
    assert process.returncode == 0
    assert "content-encoding: gzip" in headers.read_text().lower()
    if filtered:
        assert body == plain
    else:
        assert len(body) > len(plain) - 100  # only counter values differ, by a digit or two
        assert body.startswith(plain[: plain.index(b"# HELP metricbridge_")])
        assert b"\nmetricbridge_build_info{" in body
    assert body.endswith(b"# EOF\n") is (fmt == "openmetrics")


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
async def test_concurrent_name_requests_share_one_cut_of_the_fetch(
    aiohttp_server, aiohttp_client, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    """Eight name[] requests at once on one fetch: the families are cut once, every answer
    is the same, and a later request for other names cuts again."""
    cuts: list[frozenset[str]] = []
    real = name_filter.render_selected

    def counted(*args: Any) -> name_filter.Rendered:
        cuts.append(args[1])
        return real(*args)

    monkeypatch.setattr(name_filter, "render_selected", counted)
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    await _get(client, "text", encoding)  # the fetch, answered whole
    bodies = await asyncio.gather(*(_get(client, "text", encoding, STABLE_NAMES) for _ in range(8)))
    assert cuts == [frozenset(STABLE_NAMES)]
    plain = [gzip.decompress(body) if encoding == "gzip" else body for body in bodies]
    assert all(body == plain[0] for body in plain)
    assert b"sglang:num_requests_total" in plain[0]
    await _get(client, "text", encoding, STABLE_NAMES[:1])
    assert len(cuts) == 2


class _Parsed(Collector):
    """Families parsed from an exposition, served by a prometheus_client registry."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        """The parsed families as they are."""
        yield from self.families


def _restricted_reference(body: bytes, fmt: str, names: tuple[str, ...]) -> list[Metric]:
    """What prometheus_client's restricted_registry keeps of ``body`` for ``names``."""
    parse = parse_om if fmt == "openmetrics" else parse_text
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Parsed(list(parse(body.decode()))))
    return list(registry.restricted_registry(names).collect())


def _sample_lines(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The sample lines of a name[] body, by sample name and labels.

    Read line by line: prometheus_client's OpenMetrics parser rejects a histogram without its
    +Inf bucket, which is what restricting one to ``_count`` makes (its own output included).
    """
    lines = "".join(line + "\n" for line in body.decode().splitlines() if line[:1] != "#")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parse_text(lines)
        for sample in family.samples
    }


NAME_CASES = {
    "histogram-count": ("sglang:request_waiting_time_count",),
    "histogram-family": ("sglang:request_waiting_time",),
    "histogram-buckets-and-sum": ("sglang:queue_time_seconds_bucket", "sglang:queue_time_seconds_sum"),
    "counter-sample": ("sglang:num_requests_total", "sglang:cached_tokens_total"),
    "counter-family": ("sglang:num_requests", "sglang:cached_tokens"),
    "gauges": ("sglang:engine_startup_time", "sglang:num_running_reqs"),
    "own-histogram-family": ("metricbridge_upstream_scrape_duration_seconds",),
    "own-histogram-count": ("metricbridge_upstream_scrape_duration_seconds_count",),
    "own-mixed": ("metricbridge_upstream_up", "metricbridge_scrapes_total", "metricbridge_families"),
    "unknown": ("no_such_metric",),
}  # fmt: skip


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
@pytest.mark.parametrize("names", list(NAME_CASES.values()), ids=list(NAME_CASES))
async def test_name_filter_follows_prometheus_client(
    aiohttp_server, aiohttp_client, fmt: str, names: tuple[str, ...]
) -> None:
    """name[] keeps the same samples of the engine's and the bridge's own families as
    prometheus_client's restricted_registry keeps of the whole response: by sample name only."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    whole = await _get(client, fmt, "identity")
    body = await _get(client, fmt, "identity", names)
    filtered = _sample_lines(body)
    expected = _restricted_reference(whole, fmt, names)
    assert set(filtered) == {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in expected
        for sample in family.samples
    }
    assert body.count(b"# TYPE ") == len(expected)  # no family header without its samples
    reference = {key[1:]: value for key, value in _samples(whole, fmt).items()}
    for key, value in filtered.items():
        if not key[0].startswith(OWN_PREFIXES):  # the bridge's own figures move between scrapes
            assert value == reference[key], key


async def test_name_filter_histogram_count_is_counts_only(aiohttp_server, aiohttp_client) -> None:
    """The audit's case: a histogram's _count gives its counts, not its buckets and sum, and a
    histogram's family name gives nothing, the engine's as the bridge's own."""
    client = await _client(aiohttp_server, aiohttp_client, FakeUpstream())
    body = await _get(client, "text", "identity", ("sglang:request_waiting_time_count",))
    lines = [line for line in body.decode().splitlines() if not line.startswith("#")]
    assert lines
    assert all(line.startswith("sglang:request_waiting_time_count{") for line in lines)
    for name in ("sglang:request_waiting_time", "metricbridge_upstream_scrape_duration_seconds"):
        assert await _get(client, "text", "identity", (name,)) == b""
        assert await _get(client, "openmetrics", "identity", (name,)) == b"# EOF\n"


async def test_name_filter_leaves_out_an_unreadable_family(
    aiohttp_server, aiohttp_client, caplog: pytest.LogCaptureFixture
) -> None:
    """A family whose lines do not parse is left out, logged, whether or not a name selects it."""
    broken = b'# HELP broken_total x\n# TYPE broken_total counter\nbroken_total{a="1"} abc\n'
    upstream = FakeUpstream(body=(FIXTURES / "tp1.prom").read_bytes() + broken)
    client = await _client(aiohttp_server, aiohttp_client, upstream)
    with caplog.at_level(logging.WARNING, "metricbridge"):
        assert b"broken_total" not in await _get(client, "text", "identity")
        body = await _get(client, "text", "identity", ("broken_total", "metricbridge_upstream_up"))
    assert b"broken_total" not in body
    assert b"metricbridge_upstream_up{" in body
    assert "broken_total" in caplog.text


@pytest.mark.parametrize(
    ("pieces", "fresh"),
    [
        ((b"engine a\n", b"engine b\n" * 5000), b"counters\n"),
        ((), b""),  # the engine down and nothing fresh: only the last part
        ((b"x" * 70000,), bytes(range(256)) * 300),  # fresh over one stored block's 65535 bytes
    ],
    ids=["usual", "empty", "long-fresh"],
)
def test_close_gzip_makes_one_member_of_the_three(pieces: tuple[bytes, ...], fresh: bytes) -> None:
    """An open member, stored blocks and another member's blocks decode as one, CRC checked."""
    last = b"# HELP metricbridge_x x\n# EOF\n"
    opened = open_gzip(pieces, 1)
    body = b"".join(close_gzip(opened, fresh, last, gzip_member(last, 1)))
    assert _first_member(body) == b"".join(pieces) + fresh + last
    assert gzip.decompress(body) == b"".join(pieces) + fresh + last  # checks CRC and length
    again = b"".join(close_gzip(opened, b"later\n", last, gzip_member(last, 1)))  # reusable
    assert gzip.decompress(again) == b"".join(pieces) + b"later\n" + last


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_level_makes_members_that_zlib_reads(level: int) -> None:
    """ISA-L's deflate in the bridge's own framing: the header zlib writes, CRC and length."""
    data = b"".join(f'g{{a="{i}"}} {i * 7}\n'.encode() for i in range(20000))
    member = gzip_member(data, level)
    assert member.startswith(GZIP_HEADER)
    assert gzip.decompress(member) == data
    assert _first_member(member) == data
    assert len(member) < len(data) // 2  # compressed, not stored
    opened = open_gzip([memoryview(data)[:12345], memoryview(data)[12345:]], level)
    assert (opened.crc, opened.size) == (zlib.crc32(data), len(data))
    body = b"".join(close_gzip(opened, b"", b"", gzip_member(b"", level)))
    assert gzip.decompress(body) == data


@pytest.mark.parametrize("level", [-1, 4, 9])
def test_a_level_isal_does_not_have_is_refused(level: int) -> None:
    with pytest.raises(ValueError, match=f"gzip level {level} is not one of ISA-L's, 0 to 3"):
        gzip_member(b"x", level)
