"""A scrape plan: what ``translate`` works out from a payload's layout, kept for the next payload.

An engine's layout (which families, in which order, with which HELP/TYPE/UNIT, and which label
sets) is the same scrape after scrape; only values move. Much of a translation depends on the
layout alone: which families no rule reads (served as they came), which are renamed from the
escaped prefix, which served names clash, every contract row's status where the run left no
reason of its own, which escaped-spelling copies to serve, which warm-zero series are missing,
and what derive's label filters make of each label set. A ``TranslationPlan`` holds those
answers for one layout, as Prometheus' scrape cache holds series references per target.

Every answer is held with the exact input it was computed from (a list of ``FamilyMeta``, a
list of label tuples) and reused only when this payload's input compares equal, so a plan
changes speed, never a result: the first payload of a layout, and any payload whose layout
differs in the least, takes the full path. The comparisons are cheap because the reader hands
the same ``FamilyMeta`` and label tuples back for the same bytes (its caches), and a list
comparison of identical objects never looks inside them.

Plans live in the caller's ``TranslationCaches.plans`` (``translation.caches``: bounded in
bytes, emptied on a rules reload, served in the cache self-metrics); a plan also remembers the
rules it was made for and is not used with others. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from metricbridge.exposition.caches import labels_size
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import AnyFamily, FamilyMeta
from metricbridge.translation.compiled import CompiledRules, ContractRow
from metricbridge.translation.naming import Renames, escaped_renames
from metricbridge.translation.operands import DeriveMemo
from metricbridge.translation.rows import RowStatus
from metricbridge.translation.warm_zero import WarmMemo

__all__ = [
    "Clash",
    "Ending",
    "TranslationPlan",
    "default_rows",
    "find_clashes",
    "plan_for",
    "store_plan",
]

# Per family of the layout, beyond its strings: the meta reference, the name in the key, the
# position lists.
_PER_FAMILY = 64
# Per label tuple a memo holds (the tuples themselves are usually shared with the reader's).
_PER_LABEL_SET = 16
# Per label tuple in derive's tables: the dict slot and, for an answer, a tuple of its own.
_PER_DERIVED_LABEL_SET = 80


@dataclass(frozen=True, slots=True)
class Clash:
    """A family not served because a family met earlier already takes one of its names."""

    position: int  # in the list the clash check ran over
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class Ending:
    """What the end of a translation decides from the layout of the families it serves."""

    key: list[FamilyMeta]  # the families after synthesis, before the escaped copies
    escaped: Renames  # the escaped-spelling copies, as naming.escaped_targets gives them
    clashes: tuple[Clash, ...]  # over the families and their copies, in the order found
    rows: dict[str, RowStatus]  # every row's status when the run left it none of its own

    def size(self) -> int:
        """The len() of the strings it holds, roughly, for the cache's estimate."""
        texts = sum(len(c.message) + len(c.name) for c in self.clashes)
        rows = sum(len(name) + len(status.reason) for name, status in self.rows.items())
        return texts + rows + _PER_FAMILY * (len(self.key) + len(self.rows))


@dataclass(slots=True)
class TranslationPlan:
    """What one layout of upstream families decides; see the module docstring."""

    rules: CompiledRules
    metas: list[FamilyMeta]  # the layout: every upstream family's meta, in order
    renames: Renames  # naming.escaped_renames of the layout
    ruled: tuple[int, ...]  # positions of the families some rule reads (or drops)
    ending: Ending | None = None  # the last ending seen with this layout
    warm: WarmMemo = field(default_factory=WarmMemo)
    derive: DeriveMemo = field(default_factory=DeriveMemo)
    dirty: bool = True  # changed since the cache was last told its size

    def size(self) -> int:
        """The len() of the strings it holds, roughly, for the cache's estimate."""
        metas = sum(len(m.name) + len(m.help or "") + len(m.unit or "") for m in self.metas)
        ending = self.ending.size() if self.ending is not None else 0
        warm = self.warm.size(labels_size) + _PER_LABEL_SET * self.warm.label_set_count()
        derive = _PER_DERIVED_LABEL_SET * self.derive.label_set_count()
        return metas + _PER_FAMILY * len(self.metas) + ending + warm + derive

    def changed(self) -> bool:
        """Whether anything was added since the cache was last told the plan's size."""
        return self.dirty or self.warm.dirty or self.derive.dirty

    def ending_for(self, key: list[FamilyMeta]) -> Ending | None:
        """The ending remembered for families of this layout, if they are the ones given."""
        ending = self.ending
        return ending if ending is not None and ending.key == key else None


def _new_plan(rules: CompiledRules, metas: list[FamilyMeta]) -> TranslationPlan:
    renames = escaped_renames(metas, rules.naming)
    names = [meta.name for meta in metas]
    for position, meta in renames:
        names[position] = meta.name
    by_input, consumed = rules.by_input, rules.consumed
    ruled = tuple(i for i, name in enumerate(names) if name in by_input or name in consumed)
    return TranslationPlan(rules, metas, renames, ruled)


Plans = ByteLRU[tuple[str, ...], "TranslationPlan"]  # by the layout's family names


def plan_for(
    upstream: Sequence[AnyFamily], rules: CompiledRules, plans: Plans | None
) -> TranslationPlan | None:
    """The plan for this layout: the cached one if the layout is the same, else a new one.

    None without a cache of plans (nothing would keep one for the next payload).
    """
    if plans is None or not plans.budget:
        return None
    metas = [family.meta for family in upstream]
    key = tuple(meta.name for meta in metas)
    plan = plans.get(key)
    if plan is not None and plan.rules is rules and plan.metas == metas:
        return plan
    return _new_plan(rules, metas)  # held once translate has filled it in (store_plan)


def store_plan(plan: TranslationPlan, plans: Plans) -> None:
    """Hold the plan, telling the cache its size (again, once its answers have changed)."""
    plan.dirty = plan.warm.dirty = plan.derive.dirty = False
    plans.put(tuple(meta.name for meta in plan.metas), plan, plan.size())


def find_clashes(
    metas: Sequence[FamilyMeta],
    present: Mapping[str, object],
    served_names: Callable[[FamilyMeta], frozenset[str]],
) -> tuple[Clash, ...]:
    """The families of ``metas`` not to serve: a served name of theirs is taken already.

    The engine's families (those ``present`` names) claim their names first, in order, then
    the others in order; see ``translate._Run.drop_clashes`` for why.
    """
    order = [i for i, m in enumerate(metas) if m.name in present]
    order += [i for i, m in enumerate(metas) if m.name not in present]
    taken: dict[str, str] = {}
    clashes = []
    for position in order:
        meta = metas[position]
        names = served_names(meta)
        shared = names & taken.keys()
        if not shared:
            taken.update(dict.fromkeys(names, meta.name))
            continue
        other = taken[min(shared)]
        message = f"{' and '.join(sorted(shared))} already served by family {other}"
        clashes.append(Clash(position, meta.name, message))
    return tuple(clashes)


def default_rows(
    rows: Sequence[ContractRow], present: Mapping[str, object], served: set[str]
) -> dict[str, RowStatus]:
    """Every row's status from the decision table alone (what the run said overrides it)."""
    return {
        row.name: row.status(present=row.name in present, served=row.name in served) for row in rows
    }
