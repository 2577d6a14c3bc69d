"""A least-recently-used cache bounded by the bytes it holds: the one kind of memory the core keeps.

The core keeps no state of its own: no module-level container changes after import. A caller
that wants work remembered from one payload to the next (the service, once per bridge) owns the
caches, passes them in, and empties them when what they were computed for changes (``reset``,
on a rules reload). Each cache is bounded by an estimate of its bytes, not by an entry count:
an upstream that changes a 1 MiB HELP text or label value on every scrape fills a count-bounded
cache with thousands of megabyte entries, and one bounded in bytes with a few at most.

The estimate is ``len()`` of the strings and bytes an entry holds, which the caller computes
(it knows what the value is made of), plus ``ENTRY_OVERHEAD`` for the objects around them. An
entry bigger than the whole budget is not cached at all: it would only evict everything else.

Not thread-safe: one owner, one thread (the service's worker). Its figures (``bytes``,
``entries`` and the counters) may be read from another thread at any time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Per entry, beyond the len() of its strings: the dict slot and the order link, the (value,
# size) pair, and the object headers of a key and a value (CPython 3.11+, 64-bit).
ENTRY_OVERHEAD = 256


class ByteLRU(Generic[K, V]):
    """A mapping that forgets its least recently used entries to stay within ``budget`` bytes.

    ``hits``, ``misses`` and ``evictions`` only grow (``reset`` keeps them, so they can be served
    as counters); ``entries`` and ``bytes`` describe what is held now. ``None`` is not a value.
    """

    __slots__ = ("_data", "budget", "bytes", "evictions", "hits", "misses", "name")

    def __init__(self, name: str, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"cache {name}: budget must be >= 0 bytes, not {budget}")
        self.name = name
        self.budget = budget
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0

    @property
    def entries(self) -> int:
        """How many entries the cache holds."""
        return len(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held; neither a hit nor a miss, and no use of the entry."""
        return key in self._data

    def get(self, key: K) -> V | None:
        """The value held for ``key`` (now the most recently used), or None."""
        data = self._data  # one attribute load: this runs per header and label set written
        entry = data.get(key)
        if entry is None:
            self.misses += 1
            return None
        data.move_to_end(key)
        self.hits += 1
        return entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Hold ``value`` for ``key``; ``size`` is the len() of the strings both hold.

        Evicts the least recently used entries until the new one fits; one that cannot fit in
        the whole budget is not held (and an older value for its key is dropped).
        """
        data = self._data
        old = data.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        size += ENTRY_OVERHEAD
        if size > self.budget:
            return
        # Room first, then the entry: the figures are read from another thread (the service's
        # self-metrics, on the event loop, while its worker writes), and ``bytes`` must never
        # show more than the budget, not even for the moment of an eviction.
        while self.bytes + size > self.budget:
            _, (_, evicted) = data.popitem(last=False)
            self.bytes -= evicted
            self.evictions += 1
        self.bytes += size
        data[key] = (value, size)

    def reset(self) -> None:
        """Forget every entry (the counters keep counting)."""
        self._data.clear()
        self.bytes = 0

    def __repr__(self) -> str:
        return (
            f"ByteLRU({self.name!r}, {self.entries} entries, {self.bytes}/{self.budget} bytes, "
            f"{self.hits} hits, {self.misses} misses, {self.evictions} evictions)"
        )


def chosen_budgets(
    defaults: Mapping[str, int], overrides: Mapping[str, int] | None
) -> dict[str, int]:
    """``defaults`` with ``overrides`` applied by cache name (0 turns a cache off).

    A name that is no cache's is refused, naming the ones there are.
    """
    chosen = dict(defaults)
    for name, budget in (overrides or {}).items():
        if name not in chosen:
            raise ValueError(f"no cache named {name!r}; there are {', '.join(chosen)}")
        chosen[name] = budget
    return chosen
