"""The pure translation: upstream families in, contract families out. No I/O, no clock, no logging.

The service and ``metricbridge translate`` both call ``translate``; its result carries enough
for the service's self-metrics and for the contract report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from metricbridge.config.synthesis import frozen_map
from metricbridge.errors import ExpositionError, ScaleError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Labels, RawFamily
from metricbridge.model.family_names import served_names
from metricbridge.translation.compiled import (
    CompiledRule,
    CompiledRules,
    Rename,
    Scale,
    Select,
)
from metricbridge.translation.derive import Reads, derive_all
from metricbridge.translation.idle import IdleState, observe, zero_gauges
from metricbridge.translation.naming import (
    apply_renames,
    copies_of,
    escaped_targets,
    restore_escaped,
)
from metricbridge.translation.ops import (
    joined,
    relabel,
    rename,
    scale,
    select,
    without_hidden_labels,
)
from metricbridge.translation.plan import (
    Clash,
    Ending,
    TranslationPlan,
    default_rows,
    find_clashes,
    plan_for,
    store_plan,
)
from metricbridge.translation.relabel_cache import RelabelCache
from metricbridge.translation.rows import RowState, RowStatus
from metricbridge.translation.warm_zero import warm_zero

# RowState and RowStatus live in translation.rows (compile_rules decides rows with them) and
# are imported from here, beside the Translation that carries them.
__all__ = [
    "RowState",
    "RowStatus",
    "SynthState",
    "Translation",
    "TranslationStats",
    "sample_count",
    "translate",
]


@dataclass(slots=True)
class TranslationStats:
    """Counts for self-metrics; ``dropped`` maps a reason to samples not served."""

    families_in: int = 0
    samples_in: int = 0
    families_out: int = 0
    samples_out: int = 0
    names_restored: int = 0  # upstream families renamed from the escaped prefix spelling
    dropped: Counter[str] = field(default_factory=Counter)


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


def sample_count(family: AnyFamily) -> int:
    """Number of sample lines in a family."""
    return family.sample_count if isinstance(family, RawFamily) else len(family.samples)


class _Run:
    """One translation; holds the per-call accumulators so ``translate`` stays readable."""

    def __init__(
        self,
        rules: CompiledRules,
        upstream: Sequence[AnyFamily],
        caches: CodecCaches | None,
        relabel_cache: RelabelCache | None = None,
    ) -> None:
        self.rules = rules
        self.caches = caches
        self.relabel_cache = relabel_cache
        # meta.name, not the name property: a Python call per family
        self.present = {family.meta.name: family for family in upstream}
        self.stats = TranslationStats(families_in=len(upstream))
        self.problems: list[ExpositionError] = []
        self.rows: dict[str, RowStatus] = {}
        self.out: list[AnyFamily] = []
        self.parse_cache: dict[str, Family | None] = {}

    def parsed(self, family: AnyFamily) -> Family | None:
        if family.name in self.parse_cache:  # two selects of one family parse it once
            return self.parse_cache[family.name]
        try:
            result = parse_family(family, caches=self.caches)
            self.parse_cache[family.name] = result
        except ExpositionError as exc:
            self.parse_cache[family.name] = None
            self.problems.append(exc)
            self.stats.dropped["malformed"] += sample_count(family)
            return None
        return result

    def peek(self, family: AnyFamily | None) -> Family | None:
        """A family as synthesis reads it: parsed, or None if absent or unreadable.

        Nothing is recorded: a family that fails here is one served as the engine sent it,
        whose problems are not translation's. An upstream family a rule parsed already is not
        parsed again, and the caller's caches serve the lines it had last time.
        """
        if family is None or isinstance(family, Family):
            return family
        name = family.name
        upstream = self.present.get(name) is family
        if upstream and name in self.parse_cache:
            return self.parse_cache[name]
        try:
            result: Family | None = parse_family(family, caches=self.caches)
        except Exception:  # noqa: BLE001 - as series.parsed_or_none: unreadable is absent here
            result = None
        if upstream:
            self.parse_cache[name] = result
        return result

    def families(self, upstream: Sequence[AnyFamily], ruled: Sequence[int] | None) -> None:
        """Every upstream family through its rules, in order.

        ``ruled``: the positions of the families a rule reads, as a plan knows them; the
        others (most) are served as they came, a run at a time.
        """
        if ruled is None:
            by_input, consumed = self.rules.by_input, self.rules.consumed
            ruled = [i for i, f in enumerate(upstream) if f.name in by_input or f.name in consumed]
        out, start = self.out, 0
        for position in ruled:
            out.extend(upstream[start:position])
            self.family(upstream[position])
            start = position + 1
        out.extend(upstream[start:])
        self.stats.samples_in += sum(map(sample_count, upstream))

    def family(self, family: AnyFamily) -> None:
        rules = self.rules.by_input.get(family.name, ())
        original = family
        for compiled in rules:
            if compiled.in_place:
                rewritten = self.apply(compiled, family)
                if rewritten is None:
                    return  # malformed: neither the family nor anything derived from it is served
                family = rewritten
        if family.name not in self.rules.consumed:
            self.out.append(family)
        elif not rules:  # consumed by a drop rule alone (compile_rules indexes no drop rule)
            self.stats.dropped["dropped_by_rule"] += sample_count(family)
        for compiled in rules:
            if not compiled.in_place:
                derived = self.derived(compiled, original)
                if derived is not None:
                    self.out.append(derived)

    def derived(self, compiled: CompiledRule, source: AnyFamily) -> AnyFamily | None:
        if compiled.name in self.present:
            # A patched engine already serves the contract name: its series win (no duplicates).
            return None
        return self.apply(compiled, source)

    def apply(self, compiled: CompiledRule, source: AnyFamily) -> AnyFamily | None:
        if source.meta.type is not compiled.type:
            expected = f"the contract expects a {compiled.type}"
            reason = f"upstream {source.name} is a {source.meta.type}, {expected}"
            self.rows[compiled.name] = RowStatus(RowState.MISSING, reason)
            return source if compiled.in_place else None
        meta = compiled.meta(source.meta)
        transform = compiled.transform
        if isinstance(transform, Rename):
            return rename(source, meta)
        parsed = self.parsed(source)
        if parsed is None:
            return None
        if isinstance(transform, Scale):
            try:
                result = scale(parsed, transform.factor)
            except ScaleError as exc:
                self.problems.append(ExpositionError(str(exc), family=source.name))
                self.stats.dropped["malformed"] += sample_count(source)
                return None
        elif isinstance(transform, Select):
            result = select(parsed, transform)
        else:
            if transform.join is not None:
                parsed = joined(parsed, self.join_values(*transform.join))
            result, dropped, duplicates = relabel(parsed, transform.steps, self.relabel_cache)
            if transform.join is not None:
                result = without_hidden_labels(result)
            self.stats.dropped["relabel_drop"] += dropped
            self.stats.dropped["duplicate_series"] += duplicates
        if not result.samples and not compiled.in_place:
            self.rows[compiled.name] = RowStatus(
                RowState.MISSING, f"no series of {compiled.input_name} matched"
            )
            return None
        return rename(result, meta)

    def join_values(self, families: tuple[str, ...], labels: tuple[str, ...]) -> Labels:
        """``__<label>`` pairs from the first of ``families`` present, each only if unanimous.

        The values come from the payload (the L3 backend SGLang was started with, say), never
        from the rules: a label the family lacks, or on which its series disagree, is left out.
        """
        for name in families:
            family = self.peek(self.present.get(name))
            if family is None:
                continue
            pairs = []
            for label in labels:
                values = {dict(s.labels).get(label) for s in family.samples}
                if len(values) == 1 and None not in values:
                    pairs.append((f"__{label}", str(values.pop())))
            return tuple(pairs)
        return ()

    def served_names(self, meta: FamilyMeta) -> frozenset[str]:
        """``family_names.served_names``, remembered in the caller's caches when there are any."""
        if self.caches is None:
            return served_names(meta.name, meta.type)
        key = (meta.name, meta.type)
        names = self.caches.served_names.get(key)
        if names is None:
            names = served_names(meta.name, meta.type)
            self.caches.served_names.put(key, names, len(meta.name) + sum(map(len, names)))
        return names

    def finish(self, plan: TranslationPlan | None) -> dict[str, RowStatus]:
        """Escaped copies, the clash check and every row's status; the plan's if it has them.

        They depend only on the names and types served (and the engine's), so a plan keeps
        them for the next payload whose families after synthesis have the same metas.
        """
        key = [family.meta for family in self.out]
        ending = plan.ending_for(key) if plan is not None else None
        if ending is None:
            escaped = escaped_targets(key, self.rules.naming)
            self.out.extend(copies_of(self.out, escaped))
            clashes = self.find_clashes()
            self.drop(clashes)
            served = {family.meta.name for family in self.out}
            ending = Ending(
                key, escaped, clashes, default_rows(self.rules.rows, self.present, served)
            )
            if plan is not None:
                plan.ending = ending
                plan.dirty = True
        else:
            self.out.extend(copies_of(self.out, ending.escaped))
            self.drop(ending.clashes)
        rows = dict(ending.rows)
        for name, status in self.rows.items():
            if name in rows:
                rows[name] = status
        return rows

    def find_clashes(self) -> tuple[Clash, ...]:
        """Serve no two families that share a wire name, however the rules and upstreams met.

        The reader keeps one upstream's families apart in their own format, and ``config
        check`` the rules' outputs; this catches what neither can see: a rule's output against a
        family some engine release adds (a gauge ``x_count`` beside a histogram ``x``), two
        upstreams' families, and pairs that clash only in the other format (a text ``h_created``
        untyped family beside a histogram ``h``, which OpenMetrics makes ``h``'s own). A
        response may be in either format, so a name taken in either is taken. The engine's
        families claim their names first, so a rule's output yields to them.
        """
        metas = [family.meta for family in self.out]
        return find_clashes(metas, self.present, self.served_names)

    def drop(self, clashes: Sequence[Clash]) -> None:
        """Leave the clashing families out, each reported, counted and its row missing."""
        if not clashes:
            return
        out = self.out
        for clash in clashes:
            message = clash.message
            self.problems.append(ExpositionError(f"{message}; not served", family=clash.name))
            self.stats.dropped["name_clash"] += sample_count(out[clash.position])
            self.rows[clash.name] = RowStatus(RowState.MISSING, message)
        gone = {id(out[clash.position]) for clash in clashes}
        self.out = [family for family in out if id(family) not in gone]


