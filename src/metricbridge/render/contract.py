"""``metricbridge contract`` output: the coverage table of ``report.contract_report``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from metricbridge.analysis.engine_notes import EngineNote
from metricbridge.config.schema import Disposition
from metricbridge.render.findings import engine_note_dict
from metricbridge.render.table import markdown_table, one_line, text_table
from metricbridge.translation.contract_index import MissingClass
from metricbridge.translation.translate import RowState

__all__ = ["contract_totals", "missing_breakdown", "render_contract"]

_ROW_HEADER = ("FAMILY", "DISPOSITION", "TYPE", "SOURCE", "STATE", "REASON")
_ITEM_HEADER = ("ITEM", "DISPOSITION", "NOTE")
_ENGINE_HEADER = ("ROW", "CLASS", "WHY")
_NOT_SERVED = (RowState.MISSING, RowState.STRUCTURAL)
# A missing row's class, as the demo says it; the order the breakdown lists them in.
_MISSING_WORDS = {
    MissingClass.ENGINE: "need engine instrumentation",
    MissingClass.UPSTREAM: "not seen upstream yet",
    MissingClass.PENDING: "pending a second fetch",
    MissingClass.STRUCTURAL: "structural",
    MissingClass.UNKNOWN: "not contract rows",
}


def render_contract(
    report: Mapping[str, Any], fmt: str, engine: Mapping[str, EngineNote] | None = None
) -> str:
    """The report in ``fmt``: json is the report itself, text and markdown are tables.

    ``engine``: what the engine release says of missing rows (``explain_missing_rows``); JSON
    then has an ``engine`` object, text and Markdown a table of them, when there are some.
    """
    if fmt == "json":
        if engine:
            report = {**report, "engine": _engine_dict(engine)}
        return json.dumps(report, indent=2) + "\n"
    rows = [_row_cells(row) for row in report["rows"]]
    items = [
        (item["item"], item["disposition"], one_line(item["note"] or ""))
        for item in report["items"]
    ]
    table = markdown_table if fmt == "markdown" else text_table
    lines = [f"Contract coverage ({report['config']})", ""]
    if fmt == "markdown":
        lines[0] = f"### {lines[0]}"
    lines += [*table(_ROW_HEADER, rows), ""]
    if items:
        lines += [*table(_ITEM_HEADER, items), ""]
    if engine:
        release = next(iter(engine.values()))
        title = f"Missing rows {_engine_name(release)} {release.release} explains:"
        lines += [f"**{title}**" if fmt == "markdown" else title]
        notes = [(row, note.cls.value, one_line(note.detail)) for row, note in engine.items()]
        lines += [*table(_ENGINE_HEADER, notes), ""]
    lines.append(contract_totals(report))
    return "\n".join(lines) + "\n"


def _engine_name(note: EngineNote) -> str:
    return "SGLang" if note.engine == "sglang" else note.engine


def _engine_dict(engine: Mapping[str, EngineNote]) -> dict[str, Any]:
    first = next(iter(engine.values()))
    return {
        "engine": first.engine,
        "release": first.release,
        "rows": [
            {"row": row, **engine_note_dict(note), "detail": note.detail}
            for row, note in engine.items()
        ],
    }


def contract_totals(report: Mapping[str, Any]) -> str:
    """One line: rows served (by state), missing (engine or not), structural; items."""
    rows: Sequence[Mapping[str, Any]] = report["rows"]
    states = Counter(row["state"] for row in rows)
    served = {state: n for state, n in states.items() if state not in _NOT_SERVED}
    missing = states[RowState.MISSING]
    engine = sum(
        1
        for row in rows
        if row["state"] == RowState.MISSING and row["disposition"] == Disposition.ENGINE
    )
    detail = ", ".join(f"{n} {state}" for state, n in sorted(served.items()))
    line = (
        f"Totals: {len(rows)} rows: {sum(served.values())} served ({detail or 'none'}), "
        f"{missing} missing ({engine} need the engine, {missing - engine} not served from "
        f"this payload), {states[RowState.STRUCTURAL]} structural"
    )
    items = Counter(item["disposition"] for item in report["items"])
    if items:
        counts = ", ".join(f"{count} {name}" for name, count in sorted(items.items()))
        line += f"; {sum(items.values())} non-metric items ({counts})"
    return line


def _row_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        row["family"],
        row["disposition"],
        row["type"],
        row["source"] or "-",
        row["state"],
        one_line(row["reason"] or ""),
    )


def missing_breakdown(classes: Mapping[MissingClass, int]) -> str:
    """``94 (75 need engine instrumentation, 17 not seen upstream yet, 2 pending ...)``."""
    parts = [f"{classes[cls]} {words}" for cls, words in _MISSING_WORDS.items() if classes.get(cls)]
    total = sum(classes.values())
    return f"{total} ({', '.join(parts)})" if parts else str(total)
