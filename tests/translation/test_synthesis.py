"""Warm-zero, idle zeroing and derived families over sequences of real-shaped expositions.

Time is passed in (``now``); no test sleeps.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES
from helpers.promtool import promtool_check_metrics
from metricbridge.config.load import load_config, parse_config
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.openmetrics_fit import Misfit, openmetrics_misfit
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.sample_line import parse_sample
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Family, FamilyMeta, Format, MetricType
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.translate import (
    RowState,
    RowStatus,
    SynthState,
    Translation,
    translate,
)

M = 'model_name="m"'


def _rules(text: str | None = None) -> CompiledRules:
    return compile_rules(load_config() if text is None else parse_config(text, "inline"))


def _run(
    payload: bytes,
    rules: CompiledRules,
    state: SynthState | None = None,
    now: float = 0.0,
    server_info: dict[str, object] | None = None,
) -> Translation:
    exposition = read_exposition(payload, Format.TEXT)
    assert not exposition.problems
    return translate(exposition.families, rules, state, now=now, server_info=server_info)


def _series(translation: Translation, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    for family in translation.families:
        if family.name == name:
            return {
                tuple(sorted(s.labels)): s.value
                for s in parse_family(family).samples
                if s.name == name
            }
    return {}


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


# ---------------------------------------------------------------- warm-zero ----------------------


def test_warm_zero_cold_series_hand_over_to_the_real_ones_with_the_same_identity() -> None:
    """Cold: aborted=0 with the tokenizer labels; under load the engine's own series replaces it."""
    rules = _rules()
    cold = _run(_fixture("tp1-cold.prom"), rules)
    warm = _series(cold, "sglang:num_aborted_requests_total")
    assert warm == {
        (("engine_type", "unified"), ("model_name", "meta-llama/Llama-3.1-8B-Instruct")): 0.0
    }
    assert cold.rows["sglang:num_aborted_requests_total"].state is RowState.SYNTHESIZED
    busy = _run(_fixture("tp1.prom"), rules, cold.state)
    assert _series(busy, "sglang:num_aborted_requests_total") == {next(iter(warm)): 1.0}
    assert busy.rows["sglang:num_aborted_requests_total"].state is RowState.NATIVE


def test_radix_cache_warm_zero_matches_the_engines_own_label_set() -> None:
    """evicted_tokens_total, synthesized cold, has exactly the labels hicache's real series has."""
    rules = _rules()
    cold = _series(_run(_fixture("tp1-cold.prom"), rules), "sglang:evicted_tokens_total")
    real = _series(_run(_fixture("hicache.prom"), rules), "sglang:evicted_tokens_total")
    assert set(cold) == set(real)
    assert list(cold.values()) == [0.0]
    assert list(real.values()) == [60544.0]


def test_engine_row_without_a_source_is_missing_not_a_made_up_zero() -> None:
    """num_mm_requests_total has no community source: missing, never served as 0 (issue 27)."""
    result = _run(_fixture("tp1.prom"), _rules())
    status = result.rows["sglang:num_mm_requests_total"]
    assert (status.state, status.engine) == (RowState.MISSING, True)
    assert "sglang:num_mm_requests_total" not in {f.name for f in result.families}


def test_select_plus_warm_zero_fills_only_the_missing_series() -> None:
    """encoder failures: the real error series is served, the other label sets read 0."""
    got = _series(
        _run(_fixture("epd-encoder.prom"), _rules()), "sglang:encoder_num_failed_requests_total"
    )
    assert (
        got[
            (("dp_rank", "1"), ("modality", "image"), ("model_name", "Qwen/Qwen2.5-VL-7B-Instruct"))
        ]
        == 1.0
    )
    assert sorted(got.values()) == [0.0, 0.0, 0.0, 1.0]


HISTOGRAM_RULES = """
version: 1
families:
  app_wait_seconds:
    disposition: native
    type: histogram
    help: Wait.
    warm_zero:
      labels_from: app_up
      values: {source: [workflow, transfer]}
      set: {kind: x}
      buckets: [0.005, 1, 1000000]
"""


