"""``metricbridge check`` output: text for terminals, JSON for tools, Markdown for PR comments."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any

from metricbridge.analysis.dashboards import InputProblem
from metricbridge.analysis.engine_notes import EngineNote
from metricbridge.analysis.findings import CheckReport, Finding, NotFailing
from metricbridge.render.table import markdown_cell, markdown_table, markdown_text, one_line

__all__ = ["check_summary", "engine_note_dict", "finding_dict", "finding_lines", "render_check"]


def render_check(report: CheckReport, fmt: str) -> str:
    """The report in ``fmt`` (text, json or markdown), ending with a newline."""
    if fmt == "json":
        return json.dumps(_check_dict(report), indent=2) + "\n"
    if fmt == "markdown":
        return "\n".join(_markdown(report)) + "\n"
    return "\n".join(_text(report)) + "\n"


def check_summary(report: CheckReport) -> str:
    """One line: passed or failed, and the counts."""
    failing = len(report.failing)
    quiet = _not_failing_counts(report)
    verdict = "FAILED" if failing else "passed"
    files = f"{len(report.files)} file{'s' if len(report.files) != 1 else ''}"
    others = "".join(
        f", {quiet[why]} {words} (not failing)" for why, words in _OTHERS.items() if quiet[why]
    )
    return (
        f"check {verdict}: {files}, {report.queries} queries checked: {failing} failing "
        f"finding(s), {quiet[NotFailing.STRUCTURAL]} structural (not failing){others}, "
        f"{len(report.not_checked)} not checked"
    )


_OTHERS = {
    NotFailing.PENDING: "pending a second fetch",
    NotFailing.EXCUSED: "beside a served `or`",
    NotFailing.LAZY: "created later by the engine",
    NotFailing.FEATURE: "behind a feature switch",
}


def _not_failing_counts(report: CheckReport) -> Counter[NotFailing]:
    """Findings that do not fail, by why (structural always present, for the summaries)."""
    counts = Counter(why for f in report.findings if (why := f.why_not_failing) is not None)
    counts[NotFailing.STRUCTURAL] += 0
    return counts


def finding_lines(findings: Iterable[Finding]) -> list[str]:
    """Findings grouped by query: the query's place and expression once, then each finding."""
    lines: list[str] = []
    for (file, location, line, expr), group in groupby(
        findings, key=lambda f: (f.file, f.location, f.line, f.expr)
    ):
        where = file if line is None else f"{file}:{line}"
        lines += [f"{where}: {location}", f"    {one_line(expr)}"]
        for finding in group:
            level = "error" if finding.failing else "note"
            cls = f" ({finding.shown_class})" if finding.shown_class is not None else ""
            lines.append(f"  {level}: {finding.kind}{cls}: {finding.reason}")
            if finding.hint:
                lines.append(f"    hint: {finding.hint}")
    return lines


def finding_dict(finding: Finding) -> dict[str, Any]:
    """A finding as JSON-ready data; ``engine`` only when the engine release explains it."""
    data: dict[str, Any] = {
        "file": finding.file,
        "location": finding.location,
        "line": finding.line,
        "expr": finding.expr,
        "kind": finding.kind.value,
        "subject": finding.subject,
        "reason": finding.reason,
        "contract": finding.contract.value if finding.contract is not None else None,
    }
    if finding.engine is not None:
        data["engine"] = engine_note_dict(finding.engine)
    data.update(hint=finding.hint, failing=finding.failing, excused=finding.excused)
    return data


def engine_note_dict(note: EngineNote) -> dict[str, Any]:
    """What the engine release says about a family, as JSON-ready data (absent fields left out)."""
    data: dict[str, Any] = {
        "class": note.cls.value,
        "engine": note.engine,
        "release": note.release,
        "family": note.family,
        "failing": note.failing,
    }
    optional = {
        "event": note.event,
        "switches": list(note.switches) or None,
        "last_in": note.last_in,
        "removed_in": note.removed_in,
        "renamed_to": note.renamed_to,
        "added_in": note.added_in,
    }
    data.update({key: value for key, value in optional.items() if value})
    return data


def _problem_dict(problem: InputProblem) -> dict[str, Any]:
    return {
        "file": problem.file,
        "location": problem.location,
        "line": problem.line,
        "kind": problem.kind.value,
        "message": problem.message,
        "expr": problem.expr,
    }


def _check_dict(report: CheckReport) -> dict[str, Any]:
    failing = len(report.failing)
    return {
        "passed": not failing,
        "files": list(report.files),
        "queries": report.queries,
        "summary": {
            "failing": failing,
            **_not_failing_counts(report),
            "not_checked": len(report.not_checked),
        },
        "findings": [finding_dict(f) for f in report.findings],
        "not_checked": [_problem_dict(p) for p in report.not_checked],
    }


def _text(report: CheckReport) -> list[str]:
    lines = finding_lines(report.findings)
    if report.not_checked:
        lines += ["", "Not checked:"] if lines else ["Not checked:"]
        lines += [f"  {problem}" for problem in report.not_checked]
    if lines:
        lines.append("")
    return [*lines, check_summary(report)]


def _markdown(report: CheckReport) -> list[str]:
    lines = [f"### metricbridge check: {'failed' if report.failing else 'passed'}", ""]
    if report.findings:
        rows = [_markdown_row(f) for f in report.findings]
        lines += [*markdown_table(["", "File", "Location", "Query", "Finding"], rows), ""]
    if report.not_checked:
        lines.append("**Not checked**")
        lines += [f"- {markdown_cell(markdown_text(str(p)))}" for p in report.not_checked]
        lines.append("")
    return [*lines, check_summary(report)]


def _markdown_row(finding: Finding) -> Sequence[str]:
    cls = f" ({finding.shown_class})" if finding.shown_class is not None else ""
    text = f"**{finding.kind}**{cls}: {markdown_text(finding.reason)}"
    if finding.hint:
        text += f" *Hint: {markdown_text(finding.hint)}*"
    where = finding.file if finding.line is None else f"{finding.file}:{finding.line}"
    expr = one_line(finding.expr)
    code = f"`` {expr} ``" if "`" in expr else f"`{expr}`"
    level = "error" if finding.failing else "note"
    return [level, markdown_text(where), markdown_text(finding.location), code, text]
