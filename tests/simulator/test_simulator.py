"""Tests for the simulated SGLang 0.5.23 upstream, checked against the real fixtures."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from helpers.paths import FIXTURES
from helpers.promtool import promtool_check_metrics
from metricbridge.simulator.exposition import format_value
from metricbridge.simulator.families import ENCODER_FAMILIES, ENGINE_FAMILIES, Kind
from metricbridge.simulator.server import (
    REQUEST_COUNTS,
    TEXT_CONTENT_TYPE,
    LoadScript,
    SimulatedEncoder,
    SimulatedEngine,
    make_simulator_app,
    run_simulator,
    start_simulator,
)

# Families the simulator emits that tp1.prom lacks: its light load never evicted (hicache.prom
# shows both families, with the radix label set).
EXTRA_OVER_TP1 = {"sglang:evicted_tokens_total", "sglang:eviction_duration_seconds"}
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
ENGINE_SPECS = {spec.name: spec for spec in ENGINE_FAMILIES}


@dataclass
class Fam:
    """One family of an exposition, read line by line (independently of the simulator)."""

    kind: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def label_names(self) -> set[str]:
        """Label names of the family's samples, without the bucket label."""
        return {name for _, labels, _ in self.samples for name in labels} - {"le"}


def read(text: str) -> dict[str, Fam]:
    """Split an exposition into families keyed by their ``# TYPE`` name."""
    fams: dict[str, Fam] = {}
    helps: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, text_ = line[7:].partition(" ")
            helps[name] = text_
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            current = fams[name] = Fam(kind, helps[name])
        else:
            match = _SAMPLE.fullmatch(line)
            assert match, line
            assert current is not None
            current.samples.append(
                (match[1], dict(_LABEL.findall(match[2] or "")), float(match[3]))
            )
    return fams


def fixture(name: str) -> dict[str, Fam]:
    """Read a real SGLang exposition from tests/fixtures."""
    return read((FIXTURES / name).read_text())


