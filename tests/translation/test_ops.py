"""translation.ops, one operation at a time, on real SGLang 0.5.23 families.

Each rule is compiled by ``compile_rules`` from a one-row rules file, as the service compiles
the shipped contract, and applied to one family of a fixture.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from helpers.paths import FIXTURES
from metricbridge.config.load import parse_config
from metricbridge.errors import ScaleError
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Format, MetricType, Sample
from metricbridge.translation.compiled import CompiledRule, Relabel, Rename, Scale, Select
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.ops import rename, scale, select
from metricbridge.translation.relabel import relabel

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _upstream(fixture: str, name: str) -> AnyFamily:
    """The family as the reader hands it to translation (usually unparsed)."""
    families = read_exposition((FIXTURES / fixture).read_bytes(), Format.TEXT).families
    return next(family for family in families if family.name == name)


def _parsed(fixture: str, name: str) -> Family:
    return parse_family(_upstream(fixture, name))


def _compiled(name: str, body: dict[str, Any]) -> CompiledRule:
    text = yaml.safe_dump({"version": 1, "families": {name: body}}, sort_keys=False)
    rules = compile_rules(parse_config(text, "inline"))
    (compiled,) = rules.by_input[body.get("source", name)]
    return compiled


def _series(family: Family) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels)): s.value for s in family.samples}


def _labels(family: Family) -> list[dict[str, str]]:
    return [dict(s.labels) for s in family.samples]


@pytest.mark.parametrize(
    ("fixture", "source", "name", "mtype", "names"),
    [
        pytest.param(
            "tp1.prom",
            "sglang:prompt_tokens_total",
            "sglang:input_tokens_total",
            "counter",
            {"sglang:input_tokens_total"},
            id="rename_counter_keeps_total",
        ),
        pytest.param(
            "tp1.prom",
            "sglang:queue_time_seconds",
            "sglang:wait_seconds",
            "histogram",
            {"sglang:wait_seconds_bucket", "sglang:wait_seconds_sum", "sglang:wait_seconds_count"},
            id="rename_histogram_suffixes_follow",
        ),
        pytest.param(
            "tp1.prom",
            "sglang:max_total_num_tokens",
            "sglang:token_capacity",
            "gauge",
            {"sglang:token_capacity"},
            id="rename_gauge",
        ),
        pytest.param(
            "dp8.prom",
            "sglang:max_total_num_tokens",
            "sglang:token_capacity",
            "gauge",
            {"sglang:token_capacity"},
            id="rename_gauge_of_eight_dp_ranks",
        ),
    ],
)
def test_rename(fixture: str, source: str, name: str, mtype: str, names: set[str]) -> None:
    """Every sample takes the new name (suffixes kept), labels and values untouched."""
    compiled = _compiled(name, {"disposition": "alias", "type": mtype, "source": source})
    assert isinstance(compiled.transform, Rename)
    upstream = _upstream(fixture, source)
    original = parse_family(upstream)
    meta = compiled.meta(upstream.meta)
    raw_renamed = parse_family(rename(upstream, meta))
    parsed_renamed = rename(original, meta)
    assert isinstance(parsed_renamed, Family)
    assert raw_renamed == parsed_renamed  # the byte splice and the parsed path agree
    assert raw_renamed.meta == FamilyMeta(name, MetricType(mtype), original.meta.help)
    assert {s.name for s in raw_renamed.samples} == names
    assert [(s.labels, s.raw_value) for s in raw_renamed.samples] == [
        (s.labels, s.raw_value) for s in original.samples
    ]


def test_rename_meta_help_and_unit() -> None:
    """The rule's help replaces the engine's; its unit is set; a scale drops the source unit."""
    source = FamilyMeta("sglang:a", MetricType.GAUGE, "engine help", "seconds")
    alias = _compiled(
        "sglang:b", {"disposition": "alias", "type": "gauge", "source": "sglang:a", "help": "h"}
    )
    assert alias.meta(source) == FamilyMeta("sglang:b", MetricType.GAUGE, "h", "seconds")
    scaled = _compiled(
        "sglang:b", {"disposition": "scale", "type": "gauge", "source": "sglang:a", "factor": 2}
    )
    assert scaled.meta(source) == FamilyMeta("sglang:b", MetricType.GAUGE, "engine help", None)
    united = _compiled(
        "sglang:b",
        {"disposition": "scale", "type": "gauge", "source": "sglang:a", "factor": 2, "unit": "ms"},
    )
    assert united.meta(source).unit == "ms"


@pytest.mark.parametrize(
    ("fixture", "source", "mtype", "factor", "expected"),
    [
        pytest.param(
            "tp1.prom",
            "sglang:cache_hit_rate",
            "gauge",
            100,
            [("sglang:cache_hit_rate", {}, 19.15277151870212)],
            id="scale_gauge_to_percent",
        ),
        pytest.param(
            "hicache.prom",
            "sglang:cached_tokens_total",
            "counter",
            0.001,
            # 1664 / 1000 is 1.664; 1664 * 0.001 would be 1.6640000000000001
            [("sglang:cached_tokens_total", {"cache_source": "device"}, 1.664)],
            id="scale_counter_by_reciprocal_divides",
        ),
        pytest.param(
            "tp1.prom",
            "sglang:queue_time_seconds",
            "histogram",
            1000,
            [
                ("sglang:queue_time_seconds_sum", {}, 65.98148399780257),
                ("sglang:queue_time_seconds_count", {}, 25.0),
                ("sglang:queue_time_seconds_bucket", {"le": "+Inf"}, 25.0),
            ],
            id="scale_histogram_sum_not_counts",
        ),
    ],
)
def test_scale(
    fixture: str,
    source: str,
    mtype: str,
    factor: float,
    expected: list[tuple[str, dict[str, str], float]],
) -> None:
    """Values in the family's unit are multiplied (written anew); counts are not."""
    compiled = _compiled(
        "sglang:x" + ("_total" if mtype == "counter" else ""),
        {"disposition": "scale", "type": mtype, "source": source, "factor": factor},
    )
    assert isinstance(compiled.transform, Scale)
    out = scale(_parsed(fixture, source), compiled.transform.factor)
    for name, labels, value in expected:
        sample = next(
            s for s in out.samples if s.name == name and labels.items() <= dict(s.labels).items()
        )
        assert sample.value == value
        assert float(sample.raw_value) == value


