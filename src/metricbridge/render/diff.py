"""``metricbridge diff`` output: what an engine upgrade changes, in text, JSON or Markdown."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from metricbridge.analysis.findings import Finding
from metricbridge.analysis.upgrade_diff import RowFlip, UpgradeDiff
from metricbridge.render.findings import finding_dict, finding_lines
from metricbridge.render.table import markdown_table, one_line, text_table
from metricbridge.translation.translate import RowStatus

__all__ = ["diff_summary", "render_diff"]

_Table = Callable[[Sequence[str], Sequence[Sequence[str]]], list[str]]


def render_diff(diff: UpgradeDiff, fmt: str) -> str:
    """The diff in ``fmt`` (text, json or markdown), ending with a newline."""
    if fmt == "json":
        return json.dumps(_diff_dict(diff), indent=2) + "\n"
    markdown = fmt == "markdown"
    lines: list[str] = ["### metricbridge diff", ""] if markdown else []
    for title, body in _sections(diff, markdown=markdown):
        if body:
            lines += [f"**{title}**" if markdown else f"{title}:", *body, ""]
    return "\n".join([*lines, diff_summary(diff)]) + "\n"


def diff_summary(diff: UpgradeDiff) -> str:
    """One line: breaking or not, and the counts."""
    lost = sum(1 for flip in diff.row_flips if flip.breaks)
    verdict = "BREAKING" if diff.breaking else "not breaking"
    return (
        f"diff {verdict}: {len(diff.added)} families added, {len(diff.removed)} removed, "
        f"{len(diff.type_changes)} changed type, {len(diff.label_changes)} changed labels; "
        f"{lost} contract row(s) lost, {len(diff.row_flips) - lost} gained; "
        f"{len(diff.breaks)} dashboard finding(s) new, {len(diff.fixes)} fixed"
    )


def _sections(diff: UpgradeDiff, *, markdown: bool) -> list[tuple[str, list[str]]]:
    table = markdown_table if markdown else text_table
    bullet = "- " if markdown else "  "
    types = [(c.family, f"{c.old} -> {c.new}") for c in diff.type_changes]
    labels = [(c.family, _label_delta(c.added, c.removed)) for c in diff.label_changes]
    flips = [
        (f.row, _state(f.old), _state(f.new), "breaks" if f.breaks else "fixed", _why(f))
        for f in diff.row_flips
    ]
    indent = "" if markdown else "  "
    return [
        (f"Families added ({len(diff.added)})", [bullet + name for name in diff.added]),
        (f"Families removed ({len(diff.removed)})", [bullet + name for name in diff.removed]),
        ("Type changes", _tabled(table, ("FAMILY", "TYPE"), types, indent)),
        ("Label changes", _tabled(table, ("FAMILY", "LABELS"), labels, indent)),
        (
            "Contract rows served <-> missing",
            _tabled(table, ("ROW", "OLD", "NEW", "EFFECT", "WHY"), flips, indent),
        ),
        ("Dashboard findings new with the new payload", _findings(diff.breaks, markdown)),
        ("Dashboard findings fixed by the new payload", _findings(diff.fixes, markdown)),
    ]


def _tabled(
    table: _Table, header: Sequence[str], rows: Sequence[Sequence[str]], indent: str
) -> list[str]:
    return [indent + line for line in table(header, rows)] if rows else []


def _findings(findings: Sequence[Finding], markdown: bool) -> list[str]:
    lines = finding_lines(findings)
    return ["```", *lines, "```"] if markdown and lines else [f"  {line}" for line in lines]


def _label_delta(added: tuple[str, ...], removed: tuple[str, ...]) -> str:
    return " ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in removed)])


def _state(status: RowStatus) -> str:
    return status.state.value


def _why(flip: RowFlip) -> str:
    return one_line(flip.new.reason if flip.breaks else flip.old.reason)


def _status_dict(status: RowStatus) -> dict[str, str]:
    return {"state": status.state.value, "reason": status.reason}


def _diff_dict(diff: UpgradeDiff) -> dict[str, Any]:
    return {
        "breaking": diff.breaking,
        "families_added": list(diff.added),
        "families_removed": list(diff.removed),
        "type_changes": [
            {"family": c.family, "old": c.old.value, "new": c.new.value} for c in diff.type_changes
        ],
        "label_changes": [
            {"family": c.family, "added": list(c.added), "removed": list(c.removed)}
            for c in diff.label_changes
        ],
        "contract_rows": [
            {
                "row": f.row,
                "old": _status_dict(f.old),
                "new": _status_dict(f.new),
                "breaks": f.breaks,
            }
            for f in diff.row_flips
        ],
        "dashboard_breaks": [finding_dict(f) for f in diff.breaks],
        "dashboard_fixes": [finding_dict(f) for f in diff.fixes],
    }
