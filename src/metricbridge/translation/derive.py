"""Derived families: rows the contract can compute from community families or /server_info.

Each op has one documented definition (docs/configuration.md). Rates come from counter deltas
between two upstream fetches, so they need the previous fetch's values (``CounterMemory``).
Resets are detected per series: one series that went down (its process restarted; SGLang's
tokenizer and schedulers are separate processes) restarts the interval for the whole ratio,
which has no value until the next fetch, so a ratio never mixes an increase since a reset with
one since the previous fetch. A series created since the previous fetch counts from 0. A ratio
whose denominator did not move has no value: the series is left out rather than served as a
made-up 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Labels,
    MetricType,
)
from metricbridge.translation.compiled import (
    CompiledDerive,
    FromServerInfo,
    Ratio,
    RatioOfDeltas,
    ServerField,
    ShareZero,
)
from metricbridge.translation.operands import DeriveMemo, Parse, Values, grouper, selected
from metricbridge.translation.series import by_name, gauge_sample, parsed_or_none, series_labels

CounterMemory = Mapping[tuple[str, Labels], float]


@dataclass(slots=True)
class Reads:
    """The counters one derivation pass reads: their values, and which it read at all.

    ``before``: the counter series keys the previous fetch read (present or absent), so that
    one absent then and present now is known to have been created in between.
    """

    before: frozenset[str] = frozenset()
    values: dict[tuple[str, Labels], float] = field(default_factory=dict)
    now: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Derived:
    """One rule's result: a family (or None) and the reason when there is none."""

    family: Family | None
    reason: str
    pending: bool = False  # no family only until the next fetch: a rate needs two
    approximated: bool = False  # an approximate row's family


def _reset(name: str, series: Values, memory: CounterMemory) -> bool:
    """Whether any one series went down since the previous fetch: its counter was reset."""
    return any(value < memory.get((name, labels), value) for labels, value in series)


def _deltas(  # noqa: PLR0913 - one counter's series, what was remembered, and how to group
    name: str,
    series: Values,
    memory: CounterMemory,
    by: frozenset[str],
    seen: dict[tuple[str, Labels], float],
    *,
    memo: DeriveMemo | None,
    from_zero: bool,
) -> dict[Labels, float]:
    """Each group's increase since the previous fetch.

    ``from_zero``: the previous fetch read this counter, so a series it lacked was created
    since (SGLang creates labelled counters on their first event) and its whole value is the
    increase. Otherwise (the first fetch) a series without a previous value has no increase yet.
    """
    grouped = grouper(name, by, memo, len(series))
    sums: dict[Labels, float] = {}
    for labels, value in series:
        seen[(name, labels)] = value
        previous = memory.get((name, labels))
        if previous is None:
            if not from_zero:
                continue
            previous = 0.0
        group = grouped(labels)
        sums[group] = sums.get(group, 0.0) + value - previous
    return sums


# A rate row's reason on the first fetch: one snapshot can never show it (contract_index).
NEEDS_TWO_FETCHES = "no value yet: a rate needs two fetches"
# A reset on either side restarts the interval: with one side's increase since its reset and
# the other's since the previous fetch, a ratio can leave its range (a hit rate of 2.5).
RESET_REASON = "no value: a counter was reset since the previous fetch; the next fetch has one"


def _ratio_of_deltas(  # noqa: PLR0913 - the formula, what it reads, and how
    formula: RatioOfDeltas,
    families: Mapping[str, AnyFamily],
    memory: CounterMemory,
    reads: Reads,
    parse: Parse,
    *,
    server_info: Mapping[str, object] | None,
    memo: DeriveMemo | None,
) -> Values | str:
    numerator, denominator = formula.numerator, formula.denominator
    num = selected(numerator, families, parse, memo)
    den = selected(denominator, families, parse, memo)
    # Read, present or not: a counter absent now and present next time was created in between.
    reads.now.update((numerator.memory_key, denominator.memory_key))
    if num is None or den is None:
        absent = numerator.family if num is None else denominator.family
        return f"{absent} is absent upstream"
    budget = 1.0
    if formula.divide_by is not None:
        value = server_value(formula.divide_by, server_info)
        if value is None or value <= 0:
            return f"/server_info has no usable {formula.divide_by.field}"
        budget = value
    reset = _reset(numerator.memory_key, num, memory) or _reset(denominator.memory_key, den, memory)
    seen = reads.values
    num_deltas = _deltas(
        numerator.memory_key, num, memory, formula.by, seen,
        memo=memo, from_zero=numerator.memory_key in reads.before,
    )  # fmt: skip
    den_deltas = _deltas(
        denominator.memory_key, den, memory, formula.by, seen,
        memo=memo, from_zero=denominator.memory_key in reads.before,
    )  # fmt: skip
    if not den_deltas:
        return NEEDS_TWO_FETCHES
    if reset:
        return RESET_REASON
    factor = formula.factor / budget
    out = [
        (group, num_deltas.get(group, 0.0) / moved * factor)
        for group, moved in den_deltas.items()
        if moved > 0
    ]
    return out or "no value: the denominator did not move since the previous fetch"


