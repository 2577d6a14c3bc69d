"""The pure translation: upstream families in, contract families out. No I/O, no clock, no logging.

The service and ``metricbridge translate`` both call ``translate``; its result carries enough
for the service's self-metrics and for the contract report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from metricbridge.config.synthesis import frozen_map
from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import AnyFamily, Labels
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import (
    CompiledRules,
)
from metricbridge.translation.derive import Reads, derive_all
from metricbridge.translation.idle import IdleState, observe, zero_gauges
from metricbridge.translation.naming import (
    apply_renames,
    restore_escaped,
)
from metricbridge.translation.plan import (
    TranslationPlan,
    plan_for,
    store_plan,
)
from metricbridge.translation.rows import RowState, RowStatus
from metricbridge.translation.run import TranslationRun, TranslationStats, sample_count
from metricbridge.translation.warm_zero import warm_zero

# RowState and RowStatus live in translation.rows (compile_rules decides rows with them), and
# TranslationStats and sample_count in translation.run; they are imported from here, beside the
# Translation that carries them.
__all__ = [
    "RowState",
    "RowStatus",
    "SynthState",
    "Translation",
    "TranslationStats",
    "sample_count",
    "translate",
]


@dataclass(frozen=True, slots=True)
class SynthState:
    """What translation carries from one upstream fetch to the next (rates, idleness)."""

    # Counter values of the last fetch, by (series key, labels): a read-only MappingProxyType.
    counters: Mapping[tuple[str, Labels], float] = field(default_factory=frozen_map)
    idle: IdleState = IdleState()
    # The counters the last fetch read, present or absent (their series keys): one it read
    # absent that is present now was created in between, and counts from 0. A caller that
    # cannot vouch for the last fetch (an upstream of several failed) leaves it empty.
    read: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Translation:
    """What one upstream payload became."""

    families: tuple[AnyFamily, ...]
    stats: TranslationStats
    problems: tuple[ExpositionError, ...]
    rows: dict[str, RowStatus]
    state: SynthState = SynthState()
    zeroed: tuple[str, ...] = ()  # gauges served as 0 because the engine is idle
    warm_zero_series: int = 0


def _synthesize(
    run: TranslationRun,
    state: SynthState,
    now: float,
    server_info: Mapping[str, object] | None,
    plan: TranslationPlan | None,
) -> tuple[SynthState, tuple[str, ...], int]:
    """Derived families, warm-zero series, then idle zeroing, in that order."""
    rules = run.rules
    memo = plan.derive if plan is not None else None
    reads = Reads(before=state.read)
    derived, counters = derive_all(
        run.out, rules.derives, state.counters, server_info, run.peek, memo=memo, reads=reads
    )
    for name, result in derived.items():
        if result.family is not None:
            run.out.append(result.family)
            row_state = RowState.APPROXIMATED if result.approximated else RowState.TRANSLATED
            run.rows[name] = RowStatus(row_state, result.reason)
        elif name not in run.present:
            run.rows[name] = RowStatus(RowState.MISSING, result.reason, pending=result.pending)
    before = {family.meta.name for family in run.out}
    warm = warm_zero(run.out, rules.warm_zero, run.peek, plan.warm if plan else None)
    for spec in rules.warm_zero:
        name, outcome = spec.name, warm[spec.name]
        if outcome.synthesized and name not in before:
            run.rows[name] = RowStatus(
                RowState.SYNTHESIZED, f"warm-zero, {spec.absent_reason}: {outcome.reason}"
            )
        elif not outcome.synthesized and name not in before:
            run.rows.setdefault(name, RowStatus(RowState.MISSING, outcome.reason))
    idle_state, zeroed = state.idle, tuple[str, ...]()
    if rules.idle.enabled:
        idle_state = observe(run.out, rules.idle, state.idle, now)
        if idle_state.idle:
            zeroed = tuple(zero_gauges(run.out, rules.idle_zero))
    synthesized = sum(o.synthesized for o in warm.values())
    new_state = SynthState(MappingProxyType(counters), idle_state, frozenset(reads.now))
    return new_state, zeroed, synthesized


def translate(  # noqa: PLR0913 - the families, the rules, and what carries across calls
    upstream: Sequence[AnyFamily],
    rules: CompiledRules,
    state: SynthState | None = None,
    *,
    now: float = 0.0,
    server_info: Mapping[str, object] | None = None,
    caches: CodecCaches | None = None,
    remembered: TranslationCaches | None = None,
) -> Translation:
    """Apply the rules to one upstream payload's families; ``state`` is the previous call's.

    ``caches`` (the caller's, as for the reader) remembers the lines of the families the rules
    parse, for the next payload; ``remembered`` (``translation.caches``) the scrape plan of each
    layout (``translation.plan``: what the layout alone decides, reused while the next
    payload's compares equal), the names each family takes and what relabel steps made of each
    label set.
    """
    plan = plan_for(upstream, rules, remembered.plans if remembered is not None else None)
    if plan is None:
        upstream, restored = restore_escaped(upstream, rules.naming)
    else:
        upstream, restored = apply_renames(upstream, plan.renames)
    run = TranslationRun(rules, upstream, caches, remembered)
    run.stats.names_restored = restored
    run.families(upstream, plan.ruled if plan is not None else None)
    synthesized = _synthesize(run, state or SynthState(), now, server_info, plan)
    new_state, zeroed, warm_series = synthesized
    rows = run.finish(plan)
    if plan is not None and remembered is not None and plan.changed():
        store_plan(plan, remembered.plans)
    run.stats.families_out = len(run.out)
    run.stats.samples_out = sum(map(sample_count, run.out))
    return Translation(
        tuple(run.out), run.stats, tuple(run.problems), rows, new_state, zeroed, warm_series
    )
