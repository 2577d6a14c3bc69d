"""translation.warm_zero: the series a family must have before its first event, on SGLang 0.5.23.

What depends only on the rules (value lists, fixed labels) is computed by ``compile_rules``;
what depends on the payload (the label sets of ``labels_from``) once per translation.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from helpers.paths import FIXTURES
from metricbridge.config.load import load_config, parse_config
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Family, Format, Labels, MetricType
from metricbridge.translation.compiled import CompiledWarmZero
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.series import by_name, parsed_or_none
from metricbridge.translation.warm_zero import WarmOutcome, expected_series, warm_zero

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
VL = "Qwen/Qwen2.5-VL-7B-Instruct"
SHIPPED = {warm.name: warm for warm in compile_rules(load_config()).warm_zero}


def _families(fixture: str) -> list[AnyFamily]:
    return read_exposition((FIXTURES / fixture).read_bytes(), Format.TEXT).families


def _warm(name: str, mtype: str, block: dict[str, Any]) -> CompiledWarmZero:
    body = {"disposition": "native", "type": mtype, "warm_zero": block}
    text = yaml.safe_dump({"version": 1, "families": {name: body}}, sort_keys=False)
    (warm,) = compile_rules(parse_config(text, "inline")).warm_zero
    return warm


def _dicts(labels: tuple[Labels, ...] | None) -> list[dict[str, str]] | None:
    return None if labels is None else [dict(ls) for ls in labels]


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        pytest.param(
            {"values": {"cache_source": ["device", "host"]}, "set": {"engine_type": "unified"}},
            [
                {"cache_source": "device", "engine_type": "unified"},
                {"cache_source": "host", "engine_type": "unified"},
            ],
            id="warm_values_times_fixed_labels",
        ),
        pytest.param(
            {"values": {"modality": ["image", "video"], "dp_rank": ["0", "1"]}},
            [
                {"dp_rank": "0", "modality": "image"},
                {"dp_rank": "1", "modality": "image"},
                {"dp_rank": "0", "modality": "video"},
                {"dp_rank": "1", "modality": "video"},
            ],
            id="warm_product_of_two_value_lists_in_file_order",
        ),
        pytest.param({}, [{}], id="warm_one_unlabelled_series"),
        pytest.param({"values": {"modality": []}}, [], id="warm_empty_value_list_expects_none"),
    ],
)
def test_expected_series_known_at_compile_time(
    block: dict[str, Any], expected: list[dict[str, str]]
) -> None:
    """Without labels_from the expected series are compiled once; no payload is read."""
    warm = _warm("sglang:x_total", "counter", block)
    assert _dicts(warm.expected) == expected
    assert expected_series(warm, {}) is warm.expected


EVICTED = "sglang:evicted_tokens_total"


@pytest.mark.parametrize(
    ("name", "fixture", "expected"),
    [
        pytest.param(
            "sglang:num_aborted_requests_total",
            "tp1-cold.prom",
            [{"engine_type": "unified", "model_name": LLAMA}],
            id="warm_tokenizer_labels_from_startup_time_without_phase",
        ),
        pytest.param(
            EVICTED,
            "tp1.prom",
            [{"cache_type": "UnifiedRadixCache", "dp_rank": "0", "pp_rank": "0", "tp_rank": "0"}],
            id="warm_keep_ranks_default_dp_rank_fixed_cache_type",
        ),
        pytest.param(
            EVICTED,
            "dp8.prom",
            [
                {"cache_type": "UnifiedRadixCache", "dp_rank": r, "pp_rank": "0", "tp_rank": r}
                for r in ("3", "7", "6", "0", "2", "5", "4", "1")
            ],
            id="warm_dp8_ranks_in_engine_order_dp_rank_not_defaulted",
        ),
        pytest.param(
            "sglang:num_bootstrap_failed_reqs_total",
            "pd-prefill.prom",
            [
                {
                    "engine_type": "prefill",
                    "model_name": LLAMA,
                    "moe_ep_rank": "0",
                    "pp_rank": "0",
                    "tp_rank": "0",
                }
            ],
            id="warm_scheduler_labels_inherited_whole",
        ),
        pytest.param(
            "sglang:encoder_num_failed_requests_total",
            "epd-encoder.prom",
            [
                {"dp_rank": "0", "modality": "image", "model_name": VL},
                {"dp_rank": "0", "modality": "video", "model_name": VL},
                {"dp_rank": "1", "modality": "image", "model_name": VL},
                {"dp_rank": "1", "modality": "video", "model_name": VL},
            ],
            id="warm_drop_status_deduplicates_label_sets",
        ),
        pytest.param(
            EVICTED,
            "epd-encoder.prom",
            None,
            id="warm_reference_absent",
        ),
    ],
)
def test_expected_series_from_the_payload(
    name: str, fixture: str, expected: list[dict[str, str]] | None
) -> None:
    """The shipped rules' label sets, inherited from a family present from start-up."""
    warm = SHIPPED[name]
    assert warm.expected is None  # depends on the payload
    assert _dicts(expected_series(warm, by_name(_families(fixture)))) == expected