def server_value(field: ServerField, server_info: Mapping[str, object] | None) -> float | None:
    """The field's number in a /server_info answer, per DP worker if asked; None if unusable."""
    if server_info is None:
        return None
    raw = server_info.get(field.field)
    if raw is None:  # SGLang reports the scheduler's resolved value under internal_states
        states = server_info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            raw = states[0].get(field.field)
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
        field.per_dp_worker
        and server_info.get("enable_dp_attention")
        and isinstance(dp_size, int)
        and dp_size > 1
    ):
        value = float(int(value) // dp_size)  # SGLang's per_dp_max_running_requests
    return value


def _ratio(
    formula: Ratio,
    families: Mapping[str, AnyFamily],
    server_info: Mapping[str, object] | None,
    parse: Parse,
    memo: DeriveMemo | None,
) -> Values | str:
    numerator, denominator = formula.numerator, formula.denominator
    num = selected(numerator, families, parse, memo)
    if num is None:
        return f"{numerator.family} is absent upstream"
    if isinstance(denominator, ServerField):
        den_value = server_value(denominator, server_info)
        if den_value is None:
            return f"/server_info has no usable {denominator.field}"
    else:
        den = selected(denominator, families, parse, memo)
        if den is None:
            return f"{denominator.family} is absent upstream"
        den_value = sum(value for _, value in den)
    den_value = max(formula.minimum, den_value)
    if den_value == 0:
        return "no value: the denominator is 0"
    return [(labels, value / den_value) for labels, value in num]


def _from_server_info(
    formula: FromServerInfo,
    families: Mapping[str, AnyFamily],
    server_info: Mapping[str, object] | None,
    parse: Parse,
) -> Values | str:
    value = server_value(formula.field, server_info)
    if value is None:
        return f"/server_info has no usable {formula.field.field}"
    if formula.labels_from is None:
        return [((), value)]
    reference = parse(families.get(formula.labels_from))
    if reference is None:
        return f"{formula.labels_from} (for labels) is absent upstream"
    drop = formula.drop_labels
    label_sets = {
        tuple(p for p in labels if p[0] not in drop) for labels in series_labels(reference)
    }
    return [(labels, value) for labels in sorted(label_sets)]


def _share_zero(
    formula: ShareZero, families: Mapping[str, AnyFamily], parse: Parse, memo: DeriveMemo | None
) -> Values | str:
    series = selected(formula.numerator, families, parse, memo)
    if not series:
        return f"{formula.numerator.family} is absent upstream"
    grouped = grouper(formula.numerator.memory_key, formula.by, memo, len(series))
    counts: dict[Labels, list[int]] = {}
    for labels, value in series:
        tally = counts.setdefault(grouped(labels), [0, 0])
        tally[0] += value == 0
        tally[1] += 1
    return [(group, zero / total) for group, (zero, total) in counts.items()]


def derive_values(  # noqa: PLR0913 - the formula, what it reads, and how
    derive: CompiledDerive,
    families: Mapping[str, AnyFamily],
    memory: CounterMemory,
    server_info: Mapping[str, object] | None,
    *,
    reads: Reads,
    parse: Parse = parsed_or_none,
    memo: DeriveMemo | None = None,
) -> Values | str:
    """One derived family's series, or why it has none; counters read go into ``reads``.

    ``memo``: a scrape plan's, what the label filters made of the label sets seen before.
    """
    formula = derive.formula
    if isinstance(formula, RatioOfDeltas):
        return _ratio_of_deltas(
            formula, families, memory, reads, parse, server_info=server_info, memo=memo
        )
    if isinstance(formula, Ratio):
        return _ratio(formula, families, server_info, parse, memo)
    if isinstance(formula, FromServerInfo):
        return _from_server_info(formula, families, server_info, parse)
    return _share_zero(formula, families, parse, memo)


def derive_all(  # noqa: PLR0913 - as derive_values, for every rule
    families: Sequence[AnyFamily],
    derives: Sequence[CompiledDerive],
    memory: CounterMemory,
    server_info: Mapping[str, object] | None,
    parse: Parse = parsed_or_none,
    *,
    memo: DeriveMemo | None = None,
    reads: Reads | None = None,
) -> tuple[dict[str, Derived], dict[tuple[str, Labels], float]]:
    """Compute every derived family; return results by name and the counter values to remember.

    ``reads``: the caller's, to learn which counters were read (``Reads.now``) beside their
    values; its ``before`` says which the previous fetch read.
    """
    index = by_name(families)
    if reads is None:
        reads = Reads()
    results: dict[str, Derived] = {}
    for derive in derives:
        name = derive.name
        if name in index:  # a patched engine serves it natively: its series win
            results[name] = Derived(None, "served by the engine under the contract name")
            continue
        values = derive_values(
            derive, index, memory, server_info, reads=reads, parse=parse, memo=memo
        )
        if isinstance(values, str):
            pending = values is NEEDS_TWO_FETCHES  # the constant itself, never a copy of its text
            results[name] = Derived(None, values, pending=pending)
            continue
        meta = FamilyMeta(name, MetricType.GAUGE, derive.help, derive.unit)
        samples = tuple(gauge_sample(name, labels, value) for labels, value in values)
        results[name] = Derived(
            Family(meta, samples), derive.reason, approximated=derive.approximated
        )
    return results, reads.values
