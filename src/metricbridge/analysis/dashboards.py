"""Read the files ``metricbridge check`` verifies into one flat list of analysed queries.

Three kinds of file: Grafana dashboard JSON (``grafana`` finds the queries), Prometheus rule
files (``groups:``, also inside a ``PrometheusRule`` object's ``spec``), and plain PromQL files
with one expression per line. A file that cannot be read at all raises ``InputError``; anything
inside a readable file that cannot be checked (a library panel that is not inlined, a Loki
target, a query that does not parse) becomes an ``InputProblem`` and the rest is still checked,
as mimirtool collects parse errors per dashboard instead of aborting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import yaml

from metricbridge.analysis.grafana import read_dashboard
from metricbridge.analysis.promql import ExprUsage, analyze
from metricbridge.analysis.templating import normalise_newlines, substitute_grafana_variables
from metricbridge.errors import InputError, PromQLError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path

__all__ = [
    "InputError",
    "InputProblem",
    "LoadResult",
    "ProblemKind",
    "Query",
    "QueryKind",
    "load_queries",
]

_CONFLICT_MARKER = re.compile(r"^(?:(?:<{7}|>{7}|\|{7})(?:\s.*)?|={7}\s*)$")
_RULE_TEMPLATE_LABEL = re.compile(r"\$labels\.(\w+)|\.Labels\.(\w+)")


class QueryKind(StrEnum):
    """Where a query came from."""

    PANEL_TARGET = "panel target"
    TEMPLATE_VARIABLE = "template variable"
    ANNOTATION = "annotation"
    RECORDING_RULE = "recording rule"
    ALERTING_RULE = "alerting rule"
    PLAIN = "plain"


class ProblemKind(StrEnum):
    """Why something in a readable file is not checked."""

    NOT_CHECKABLE = "not checkable"
    PARSE_ERROR = "parse error"


@dataclass(frozen=True, slots=True)
class Query:
    """One query to check.

    ``raw`` is as written; ``expr`` is the PromQL that was analysed (variables substituted, a
    variable's ``label_values(m, l)`` turned into ``count by (l) (m)``). ``legend_labels`` are
    the labels a legend, annotation title or alert template reads (``{{model_name}}``).
    """

    file: str
    location: str
    kind: QueryKind
    raw: str
    expr: str
    legend_labels: tuple[str, ...]
    usage: ExprUsage
    line: int | None = None


@dataclass(frozen=True, slots=True)
class InputProblem:
    """Something in a file that the check cannot verify, with where it is."""

    file: str
    location: str
    kind: ProblemKind
    message: str
    expr: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        """Render as ``file:line: location: kind: message``."""
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.location}: {self.kind}: {self.message}"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The queries of one file, and what in it could not be checked, in document order."""

    queries: tuple[Query, ...]
    problems: tuple[InputProblem, ...]


def load_queries(path: Path) -> LoadResult:
    """Read a dashboard, rule file or PromQL file into analysed queries.

    The format comes from the suffix (``.json``; ``.yaml``/``.yml``; ``.promql``/``.txt``),
    else from the content. Raises ``InputError`` for a file that cannot be used at all.
    """
    collector = _Collector(str(path))
    text = _read_text(path)
    _reject_conflict_markers(collector.file, text)
    _loader(path.suffix.lower(), text)(text, collector)
    return LoadResult(tuple(collector.queries), tuple(collector.problems))


def _loader(suffix: str, text: str) -> Callable[[str, _Collector], None]:
    """Choose the reader by suffix, or by content for other suffixes."""
    if suffix in _LOADERS:
        return _LOADERS[suffix]
    if text.lstrip()[:1] in {"{", "["}:
        return _load_dashboard
    if re.search(r"^(?:groups|spec|apiVersion)\s*:", text, re.MULTILINE):
        return _load_rules
    return _load_plain


@dataclass
class _Collector:
    """Analyses each query as it is found, turning parse failures into problems."""

    file: str
    queries: list[Query] = field(default_factory=list)
    problems: list[InputProblem] = field(default_factory=list)

    def add(self, found: _Found, variables: Mapping[str, str] | None) -> None:
        """Analyse a query; ``variables`` is None for files that are not Grafana's."""
        expr = (
            normalise_newlines(found.expr)
            if variables is None
            else substitute_grafana_variables(found.expr, variables)
        ).strip()
        try:
            usage = analyze(expr)
        except PromQLError as exc:
            kind = ProblemKind.PARSE_ERROR
            self.problem(found.location, kind, exc.message, found.raw, found.line)
            return
        query = Query(
            self.file, found.location, found.kind, found.raw, expr, found.labels, usage, found.line
        )
        self.queries.append(query)

    def problem(
        self,
        location: str,
        kind: ProblemKind,
        message: str,
        expr: str | None = None,
        line: int | None = None,
    ) -> None:
        """Record something that cannot be checked."""
        self.problems.append(InputProblem(self.file, location, kind, message, expr, line))


@dataclass(frozen=True, slots=True)
class _Found:
    location: str
    kind: QueryKind
    raw: str
    expr: str
    labels: tuple[str, ...] = ()
    line: int | None = None


def _read_text(path: Path) -> str:
    """Read UTF-8 text, dropping a byte-order mark (Windows editors write one)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(str(path), "not UTF-8 text", line=line) from exc


def _reject_conflict_markers(file: str, text: str) -> None:
    """Refuse a file left mid-merge: it would load as something the author never wrote."""
    for number, line in enumerate(text.splitlines(), start=1):
        if _CONFLICT_MARKER.match(line):
            raise InputError(file, "merge conflict marker", line=number)


# --- Grafana dashboards ----------------------------------------------------------------------


def _load_dashboard(text: str, collector: _Collector) -> None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(collector.file, exc.msg, line=exc.lineno, column=exc.colno) from exc
    except RecursionError as exc:
        raise InputError(collector.file, "JSON nested too deeply to read") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InputError(collector.file, f"unreadable JSON: {exc}") from exc
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise InputError(collector.file, f"expected a JSON object at the top level, got {kind}")
    if "groups" in document or _is_rule_object(document):
        # A Prometheus rule file in JSON, which promtool reads as YAML; so does this, for the
        # line numbers. YAML refuses tab indentation (jq --tab), and valid JSON holds a tab only
        # between tokens (json.loads refused any inside a string), so spaces change nothing.
        _load_rules(text.replace("\t", " "), collector)
        return
    try:
        board = read_dashboard(document)
    except ValueError as exc:
        raise InputError(collector.file, str(exc)) from exc
    for found in board.found:
        kind = QueryKind(found.kind)
        query = _Found(found.location, kind, found.raw, found.expr, found.legend_labels)
        collector.add(query, board.variables)
    for skipped in board.skipped:
        collector.problem(skipped.location, ProblemKind.NOT_CHECKABLE, skipped.message)


def _is_rule_object(document: dict[str, object]) -> bool:
    """A PrometheusRule object (Kubernetes) rather than a dashboard."""
    spec = document.get("spec")
    return isinstance(spec, dict) and "groups" in spec and "panels" not in document


# --- Prometheus rule files -------------------------------------------------------------------


def _load_rules(text: str, collector: _Collector) -> None:
    """Read ``groups[].rules[]``, from the document root or a PrometheusRule's ``spec``."""
    try:
        documents = [doc for doc in yaml.compose_all(text, Loader=yaml.SafeLoader) if doc]
    except RecursionError as exc:
        raise InputError(collector.file, "YAML nested too deeply to read") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if isinstance(mark, yaml.Mark) else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(collector.file, f"invalid YAML: {problem}", line=line) from exc
    groups = [_child(doc, "groups") or _child(_child(doc, "spec"), "groups") for doc in documents]
    if documents and not any(groups):
        raise InputError(collector.file, "not a Prometheus rule file: no 'groups'")
    for group in groups:
        for found in _rules(group, collector):
            collector.add(found, None)


def _rules(groups: yaml.Node | None, collector: _Collector) -> Iterator[_Found]:
    for group in _items(groups):
        where = f'group "{_scalar(_child(group, "name"))}"'
        for index, rule in enumerate(_items(_child(group, "rules")), start=1):
            alert = _scalar(_child(rule, "alert"))
            kind = QueryKind.ALERTING_RULE if alert else QueryKind.RECORDING_RULE
            name = alert or _scalar(_child(rule, "record"))
            what = "alert" if alert else "record"
            location = f'{where} > {what} "{name}"' if name else f"{where} > rule {index}"
            expr_node = _child(rule, "expr")
            expr = _scalar(expr_node)
            if expr_node is None or not expr.strip():
                line = rule.start_mark.line + 1
                collector.problem(
                    location, ProblemKind.NOT_CHECKABLE, "rule has no 'expr'", None, line
                )
                continue
            labels = _template_labels(rule) if alert else ()
            yield _Found(location, kind, expr, expr, labels, expr_node.start_mark.line + 1)


def _template_labels(rule: yaml.Node) -> tuple[str, ...]:
    """Labels an alert's ``labels`` and ``annotations`` templates read (``$labels.model``)."""
    texts = [_scalar(value) for key in ("labels", "annotations") for _, value in _pairs(rule, key)]
    found = [a or b for text in texts for a, b in _RULE_TEMPLATE_LABEL.findall(text)]
    return tuple(dict.fromkeys(found))


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next(
        (v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None
    )


def _pairs(node: yaml.Node, key: str) -> list[tuple[yaml.Node, yaml.Node]]:
    child = _child(node, key)
    return list(child.value) if isinstance(child, yaml.MappingNode) else []


def _items(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _scalar(node: yaml.Node | None) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else ""


# --- Plain PromQL files ----------------------------------------------------------------------


def _load_plain(text: str, collector: _Collector) -> None:
    """One expression per line; blank lines and ``#`` comments are skipped."""
    for number, line in enumerate(text.splitlines(), start=1):
        expr = line.strip()
        if expr and not expr.startswith("#"):
            found = _Found(f"line {number}", QueryKind.PLAIN, expr, expr, line=number)
            collector.add(found, {})


_LOADERS: dict[str, Callable[[str, _Collector], None]] = {
    ".json": _load_dashboard,
    ".yaml": _load_rules,
    ".yml": _load_rules,
    ".promql": _load_plain,
    ".txt": _load_plain,
}
