"""Idle detection and gauge zeroing (opt-in: SGLang declined it upstream, sgl-project/sglang#4244).

The engine is idle when every series of the ``when_zero`` gauges (running and queued requests)
is 0 and the sums of the ``when_flat`` counters (requests, tokens) have not moved, continuously
for ``after_seconds``. The quiet period is taken to start at the previous observation: the
counters did not move since then. While idle, the ``zero`` gauges are served as 0; the first
observation with traffic serves real values again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from metricbridge.config.synthesis import IdleConfig, frozen_map
from metricbridge.model.family import AnyFamily, Family, MetricType
from metricbridge.translation.series import by_name, gauge_sample, parsed_or_none, value_samples


@dataclass(frozen=True, slots=True)
class IdleState:
    """What idle detection remembers between observations."""

    last_seen: float | None = None
    last_sums: Mapping[str, float] = field(default_factory=frozen_map)  # a MappingProxyType
    quiet_since: float | None = None
    idle: bool = False


def _counter_sums(index: dict[str, AnyFamily], names: Iterable[str]) -> Mapping[str, float]:
    sums = {}
    for name in names:
        family = parsed_or_none(index.get(name))
        # A lazily created counter that does not exist yet has counted nothing.
        sums[name] = sum(s.value for s in value_samples(family)) if family else 0.0
    return frozen_map(sums)


def _all_zero(index: dict[str, AnyFamily], names: Iterable[str]) -> bool:
    for name in names:
        family = parsed_or_none(index.get(name))
        if family is None or not family.samples:
            return False  # absent (e.g. before the first stats report): cannot tell
        if any(s.value != 0 for s in family.samples):
            return False
    return True


def observe(
    families: Sequence[AnyFamily], config: IdleConfig, state: IdleState, now: float
) -> IdleState:
    """Fold one upstream observation into the idle state."""
    index = by_name(families)
    sums = _counter_sums(index, config.when_flat)
    previous = state.last_seen
    if previous is None:  # the first observation: nothing to be flat against
        return IdleState(now, sums)
    flat = all(
        math.isclose(sums[name], state.last_sums.get(name, math.nan)) for name in config.when_flat
    )
    if not (flat and _all_zero(index, config.when_zero)):
        return IdleState(now, sums)
    since = state.quiet_since if state.quiet_since is not None else previous
    return IdleState(now, sums, since, now - since >= config.after_seconds)


def zero_gauges(families: list[AnyFamily], names: frozenset[str]) -> list[str]:
    """Serve the named gauges as 0 (in place); return the names actually zeroed."""
    zeroed = []
    for position, family in enumerate(families):
        if family.name not in names or family.meta.type is not MetricType.GAUGE:
            continue
        parsed = parsed_or_none(family)
        if parsed is None:
            continue
        samples = tuple(gauge_sample(s.name, s.labels, 0.0) for s in parsed.samples)
        families[position] = Family(parsed.meta, samples)
        zeroed.append(family.name)
    return zeroed
