"""translation.derive, one formula at a time: the shipped contract's derived rows on SGLang 0.5.23.

The rules are the shipped contract's, compiled by ``compile_rules``; each case reads one fixture
(and a /server_info answer shaped like SGLang's) and checks the series or the reason.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest

from helpers.paths import FIXTURES
from metricbridge.config.load import load_config
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Format, Labels, MetricType
from metricbridge.translation.compiled import (
    CompiledDerive,
    FamilySeries,
    FromServerInfo,
    Ratio,
    RatioOfDeltas,
    ServerField,
    ShareZero,
)
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.derive import (
    NEEDS_TWO_FETCHES,
    CounterMemory,
    Reads,
    derive_all,
    derive_values,
)
from metricbridge.translation.series import by_name

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen3-30B-A3B"
SCHEDULER = {"engine_type": "unified", "model_name": LLAMA, "moe_ep_rank": "0", "pp_rank": "0"}
DERIVES = {
    derive.name: derive for derive in compile_rules(load_config(None, ["approximations"])).derives
}


def _families(fixture: str, edit: tuple[bytes, bytes] | None = None) -> list[AnyFamily]:
    payload = (FIXTURES / fixture).read_bytes()
    if edit is not None:
        assert edit[0] in payload
        payload = payload.replace(*edit)
    return read_exposition(payload, Format.TEXT).families


def _values(
    name: str,
    fixture: str,
    server_info: dict[str, object] | None = None,
    memory: CounterMemory | None = None,
) -> list[tuple[dict[str, str], float]] | str:
    index = by_name(_families(fixture))
    values = derive_values(DERIVES[name], index, memory or {}, server_info, reads=Reads())
    return values if isinstance(values, str) else [(dict(ls), v) for ls, v in values]


def test_formulas_are_resolved_at_compile_time() -> None:
    """Each shipped derive is compiled to its formula with typed, resolved inputs."""
    util = DERIVES["sglang:decode_bs_util"].formula
    assert util == Ratio(
        FamilySeries(
            "sglang:num_running_reqs", frozenset(), frozenset(), "sglang:num_running_reqs[]"
        ),
        ServerField("max_running_requests", per_dp_worker=True),
        minimum=1.0,
    )
    hit = DERIVES["sglang:device_cache_hit_rate"].formula
    assert isinstance(hit, RatioOfDeltas)
    assert hit.numerator.pairs == frozenset({("cache_source", "device")})
    assert hit.numerator.memory_key == "sglang:cached_tokens_total[('cache_source', 'device')]"
    assert hit.by == frozenset({"engine_type", "model_name"})
    assert isinstance(DERIVES["sglang:idle_batch_ratio"].formula, ShareZero)
    batches = DERIVES["sglang:num_max_batchs"].formula
    assert batches == FromServerInfo(
        ServerField("max_running_requests", per_dp_worker=False),
        "sglang:startup_time_seconds",
        frozenset({"phase"}),
    )
    assert all(isinstance(d, CompiledDerive) for d in DERIVES.values())
    assert DERIVES["sglang:decode_bs_util"].reason == "derived (ratio)"


DP8_INFO = {"max_running_requests": 64, "dp_size": 8, "enable_dp_attention": True}
DP8_RUNNING = {"3": 2.0, "7": 2.0, "6": 3.0, "0": 2.0, "2": 2.0, "5": 2.0, "4": 2.0, "1": 2.0}


def _dp8(per_worker: float) -> list[tuple[dict[str, str], float]]:
    return [
        (
            {
                "dp_rank": rank,
                "engine_type": "unified",
                "model_name": QWEN,
                "moe_ep_rank": rank,
                "pp_rank": "0",
                "tp_rank": rank,
            },
            running / per_worker,
        )
        for rank, running in DP8_RUNNING.items()
    ]


@pytest.mark.parametrize(
    ("name", "fixture", "server_info", "expected"),
    [
        pytest.param(
            "sglang:decode_bs_util",
            "tp1.prom",
            {"max_running_requests": 48},
            [({**SCHEDULER, "tp_rank": "0"}, 6 / 48)],
            id="ratio_running_over_max_running",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "dp8.prom",
            DP8_INFO,
            _dp8(64 // 8),
            id="ratio_per_dp_worker_under_dp_attention",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "dp8.prom",
            {**DP8_INFO, "enable_dp_attention": False},
            _dp8(64),
            id="ratio_whole_max_without_dp_attention",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "tp1.prom",
            {"internal_states": [{"max_running_requests": 48}]},
            [({**SCHEDULER, "tp_rank": "0"}, 6 / 48)],
            id="ratio_reads_the_scheduler_internal_states",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "tp1.prom",
            {"max_running_requests": 0},
            [({**SCHEDULER, "tp_rank": "0"}, 6.0)],
            id="ratio_denominator_is_at_least_the_minimum",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "tp1.prom",
            {"max_running_requests": True},
            "/server_info has no usable max_running_requests",
            id="ratio_refuses_a_boolean_field",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "tp1.prom",
            None,
            "/server_info has no usable max_running_requests",
            id="ratio_without_server_info",
        ),
        pytest.param(
            "sglang:decode_bs_util",
            "tp1-cold.prom",
            {"max_running_requests": 48},
            "sglang:num_running_reqs is absent upstream",
            id="ratio_numerator_absent_on_a_cold_engine",
        ),
        pytest.param(
            "sglang:idle_batch_ratio",
            "dp8.prom",
            None,
            [({"engine_type": "unified", "model_name": QWEN}, 0.0)],
            id="share_zero_every_dp_worker_busy",
        ),
        pytest.param(
            "sglang:idle_batch_ratio",
            "tp1-idle.prom",
            None,
            [({"engine_type": "unified", "model_name": LLAMA}, 1.0)],
            id="share_zero_idle_engine",
        ),
        pytest.param(
            "sglang:num_max_batchs",
            "tp1.prom",
            {"max_running_requests": 48},
            [({"engine_type": "unified", "model_name": LLAMA}, 48.0)],
            id="server_info_labelled_like_the_tokenizer",
        ),
        pytest.param(
            "sglang:num_max_batchs",
            "epd-encoder.prom",
            {"max_running_requests": 48},
            "sglang:startup_time_seconds (for labels) is absent upstream",
            id="server_info_waits_for_its_label_family",
        ),
        pytest.param(
            "sglang:device_cache_hit_rate",
            "tp1.prom",
            None,
            NEEDS_TWO_FETCHES,
            id="rate_needs_two_fetches",
        ),
        pytest.param(
            "sglang:host_cache_hit_rate",
            "epd-encoder.prom",
            None,
            "sglang:cached_tokens_total is absent upstream",
            id="rate_numerator_absent",
        ),
    ],
)
def test_derived_values(
    name: str,
    fixture: str,
    server_info: dict[str, object] | None,
    expected: list[tuple[dict[str, str], float]] | str,
) -> None:
    """The series of one derived row on one fixture, or why there are none."""
    assert _values(name, fixture, server_info) == expected


CACHED_DEVICE = b'sglang:cached_tokens_total{cache_source="device",engine_type="unified",'
PROMPT_FALSE = b'sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",'


def _edit(prefix: bytes, old: bytes, new: bytes) -> tuple[bytes, bytes]:
    line = prefix + b'model_name="' + LLAMA.encode() + b'"} '
    return line + old, line + new


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        pytest.param(
            [
                _edit(CACHED_DEVICE, b"1771.0", b"1871.0"),
                _edit(PROMPT_FALSE, b"12657.0", b"13057.0"),
            ],
            [({"engine_type": "unified", "model_name": LLAMA}, 100 / 400)],
            id="rate_of_deltas_between_fetches",
        ),
        pytest.param(
            [_edit(PROMPT_FALSE, b"12657.0", b"13057.0")],
            [({"engine_type": "unified", "model_name": LLAMA}, 0.0)],
            id="rate_zero_when_only_the_denominator_moved",
        ),
        pytest.param(
            [],
            "no value: the denominator did not move since the previous fetch",
            id="rate_without_traffic_has_no_value",
        ),
        pytest.param(
            [_edit(CACHED_DEVICE, b"1771.0", b"100.0"), _edit(PROMPT_FALSE, b"12657.0", b"300.0")],
            # a restart restarts the interval: the next fetch has a value
            "no value: a counter was reset since the previous fetch; the next fetch has one",
            id="rate_after_an_engine_restart",
        ),
    ],
)
def test_rate_over_two_fetches(
    edits: list[tuple[bytes, bytes]], expected: list[tuple[dict[str, str], float]] | str
) -> None:
    """device_cache_hit_rate from tp1 and a later fetch of it (counters edited)."""
    rules = [DERIVES["sglang:device_cache_hit_rate"]]
    first, memory = derive_all(_families("tp1.prom"), rules, {}, None)
    assert first["sglang:device_cache_hit_rate"].reason == NEEDS_TWO_FETCHES
    assert memory == {
        ("sglang:cached_tokens_total[('cache_source', 'device')]", SCHEDULER_TOKENS): 1771.0,
        ("sglang:prompt_tokens_total[]", _streaming("false")): 12657.0,
        ("sglang:prompt_tokens_total[]", _streaming("true")): 8187.0,
    }
    payload = (FIXTURES / "tp1.prom").read_bytes()
    for old, new in edits:
        assert old in payload
        payload = payload.replace(old, new)
    later = read_exposition(payload, Format.TEXT).families
    second, _ = derive_all(later, rules, MappingProxyType(memory), None)
    result = second["sglang:device_cache_hit_rate"]
    if isinstance(expected, str):
        assert (result.family, result.reason) == (None, expected)
    else:
        assert result.family is not None
        assert result.family.meta.type is MetricType.GAUGE
        got = [(dict(s.labels), s.value) for s in result.family.samples]
        assert got == expected


SCHEDULER_TOKENS: Labels = (("engine_type", "unified"), ("model_name", LLAMA))


def _streaming(value: str) -> Labels:
    return (("engine_type", "unified"), ("is_streaming", value), ("model_name", LLAMA))


def test_engine_series_win_over_a_derived_row() -> None:
    """A patched engine serving the contract name itself: nothing is derived."""
    families = _families("tp1.prom")
    native = read_exposition(
        b"# TYPE sglang:num_max_batchs gauge\nsglang:num_max_batchs 12\n", Format.TEXT
    ).families
    results, _ = derive_all(
        [*families, *native], [DERIVES["sglang:num_max_batchs"]], {}, {"max_running_requests": 48}
    )
    assert results["sglang:num_max_batchs"].family is None
    assert results["sglang:num_max_batchs"].reason == "served by the engine under the contract name"


def test_derived_family_metadata() -> None:
    """A derived family is a gauge with the row's help and unit."""
    results, _ = derive_all(
        _families("tp1.prom"),
        [DERIVES["sglang:decode_bs_util"]],
        {},
        {"max_running_requests": 48},
    )
    family = results["sglang:decode_bs_util"].family
    assert family is not None
    assert family.meta.type is MetricType.GAUGE
    assert family.meta.help == DERIVES["sglang:decode_bs_util"].help
    assert [s.raw_value for s in family.samples] == ["0.125"]