def test_scale_histogram_bounds_move_buckets_do_not() -> None:
    """Seconds to milliseconds: ``le`` is scaled, bucket counts and +Inf stay."""
    original = _parsed("tp1.prom", "sglang:queue_time_seconds")
    out = scale(original, 1000.0)
    buckets = [s for s in out.samples if s.name.endswith("_bucket")]
    before = [s for s in original.samples if s.name.endswith("_bucket")]
    assert [s.value for s in buckets] == [s.value for s in before]
    bounds = [dict(s.labels)["le"] for s in buckets[:4]]
    assert bounds == ["0.0", "1.0", "5.0", "10.0"]
    assert dict(buckets[-1].labels)["le"] == "+Inf"


def test_scale_refuses_a_bound_that_is_not_a_number() -> None:
    """A histogram whose ``le`` is not a number cannot be scaled (translate drops it)."""
    family = Family(
        FamilyMeta("h", MetricType.HISTOGRAM),
        (Sample("h_bucket", (("le", "fast"),), 1.0, "1"),),
    )
    with pytest.raises(ScaleError, match="le='fast'"):
        scale(family, 2.0)


@pytest.mark.parametrize(
    ("fixture", "source", "match", "expected"),
    [
        pytest.param(
            "tp1.prom",
            "sglang:startup_time_seconds",
            {"phase": "tokenizer_e2e"},
            [({"engine_type": "unified", "model_name": MODEL}, 48.371)],
            id="select_one_phase_drops_the_phase_label",
        ),
        pytest.param(
            "hicache.prom",
            "sglang:cached_tokens_total",
            {"cache_source": "storage"},
            [({"engine_type": "unified", "model_name": MODEL}, 512.0)],
            id="select_counter_slice_by_cache_source",
        ),
        pytest.param(
            "tp1.prom",
            "sglang:startup_time_seconds",
            {"phase": "tokenizer_e2e", "engine_type": "unified"},
            [({"model_name": MODEL}, 48.371)],
            id="select_on_two_labels_removes_both",
        ),
        pytest.param(
            "tp1.prom",
            "sglang:startup_time_seconds",
            {"phase": "no_such_phase"},
            [],
            id="select_nothing_matches",
        ),
    ],
)
def test_select(
    fixture: str,
    source: str,
    match: dict[str, str],
    expected: list[tuple[dict[str, str], float]],
) -> None:
    """The series with every matched pair, those labels removed."""
    compiled = _compiled(
        "sglang:selected" + ("_total" if source.endswith("_total") else ""),
        {
            "disposition": "select",
            "type": "counter" if source.endswith("_total") else "gauge",
            "source": source,
            "match": match,
        },
    )
    assert isinstance(compiled.transform, Select)
    out = select(_parsed(fixture, source), compiled.transform)
    assert [(dict(s.labels), s.value) for s in out.samples] == expected


