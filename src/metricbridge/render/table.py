"""Tables for terminal and GitHub: aligned text columns and Markdown pipes. Pure."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown_cell", "markdown_table", "markdown_text", "one_line", "text_table"]


def one_line(text: str) -> str:
    """Collapse whitespace runs (a multi-line query, a folded YAML note) to single spaces."""
    return " ".join(text.split())


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def markdown_cell(text: str) -> str:
    """A table cell: one line, pipes escaped."""
    return one_line(text).replace("|", "\\|")


# The characters that make Markdown of plain text: names like sglang_x_y and regexes like
# .*nope.* would turn italic or bold, and a title's <b> would be HTML.
_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#~"})


def markdown_text(text: str) -> str:
    """Plain text (names, regexes, titles) shown as written in Markdown, not formatted."""
    return text.translate(_MARKDOWN_SPECIAL)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(markdown_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines.extend("| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows)
    return lines
