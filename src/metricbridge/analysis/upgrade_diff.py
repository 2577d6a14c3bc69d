"""What an engine upgrade changes for dashboards: two served catalogs and contract states compared.

Both payloads are translated first, so the diff is of what the bridge serves, not of what the
engine emits. A break is a contract row that was served and no longer is, or a dashboard
finding the new payload has and the old did not (sgl-project/sglang#19009 turned the KV-transfer
gauges into histograms: a panel reading the gauge breaks although the family still exists).
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metricbridge.analysis.catalog import Catalog
from metricbridge.analysis.findings import CheckReport, Finding
from metricbridge.model.family import MetricType
from metricbridge.translation.translate import RowState, RowStatus

__all__ = ["LabelChange", "RowFlip", "TypeChange", "UpgradeDiff", "diff_upgrade"]

# Served, whatever the way: a warm-zero series is served until the engine has the real one.
_SERVED = (RowState.NATIVE, RowState.TRANSLATED, RowState.SYNTHESIZED)


@dataclass(frozen=True, slots=True)
class TypeChange:
    """A family served under both payloads with a different type."""

    family: str
    old: MetricType
    new: MetricType


@dataclass(frozen=True, slots=True)
class LabelChange:
    """Label names a family gained or lost."""

    family: str
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RowFlip:
    """A contract row that went from served to missing, or back."""

    row: str
    old: RowStatus
    new: RowStatus

    @property
    def breaks(self) -> bool:
        """Whether the row was served and no longer is."""
        return self.old.state in _SERVED


@dataclass(frozen=True, slots=True)
class UpgradeDiff:
    """Everything that changed; ``breaks`` and ``fixes`` are dashboard findings."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    type_changes: tuple[TypeChange, ...]
    label_changes: tuple[LabelChange, ...]
    row_flips: tuple[RowFlip, ...]
    breaks: tuple[Finding, ...] = ()
    fixes: tuple[Finding, ...] = ()

    @property
    def breaking(self) -> bool:
        """Whether the upgrade loses a served contract row or breaks a given dashboard."""
        return bool(self.breaks) or any(flip.breaks for flip in self.row_flips)


def diff_upgrade(
    old: Catalog,
    new: Catalog,
    old_rows: Mapping[str, RowStatus],
    new_rows: Mapping[str, RowStatus],
    checks: tuple[CheckReport, CheckReport] | None = None,
) -> UpgradeDiff:
    """Compare what the bridge serves before and after; ``checks`` are the dashboards' reports."""
    both = [name for name in old.families if name in new.families]
    type_changes = tuple(
        TypeChange(name, old.families[name].type, new.families[name].type)
        for name in both
        if old.families[name].type is not new.families[name].type
    )
    label_changes = []
    for name in both:
        before, after = old.families[name].label_names, new.families[name].label_names
        if before != after:
            label_changes.append(
                LabelChange(name, tuple(sorted(after - before)), tuple(sorted(before - after)))
            )
    flips = tuple(
        RowFlip(row, old_rows[row], status)
        for row, status in new_rows.items()
        if row in old_rows and (old_rows[row].state in _SERVED) != (status.state in _SERVED)
    )
    breaks: tuple[Finding, ...] = ()
    fixes: tuple[Finding, ...] = ()
    if checks is not None:
        before_keys = {f.key for f in checks[0].failing}
        after_keys = {f.key for f in checks[1].failing}
        breaks = tuple(f for f in checks[1].failing if f.key not in before_keys)
        fixes = tuple(f for f in checks[0].failing if f.key not in after_keys)
    return UpgradeDiff(
        added=tuple(sorted(set(new.families) - set(old.families))),
        removed=tuple(sorted(set(old.families) - set(new.families))),
        type_changes=type_changes,
        label_changes=tuple(label_changes),
        row_flips=flips,
        breaks=breaks,
        fixes=fixes,
    )