def test_warm_zero_creates_the_absent_counter() -> None:
    """tp1-cold has no aborted requests yet: one zero series with the tokenizer labels."""
    families = _families("tp1-cold.prom")
    rule = SHIPPED["sglang:num_aborted_requests_total"]
    outcomes = warm_zero(families, (rule,))
    assert outcomes == {rule.name: WarmOutcome(1, "1 of 1 series warm-zero")}
    family = by_name(families)[rule.name]
    assert isinstance(family, Family)
    assert family.meta.type is MetricType.COUNTER
    assert family.meta.help == rule.help
    assert [(s.name, dict(s.labels), s.raw_value) for s in family.samples] == [
        (rule.name, {"engine_type": "unified", "model_name": LLAMA}, "0.0")
    ]


def test_warm_zero_histogram_has_empty_buckets() -> None:
    """A histogram warms as _sum, one _bucket per bound and +Inf, and _count, all 0."""
    rule = _warm(
        "sglang:wait_seconds",
        "histogram",
        {
            "labels_from": "sglang:max_total_num_tokens",
            "keep_labels": ["tp_rank"],
            "buckets": [0.1, 1],
        },
    )
    families = _families("tp1-cold.prom")
    assert warm_zero(families, (rule,))[rule.name].synthesized == 1
    family = by_name(families)[rule.name]
    assert isinstance(family, Family)
    assert [(s.name, dict(s.labels).get("le"), s.value) for s in family.samples] == [
        ("sglang:wait_seconds_sum", None, 0.0),
        ("sglang:wait_seconds_bucket", "0.1", 0.0),
        ("sglang:wait_seconds_bucket", "1.0", 0.0),
        ("sglang:wait_seconds_bucket", "+Inf", 0.0),
        ("sglang:wait_seconds_count", None, 0.0),
    ]


@pytest.mark.parametrize(
    ("fixture", "name", "outcome"),
    [
        pytest.param(
            "pd-prefill.prom",
            "sglang:num_bootstrap_failed_reqs_total",
            WarmOutcome(0, "every expected series is real"),
            id="warm_nothing_when_the_engine_has_the_series",
        ),
        pytest.param(
            "epd-encoder.prom",
            EVICTED,
            WarmOutcome(0, "warm-zero waits for sglang:max_total_num_tokens, which is absent"),
            id="warm_waits_for_its_reference",
        ),
        pytest.param(
            "tp1-idle.prom",
            "sglang:num_aborted_requests_total",
            WarmOutcome(0, "every expected series is real"),
            id="warm_real_series_after_the_first_abort",
        ),
    ],
)
def test_warm_zero_outcomes(fixture: str, name: str, outcome: WarmOutcome) -> None:
    """What warm-zero reports when it adds nothing; the families are left as they were."""
    families = _families(fixture)
    before = list(families)
    assert warm_zero(families, (SHIPPED[name],)) == {name: outcome}
    assert families == before


def test_warm_zero_refuses_a_family_of_another_type() -> None:
    """An engine serving the name as a gauge keeps it; no counter series is added."""
    families = read_exposition(
        (FIXTURES / "tp1-cold.prom").read_bytes()
        + b"# TYPE sglang:num_aborted_requests_total gauge\n"
        b'sglang:num_aborted_requests_total{engine_type="unified"} 3\n',
        Format.TEXT,
    ).families
    rule = SHIPPED["sglang:num_aborted_requests_total"]
    outcome = warm_zero(families, (rule,))[rule.name]
    assert outcome == WarmOutcome(0, f"engine serves {rule.name} as a gauge")


def test_warm_zero_adds_missing_series_beside_real_ones() -> None:
    """A family with some expected series gets the others, after its own."""
    rule = _warm(
        "sglang:num_aborted_requests_total",
        "counter",
        {
            "labels_from": "sglang:startup_time_seconds",
            "drop_labels": ["phase"],
            "values": {"reason": ["timeout", "client"]},
        },
    )
    families = _families("tp1-idle.prom")
    original = parse_family(by_name(families)[rule.name])
    outcome = warm_zero(families, (rule,))[rule.name]
    assert outcome == WarmOutcome(2, "2 of 2 series warm-zero")
    family = parse_family(by_name(families)[rule.name])
    assert family.samples[: len(original.samples)] == original.samples
    added = [dict(s.labels)["reason"] for s in family.samples[len(original.samples) :]]
    assert added == ["timeout", "client"]


def test_one_parse_per_reference_per_translation() -> None:
    """Three rules inheriting from max_total_num_tokens read it once; nothing outlives the call."""
    calls: list[str] = []

    def counting(family: AnyFamily | None) -> Family | None:
        if family is not None:
            calls.append(family.name)
        return parsed_or_none(family)

    rules = tuple(w for w in SHIPPED.values() if w.labels_from == "sglang:max_total_num_tokens")
    assert len(rules) >= 3
    for _ in range(2):
        warm_zero(_families("tp1-cold.prom"), rules, counting)
    assert calls.count("sglang:max_total_num_tokens") == 2  # once per call, never cached across
