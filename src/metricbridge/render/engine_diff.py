"""``diff --engine-from A --engine-to B`` output: two releases compared, text, JSON or Markdown."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any

from metricbridge.analysis.engine_diff import EngineDiff, QueryBreak
from metricbridge.render.table import markdown_table, markdown_text, one_line, text_table

__all__ = ["engine_diff_summary", "render_engine_diff"]

_Table = Callable[[Sequence[str], Sequence[Sequence[str]]], list[str]]


def render_engine_diff(diff: EngineDiff, fmt: str) -> str:
    """The diff in ``fmt`` (text, json or markdown), ending with a newline."""
    if fmt == "json":
        return json.dumps(_diff_dict(diff), indent=2) + "\n"
    markdown = fmt == "markdown"
    lines = [f"### metricbridge diff: {_releases(diff)}", ""] if markdown else []
    for title, body in _sections(diff, markdown=markdown):
        if body:
            lines += [f"**{title}**" if markdown else f"{title}:", *body, ""]
    return "\n".join([*lines, engine_diff_summary(diff)]) + "\n"


def engine_diff_summary(diff: EngineDiff) -> str:
    """One line: breaking or not, the catalogue's counts, and the queries' breaks."""
    changes = diff.changes
    verdict = "BREAKING" if diff.breaking else "not breaking"
    line = (
        f"diff {verdict}: {_releases(diff)}: {len(changes.added)} families added, "
        f"{len(changes.removed)} removed, {len(changes.renames)} renamed, "
        f"{len(changes.retyped)} changed type, {len(changes.labels_changed)} changed labels, "
        f"{len(changes.help_changed)} changed HELP"
    )
    if diff.files:
        files = f"{len(diff.files)} file{'s' if len(diff.files) != 1 else ''}"
        bridged = sum(1 for b in diff.breaks if b.bridge is not None)
        line += (
            f"; {files}, {diff.queries} queries checked: {len(diff.failing)} break(s), "
            f"{bridged} bridged by a contract rule (not failing)"
        )
    return line


def _releases(diff: EngineDiff) -> str:
    engine = "SGLang" if diff.engine == "sglang" else diff.engine
    return f"{engine} {diff.changes.old_version} -> {diff.changes.new_version}"


def _sections(diff: EngineDiff, *, markdown: bool) -> list[tuple[str, list[str]]]:
    table = markdown_table if markdown else text_table
    bullet = "- " if markdown else "  "
    indent = "" if markdown else "  "
    changes = diff.changes
    code = _code if markdown else str
    prose = markdown_text if markdown else one_line
    renames = [(code(r.old), code(r.new), f"{r.similarity:g}") for r in changes.renames]
    types = [(code(c.name), f"{c.old} -> {c.new}") for c in changes.retyped]
    labels = [
        (code(c.name), " ".join([*(f"+{n}" for n in c.added), *(f"-{n}" for n in c.removed)]))
        for c in changes.labels_changed
    ]
    helps = [(code(c.name), prose(c.old), prose(c.new)) for c in changes.help_changed]
    return [
        (
            f"Families added ({len(changes.added)})",
            [bullet + code(f.name) for f in changes.added],
        ),
        (
            f"Families removed ({len(changes.removed)})",
            [bullet + code(f.name) for f in changes.removed],
        ),
        ("Likely renames", _tabled(table, ("OLD", "NEW", "SIMILARITY"), renames, indent)),
        ("Type changes", _tabled(table, ("FAMILY", "TYPE"), types, indent)),
        ("Label changes", _tabled(table, ("FAMILY", "LABELS"), labels, indent)),
        ("HELP changes", _tabled(table, ("FAMILY", "OLD HELP", "NEW HELP"), helps, indent)),
        ("Queries that break", _breaks(diff.breaks, markdown=markdown)),
    ]


def _code(text: str) -> str:
    return f"`{text}`"


def _tabled(
    table: _Table, header: Sequence[str], rows: Sequence[Sequence[str]], indent: str
) -> list[str]:
    return [indent + line for line in table(header, rows)] if rows else []


def break_lines(breaks: Sequence[QueryBreak]) -> list[str]:
    """Breaks grouped by query: the query's place and expression once, then each break."""
    lines: list[str] = []
    for (file, location, line, expr), group in groupby(
        breaks, key=lambda b: (b.file, b.location, b.line, b.expr)
    ):
        where = file if line is None else f"{file}:{line}"
        lines += [f"{where}: {location}", f"    {one_line(expr)}"]
        for item in group:
            level = "error" if item.failing else "note"
            lines.append(f"  {level}: {item.kind}: {item.subject}: {item.reason}")
            if item.bridge is not None:
                lines.append(f"    bridged by the contract rule {item.bridge}")
            elif item.alternative is not None:
                lines.append(f"    hint: the bridge serves the data as {item.alternative}")
    return lines


def _breaks(breaks: Sequence[QueryBreak], *, markdown: bool) -> list[str]:
    lines = break_lines(breaks)
    if markdown:
        return ["```", *lines, "```"] if lines else []
    return [f"  {line}" for line in lines]


def _bridge_dict(item: QueryBreak, which: str) -> dict[str, Any] | None:
    bridge = item.bridge if which == "bridge" else item.alternative
    if bridge is None:
        return None
    return {"rule": bridge.rule, "disposition": bridge.disposition, "reads": list(bridge.reads)}


def _break_dict(item: QueryBreak) -> dict[str, Any]:
    return {
        "file": item.file,
        "location": item.location,
        "line": item.line,
        "expr": item.expr,
        "kind": item.kind.value,
        "subject": item.subject,
        "family": item.family,
        "reason": item.reason,
        "bridge": _bridge_dict(item, "bridge"),
        "alternative": _bridge_dict(item, "alternative"),
        "failing": item.failing,
        "excused": item.excused,
    }


def _diff_dict(diff: EngineDiff) -> dict[str, Any]:
    changes = diff.changes
    return {
        "breaking": diff.breaking,
        "engine": diff.engine,
        "from": changes.old_version,
        "to": changes.new_version,
        "families_added": [f.name for f in changes.added],
        "families_removed": [f.name for f in changes.removed],
        "renames": [
            {"old": r.old, "new": r.new, "similarity": r.similarity} for r in changes.renames
        ],
        "type_changes": [{"family": c.name, "old": c.old, "new": c.new} for c in changes.retyped],
        "label_changes": [
            {"family": c.name, "added": list(c.added), "removed": list(c.removed)}
            for c in changes.labels_changed
        ],
        "help_changes": [
            {"family": c.name, "old": c.old, "new": c.new} for c in changes.help_changed
        ],
        "files": list(diff.files),
        "queries": diff.queries,
        "breaks": [_break_dict(b) for b in diff.breaks],
        "not_checked": [
            {
                "file": p.file,
                "location": p.location,
                "line": p.line,
                "kind": p.kind.value,
                "message": p.message,
                "expr": p.expr,
            }
            for p in diff.not_checked
        ],
    }