HICACHE_TOKENS = "sglang:cached_tokens_total"


@pytest.mark.parametrize(
    ("steps", "expected_sources", "dropped", "duplicates"),
    [
        pytest.param(
            [
                {
                    "source_labels": ["cache_source"],
                    "regex": "storage",
                    "target_label": "cache_source",
                    "replacement": "storage_MooncakeStore",
                }
            ],
            ["storage_MooncakeStore", "device", "host"],
            0,
            0,
            id="relabel_replace_names_the_l3_backend",
        ),
        pytest.param(
            [
                {
                    "source_labels": ["cache_source"],
                    "regex": "(stor)(?P<rest>age)",
                    "target_label": "cache_source",
                    "replacement": "${rest}-$1$$",
                }
            ],
            ["age-stor$", "device", "host"],
            0,
            0,
            id="relabel_replace_expands_groups_and_dollars",
        ),
        pytest.param(
            [{"action": "keep", "source_labels": ["cache_source"], "regex": "device|host"}],
            ["device", "host"],
            1,
            0,
            id="relabel_keep_drops_the_rest",
        ),
        pytest.param(
            [{"action": "drop", "source_labels": ["cache_source"], "regex": "device"}],
            ["storage", "host"],
            1,
            0,
            id="relabel_drop_drops_matches",
        ),
        pytest.param(
            [
                {
                    "source_labels": ["cache_source"],
                    "regex": "storage|host",
                    "target_label": "cache_source",
                    "replacement": "offload",
                }
            ],
            ["offload", "device"],
            0,
            1,
            id="relabel_merging_two_series_keeps_the_first",
        ),
        pytest.param(
            [
                {
                    "source_labels": ["cache_source"],
                    "regex": "host",
                    "target_label": "cache_source",
                    "replacement": "device",
                }
            ],
            ["storage", "device"],
            0,
            1,
            id="relabel_engine_series_wins_over_a_rewritten_one",
        ),
        pytest.param(
            [
                {
                    "source_labels": ["cache_source"],
                    "regex": "(.*)",
                    "target_label": "${1}-bad",
                    "replacement": "x",
                }
            ],
            ["storage", "device", "host"],
            0,
            0,
            id="relabel_target_expanding_to_a_bad_name_is_skipped",
        ),
    ],
)
def test_relabel_cache_source(
    steps: list[dict[str, Any]], expected_sources: list[str], dropped: int, duplicates: int
) -> None:
    """Relabel steps on hicache's cached_tokens_total (storage, device and host series)."""
    compiled = _compiled(
        HICACHE_TOKENS, {"disposition": "relabel", "type": "counter", "relabel": steps}
    )
    assert compiled.in_place
    assert isinstance(compiled.transform, Relabel)
    out, lost, merged = relabel(_parsed("hicache.prom", HICACHE_TOKENS), compiled.relabel)
    assert [dict(s.labels).get("cache_source") for s in out.samples] == expected_sources
    assert (lost, merged) == (dropped, duplicates)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(
            {"action": "labeldrop", "regex": "engine_type|moe_ep_rank"},
            {"model_name", "pp_rank", "tp_rank"},
            id="labeldrop_removes_matching_names",
        ),
        pytest.param(
            {"action": "labelkeep", "regex": "tp_rank"},
            {"tp_rank"},
            id="labelkeep_keeps_matching_names",
        ),
        pytest.param(
            {"action": "labelmap", "regex": "(tp|pp)_rank", "replacement": "${1}"},
            {"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank", "pp", "tp"},
            id="labelmap_copies_under_the_expanded_name",
        ),
        pytest.param(
            {
                "source_labels": ["engine_type"],
                "regex": "unified",
                "target_label": "engine_type",
                "replacement": "",
            },
            {"model_name", "moe_ep_rank", "pp_rank", "tp_rank"},
            id="replace_with_empty_value_removes_the_label",
        ),
        pytest.param(
            {
                "source_labels": ["tp_rank", "pp_rank"],
                "separator": "/",
                "regex": "(.*)/(.*)",
                "target_label": "rank",
                "replacement": "tp$1-pp$2",
            },
            {"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank", "rank"},
            id="replace_joins_source_labels_with_the_separator",
        ),
    ],
)
def test_relabel_label_names(step: dict[str, Any], expected: set[str]) -> None:
    """Label-name actions on tp1's queue_time_seconds histogram; ``le`` is never touched."""
    name = "sglang:queue_time_seconds"
    compiled = _compiled(name, {"disposition": "relabel", "type": "histogram", "relabel": [step]})
    original = _parsed("tp1.prom", name)
    out, lost, merged = relabel(original, compiled.relabel)
    assert (lost, merged) == (0, 0)
    assert len(out.samples) == len(original.samples)
    for sample in out.samples:
        names = set(dict(sample.labels)) - {"le"}
        assert names == expected
        assert ("le" in dict(sample.labels)) == sample.name.endswith("_bucket")
    if "rank" in expected:
        assert dict(out.samples[0].labels)["rank"] == "tp0-pp0"
    if "tp" in expected:
        assert dict(out.samples[0].labels)["tp"] == "0"