def series(fams: dict[str, Fam]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Map every series (sample name and labels) to its value, failing on duplicates."""
    keys = Counter((s[0], frozenset(s[1].items())) for fam in fams.values() for s in fam.samples)
    assert max(keys.values(), default=1) == 1, [k for k, n in keys.items() if n > 1][:3]
    return {(s[0], frozenset(s[1].items())): s[2] for fam in fams.values() for s in fam.samples}


def value(fams: dict[str, Fam], family: str, **labels: str) -> float:
    """Return the value of the one sample of ``family`` whose labels include ``labels``."""
    found = [v for _, lab, v in fams[family].samples if labels.items() <= lab.items()]
    assert len(found) == 1, (family, labels, found)
    return found[0]


def busy_engine(seconds: float = 60.0, rate: float = 8.0, **kwargs: object) -> SimulatedEngine:
    """Return an engine that has served ``seconds`` of traffic."""
    engine = SimulatedEngine(**kwargs)  # type: ignore[arg-type]
    engine.advance(seconds, arrivals_per_second=rate)
    return engine


# -- number formatting and the family table ---------------------------------------------------


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1.0"),
        (421367.0, "421367.0"),
        (1183744.0, "1.183744e+06"),
        (8313110528.0, "8.313110528e+09"),
        (1e6, "1e+06"),
        (0.0016200000000000001, "0.0016200000000000001"),
        (0.019999999999999796, "0.019999999999999796"),
        (-1.0, "-1.0"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
    ],
)
def test_format_value_examples(number: float, text: str) -> None:
    """Values render as in the fixtures (integers as floats, Go-style exponents, NaN, +Inf)."""
    assert format_value(number) == text


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_format_value_equals_float_to_go_string(number: float) -> None:
    """The own formatter agrees with prometheus_client's floatToGoString on every float."""
    assert format_value(number) == floatToGoString(number)


def test_family_table_matches_the_fixtures() -> None:
    """Every family's HELP, TYPE and bucket bounds are SGLang's own, taken from the fixtures."""
    real = fixture("tp1.prom") | fixture("hicache.prom") | fixture("epd-encoder.prom")
    definitions = json.loads((FIXTURES / "metric-definitions.json").read_text())["metrics"]
    bounds = {d["name"]: d.get("buckets") for d in definitions}
    for spec in ENGINE_FAMILIES + ENCODER_FAMILIES:
        assert (spec.kind.value, spec.help) == (real[spec.name].kind, real[spec.name].help)
        if spec.kind is Kind.HISTOGRAM:
            assert [*spec.buckets, math.inf] == bounds[spec.name], spec.name


# -- the engine's exposition ------------------------------------------------------------------


def test_cold_render_has_exactly_the_series_of_tp1_cold() -> None:
    """A fresh engine serves the same families, HELP texts and series as tp1-cold.prom."""
    ours, real = read(SimulatedEngine().render().decode()), fixture("tp1-cold.prom")
    assert {n: (f.kind, f.help) for n, f in ours.items()} == {
        n: (f.kind, f.help) for n, f in real.items()
    }
    assert series(ours).keys() == series(real).keys()
    assert len(ours["sglang:startup_time_seconds"].samples) == 4


def test_cold_render_lacks_lazy_families() -> None:
    """Lazily created counters and histograms are absent until their first event."""
    fams = read(SimulatedEngine().render().decode())
    lazy = {
        "sglang:num_requests_total",
        "sglang:num_aborted_requests_total",
        "sglang:cached_tokens_total",
        "sglang:queue_time_seconds",
        "sglang:time_to_first_token_seconds",
        "sglang:evicted_tokens_total",
        "sglang:num_running_reqs",  # log_stats gauges wait for the first stats report
        "sglang:http_responses_total",
    }
    assert not lazy & fams.keys()
    assert "sglang:prefill_effective_tokens_total" in fams


def test_idle_scheduler_publishes_log_stats_gauges_after_30_seconds() -> None:
    """Without traffic the log_stats gauges appear with the idle publish after 30 s."""
    engine = SimulatedEngine()
    engine.advance(29.0, arrivals_per_second=0.0)
    assert "sglang:num_running_reqs" not in read(engine.render().decode())
    engine.advance(2.0, arrivals_per_second=0.0)
    fams = read(engine.render().decode())
    assert value(fams, "sglang:num_running_reqs") == 0.0
    assert value(fams, "sglang:pending_prealloc_token_usage") == 0.0
    assert "sglang:num_requests_total" not in fams


def test_family_set_after_traffic_matches_tp1() -> None:
    """After traffic the families are tp1.prom's plus the eviction pair, with the same labels."""
    ours = read(busy_engine().render().decode())
    real = fixture("tp1.prom") | {
        name: fam for name, fam in fixture("hicache.prom").items() if name in EXTRA_OVER_TP1
    }
    assert ours.keys() == real.keys()
    for name, fam in ours.items():
        assert fam.label_names() == real[name].label_names(), name


def test_dp_label_sets_match_dp8() -> None:
    """With DP attention every scheduler series carries dp_rank, as in dp8.prom."""
    ours = read(busy_engine(dp_size=2, tp_size=2, rate=16.0).render().decode())
    real = fixture("dp8.prom")
    for name in ours.keys() & real.keys():
        assert ours[name].label_names() == real[name].label_names(), name
    ranks = {lab["tp_rank"] for _, lab, _ in ours["sglang:num_running_reqs"].samples}
    assert ranks == {"0", "1", "2", "3"}
    components = {
        lab["component"] for _, lab, _ in ours["sglang:process_cpu_seconds_total"].samples
    }
    assert "data_parallel_controller" in components


@pytest.mark.parametrize(
    ("seconds", "kwargs"),
    [
        (0.0, {}),
        (60.0, {}),
        (60.0, {"dp_size": 2, "tp_size": 2}),
        (60.0, {"engine_type": "prefill"}),
        (60.0, {"engine_type": "decode"}),
    ],
    ids=["cold", "tp1", "dp2-tp2", "prefill", "decode"],
)
def test_render_parses_without_duplicate_series(seconds: float, kwargs: dict[str, object]) -> None:
    """prometheus_client's parser reads every render, and no series appears twice."""
    text = busy_engine(seconds, **kwargs).render().decode()
    keys = Counter(
        (sample.name, frozenset(sample.labels.items()))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    )
    assert keys
    assert max(keys.values()) == 1
    series(read(text))


def test_layout_follows_multiprocess_collector() -> None:
    """Labels are sorted, histograms go _sum, ascending buckets, _count; no _created."""
    fams = read(busy_engine().render().decode())
    for name, fam in fams.items():
        for sample, labels, _ in fam.samples:
            assert list(labels) == sorted(labels), sample
            assert not sample.endswith("_created")
        if fam.kind != "histogram":
            continue
        kinds = [sample.removeprefix(name) for sample, _, _ in fam.samples]
        per_series = len(ENGINE_SPECS[name].buckets) + 3
        expected = ["_sum", *["_bucket"] * (per_series - 2), "_count"]
        assert kinds == expected * (len(kinds) // per_series), name


def test_counters_grow_and_histograms_stay_cumulative() -> None:
    """Between two renders counters never decrease; buckets grow with le and +Inf equals _count."""
    engine = busy_engine(30.0)
    before = read(engine.render().decode())
    engine.advance(30.0, arrivals_per_second=8.0)
    after = read(engine.render().decode())
    now = series(after)
    for name, fam in before.items():
        if fam.kind == "gauge":
            continue
        for sample, labels, old in fam.samples:
            assert now[sample, frozenset(labels.items())] >= old, (name, sample, labels)
    for fam in after.values():
        if fam.kind == "histogram":
            _assert_cumulative(fam)


def _assert_cumulative(fam: Fam) -> None:
    buckets: dict[frozenset[tuple[str, str]], list[tuple[float, float]]] = {}
    counts: dict[frozenset[tuple[str, str]], float] = {}
    for sample, labels, val in fam.samples:
        key = frozenset((k, v) for k, v in labels.items() if k != "le")
        if sample.endswith("_bucket"):
            buckets.setdefault(key, []).append((float(labels["le"]), val))
        elif sample.endswith("_count"):
            counts[key] = val
    for key, pairs in buckets.items():
        assert [le for le, _ in pairs] == sorted(le for le, _ in pairs)
        assert [n for _, n in pairs] == sorted(n for _, n in pairs)
        assert pairs[-1] == (math.inf, counts[key])


def test_idle_zeroes_running_but_keeps_stale_gauges() -> None:
    """Idle republishes running/queue/throughput as 0 but keeps cache_hit_rate and friends."""
    engine = busy_engine(30.0)
    busy = read(engine.render().decode())
    assert value(busy, "sglang:num_running_reqs") > 0
    engine.advance(60.0, arrivals_per_second=0.0)
    drained = read(engine.render().decode())
    engine.advance(10.0, arrivals_per_second=0.0)
    idle = read(engine.render().decode())
    for gauge in ("num_running_reqs", "num_queue_reqs", "gen_throughput", "token_usage"):
        assert value(idle, f"sglang:{gauge}") == 0.0
    for gauge in ("cache_hit_rate", "decode_sum_seq_lens", "new_token_ratio"):
        assert value(idle, f"sglang:{gauge}") == value(drained, f"sglang:{gauge}") > 0


def test_aborts_are_lazy_and_rare() -> None:
    """num_aborted_requests_total appears with the first abort, for about 2% of requests."""
    engine = SimulatedEngine(seed=7)
    engine.advance(1.0, arrivals_per_second=1.0)
    assert "sglang:num_aborted_requests_total" not in read(engine.render().decode())
    engine.advance(300.0, arrivals_per_second=10.0)
    fams = read(engine.render().decode())
    finished = sum(v for _, _, v in fams["sglang:num_requests_total"].samples)
    aborted = value(fams, "sglang:num_aborted_requests_total")
    assert 0.01 < aborted / finished < 0.03


def test_cached_tokens_by_source() -> None:
    """cached_tokens_total has device and host children once each source produced a hit."""
    fams = read(busy_engine(120.0).render().decode())
    sources = {lab["cache_source"] for _, lab, _ in fams["sglang:cached_tokens_total"].samples}
    assert sources == {"device", "host"}


def test_render_counts_itself_like_the_middleware() -> None:
    """Each render is a scrape: /metrics requests include it, responses exclude it."""
    engine = SimulatedEngine()
    engine.render()
    fams = read(engine.render().decode())
    assert value(fams, "sglang:http_requests_total", endpoint="/metrics") == 2.0
    assert value(fams, "sglang:http_responses_total", endpoint="/metrics") == 1.0
    assert value(fams, "sglang:http_requests_active", endpoint="/metrics") == 1.0
    assert engine.scrapes == 2


def test_same_seed_gives_the_same_bytes() -> None:
    """The model is deterministic: the seed alone decides the traffic."""
    assert busy_engine(seed=3).render() == busy_engine(seed=3).render()
    assert busy_engine(seed=3).render() != busy_engine(seed=4).render()


def test_engine_types_follow_pd_disaggregation() -> None:
    """Prefill servers report utilization -1 and no TTFT; decode servers use decode stages."""
    prefill = read(busy_engine(engine_type="prefill").render().decode())
    assert value(prefill, "sglang:utilization") == -1.0
    assert "sglang:time_to_first_token_seconds" not in prefill
    decode = read(busy_engine(engine_type="decode").render().decode())
    stages = {lab["stage"] for _, lab, _ in decode["sglang:per_stage_req_latency_seconds"].samples}
    assert "decode_prepare" in stages
    assert {lab["engine_type"] for _, lab, _ in decode["sglang:num_running_reqs"].samples} == {
        "decode"
    }


def test_invalid_arguments_are_rejected() -> None:
    """Unknown engine types and negative durations raise ValueError."""
    with pytest.raises(ValueError, match="engine_type"):
        SimulatedEngine(engine_type="hybrid")
    with pytest.raises(ValueError, match="negative"):
        SimulatedEngine().advance(-1.0, arrivals_per_second=1.0)
    with pytest.raises(ValueError, match="positive"):
        SimulatedEncoder(dp_size=0)


@pytest.mark.integration
def test_renders_pass_promtool() -> None:
    """Prometheus' own parser reads a busy engine's and an encoder's render."""
    promtool_check_metrics(busy_engine(dp_size=2).render())
    encoder = SimulatedEncoder()
    encoder.advance(30.0, arrivals_per_second=2.0)
    promtool_check_metrics(encoder.render())


# -- payload sizes ----------------------------------------------------------------------------


def test_payload_size_dp8_tp2_is_about_one_megabyte() -> None:
    """Sixteen schedulers after some traffic render between 0.7 and 1.5 MB."""
    size = len(busy_engine(30.0, 24.0, dp_size=8, tp_size=2).render())
    assert 700_000 <= size <= 1_500_000, size


def test_payload_size_dp64_tp2_is_several_megabytes() -> None:
    """128 busy schedulers render between 7 and 14 MB (about 56 KB each, as in dp8.prom)."""
    engine = busy_engine(30.0, 64 * 20.0, dp_size=64, tp_size=2, max_running_requests=64 * 256)
    size = len(engine.render())
    assert 7_000_000 <= size <= 14_000_000, size


# -- the encoder ------------------------------------------------------------------------------


def test_encoder_matches_the_epd_fixture() -> None:
    """A fresh encoder renders nothing; after traffic its families and labels are the fixture's."""
    encoder = SimulatedEncoder()
    assert encoder.render() == b""
    encoder.advance(60.0, arrivals_per_second=1.0)
    ours, real = read(encoder.render().decode()), fixture("epd-encoder.prom")
    assert ours.keys() == real.keys()
    for name, fam in ours.items():
        assert fam.label_names() == real[name].label_names(), name
    statuses = {lab["status"] for _, lab, _ in ours["sglang:encoder_requests_total"].samples}
    assert statuses == {"success", "error"}
    series(ours)


# -- the load script and the HTTP server ------------------------------------------------------


def test_load_script_cycles_through_busy_bursts_and_idle() -> None:
    """The rate follows the busy part, its bursts, then the idle part, and repeats."""
    script = LoadScript(busy_seconds=20, idle_seconds=10, rate=5, burst_every_seconds=10)
    assert script.rate_at(0.0) == 5
    assert script.rate_at(9.0) == script.burst_rate
    assert script.rate_at(25.0) == 0.0
    assert script.rate_at(30.0) == 5
    with pytest.raises(ValueError, match="negative"):
        LoadScript(rate=-1)


async def test_metrics_endpoint_serves_the_exposition(aiohttp_client) -> None:
    """GET /metrics answers text 0.0.4 and the app counts the requests it served."""
    engine = busy_engine(10.0)
    app = make_simulator_app(engine, tick_seconds=60.0)
    client = await aiohttp_client(app)
    for _ in range(2):
        response = await client.get("/metrics", headers={"Accept-Encoding": "identity"})
        assert response.status == 200
        assert response.headers["Content-Type"] == TEXT_CONTENT_TYPE
        assert "Content-Encoding" not in response.headers
        body = await response.text()
    assert app[REQUEST_COUNTS].metrics == engine.scrapes == 2
    assert value(read(body), "sglang:http_requests_total", endpoint="/metrics") == 2.0


async def test_metrics_endpoint_honours_gzip(aiohttp_client) -> None:
    """With Accept-Encoding: gzip the body is gzip-compressed, as prometheus_client does."""
    client = await aiohttp_client(make_simulator_app(SimulatedEngine()), auto_decompress=False)
    response = await client.get("/metrics", headers={"Accept-Encoding": "gzip, deflate"})
    assert response.headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(await response.read()).decode()
    assert "sglang:startup_time_seconds" in read(text)


async def test_server_info_and_health(aiohttp_client) -> None:
    """/server_info and /get_server_info report resolved args; /health answers 200."""
    engine = SimulatedEngine(dp_size=2, tp_size=2, max_running_requests=128)
    client = await aiohttp_client(make_simulator_app(engine))
    for path in ("/server_info", "/get_server_info"):
        response = await client.get(path)
        info = await response.json()
        assert info["max_running_requests"] == 128
        assert (info["tp_size"], info["dp_size"]) == (4, 2)
        assert info["served_model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert info["disaggregation_mode"] == "null"
    health = await client.get("/health")
    assert health.status == 200
    fams = read(engine.render().decode())
    assert value(fams, "sglang:http_requests_total", endpoint="/health") == 1.0


async def test_encoder_endpoint_only_with_an_encoder(aiohttp_client) -> None:
    """/encoder/metrics exists when an encoder is given, and 404s otherwise."""
    encoder = SimulatedEncoder()
    encoder.advance(10.0, arrivals_per_second=2.0)
    app = make_simulator_app(SimulatedEngine(), encoder=encoder)
    with_encoder = await aiohttp_client(app)
    response = await with_encoder.get("/encoder/metrics")
    assert response.headers["Content-Type"] == TEXT_CONTENT_TYPE
    assert "sglang:encoder_requests_total" in read(await response.text())
    assert app[REQUEST_COUNTS].encoder_metrics == 1
    without = await aiohttp_client(make_simulator_app(SimulatedEngine()))
    assert (await without.get("/encoder/metrics")).status == 404


class WatchedEngine(SimulatedEngine):
    """An engine that signals each advance, so a test can wait for a tick without polling."""

    def __init__(self) -> None:
        """Start a default engine with an unset event."""
        super().__init__()
        self.ticked = asyncio.Event()

    def advance(self, seconds: float, *, arrivals_per_second: float) -> None:
        """Advance as usual, then set the event."""
        super().advance(seconds, arrivals_per_second=arrivals_per_second)
        self.ticked.set()


async def test_background_task_advances_the_engine(aiohttp_client) -> None:
    """The cleanup_ctx task follows the load script every tick, so counters grow."""
    engine, encoder = WatchedEngine(), SimulatedEncoder()
    script = LoadScript(rate=400.0, burst_every_seconds=0.0, encoder_share=0.25)
    app = make_simulator_app(engine, encoder=encoder, tick_seconds=0.05, script=script)
    await aiohttp_client(app)
    async with asyncio.timeout(5.0):
        await engine.ticked.wait()
    assert engine.now == encoder.now == 0.05
    fams = read(engine.render().decode())
    assert value(fams, "sglang:http_requests_total", endpoint="/generate") > 0
    assert encoder.render()


async def test_start_and_run_simulator_serve_real_sockets() -> None:
    """start_simulator binds a port; run_simulator returns once its stop event is set."""
    runner = await start_simulator("127.0.0.1", 0, tick_seconds=60.0)
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            response = await session.get(f"http://127.0.0.1:{port}/metrics")
            assert response.status == 200
            assert "sglang:startup_time_seconds" in read(await response.text())
    finally:
        await runner.cleanup()
    stop = asyncio.Event()
    task = asyncio.create_task(run_simulator("127.0.0.1", 0, tick_seconds=60.0, stop=stop))
    stop.set()
    async with asyncio.timeout(5.0):
        await task
