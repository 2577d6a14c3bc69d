"""Relabel steps on a family's series, run once per distinct thing the steps read.

Relabel steps read a series' labels and nothing else, and of those labels only some: the
``source_labels`` of each step, and, for ``labeldrop``/``labelkeep``, the label names. What
the steps do to a series (drop it, or set and remove some labels) is a function of that
projection alone, so it is worked out once per distinct projection and applied to every series
that shares it. A family of 100,000 series told apart by a ``tp_rank`` no step reads runs the
steps once, not 100,000 times: each series then costs a dict and a tuple built in C and a
lookup, and one whose labels the steps leave alone keeps its ``Sample`` as it came.

Why the projection is enough: the steps only ever write (set a label, remove one) and decide
(keep, drop); each step's decision and writes depend on the current values of its source
labels (and the current label names), and a current value is either the series' own, which
the projection holds, or an earlier write, itself decided from the projection. So the writes
are the same for every series with that projection, and the last write per label is the net
change (``Patch``). ``labelmap`` copies the value of every label whose name matches, so a rule
with one projects each series onto all of its labels (no sharing, but the same result).
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

from metricbridge.config.schema import RelabelAction
from metricbridge.config.templates import expand
from metricbridge.model.family import SHAPE_LABELS, Family, Labels, Sample, series_key
from metricbridge.model.names import LABEL_NAME
from metricbridge.translation.compiled import CompiledRelabel
from metricbridge.translation.relabel_cache import (
    MISS,
    Miss,
    Patch,
    Projection,
    RelabelCache,
    Relabelled,
)

_NAME_ACTIONS = frozenset((RelabelAction.LABELDROP, RelabelAction.LABELKEEP))
_LABELS = attrgetter("labels")
_NAME = attrgetter("name")


def _relabel_one(
    labels: dict[str, str], step: CompiledRelabel, writes: dict[str, str | None]
) -> bool:
    """Apply one step to ``labels`` in place, noting each write; False: the series is dropped.

    ``writes`` gets every label the step sets (its value) or removes (None), the last write
    winning: what the steps change, for every series that reads the same (module docstring).
    """
    action = step.action
    if action in (RelabelAction.LABELDROP, RelabelAction.LABELKEEP, RelabelAction.LABELMAP):
        for key in [k for k in labels if k not in SHAPE_LABELS]:
            hit = step.regex.fullmatch(key)
            if (action is RelabelAction.LABELDROP and hit) or (
                action is RelabelAction.LABELKEEP and not hit
            ):
                del labels[key]
                writes[key] = None
            elif action is RelabelAction.LABELMAP and hit:
                target = expand(step.replacement, hit)
                labels[target] = writes[target] = labels[key]
        return True
    joined = step.separator.join(labels.get(name, "") for name in step.source_labels)
    hit = step.regex.fullmatch(joined)
    if action is RelabelAction.KEEP:
        return hit is not None
    if action is RelabelAction.DROP:
        return hit is None
    if hit is not None and step.target_label is not None:
        target = expand(step.target_label, hit)
        if not LABEL_NAME.fullmatch(target) or target in SHAPE_LABELS or target.startswith("__"):
            return True  # Prometheus skips a target that expands to an unusable name
        value = expand(step.replacement, hit)
        if value:
            labels[target] = writes[target] = value
        else:
            labels.pop(target, None)  # Prometheus: an empty value removes the label
            writes[target] = None
    return True


def patch_for(labels: Labels, steps: tuple[CompiledRelabel, ...]) -> Relabelled:
    """What ``steps`` do to a series with these labels: None (dropped) or the net writes."""
    writes: dict[str, str | None] = {}
    current = dict(labels)
    if not all(_relabel_one(current, step, writes) for step in steps):
        return None
    return tuple(writes.items())


class Projector:
    """What of a series' labels ``steps`` read, as one tuple: the key of their outcome."""

    __slots__ = ("defaults", "names", "whole", "with_names")

    def __init__(self, steps: tuple[CompiledRelabel, ...]) -> None:
        sources = dict.fromkeys(name for step in steps for name in step.source_labels)
        self.names = tuple(sources)
        self.defaults = ("",) * len(self.names)  # an absent label reads as "", as Prometheus
        actions = {step.action for step in steps}
        self.whole = RelabelAction.LABELMAP in actions
        self.with_names = not self.whole and not actions.isdisjoint(_NAME_ACTIONS)

    def project(self, labels: Labels, current: dict[str, str]) -> Projection:
        """``current`` is ``dict(labels)``; a fixed number of values, then names or pairs."""
        values = tuple(map(current.get, self.names, self.defaults))
        if self.whole:
            return values + tuple(chain.from_iterable(labels))
        if self.with_names:
            return values + tuple(current)
        return values


def with_labels(sample: Sample, labels: Labels) -> Sample:
    """The sample with other labels (Sample is a frozen dataclass: a new one, the rest kept)."""
    return Sample(
        sample.name, labels, sample.value, sample.raw_value, sample.timestamp, sample.exemplar
    )


