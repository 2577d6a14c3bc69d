"""The shell and Python examples of the user docs, read out of their Markdown for the suite to run.

A page's fenced blocks are examples of four kinds:

- ``console``: a session. Each ``$ `` line (with ``\\`` continuation lines) is a command, and the
  lines up to the next ``$ `` line are what it prints, stdout and stderr together. A line that is
  only ``[...]``, ``[... words ...]`` or an indented ``...`` (in JSON) stands for any number of
  lines: the page leaves them out.
  ``$ cat FILE`` of a file the repository does not hold declares that file: the page shows its
  content, and the harness writes it before the page's sessions run.
- ``sh``, ``bash`` and ``shell``: commands whose output the page does not show; each must exit 0.
- ``python``: run as a script; a line ``EXPR  # VALUE`` whose VALUE is a Python literal asserts
  that EXPR equals it.
- anything else (YAML, diagrams): not an example.

A block that cannot run offline (it needs a live engine, a network, a long-running process) says
so in an HTML comment on the line before its fence, ``<!-- not run: the reason -->``; the reason
is required, so that skipping an example is a decision the page shows.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = frozenset({"console", "sh", "bash", "shell", "python"})
_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
_ELISION = re.compile(r"^(?:\[\.\.\.(?:.*\.\.\.)?\]|\s*\.\.\.)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None  # the reason given, when the page says the block is not run

    @property
    def where(self) -> str:
        """``page:line``, as a test id and in failure messages."""
        return f"{self.page.name}:{self.line}"


@dataclass(frozen=True)
class Step:
    """One command of a console block and the lines the page shows it printing."""

    command: str
    expected: tuple[str, ...]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index] != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise ValueError(f"{page}:{start + 1}: fence never closed")
        marker = _NOT_RUN.match(lines[start - 1]) if start else None
        found.append(
            Block(
                page=page,
                line=start + 1,
                lang=opening.group(1),
                text="\n".join(body) + "\n",
                not_run=marker.group(1) if marker else None,
            )
        )
        index += 1
    return found


def steps(block: Block) -> list[Step]:
    """The commands of a console block, each with the output the page shows for it."""
    result: list[Step] = []
    lines = block.text.splitlines()
    index = 0
    if lines and not lines[0].startswith("$ "):
        raise ValueError(f"{block.where}: a console block starts with a '$ ' command")
    while index < len(lines):
        command = lines[index][2:]
        index += 1
        while command.endswith("\\") and index < len(lines):
            command = command + "\n" + lines[index]
            index += 1
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        result.append(Step(command=command, expected=tuple(output)))
    return result


def declared_files(page_blocks: list[Block], root: Path) -> dict[str, str]:
    """Files a page shows with ``$ cat FILE`` that the repository does not hold: name -> text."""
    files: dict[str, str] = {}
    for block in page_blocks:
        if block.lang != "console" or block.not_run:
            continue
        for step in steps(block):
            name = step.command.removeprefix("cat ").strip()
            if step.command.startswith("cat ") and " " not in name and not (root / name).exists():
                files[name] = "\n".join(step.expected) + "\n"
    return files


def output_matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` line for line, each elision line standing for any lines."""
    want = [line.rstrip() for line in expected]
    got = [line.rstrip() for line in actual]
    # Trailing blank lines are layout on the page, not output.
    while want and not want[-1]:
        want.pop()
    while got and not got[-1]:
        got.pop()
    # reachable[j]: the first i lines of want can match the first j lines of got.
    reachable = [True] + [False] * len(got)
    for line in want:
        if _ELISION.match(line):
            for j in range(1, len(got) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [reachable[j] and got[j] == line for j in range(len(got))]
    return reachable[len(got)]


def python_assertions(source: str) -> str:
    """``source`` with each ``EXPR  # LITERAL`` line turned into an assertion that they are equal."""
    out: list[str] = []
    for line in source.splitlines():
        code, sep, comment = line.partition("  # ")
        if sep and not code.startswith((" ", "\t")):
            literal = comment.strip()
            try:
                compile(literal, "<doc>", "eval")
                compile(code, "<doc>", "eval")
            except SyntaxError:
                out.append(line)
                continue
            if _is_literal(literal):
                out.append(f"assert ({code}) == ({literal}), ({code!r}, {code})")
                continue
        out.append(line)
    return "\n".join(out) + "\n"


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return True