def _synthesize(
    run: _Run,
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
    relabel_cache: RelabelCache | None = None,
) -> Translation:
    """Apply the rules to one upstream payload's families; ``state`` is the previous call's.

    ``caches`` (the caller's, as for the reader) remembers the lines of the families the rules
    parse, for the next payload, and the scrape plan of each layout (``translation.plan``:
    what the layout alone decides, reused while the next payload's compares equal);
    ``relabel_cache`` what relabel steps made of each label set.
    """
    plan = plan_for(upstream, rules, caches)
    if plan is None:
        upstream, restored = restore_escaped(upstream, rules.naming)
    else:
        upstream, restored = apply_renames(upstream, plan.renames)
    run = _Run(rules, upstream, caches, relabel_cache)
    run.stats.names_restored = restored
    run.families(upstream, plan.ruled if plan is not None else None)
    synthesized = _synthesize(run, state or SynthState(), now, server_info, plan)
    new_state, zeroed, warm_series = synthesized
    rows = run.finish(plan)
    if plan is not None and caches is not None and plan.changed():
        store_plan(plan, caches)
    run.stats.families_out = len(run.out)
    run.stats.samples_out = sum(map(sample_count, run.out))
    return Translation(
        tuple(run.out), run.stats, tuple(run.problems), rows, new_state, zeroed, warm_series
    )
