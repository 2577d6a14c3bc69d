"""What a PromQL expression needs from the data: metric names, label matchers and label names.

``analyze`` parses with ``promql_parser`` (bindings of the Rust crate that follows Prometheus'
grammar) and reports every selector, and every label name that a grouping, a vector match or a
label function reads, tied to the selectors it reads it from, so a checker can ask "does label
X exist on metric Y". Dashboard queries go through ``substitute_grafana_variables`` (from
``templating``, re-exported here) first.

The parser's objects appear only in the walk below and are turned into the frozen dataclasses
of this module before anything leaves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import promql_parser

from metricbridge.analysis.templating import (
    VARIABLE_PLACEHOLDER,
    normalise_newlines,
    substitute_grafana_variables,
)
from metricbridge.errors import PromQLError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "VARIABLE_PLACEHOLDER",
    "ExprUsage",
    "LabelMatcher",
    "LabelUse",
    "LabelUseKind",
    "MatchOp",
    "PromQLError",
    "Selector",
    "analyze",
    "substitute_grafana_variables",
]

_STRING_OR_CODE = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)|[^"'`]+|.""", re.DOTALL
)


class MatchOp(StrEnum):
    """Label matcher operators, spelled as in PromQL."""

    EQUAL = "="
    NOT_EQUAL = "!="
    RE = "=~"
    NOT_RE = "!~"


class LabelUseKind(StrEnum):
    """The construct that reads a label name."""

    BY = "by"
    WITHOUT = "without"
    ON = "on"
    IGNORING = "ignoring"
    GROUP_LEFT = "group_left"
    GROUP_RIGHT = "group_right"
    LABEL_REPLACE = "label_replace"
    LABEL_JOIN = "label_join"
    SORT_BY_LABEL = "sort_by_label"
    HISTOGRAM_QUANTILE = "histogram_quantile"


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """One ``name op "value"`` matcher; ``is_variable``: its name or value came from a variable."""

    name: str
    op: MatchOp
    value: str
    is_variable: bool

    def __str__(self) -> str:
        """Render as PromQL, for messages.

        A dashboard variable shows as ``$var``, not as the placeholder that stood in for it
        while the query was parsed.
        """
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        shown = f'{self.name}{self.op}"{escaped}"'
        return shown.replace(VARIABLE_PLACEHOLDER, "$var") if self.is_variable else shown


@dataclass(frozen=True, slots=True)
class Selector:
    """A vector or range selector.

    ``metric`` is the metric name, whether written bare, quoted or as ``__name__="..."``, or
    None. ``name_matchers`` holds the other ``__name__`` matchers (``{__name__=~"sglang:.*"}``),
    ``matchers`` the label matchers, ``alternatives`` the groups of ``{a="1" or b="2"}``.
    """

    metric: str | None
    matchers: tuple[LabelMatcher, ...]
    name_matchers: tuple[LabelMatcher, ...] = ()
    alternatives: tuple[tuple[LabelMatcher, ...], ...] = ()
    is_range: bool = False

    @property
    def metric_is_variable(self) -> bool:
        """Whether the metric name was built from a dashboard variable."""
        return self.metric is not None and VARIABLE_PLACEHOLDER in self.metric

    def __str__(self) -> str:
        """Render as PromQL, for messages."""
        groups = [self.name_matchers + self.matchers] if self.matchers or self.name_matchers else []
        groups += list(self.alternatives)
        body = " or ".join(",".join(str(m) for m in group) for group in groups)
        return f"{self.metric or ''}{{{body}}}" if body or not self.metric else self.metric


@dataclass(frozen=True, slots=True)
class LabelUse:
    """Label names a construct reads, and the selectors of the sub-expression it reads them from.

    Names that a ``label_replace``, ``label_join`` or ``count_values`` inside that
    sub-expression creates, and names that came from a variable, are left out.
    """

    kind: LabelUseKind
    labels: tuple[str, ...]
    selectors: tuple[Selector, ...]


