"""What changed between two releases' catalogues.

Families added, removed, retyped, relabelled, re-documented, and the likely renames among the
removed and added ones.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .model import Catalogue, EngineFamily

RENAME_SIMILARITY = 0.6


@dataclass(frozen=True, slots=True)
class Retyped:
    """A family whose type changed (a gauge that became a counter...)."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class LabelsChanged:
    """A family whose label names changed (required or conditional ones)."""

    name: str
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HelpChanged:
    """A family whose HELP text changed."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Rename:
    """A family that likely was renamed.

    ``old`` disappeared as ``new`` appeared, both of one type and label set, with similar names
    (``similarity`` is difflib's ratio, 0-1).
    """

    old: str
    new: str
    similarity: float


@dataclass(frozen=True, slots=True)
class CatalogueDiff:
    """Differences from ``old_version`` to ``new_version``.

    Renamed families are listed under ``renames`` only, not also as added and removed.
    """

    old_version: str
    new_version: str
    added: tuple[EngineFamily, ...]
    removed: tuple[EngineFamily, ...]
    retyped: tuple[Retyped, ...]
    labels_changed: tuple[LabelsChanged, ...]
    help_changed: tuple[HelpChanged, ...]
    renames: tuple[Rename, ...]

    @property
    def empty(self) -> bool:
        """True when the two releases define the same families alike."""
        parts = (self.added, self.removed, self.retyped, self.labels_changed, self.help_changed)
        return not any(parts) and not self.renames


def _short(name: str) -> str:
    """The name without its ``engine:`` prefix, so the prefix does not inflate similarity."""
    return name.split(":", 1)[-1]


def similarity(old: str, new: str) -> float:
    """Difflib's ratio between two family names, prefix left out."""
    return difflib.SequenceMatcher(None, _short(old), _short(new)).ratio()


def _renames(
    removed: list[EngineFamily], added: list[EngineFamily], threshold: float
) -> tuple[Rename, ...]:
    """Pairs of same type and labels, most similar first, each family in one pair at most."""
    candidates = sorted(
        (
            (similarity(old.name, new.name), old.name, new.name)
            for old in removed
            for new in added
            if old.type == new.type and set(old.all_label_names) == set(new.all_label_names)
        ),
        key=lambda c: (-c[0], c[1], c[2]),
    )
    used: set[str] = set()
    found: list[Rename] = []
    for score, old_name, new_name in candidates:
        if score >= threshold and old_name not in used and new_name not in used:
            used.update((old_name, new_name))
            found.append(Rename(old_name, new_name, round(score, 3)))
    return tuple(sorted(found, key=lambda r: r.old))


def _changes(
    old: Catalogue, new: Catalogue
) -> tuple[list[Retyped], list[LabelsChanged], list[HelpChanged]]:
    retyped: list[Retyped] = []
    relabelled: list[LabelsChanged] = []
    documented: list[HelpChanged] = []
    for before in old.families:
        after = new.get(before.name)
        if after is None:
            continue
        if before.type != after.type:
            retyped.append(Retyped(before.name, before.type, after.type))
        gained = tuple(n for n in after.all_label_names if n not in before.all_label_names)
        lost = tuple(n for n in before.all_label_names if n not in after.all_label_names)
        if gained or lost:
            relabelled.append(LabelsChanged(before.name, gained, lost))
        if before.help != after.help:
            documented.append(HelpChanged(before.name, before.help, after.help))
    return retyped, relabelled, documented


def diff_catalogues(
    old: Catalogue, new: Catalogue, rename_threshold: float = RENAME_SIMILARITY
) -> CatalogueDiff:
    """What changed from ``old`` to ``new``."""
    removed = [f for f in old.families if f.name not in new.names]
    added = [f for f in new.families if f.name not in old.names]
    renames = _renames(removed, added, rename_threshold)
    renamed = {r.old for r in renames} | {r.new for r in renames}
    retyped, relabelled, documented = _changes(old, new)
    return CatalogueDiff(
        old_version=old.version,
        new_version=new.version,
        added=tuple(f for f in added if f.name not in renamed),
        removed=tuple(f for f in removed if f.name not in renamed),
        retyped=tuple(retyped),
        labels_changed=tuple(relabelled),
        help_changed=tuple(documented),
        renames=renames,
    )
