"""What translating remembers from one payload to the next, in one object of translation's own.

Three caches, each a byte-bounded ``ByteLRU`` whose name the self-metrics show: the scrape plan
of each layout (``translation.plan``), the names each family takes on the wire (for the guard
against two families sharing one), and what relabel steps made of each label set
(``translation.relabel_cache``). The codec's caches (``exposition.caches.CodecCaches``) hold what
reading and writing remember; these are translation's, typed as what they hold.

Whoever translates payload after payload owns one (the service's bridge, for its life) and
resets it when the rules change; a command that translates one payload makes one without plans,
which only a later payload could use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from metricbridge.model.cache import ByteLRU, chosen_budgets
from metricbridge.model.family import MetricType
from metricbridge.translation.plan import TranslationPlan
from metricbridge.translation.relabel_cache import DEFAULT_BUDGET as RELABEL_BUDGET
from metricbridge.translation.relabel_cache import RelabelCache

MiB = 1 << 20

DEFAULT_BUDGETS: Mapping[str, int] = MappingProxyType(
    {
        "served_names": 1 * MiB,  # the names each family takes in either format
        # translation.plan: what each layout decides; a 10 MB engine's plan is about 1.1 MiB
        "translation_plans": 4 * MiB,
        "relabel_results": RELABEL_BUDGET,  # translation.relabel_cache
    }
)

# One payload (a command's input): a plan serves only a later payload.
ONE_PAYLOAD_BUDGETS: Mapping[str, int] = MappingProxyType({"translation_plans": 0})


class TranslationCaches:
    """Translation's caches, each with a byte budget of its own (``budgets`` overrides)."""

    __slots__ = ("plans", "relabel", "served_names")

    def __init__(self, budgets: Mapping[str, int] | None = None) -> None:
        chosen = chosen_budgets(DEFAULT_BUDGETS, budgets)
        self.plans: ByteLRU[tuple[str, ...], TranslationPlan] = ByteLRU(
            "translation_plans", chosen["translation_plans"]
        )
        self.served_names: ByteLRU[tuple[str, MetricType], frozenset[str]] = ByteLRU(
            "served_names", chosen["served_names"]
        )
        self.relabel = RelabelCache(chosen["relabel_results"])

    def __iter__(self) -> Iterator[ByteLRU[Any, Any]]:
        """Every cache, in a fixed order."""
        yield self.served_names
        yield self.plans
        yield self.relabel.lru

    def reset(self) -> None:
        """Forget everything (the rules changed); the counters keep counting."""
        for cache in self:
            cache.reset()
