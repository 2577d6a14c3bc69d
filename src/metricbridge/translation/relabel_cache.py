"""What relabel steps did to each projection of a series, remembered from one payload to the next.

Relabel steps read some of a series' labels and nothing else (``translation.relabel``: the
projection), and an engine serves the same label sets scrape after scrape with new values.
Running the steps costs 10-20 us (RE2 through its Python binding, the templates); a hit costs a
dict lookup. Within one payload ``relabel`` runs them once per projection anyway; this keeps
those outcomes for the next payload.

The cache belongs to whoever runs the translations (the service's bridge, for its life), is
bounded in bytes (``model.cache.ByteLRU``), and is emptied when the rules change. A result is
only ever used with the very steps that made it: entries are keyed by the steps themselves
(``CompiledRelabel`` compares by identity, so rules compiled again, or a second relabel rule,
are other keys) and hold them, so no other steps can come to share a key.
"""

from __future__ import annotations

from typing import Final

from metricbridge.model.cache import ByteLRU
from metricbridge.translation.compiled import CompiledRelabel

# What of a series the steps read: the values of their source labels ("" for an absent one),
# then, when a step reads names, the label names, or, with labelmap, every name and value.
Projection = tuple[str, ...]
# The net writes of the steps: each label they set (its value) or removed (None).
Patch = tuple[tuple[str, str | None], ...]
# None: the steps drop the series.
Relabelled = Patch | None
Steps = tuple[CompiledRelabel, ...]


class Miss:
    """The one value ``get`` returns for a label set it has no result for (None is a result)."""

    __slots__ = ()


MISS: Final = Miss()

# Projections repeat across series, so entries are few (a 10 MB engine's relabelled family of
# 528 series has a handful); the budget is there for labelmap rules, which project each series
# onto all of its labels.
DEFAULT_BUDGET = 4 << 20
# Per tuple held, beyond its strings: the tuple, and a slot (a pair tuple for a patch) per item.
_TUPLE_OVERHEAD = 64
_ITEM_OVERHEAD = 8
_PAIR_OVERHEAD = 72


class RelabelCache:
    """Relabel outcomes by projection; ``lru`` holds them (and is what self-metrics show)."""

    __slots__ = ("lru",)

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        # By the steps (hashed by identity: ``CompiledRelabel``) and the projection; the
        # outcome in a 1-tuple, since None (the series is dropped) is an outcome.
        self.lru: ByteLRU[tuple[Steps, Projection], tuple[Relabelled]] = ByteLRU(
            "relabel_results", budget
        )

    def get(self, key: Projection, steps: Steps) -> Relabelled | Miss:
        """The outcome remembered for a projection under ``steps``, or ``MISS``."""
        entry = self.lru.get((steps, key))
        return MISS if entry is None else entry[0]

    def put(self, key: Projection, steps: Steps, outcome: Relabelled) -> None:
        """Remember ``outcome`` for a projection under ``steps``."""
        self.lru.put((steps, key), (outcome,), _size(key, outcome))

    def reset(self) -> None:
        """Forget every outcome (the rules changed); the counters keep counting."""
        self.lru.reset()


def _size(key: Projection, outcome: Relabelled) -> int:
    """The estimated bytes of an entry: the projection's strings and tuple, and the patch's.

    The patch's names are the projection's or the rules' strings; its values may be new.
    """
    size = _TUPLE_OVERHEAD + sum(len(item) + _ITEM_OVERHEAD for item in key)
    if outcome is not None:
        size += _TUPLE_OVERHEAD + sum(
            _PAIR_OVERHEAD + len(name) + len(value or "") for name, value in outcome
        )
    return size
