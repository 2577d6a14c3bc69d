"""The approximations profile: hand-computed values from tp1.prom and dp8.prom with counters grown."""

from __future__ import annotations

import pytest

from helpers.paths import FIXTURES
from helpers.tp1_payloads import TP1, scaled
from metricbridge.config.load import load_config
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.report import contract_report
from metricbridge.translation.translate import RowState, SynthState, Translation, translate

ROWS = (
    "sglang:run_batch_time",
    "sglang:generation_time",
    "sglang:iter_token_process_time",
    "sglang:all_gather_latency_us",
)
RANK = (
    ("engine_type", "unified"),
    ("model_name", "meta-llama/Llama-3.1-8B-Instruct"),
    ("moe_ep_rank", "0"),
    ("pp_rank", "0"),
    ("tp_rank", "0"),
)
# tp1.prom's scheduler_stage_seconds_total (forward_overlap="none" only) and cuda_graph_passes.
RUN_BATCH = 2.658806828
NOT_IDLE = (
    0.16902725199999996 + 0.19636767800000002 + 0.056427833 + 0.029748054 + 0.0
    + 2.658806828 + 0.100979176 + 0.0
)  # fmt: skip
PASSES = 20.0 + 183.0  # prefill_none + decode_cuda_graph


def _rules(*profiles: str) -> CompiledRules:
    return compile_rules(load_config(profiles=profiles))


def _run(payload: bytes, rules: CompiledRules, state: SynthState | None = None) -> Translation:
    exposition = read_exposition(payload, Format.TEXT)
    return translate(exposition.families, rules, state)


def _values(translation: Translation, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    for family in translation.families:
        if family.name == name:
            parsed = parse_family(family)
            return {tuple(sorted(s.labels)): s.value for s in parsed.samples}
    return {}


def _help(translation: Translation, name: str) -> str:
    return next(f.meta.help for f in translation.families if f.name == name)


def test_grown_counters_give_the_hand_computed_means_per_forward_pass() -> None:
    """Every counter x1.5: Δ = 0.5 x tp1's values, so each ratio is tp1's own ratio."""
    rules = _rules("approximations")
    first = _run(TP1, rules)
    assert first.rows["sglang:run_batch_time"].pending
    second = _run(scaled(1.5), rules, first.state)
    run_batch = (0.5 * RUN_BATCH) / (0.5 * PASSES)  # 2.658806828 / 203 = 0.0130976...
    generation = (0.5 * NOT_IDLE) / (0.5 * PASSES)  # 3.211356821 / 203 = 0.0158195...
    assert _values(second, "sglang:run_batch_time") == {RANK: pytest.approx(run_batch)}
    assert _values(second, "sglang:generation_time") == {RANK: pytest.approx(generation)}
    assert _values(second, "sglang:iter_token_process_time") == {
        RANK: pytest.approx(generation - run_batch)
    }
    assert run_batch == pytest.approx(0.013097570581280788)
    assert generation == pytest.approx(0.01581949172906404)
    for name in ROWS[:3]:
        assert second.rows[name].state is RowState.APPROXIMATED
        assert second.rows[name].reason.startswith("approximated: Δ sum by (")
        assert _help(second, name).startswith("Approximation:")
    # tp1's sync-wait histogram never moved (count 0 then 0): no value, never a 0.
    assert _values(second, "sglang:all_gather_latency_us") == {}
    assert second.rows["sglang:all_gather_latency_us"].state is RowState.MISSING


def test_chosen_deltas_by_hand() -> None:
    """Stage seconds x2 (Δ = tp1's), passes x1.25 (Δ = 50.75): run_batch 2.658806828 / 50.75."""
    rules = _rules("approximations")
    first = _run(TP1, rules)
    grown = scaled(
        1.0,
        {"sglang:scheduler_stage_seconds_total": 2.0, "sglang:cuda_graph_passes_total": 1.25},
    )
    second = _run(grown, rules, first.state)
    assert _values(second, "sglang:run_batch_time") == {RANK: pytest.approx(RUN_BATCH / 50.75)}
    assert _values(second, "sglang:iter_token_process_time") == {
        RANK: pytest.approx((NOT_IDLE - RUN_BATCH) / 50.75)
    }


def test_flat_denominator_and_a_reset_give_no_sample() -> None:
    """Passes flat: no sample. Then a restart (every counter x0.5): no sample for that interval."""
    rules = _rules("approximations")
    state = _run(TP1, rules).state
    flat = _run(scaled(1.0, {"sglang:scheduler_stage_seconds_total": 2.0}), rules, state)
    assert _values(flat, "sglang:run_batch_time") == {}
    assert "did not move" in flat.rows["sglang:run_batch_time"].reason
    reset = _run(scaled(0.5), rules, flat.state)
    assert _values(reset, "sglang:run_batch_time") == {}
    assert "reset" in reset.rows["sglang:run_batch_time"].reason
    after = _run(scaled(1.0), rules, reset.state)  # the next interval is measured again
    assert _values(after, "sglang:run_batch_time") == {
        RANK: pytest.approx((0.5 * RUN_BATCH) / (0.5 * PASSES))
    }


def test_all_gather_latency_on_dp8_by_hand() -> None:
    """dp8.prom, each rank's sync-wait _sum +0.006 s over _count +4: 1500 µs per rank."""
    payload = (FIXTURES / "dp8.prom").read_bytes()
    rules = _rules("approximations")
    first = _run(payload, rules)
    lines = []
    for line in payload.decode().split("\n"):
        new = line
        if line.startswith("sglang:dp_attention_sync_wait_seconds_sum{"):
            new = line.rsplit(" ", 1)[0] + " 0.006"
        elif line.startswith("sglang:dp_attention_sync_wait_seconds_count{") or (
            line.startswith("sglang:dp_attention_sync_wait_seconds_bucket{") and 'le="+Inf"' in line
        ):
            new = line.rsplit(" ", 1)[0] + " 4.0"  # a valid histogram: _count is its +Inf bucket
        lines.append(new)
    second = _run("\n".join(lines).encode(), rules, first.state)
    values = _values(second, "sglang:all_gather_latency_us")
    assert len(values) == 8
    assert list(values.values()) == [pytest.approx(0.006 / 4 * 1e6)] * 8  # 1500.0
    assert second.rows["sglang:all_gather_latency_us"].state is RowState.APPROXIMATED


def test_without_the_profile_nothing_is_served_and_the_rows_read_engine() -> None:
    """The default contract: the rows are missing (engine), nothing named after them is served."""
    rules = _rules()
    state = _run(TP1, rules).state
    second = _run(scaled(1.5), rules, state)
    for name in ROWS:
        assert _values(second, name) == {}
        assert second.rows[name].state is RowState.MISSING
        assert "--profile approximations" in second.rows[name].reason


def test_contract_report_lists_the_profile_and_the_approximated_state() -> None:
    config = load_config(profiles=["approximations"])
    rules = compile_rules(config)
    second = _run(scaled(1.5), rules, _run(TP1, rules).state)
    report = contract_report(config, second)
    assert report["profiles"] == ["approximations"]
    approximated = [r["family"] for r in report["rows"] if r["state"] == "approximated"]
    assert report["totals"]["approximated"] == len(approximated)
    assert {"sglang:run_batch_time", "sglang:generation_time"} <= set(approximated)
    row = next(r for r in report["rows"] if r["family"] == "sglang:run_batch_time")
    assert row["state"] == "approximated"
    assert row["formula"].startswith("Δ sum by (engine_type")
    assert contract_report(load_config(), None)["profiles"] == []