def _applied(sample: Sample, current: dict[str, str], patch: Patch) -> tuple[Sample, bool]:
    """The sample with ``patch`` applied to ``current`` (its labels), and whether they changed."""
    if not any(current.get(key) != value for key, value in patch):
        return sample, False
    for key, value in patch:
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    return with_labels(sample, tuple(sorted(current.items()))), True


def relabel(
    family: Family, steps: tuple[CompiledRelabel, ...], cache: RelabelCache | None = None
) -> tuple[Family, int, int]:
    """Apply relabel steps per series; return the family, series dropped and duplicates removed.

    Two series the steps make one are resolved whole, never sample by sample (a histogram's
    buckets from two series would not add up). A series the engine serves under the rewritten
    labels already wins, wherever it stands: the engine's own series is the true one (a patched
    engine writing ``cache_source="storage_MooncakeStore"`` itself, say). Otherwise the first
    series rewritten onto those labels is kept. ``cache`` (the caller's) remembers what the
    steps did to each projection, for the next payload: the same result, without the regexes.
    """
    projector = Projector(steps)
    project = projector.project
    outcomes: dict[Projection, Relabelled] = {}
    kept: list[Sample] = []  # as served
    before: dict[int, Labels] = {}  # position in kept -> labels before, for a rewritten series
    dropped = 0
    for sample in family.samples:
        labels = sample.labels
        current = dict(labels)
        key = project(labels, current)
        patch = outcomes.get(key, MISS)
        if isinstance(patch, Miss):
            patch = outcomes[key] = outcome_for(labels, key, steps, cache)
        if patch is None:
            dropped += 1
            continue
        served, rewritten = _applied(sample, current, patch) if patch else (sample, False)
        if rewritten:
            before[len(kept)] = labels
        kept.append(served)
    out, duplicates = _resolved(kept, before)
    return Family(family.meta, tuple(out)), dropped, duplicates


def outcome_for(
    labels: Labels, key: Projection, steps: tuple[CompiledRelabel, ...], cache: RelabelCache | None
) -> Relabelled:
    """The steps' outcome for a projection not met in this family yet: remembered, or run."""
    if cache is None:
        return patch_for(labels, steps)
    held = cache.get(key, steps)
    if not isinstance(held, Miss):
        return held
    outcome = patch_for(labels, steps)
    cache.put(key, steps, outcome)
    return outcome


def _resolved(kept: list[Sample], before: dict[int, Labels]) -> tuple[list[Sample], int]:
    """The kept samples without duplicates: the engine's own series first, then the first one.

    ``before`` holds the labels of the rewritten series as they came. A series the steps left
    alone is its own owner (its key before and after is one), so the owners only need working
    out when some series was rewritten, and with none rewritten a set of every sample's name and
    sorted labels, built in C, shows at once that there is no duplicate to look for.
    """
    if not before:
        keys = set(zip(map(_NAME, kept), map(tuple, map(sorted, map(_LABELS, kept))), strict=True))
        if len(keys) == len(kept):
            return kept, 0
    owner: dict[Labels, Labels] = {}
    for position, sample in enumerate(kept):
        if position not in before:
            own = series_key(sample.labels)
            owner.setdefault(own, own)
    for position, labels in before.items():
        owner.setdefault(series_key(kept[position].labels), series_key(labels))
    out: list[Sample] = []
    seen: set[tuple[str, Labels]] = set()
    duplicates = 0
    for position, sample in enumerate(kept):
        if position in before:
            ordered = sample.labels  # rewritten labels come sorted already
            if owner[series_key(ordered)] != series_key(before[position]):
                duplicates += 1
                continue
        else:
            ordered = tuple(sorted(sample.labels))
        key = (sample.name, ordered)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(sample)
    return out, duplicates


def joined(family: Family, pairs: Labels) -> Family:
    """Every series with ``pairs`` (``__`` labels a relabel's steps read) added, sorted."""
    if not pairs:
        return family
    samples = tuple(
        Sample(
            s.name,
            tuple(sorted((*s.labels, *pairs))),
            s.value,
            s.raw_value,
            s.timestamp,
            s.exemplar,
        )
        for s in family.samples
    )
    return Family(family.meta, samples)


def has_hidden_labels(family: Family) -> bool:
    """Whether any series has a ``__`` label: every label name gathered in C, then a few tested."""
    names = dict(chain.from_iterable(map(_LABELS, family.samples)))
    return any(name.startswith("__") for name in names)


def without_hidden_labels(family: Family) -> Family:
    """Every series without its ``__`` labels: they are for relabel steps, never served."""
    # Most families have no "__" label at all, and then no series needs looking at.
    if not has_hidden_labels(family):
        return family
    samples = []
    for sample in family.samples:
        kept = tuple(p for p in sample.labels if not p[0].startswith("__"))
        if len(kept) == len(sample.labels):
            samples.append(sample)
        else:
            samples.append(
                Sample(
                    sample.name,
                    kept,
                    sample.value,
                    sample.raw_value,
                    sample.timestamp,
                    sample.exemplar,
                )
            )
    return Family(family.meta, tuple(samples))
