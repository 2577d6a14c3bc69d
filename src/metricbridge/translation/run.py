"""One translation run: every upstream family through its rules, then the names it may serve.

``translate`` makes one ``TranslationRun`` per call: it applies each family's rules in order
(rename, scale, select, relabel), keeps what was served, dropped and why, and finishes with the
escaped-prefix copies and the check that no two served families share a wire name. Synthesis
(derive, warm-zero, idle) reads and extends what it serves; that is ``translate``'s. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from metricbridge.errors import ExpositionError, ScaleError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import AnyFamily, Family, FamilyMeta, Format, Labels, RawFamily
from metricbridge.model.family_names import wire_names
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import (
    CompiledRule,
    CompiledRules,
    Rename,
    Scale,
    Select,
)
from metricbridge.translation.naming import copies_of, escaped_targets
from metricbridge.translation.ops import rename, scale, select
from metricbridge.translation.plan import (
    Clash,
    Ending,
    TranslationPlan,
    default_rows,
    find_clashes,
)
from metricbridge.translation.relabel import relabel
from metricbridge.translation.relabel_join import relabel_joined
from metricbridge.translation.rows import RowState, RowStatus

__all__ = ["TranslationRun", "TranslationStats", "sample_count"]


@dataclass(slots=True)
class TranslationStats:
    """Counts for self-metrics; ``dropped`` maps a reason to samples not served."""

    families_in: int = 0
    samples_in: int = 0
    families_out: int = 0
    samples_out: int = 0
    names_restored: int = 0  # upstream families renamed from the escaped prefix spelling
    dropped: Counter[str] = field(default_factory=Counter)


def sample_count(family: AnyFamily) -> int:
    """Number of sample lines in a family."""
    return family.sample_count if isinstance(family, RawFamily) else len(family.samples)


class TranslationRun:
    """One translation: the per-call accumulators, and each upstream family through its rules."""

    def __init__(
        self,
        rules: CompiledRules,
        upstream: Sequence[AnyFamily],
        caches: CodecCaches | None,
        remembered: TranslationCaches | None = None,
    ) -> None:
        self.rules = rules
        self.caches = caches
        self.remembered = remembered
        self.relabel_cache = remembered.relabel if remembered is not None else None
        # meta.name, not the name property: a Python call per family
        self.present = {family.meta.name: family for family in upstream}
        self.stats = TranslationStats(families_in=len(upstream))
        self.problems: list[ExpositionError] = []
        self.rows: dict[str, RowStatus] = {}
        self.out: list[AnyFamily] = []
        self.parse_cache: dict[str, Family | None] = {}

    def parsed(self, family: AnyFamily) -> Family | None:
        """A family a rule transforms, parsed once per run; a malformed one is counted, None."""
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
        """One upstream family: its in-place rules, then what the other rules make of it."""
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
        """A rule's new family from ``source``, unless the engine serves the name itself."""
        if compiled.name in self.present:
            # A patched engine already serves the contract name: its series win (no duplicates).
            return None
        return self.apply(compiled, source)

    def apply(self, compiled: CompiledRule, source: AnyFamily) -> AnyFamily | None:
        """One rule on one family; None when nothing of it is served (its row says why)."""
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
                pairs = self.join_values(*transform.join)
                result, dropped, duplicates = relabel_joined(
                    parsed, transform.steps, pairs, self.relabel_cache
                )
            else:
                result, dropped, duplicates = relabel(parsed, transform.steps, self.relabel_cache)
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
        """The names a family takes in text, remembered in translation's caches if any.

        Text, where every snapshot can be answered: a name shared only in OpenMetrics makes
        the answer text (``exposition.openmetrics_fit``), not a family dropped.
        """
        if self.remembered is None:
            return wire_names(meta.name, meta.type, Format.TEXT)
        key = (meta.name, meta.type)
        cache = self.remembered.served_names
        names = cache.get(key)
        if names is None:
            names = wire_names(meta.name, meta.type, Format.TEXT)
            cache.put(key, names, len(meta.name) + sum(map(len, names)))
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