def test_histogram_warm_zero_has_real_bounds_and_the_label_product() -> None:
    """Every bucket 0 with prometheus_client's le spelling; one series per source value."""
    payload = f"# TYPE app_up gauge\napp_up{{{M}}} 1\n".encode()
    family = next(
        f for f in _run(payload, _rules(HISTOGRAM_RULES)).families if f.name == "app_wait_seconds"
    )
    samples = parse_family(family).samples
    les = [
        dict(s.labels)["le"]
        for s in samples
        if s.name.endswith("_bucket") and dict(s.labels)["source"] == "workflow"
    ]
    assert les == ["0.005", "1.0", "1e+06", "+Inf"]
    assert {dict(s.labels)["source"] for s in samples} == {"workflow", "transfer"}
    assert all(dict(s.labels)["kind"] == "x" and s.value == 0 for s in samples)
    assert {s.name for s in samples} == {
        "app_wait_seconds_sum",
        "app_wait_seconds_bucket",
        "app_wait_seconds_count",
    }


def test_warm_zero_waits_for_its_reference_family() -> None:
    """No reference labels yet: nothing is invented, and the report says why."""
    translation = _run(b"# TYPE other gauge\nother 1\n", _rules(HISTOGRAM_RULES))
    assert "app_wait_seconds" not in {f.name for f in translation.families}
    assert (
        translation.rows["app_wait_seconds"].reason == "warm-zero waits for app_up, which is absent"
    )


# ---------------------------------------------------------------- idle ---------------------------

IDLE_RULES = """
version: 1
idle:
  enabled: true
  after_seconds: 10
  when_zero: [running]
  when_flat: [requests_total]
  zero: [hit_rate]
"""


def _engine(running: float, requests: float, hit_rate: float = 0.4) -> bytes:
    return (
        f"# TYPE running gauge\nrunning{{{M}}} {running}\n# TYPE hit_rate gauge\nhit_rate{{{M}}} {hit_rate}\n"
        f"# TYPE requests_total counter\nrequests_total{{{M}}} {requests}\n"
    ).encode()


def test_idle_zeroing_starts_and_stops_exactly_per_the_rule() -> None:
    """Busy, quiet for < 10 s, quiet for >= 10 s (zeroed), then traffic: real values at once."""
    rules, state = _rules(IDLE_RULES), SynthState()
    timeline = [  # (now, running, requests, expect idle)
        (0.0, 3, 10, False),
        (5.0, 0, 12, False),  # running 0 but the counter moved
        (10.0, 0, 12, False),  # quiet since t=5: 5 s
        (14.9, 0, 12, False),
        (15.0, 0, 12, True),  # quiet since t=5: 10 s
        (20.0, 0, 12, True),
        (25.0, 0, 13, False),  # a request finished: traffic again
    ]
    for now, running, requests, expect_idle in timeline:
        result = _run(_engine(running, requests), rules, state, now)
        state = result.state
        assert state.idle.idle is expect_idle, now
        hit = _series(result, "hit_rate")[(("model_name", "m"),)]
        assert hit == (0.0 if expect_idle else 0.4), now
        assert result.zeroed == (("hit_rate",) if expect_idle else ())


def test_idle_zeroing_is_off_unless_enabled() -> None:
    """The shipped default leaves stale gauges alone."""
    state = SynthState()
    for now in (0.0, 100.0, 200.0):
        result = _run(_fixture("tp1-idle.prom"), _rules(), state, now)
        state = result.state
    assert not result.zeroed
    assert _series(result, "sglang:cache_hit_rate")


def test_default_idle_list_zeroes_the_gauges_sglang_leaves_stale() -> None:
    """With idle on, tp1-idle's stale cache_hit_rate and decode_sum_seq_lens read 0."""
    rules = _rules()
    rules = dataclasses.replace(rules, idle=dataclasses.replace(rules.idle, enabled=True))
    state = SynthState()
    for now in (0.0, 5.0, 11.0):
        result = _run(_fixture("tp1-idle.prom"), rules, state, now)
        state = result.state
    assert set(result.zeroed) == {"sglang:cache_hit_rate", "sglang:decode_sum_seq_lens"}
    assert set(_series(result, "sglang:cache_hit_rate").values()) == {0.0}


