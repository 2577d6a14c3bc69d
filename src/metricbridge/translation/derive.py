"""Derived families: rows the contract can compute from community families or /server_info.

Each op has one documented definition (docs/configuration.md). Rates come from counter deltas
between two upstream fetches, so they need the previous fetch's values (``CounterMemory``); a
counter that went down was reset (engine restart) and its new value is the increase, as
Prometheus' ``increase()`` treats it. A ratio whose denominator did not move has no value: the
series is left out rather than served as a made-up 0.
"""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metricbridge.config.schema import FamilyRule
from metricbridge.config.synthesis import Derive, DeriveOp, Operand
from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Labels, MetricType
from metricbridge.translation.series import (
    by_name,
    gauge_sample,
    parsed_or_none,
    series_labels,
    value_samples,
)

CounterMemory = Mapping[tuple[str, Labels], float]


@dataclass(frozen=True, slots=True)
class Derived:
    """One rule's result: a family (or None) and the reason when there is none."""

    family: Family | None
    reason: str
    pending: bool = False  # no family only until the next fetch: a rate needs two


def _selected(
    operand: Operand, families: Mapping[str, AnyFamily]
) -> list[tuple[Labels, float]] | None:
    """(labels without the matched ones, value) of the operand's series; None if absent."""
    family = parsed_or_none(families.get(operand.family or ""))
    if family is None:
        return None
    wanted = set(operand.match.items())
    out = []
    for sample in value_samples(family):
        if wanted <= set(sample.labels):
            rest = tuple(sorted(p for p in sample.labels if p[0] not in operand.match))
            out.append((rest, sample.value))
    return out


def _group(labels: Labels, by: Sequence[str]) -> Labels:
    return tuple(sorted(p for p in labels if p[0] in by))


def _deltas(
    name: str,
    series: list[tuple[Labels, float]],
    memory: CounterMemory,
    by: Sequence[str],
    seen: dict[tuple[str, Labels], float],
) -> dict[Labels, float]:
    # One series going down means the engine restarted: every series of the family started
    # over, including those that have already grown past their old values.
    restarted = any(value < memory.get((name, labels), value) for labels, value in series)
    sums: dict[Labels, float] = {}
    for labels, value in series:
        seen[(name, labels)] = value
        previous = memory.get((name, labels))
        if previous is None:
            continue
        delta = value if restarted else value - previous
        group = _group(labels, by)
        sums[group] = sums.get(group, 0.0) + delta
    return sums


# A rate row's reason on the first fetch: one snapshot can never show it (contract_index).
NEEDS_TWO_FETCHES = "no value yet: a rate needs two fetches"


def _ratio_of_deltas(
    derive: Derive,
    families: Mapping[str, AnyFamily],
    memory: CounterMemory,
    seen: dict[tuple[str, Labels], float],
) -> list[tuple[Labels, float]] | str:
    numerator, denominator = derive.numerator, derive.denominator
    assert numerator is not None  # noqa: S101 - config checks guarantee both operands
    assert denominator is not None  # noqa: S101
    num = _selected(numerator, families)
    den = _selected(denominator, families)
    if num is None or den is None:
        absent = numerator.family if num is None else denominator.family
        return f"{absent} is absent upstream"
    num_deltas = _deltas(
        f"{numerator.family}{sorted(numerator.match.items())}", num, memory, derive.by, seen
    )
    den_deltas = _deltas(
        f"{denominator.family}{sorted(denominator.match.items())}", den, memory, derive.by, seen
    )
    if not den_deltas:
        return NEEDS_TWO_FETCHES
    out = [
        (group, num_deltas.get(group, 0.0) / moved)
        for group, moved in den_deltas.items()
        if moved > 0
    ]
    return out or "no value: the denominator did not move since the previous fetch"


