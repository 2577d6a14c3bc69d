"""What relabel steps made of each label set, remembered from one payload to the next.

Relabel steps read a series' labels and nothing else, and an engine serves the same label sets
scrape after scrape with new values. Running the steps costs 10-20 us a series (RE2 through
its Python binding, the template, sorting the result), so 48 relabelled series of a real
SGLang payload cost about as much as the rest of the translation; a hit costs a dict lookup.

The cache belongs to whoever runs the translations (the service's bridge, for its life), is
bounded in bytes (``model.cache.ByteLRU``), and is emptied when the rules change. A result is
only ever used with the very steps that made it: an entry remembers its steps and a lookup
with other steps (rules compiled again, a second relabel rule) is a miss, whatever was reset.
"""

from __future__ import annotations

from typing import Final

from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Labels
from metricbridge.translation.compiled import CompiledRelabel

# The labels served, whether the steps changed them, the series before and after
# (``series_key``), and the served labels sorted (what the duplicate check compares).
Outcome = tuple[Labels, bool, Labels, Labels, Labels]
# None: the steps drop the series.
Relabelled = Outcome | None
Steps = tuple[CompiledRelabel, ...]


class Miss:
    """The one value ``get`` returns for a label set it has no result for (None is a result)."""

    __slots__ = ()


MISS: Final = Miss()

DEFAULT_BUDGET = 4 << 20  # a 10 MB engine's relabelled family (528 series) takes under 1 MiB
# Per label tuple held, beyond its strings: the tuple, a pair tuple per label.
_TUPLE_OVERHEAD = 64
_PAIR_OVERHEAD = 72


class RelabelCache:
    """Relabel outcomes by input label set; ``lru`` holds them (and is what self-metrics show)."""

    __slots__ = ("lru",)

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        # By the steps' identity and the labels; the entry keeps its steps alive and checks
        # them on every hit, so an identity reused by other steps cannot match.
        self.lru: ByteLRU[tuple[int, Labels], tuple[Steps, Relabelled]] = ByteLRU(
            "relabel_results", budget
        )

    def get(self, labels: Labels, steps: Steps) -> Relabelled | Miss:
        """The outcome remembered for ``labels`` under ``steps``, or ``MISS``."""
        entry = self.lru.get((id(steps), labels))
        if entry is None or entry[0] is not steps:
            return MISS
        return entry[1]

    def put(self, labels: Labels, steps: Steps, outcome: Relabelled) -> None:
        """Remember ``outcome`` for ``labels`` under ``steps``."""
        self.lru.put((id(steps), labels), (steps, outcome), _size(labels, outcome))

    def reset(self) -> None:
        """Forget every outcome (the rules changed); the counters keep counting."""
        self.lru.reset()


def _size(labels: Labels, outcome: Relabelled) -> int:
    """The estimated bytes of an entry: the input labels' strings, and every tuple it holds.

    The outcome's tuples share the input's strings, except values the steps wrote.
    """
    held = [labels] if outcome is None else [labels, *outcome[:1], *outcome[2:]]
    strings = sum(len(key) + len(value) for key, value in labels)
    if outcome is not None:
        strings += sum(len(value) for _, value in outcome[0])
    return strings + sum(_TUPLE_OVERHEAD + _PAIR_OVERHEAD * len(tup) for tup in held)