# ---------------------------------------------------------------- derive --------------------------

RATE_RULES = """
version: 1
families:
  hit_rate_derived:
    disposition: derive
    type: gauge
    derive:
      op: ratio_of_deltas
      numerator: {family: cached_total, match: {source: device}}
      denominator: {family: prompt_total}
      by: [model_name]
"""


def _tokens(device: float, host: float, prompt_a: float, prompt_b: float) -> bytes:
    return (
        f'# TYPE cached_total counter\ncached_total{{{M},source="device"}} {device}\n'
        f'cached_total{{{M},source="host"}} {host}\n'
        f'# TYPE prompt_total counter\nprompt_total{{{M},s="a"}} {prompt_a}\nprompt_total{{{M},s="b"}} {prompt_b}\n'
    ).encode()


def test_ratio_of_deltas_matches_hand_computed_figures_and_survives_a_restart() -> None:
    """First fetch: no value; then Δdevice/Δprompt; flat denominator: no value; a reset restarts."""
    rules, state = _rules(RATE_RULES), SynthState()
    steps = [  # payload, expected value (None = no series)
        (_tokens(100, 50, 300, 100), None),  # first fetch: a rate needs two
        (_tokens(160, 50, 400, 200), 60 / 200),
        (_tokens(160, 50, 400, 200), None),  # nothing moved
        (_tokens(10, 0, 30, 10), None),  # engine restart: the interval starts over
        (_tokens(20, 0, 50, 30), 10 / 40),
    ]
    for step, (payload, expected) in enumerate(steps):
        result = _run(payload, rules, state, now=float(step))
        state = result.state
        got = _series(result, "hit_rate_derived")
        if expected is None:
            assert got == {}, step
            assert result.rows["hit_rate_derived"].state is RowState.MISSING
        else:
            assert got == {(("model_name", "m"),): pytest.approx(expected)}, step


def test_default_device_cache_hit_rate_from_two_real_scrapes() -> None:
    """tp1 then hicache's counters: Δcached{device}/Δprompt by model, by hand."""
    rules = compile_rules(load_config(None, ["approximations"]))
    first = _run(_fixture("tp1.prom"), rules)
    assert (
        first.rows["sglang:device_cache_hit_rate"].reason
        == "no value yet: a rate needs two fetches"
    )
    second = _run(_fixture("tp1.prom"), rules, first.state)
    assert (
        second.rows["sglang:device_cache_hit_rate"].reason
        == "no value: the denominator did not move since the previous fetch"
    )


SERVER_INFO = {"max_running_requests": 256, "dp_size": 8, "enable_dp_attention": True}


def test_server_info_feeds_num_max_batchs_and_decode_bs_util_per_dp_worker() -> None:
    """dp8: 256 slots split over 8 workers; each worker's running count over its 32 slots."""
    result = _run(_fixture("dp8.prom"), _rules(), server_info=SERVER_INFO)
    (max_batches,) = _series(result, "sglang:num_max_batchs").values()
    assert max_batches == 256
    running = _series(result, "sglang:num_running_reqs")
    util = _series(result, "sglang:decode_bs_util")
    assert len(util) == len(running) == 8
    for labels, value in running.items():
        assert util[labels] == pytest.approx(value / 32)


def test_without_server_info_those_rows_are_missing_not_zero() -> None:
    """No /server_info answer: no invented value."""
    result = _run(_fixture("dp8.prom"), _rules())
    assert "sglang:num_max_batchs" not in {f.name for f in result.families}
    assert (
        result.rows["sglang:num_max_batchs"].reason
        == "/server_info has no usable max_running_requests"
    )