@dataclass(frozen=True, slots=True)
class ExprUsage:
    """Everything an expression reads: selectors in order of appearance, label uses, functions."""

    selectors: tuple[Selector, ...]
    label_uses: tuple[LabelUse, ...]
    functions: tuple[str, ...]
    # (left, right) selectors of each `or`: either side alone makes the result, so a dashboard
    # can bridge a rename (`new_name or old_name`).
    fallbacks: tuple[tuple[tuple[Selector, ...], tuple[Selector, ...]], ...] = ()

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The sorted metric names the expression selects, leaving out variable ones."""
        names = {s.metric for s in self.selectors if s.metric and not s.metric_is_variable}
        return tuple(sorted(names))


# --- Analysis --------------------------------------------------------------------------------


# Arithmetic, comparison and set operators, unary signs included; label matchers count too,
# which only makes the bound below more conservative.
_OPERATOR = re.compile(r"[-+*/%^]|[=!<>]=|[<>]|\b(?:and|or|unless)\b")
_MAX_OPERATORS = 1000


def analyze(expr: str) -> ExprUsage:
    """Parse ``expr`` (after variable substitution) and report what it reads from the data.

    Raises ``PromQLError`` with the parser's message if the expression does not parse.
    """
    operators = len(_OPERATOR.findall(expr))
    if operators > _MAX_OPERATORS:
        # The Rust parser recurses once per operator and crashes the whole process (SIGSEGV)
        # somewhere past 3,000 of them; no dashboard query comes near the limit.
        message = f"too long to analyse: {operators} operators (at most {_MAX_OPERATORS})"
        raise PromQLError(message, expr)
    walk = _Walk()
    try:
        walk.visit(promql_parser.parse(_prepare(expr)))
    except ValueError as exc:
        raise PromQLError(str(exc), expr) from exc
    except RecursionError as exc:
        # Deep nesting overflows the bindings' conversion to Python objects, or this walk.
        raise PromQLError("expression nested too deeply", expr) from exc
    return ExprUsage(
        selectors=tuple(dict.fromkeys(walk.selectors)),
        label_uses=tuple(dict.fromkeys(walk.label_uses)),
        fallbacks=tuple(walk.fallbacks),
        functions=tuple(sorted(set(walk.functions))),
    )


@dataclass(frozen=True, slots=True)
class _Sub:
    """What a sub-expression contributes upwards: its selectors and the labels it creates."""

    selectors: tuple[Selector, ...] = ()
    produced: frozenset[str] = frozenset()

    def __add__(self, other: _Sub) -> _Sub:
        return _Sub(self.selectors + other.selectors, self.produced | other.produced)


_NO_SUB = _Sub()
# The bindings' MatchOp values are unhashable (no dict keys), so they are compared one by one.
_MATCH_OPS = (
    (promql_parser.MatchOp.Equal, MatchOp.EQUAL),
    (promql_parser.MatchOp.NotEqual, MatchOp.NOT_EQUAL),
    (promql_parser.MatchOp.Re, MatchOp.RE),
    (promql_parser.MatchOp.NotRe, MatchOp.NOT_RE),
)
_LABEL_FUNCTIONS = {
    "label_replace": (LabelUseKind.LABEL_REPLACE, slice(3, 4), 1),
    "label_join": (LabelUseKind.LABEL_JOIN, slice(3, None), 1),
    "sort_by_label": (LabelUseKind.SORT_BY_LABEL, slice(1, None), None),
    "sort_by_label_desc": (LabelUseKind.SORT_BY_LABEL, slice(1, None), None),
}


class _Walk:
    """Depth-first walk over promql_parser nodes, collecting into plain lists."""

    def __init__(self) -> None:
        self.selectors: list[Selector] = []
        self.label_uses: list[LabelUse] = []
        self.fallbacks: list[tuple[tuple[Selector, ...], tuple[Selector, ...]]] = []
        self.functions: list[str] = []

    def visit(self, node: object) -> _Sub:
        """Visit one node and return what its sub-expression contributes."""
        if isinstance(node, promql_parser.VectorSelector | promql_parser.MatrixSelector):
            return self._selector(node)
        if isinstance(node, promql_parser.AggregateExpr):
            return self._aggregate(node)
        if isinstance(node, promql_parser.BinaryExpr):
            return self._binary(node)
        if isinstance(node, promql_parser.Call):
            return self._call(node)
        if isinstance(
            node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
        ):
            return self.visit(node.expr)
        return _NO_SUB  # number and string literals

    def use(self, kind: LabelUseKind, labels: Iterable[object] | None, sub: _Sub) -> None:
        """Record a label use, leaving out created and variable names."""
        names = [str(label) for label in labels or ()]
        kept = tuple(n for n in names if n and n not in sub.produced and not _is_variable(n))
        if kept:
            self.label_uses.append(LabelUse(kind, kept, sub.selectors))

    def _selector(self, node: promql_parser.VectorSelector | promql_parser.MatrixSelector) -> _Sub:
        if isinstance(node, promql_parser.MatrixSelector):
            selector = _convert_selector(node.vector_selector, is_range=True)
        else:
            selector = _convert_selector(node, is_range=False)
        self.selectors.append(selector)
        return _Sub((selector,))

    def _aggregate(self, node: promql_parser.AggregateExpr) -> _Sub:
        sub = self.visit(node.expr)
        param, modifier = node.param, node.modifier
        if modifier is not None:
            by = modifier.type == promql_parser.AggModifierType.By
            self.use(LabelUseKind.BY if by else LabelUseKind.WITHOUT, modifier.labels, sub)
        if isinstance(param, promql_parser.StringLiteral):  # count_values("label", ...)
            return _Sub(sub.selectors, sub.produced | {str(param.val)})
        return sub + (self.visit(param) if param is not None else _NO_SUB)

    def _binary(self, node: promql_parser.BinaryExpr) -> _Sub:
        lhs, rhs = self.visit(node.lhs), self.visit(node.rhs)
        both = lhs + rhs
        if str(node.op) == "or":
            self.fallbacks.append((lhs.selectors, rhs.selectors))
        modifier = node.modifier
        if modifier is None:
            return both
        matching = modifier.matching
        if matching is not None:
            on = matching.type == promql_parser.LabelModifierType.Include
            self.use(LabelUseKind.ON if on else LabelUseKind.IGNORING, matching.labels, both)
        # group_left copies its extra labels from the "one" side, the right; group_right the left.
        if modifier.card == promql_parser.VectorMatchCardinality.ManyToOne:
            self.use(LabelUseKind.GROUP_LEFT, modifier.group_labels, rhs)
        elif modifier.card == promql_parser.VectorMatchCardinality.OneToMany:
            self.use(LabelUseKind.GROUP_RIGHT, modifier.group_labels, lhs)
        return both

    def _call(self, node: promql_parser.Call) -> _Sub:
        name = str(node.func.name)
        args: list[object] = list(node.args)
        self.functions.append(name)
        subs = [self.visit(arg) for arg in args]
        total = sum(subs, _NO_SUB)
        strings = [str(a.val) if isinstance(a, promql_parser.StringLiteral) else "" for a in args]
        if name == "histogram_quantile" and len(subs) > 1:
            self.use(LabelUseKind.HISTOGRAM_QUANTILE, ("le",), subs[1])
        if name not in _LABEL_FUNCTIONS or not subs:
            return total
        kind, sources, target = _LABEL_FUNCTIONS[name]
        self.use(kind, strings[sources], subs[0])
        created = {strings[target]} if target is not None and len(strings) > target else set()
        return _Sub(total.selectors, total.produced | created)


def _is_variable(text: str) -> bool:
    return VARIABLE_PLACEHOLDER in text


def _convert_matcher(matcher: promql_parser.Matcher) -> LabelMatcher:
    op = next(ours for theirs, ours in _MATCH_OPS if theirs == matcher.op)
    name, value = str(matcher.name), str(matcher.value)
    return LabelMatcher(name, op, value, _is_variable(name) or _is_variable(value))


def _convert_selector(node: promql_parser.VectorSelector, *, is_range: bool) -> Selector:
    """Build a ``Selector``, taking the metric name from ``__name__="..."`` when not bare."""
    found = node.matchers
    matchers = [_convert_matcher(m) for m in found.matchers]
    metric = None if node.name is None else str(node.name)
    if metric is None:
        named = next((m for m in matchers if m.name == "__name__" and m.op is MatchOp.EQUAL), None)
        if named is not None:
            metric = named.value
            matchers.remove(named)
    return Selector(
        metric=metric,
        matchers=tuple(m for m in matchers if m.name != "__name__"),
        name_matchers=tuple(m for m in matchers if m.name == "__name__"),
        alternatives=tuple(
            tuple(_convert_matcher(m) for m in group) for group in found.or_matchers
        ),
        is_range=is_range,
    )


def _prepare(expr: str) -> str:
    r"""Work around input promql_parser rejects although Prometheus accepts it.

    Backtick strings are raw in PromQL, but the parser applies escapes inside them
    (`` `\d+` `` fails with "unknown escape sequence"), so they become double-quoted strings.
    """
    out: list[str] = []
    for token in _STRING_OR_CODE.finditer(normalise_newlines(expr)):
        chunk = token.group()
        if token.lastgroup == "string" and chunk.startswith("`"):
            body = chunk[1:-1].replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            chunk = f'"{body}"'
        out.append(chunk)
    return "".join(out)
