"""Relabel steps that read payload-wide ``__`` labels (a rule's ``join``), in one pass.

A rule with ``join`` reads label values from other families (the L3 backend an engine names in
its storage families, as ``__storage_backend``). What it serves is defined as three steps:
every series with those pairs added and its labels sorted (``relabel.joined``), the steps
(``relabel.relabel``), then every ``__`` label left out (``relabel.without_hidden_labels``).
Run that way, a family of 100,000 series is rebuilt three times over. ``relabel_joined`` gives
the same family in one pass: the pairs go into each series' dict (they are the same for every
series), a series the steps leave alone is served with its own labels sorted, and only the
rewritten ones are built with the pairs and then without them. That holds while no series has
a ``__`` label of its own and no step is a ``labelmap`` (which reads the labels in their
order); otherwise the three steps run as defined.
"""

from __future__ import annotations

from collections.abc import Iterator

from metricbridge.config.schema import RelabelAction
from metricbridge.model.family import Family, Labels, Sample, series_key
from metricbridge.translation.compiled import CompiledRelabel
from metricbridge.translation.relabel import (
    Projector,
    has_hidden_labels,
    joined,
    outcome_for,
    relabel,
    with_labels,
    without_hidden_labels,
)
from metricbridge.translation.relabel_cache import MISS, Miss, Projection, RelabelCache, Relabelled

# A kept series: the sample as it came, whether the steps rewrote its labels, and its labels
# sorted: its own when left alone, else as the steps left them, pairs included.
_Kept = tuple[Sample, bool, Labels]


def relabel_joined(
    family: Family,
    steps: tuple[CompiledRelabel, ...],
    pairs: Labels,
    cache: RelabelCache | None = None,
) -> tuple[Family, int, int]:
    """``relabel`` of ``family`` with ``pairs`` joined, without ``__`` labels; as ``relabel``."""
    if (
        not pairs
        or not all(name.startswith("__") for name, _ in pairs)
        or any(step.action is RelabelAction.LABELMAP for step in steps)
        or has_hidden_labels(family)
    ):
        result, dropped, duplicates = relabel(joined(family, pairs), steps, cache)
        return without_hidden_labels(result), dropped, duplicates
    project = Projector(steps).project
    outcomes: dict[Projection, Relabelled] = {}
    kept: list[_Kept] = []
    dropped = 0
    rewritten = False
    for sample in family.samples:
        labels = sample.labels
        current = dict(labels)
        current.update(pairs)  # the joined series' labels, as a dict (no name is in both)
        key = project(labels, current)
        patch = outcomes.get(key, MISS)
        if isinstance(patch, Miss):
            patch = outcomes[key] = outcome_for(tuple(current.items()), key, steps, cache)
        if patch is None:
            dropped += 1
        elif patch and any(current.get(name) != value for name, value in patch):
            for name, value in patch:
                if value is None:
                    current.pop(name, None)
                else:
                    current[name] = value
            kept.append((sample, True, tuple(sorted(current.items()))))
            rewritten = True
        else:
            kept.append((sample, False, tuple(sorted(labels))))
    out, duplicates = _resolved(kept, pairs, any_rewritten=rewritten)
    return Family(family.meta, tuple(out)), dropped, duplicates


def _served(kept: list[_Kept]) -> Iterator[Sample]:
    for sample, rewritten, labels in kept:
        if not rewritten:
            yield sample if labels == sample.labels else with_labels(sample, labels)
        else:
            yield with_labels(sample, tuple(p for p in labels if not p[0].startswith("__")))


def _with_pairs(sample: Sample, pairs: Labels) -> Labels:
    """The series' labels as the joined family holds them: with the pairs, sorted."""
    return tuple(sorted((*sample.labels, *pairs)))


def _owners(kept: list[_Kept], pairs: Labels) -> dict[Labels, Labels]:
    """Which joined series each resulting series comes from: the engine's own first."""
    owner: dict[Labels, Labels] = {}
    for sample, rewritten, _ in kept:
        if not rewritten:
            own = series_key(_with_pairs(sample, pairs))
            owner.setdefault(own, own)
    for sample, rewritten, after in kept:
        if rewritten:
            owner.setdefault(series_key(after), series_key(_with_pairs(sample, pairs)))
    return owner


def _resolved(kept: list[_Kept], pairs: Labels, *, any_rewritten: bool) -> tuple[list[Sample], int]:
    """``relabel``'s duplicate rule on the joined series, then what is served of each.

    With no series rewritten, the pairs are on every series alike, so two series are one
    exactly when their own sorted labels are: one set says whether any are.
    """
    if not any_rewritten:
        keys = {(sample.name, labels) for sample, _, labels in kept}
        if len(keys) == len(kept):
            return list(_served(kept)), 0
    owner = _owners(kept, pairs) if any_rewritten else {}
    unique: list[_Kept] = []
    seen: set[tuple[str, Labels]] = set()
    duplicates = 0
    for entry in kept:
        sample, rewritten, after = entry
        before = _with_pairs(sample, pairs)
        if rewritten and owner[series_key(after)] != series_key(before):
            duplicates += 1
            continue
        key = (sample.name, after if rewritten else before)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        unique.append(entry)
    return list(_served(unique)), duplicates