def test_idle_batch_ratio_is_the_share_of_idle_dp_workers() -> None:
    """share_zero over dp8's per-rank running counts, by hand."""
    result = _run(_fixture("dp8.prom"), compile_rules(load_config(None, ["approximations"])))
    running = list(_series(result, "sglang:num_running_reqs").values())
    (ratio,) = _series(result, "sglang:idle_batch_ratio").values()
    assert math.isclose(ratio, sum(v == 0 for v in running) / len(running))


def test_derived_row_yields_to_a_patched_engine() -> None:
    """If the engine serves the contract name itself, its series win."""
    payload = (
        _fixture("dp8.prom") + b"# TYPE sglang:num_max_batchs gauge\nsglang:num_max_batchs 7\n"
    )
    result = _run(payload, _rules(), server_info=SERVER_INFO)
    assert _series(result, "sglang:num_max_batchs") == {(): 7.0}
    assert result.rows["sglang:num_max_batchs"].state is RowState.NATIVE


def test_a_family_that_clashes_only_in_openmetrics_is_served_in_text() -> None:
    """Text input that OpenMetrics would make one family's: both kept, the answer text."""
    payload = (
        b'# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n'
        b"# TYPE h_created untyped\nh_created 5\n"
    )
    result = _run(payload, _rules("version: 1\nfamilies: {}\n"))
    assert [f.name for f in result.families] == ["h", "h_created"]
    assert openmetrics_misfit(result.families) is Misfit.NAME_CLASH
    text = write_exposition(result.families, Format.TEXT)
    assert {f.name for f in parse_text(text.decode())} == {"h", "h_created"}
    promtool_check_metrics(text)


def test_a_dropped_family_is_not_served_and_its_row_says_so() -> None:
    """A drop rule needs no type: the row reads "dropped by rule", not a type mismatch."""
    rules = _rules("version: 1\nfamilies:\n  sglang:num_running_reqs:\n    disposition: drop\n")
    result = _run(_fixture("tp1.prom"), rules)
    assert "sglang:num_running_reqs" not in {f.name for f in result.families}
    assert result.rows["sglang:num_running_reqs"] == RowStatus(
        RowState.STRUCTURAL, "dropped by rule"
    )
    assert result.stats.dropped["dropped_by_rule"] == 1
    assert not result.problems


def test_a_rule_output_that_takes_an_engine_familys_sample_name_is_not_served() -> None:
    """A gauge alias `x_count` beside an engine histogram `x`: the engine's family keeps it."""
    rules = _rules(
        """
version: 1
families:
  x_count:
    disposition: alias
    type: gauge
    source: y
"""
    )
    payload = (
        b'# TYPE y gauge\ny 3\n# TYPE x histogram\nx_bucket{le="+Inf"} 2\nx_sum 1.5\nx_count 2\n'
    )
    result = _run(payload, rules)
    assert [f.name for f in result.families] == ["y", "x"]
    assert [str(p) for p in result.problems] == [
        "family x_count: x_count already served by family x; not served"
    ]
    assert result.stats.dropped["name_clash"] == 1
    assert result.rows["x_count"] == RowStatus(
        RowState.MISSING, "x_count already served by family x"
    )


@pytest.mark.parametrize("native_first", [True, False])
def test_a_relabelled_series_yields_to_the_engines_own(native_first: bool) -> None:
    """storage -> storage_file landing on a series the engine serves: the engine's wins.

    The result must not depend on the order of the lines; the collision is counted. The backend
    is the L3 family's storage_backend label, never a value of the rules (issue 27).
    """
    family = (
        b"# TYPE sglang:backuped_tokens_total counter\n"
        b'sglang:backuped_tokens_total{storage_backend="file"} 1.0\n'
        b"# TYPE sglang:cached_tokens_total counter\n"
    )
    rewritten = b'sglang:cached_tokens_total{cache_source="storage"} 4.0\n'
    native = b'sglang:cached_tokens_total{cache_source="storage_file"} 5.0\n'
    device = b'sglang:cached_tokens_total{cache_source="device"} 9.0\n'
    lines = native + rewritten if native_first else rewritten + native
    result = _run(family + lines + device, _rules())
    assert _series(result, "sglang:cached_tokens_total") == {
        (("cache_source", "storage_file"),): 5.0,
        (("cache_source", "device"),): 9.0,
    }
    assert result.stats.dropped["duplicate_series"] == 1