def _server_value(operand: Operand, server_info: Mapping[str, object] | None) -> float | None:
    if server_info is None or operand.server_info is None:
        return None
    raw = server_info.get(operand.server_info)
    if raw is None:  # SGLang reports the scheduler's resolved value under internal_states
        states = server_info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            raw = states[0].get(operand.server_info)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    try:
        value = float(raw)
    except OverflowError:  # an integer beyond any float: JSON allows it, no engine means it
        return None
    if not math.isfinite(value):  # NaN or 1e999 from an engine's JSON: no usable number
        return None
    dp_size = server_info.get("dp_size")
    if (
        operand.per_dp_worker
        and server_info.get("enable_dp_attention")
        and isinstance(dp_size, int)
        and dp_size > 1
    ):
        value = float(int(value) // dp_size)  # SGLang's per_dp_max_running_requests
    return value


def _ratio(
    derive: Derive, families: Mapping[str, AnyFamily], server_info: Mapping[str, object] | None
) -> list[tuple[Labels, float]] | str:
    numerator, denominator = derive.numerator, derive.denominator
    assert numerator is not None  # noqa: S101 - config checks guarantee both operands
    assert denominator is not None  # noqa: S101
    num = _selected(numerator, families)
    if num is None:
        return f"{numerator.family} is absent upstream"
    if denominator.server_info is not None:
        den_value = _server_value(denominator, server_info)
        if den_value is None:
            return f"/server_info has no usable {denominator.server_info}"
    else:
        den = _selected(denominator, families)
        if den is None:
            return f"{denominator.family} is absent upstream"
        den_value = sum(value for _, value in den)
    den_value = max(derive.minimum or 0.0, den_value)
    if den_value == 0:
        return "no value: the denominator is 0"
    return [(labels, value / den_value) for labels, value in num]


def _from_server_info(
    derive: Derive, families: Mapping[str, AnyFamily], server_info: Mapping[str, object] | None
) -> list[tuple[Labels, float]] | str:
    assert derive.numerator is not None  # noqa: S101 - config checks
    value = _server_value(derive.numerator, server_info)
    if value is None:
        return f"/server_info has no usable {derive.numerator.server_info}"
    if derive.labels_from is None:
        return [((), value)]
    reference = parsed_or_none(families.get(derive.labels_from))
    if reference is None:
        return f"{derive.labels_from} (for labels) is absent upstream"
    label_sets = {
        tuple(p for p in labels if p[0] not in derive.drop_labels)
        for labels in series_labels(reference)
    }
    return [(labels, value) for labels in sorted(label_sets)]


def _share_zero(
    derive: Derive, families: Mapping[str, AnyFamily]
) -> list[tuple[Labels, float]] | str:
    assert derive.numerator is not None  # noqa: S101 - config checks
    series = _selected(derive.numerator, families)
    if not series:
        return f"{derive.numerator.family} is absent upstream"
    counts: dict[Labels, list[int]] = {}
    for labels, value in series:
        tally = counts.setdefault(_group(labels, derive.by), [0, 0])
        tally[0] += value == 0
        tally[1] += 1
    return [(group, zero / total) for group, (zero, total) in counts.items()]


def derive_all(
    families: Sequence[AnyFamily],
    rules: Sequence[FamilyRule],
    memory: CounterMemory,
    server_info: Mapping[str, object] | None,
) -> tuple[dict[str, Derived], dict[tuple[str, Labels], float]]:
    """Compute every derive rule; return results by name and the counter values to remember."""
    index = by_name(families)
    seen: dict[tuple[str, Labels], float] = {}
    results: dict[str, Derived] = {}
    for rule in rules:
        derive = rule.derive
        if derive is None:
            continue
        if rule.name in index:  # a patched engine serves it natively: its series win
            results[rule.name] = Derived(None, "served by the engine under the contract name")
            continue
        if derive.op is DeriveOp.RATIO_OF_DELTAS:
            values = _ratio_of_deltas(derive, index, memory, seen)
        elif derive.op is DeriveOp.RATIO:
            values = _ratio(derive, index, server_info)
        elif derive.op is DeriveOp.SERVER_INFO:
            values = _from_server_info(derive, index, server_info)
        else:
            values = _share_zero(derive, index)
        if isinstance(values, str):
            pending = values is NEEDS_TWO_FETCHES  # the constant itself, never a copy of its text
            results[rule.name] = Derived(None, values, pending=pending)
            continue
        meta = FamilyMeta(rule.name, MetricType.GAUGE, rule.help or rule.note, rule.unit)
        samples = tuple(gauge_sample(rule.name, labels, value) for labels, value in values)
        results[rule.name] = Derived(Family(meta, samples), f"derived ({derive.op})")
    return results, seen