def test_relabel_leaves_untouched_samples_as_they_were() -> None:
    """A series no step changes is the very same sample (no copy, labels in engine order)."""
    compiled = _compiled(
        HICACHE_TOKENS,
        {
            "disposition": "relabel",
            "type": "counter",
            "relabel": [
                {
                    "source_labels": ["cache_source"],
                    "regex": "storage",
                    "target_label": "cache_source",
                    "replacement": "storage_MooncakeStore",
                }
            ],
        },
    )
    original = _parsed("hicache.prom", HICACHE_TOKENS)
    out, _, _ = relabel(original, compiled.relabel)
    assert out.samples[1] is original.samples[1]
    assert out.samples[2] is original.samples[2]
    assert out.samples[0].labels == tuple(sorted(out.samples[0].labels))


def test_scale_moves_exemplar_values_into_the_new_unit() -> None:
    """ms -> s: a bucket's exemplar 4200.0 becomes 4.2 (OTel's metricstransformprocessor
    scales exemplars too); labels, timestamps and unreadable exemplars are kept as they came."""
    meta = FamilyMeta("x_milliseconds", MetricType.HISTOGRAM)
    family = Family(
        meta,
        (
            Sample(
                "x_milliseconds_bucket",
                (("le", "5000.0"),),
                1.0,
                "1",
                None,
                '{trace_id="a}b"} 4200.0 1700000000.5',
            ),
            Sample("x_milliseconds_bucket", (("le", "+Inf"),), 1.0, "1", None, "not an exemplar"),
            Sample("x_milliseconds_sum", (), 4200.0, "4200.0"),
            Sample("x_milliseconds_count", (), 1.0, "1"),
        ),
    )
    out = {(s.name, s.labels): s.exemplar for s in scale(family, 0.001).samples}
    assert out[("x_milliseconds_bucket", (("le", "5.0"),))] == '{trace_id="a}b"} 4.2 1700000000.5'
    assert out[("x_milliseconds_bucket", (("le", "+Inf"),))] == "not an exemplar"