def test_a_relabelled_histogram_series_yields_whole_to_the_engines_own() -> None:
    """Never a mix of two series' buckets: the engine's series is served entire, and alone."""
    rules = _rules(
        """
version: 1
families:
  h:
    disposition: relabel
    type: histogram
    relabel:
      - {source_labels: [src], regex: storage, target_label: src, replacement: storage_M}
"""
    )
    payload = (
        b"# TYPE h histogram\n"
        b'h_bucket{le="0.5",src="storage"} 10\nh_bucket{le="1",src="storage"} 10\n'
        b'h_bucket{le="+Inf",src="storage"} 10\nh_count{src="storage"} 10\n'
        b'h_sum{src="storage"} 2\n'
        b'h_bucket{le="1",src="storage_M"} 3\nh_bucket{le="+Inf",src="storage_M"} 3\n'
        b'h_count{src="storage_M"} 3\nh_sum{src="storage_M"} 1\n'
    )
    result = _run(payload, rules)
    (family,) = (f for f in result.families if f.name == "h")
    assert [(s.name, dict(s.labels), s.value) for s in parse_family(family).samples] == [
        ("h_bucket", {"le": "1", "src": "storage_M"}, 3.0),
        ("h_bucket", {"le": "+Inf", "src": "storage_M"}, 3.0),
        ("h_count", {"src": "storage_M"}, 3.0),
        ("h_sum", {"src": "storage_M"}, 1.0),
    ]
    assert result.stats.dropped["duplicate_series"] == 5
    om = write_exposition(result.families, Format.OPENMETRICS).decode()
    list(parse_openmetrics(om))  # buckets in order, +Inf present


def test_relabel_target_expanding_to_an_unusable_name_is_skipped() -> None:
    """As in Prometheus: a `$1` target that expands to `le` or an invalid name changes nothing."""
    rules = _rules(
        """
version: 1
families:
  h:
    disposition: relabel
    type: histogram
    relabel:
      - {source_labels: [k], target_label: "$1", replacement: "9"}
"""
    )
    for bad in ("le", "not a name"):
        payload = f'# TYPE h histogram\nh_bucket{{k="{bad}",le="1"}} 1\nh_bucket{{k="{bad}",le="+Inf"}} 1\nh_count{{k="{bad}"}} 1\nh_sum{{k="{bad}"}} 1\n'.encode()
        family = next(f for f in _run(payload, rules).families if f.name == "h")
        assert {dict(s.labels).get("le") for s in parse_family(family).samples} == {
            "1",
            "+Inf",
            None,
        }


def test_scaling_a_histogram_with_a_non_numeric_bound_drops_it_with_a_problem() -> None:
    """le="abc" cannot be scaled: the family is reported, not a crash."""
    rules = _rules(
        "version: 1\nfamilies:\n  h2:\n    {disposition: scale, type: histogram, source: h, factor: 2}\n"
    )
    payload = (
        b'# TYPE h histogram\nh_bucket{le="abc"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n'
    )
    # The reader refuses such a family itself now (exposition.semantics); translation must
    # still not crash on one that reaches it, e.g. built by a caller.
    assert [p.reason for p in read_exposition(payload, Format.TEXT).problems] == ["le_label"]
    lines = payload.decode().splitlines()[1:]
    family = Family(
        FamilyMeta("h", MetricType.HISTOGRAM),
        tuple(parse_sample(line, Format.TEXT) for line in lines),
    )
    result = translate([family], rules)
    assert [str(p) for p in result.problems] == ["family h: bucket bound le='abc' is not a number"]
    assert "h2" not in {f.name for f in result.families}
