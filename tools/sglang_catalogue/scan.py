"""Finds the prometheus_client metric constructions in a release's source."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .scope import Function, Scope, own_statements, parameter
from .sources import Release, is_test_path

TYPES = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "Info": "info",
    "Enum": "stateset",
}
_FACTORY_ATTR = re.compile(r"^_?(counter|gauge|histogram|summary)_cls$")
_TRIGGERS = ("prometheus_client", "sglang:")


@dataclass(frozen=True)
class Wrapper:
    """A class of the release that builds one prometheus metric from its own arguments.

    Such as ``GaugeHistogram``: calls to it define families too.
    """

    kind: str
    inner: ast.Call
    scope: Scope


@dataclass(frozen=True)
class Definition:
    """One metric construction found in the source."""

    kind: str
    call: ast.Call
    scope: Scope
    guards: tuple[str, ...]
    target: ast.expr | None
    wrapper: Wrapper | None = None

    @property
    def qualname(self) -> str:
        """``Class.method`` or ``function`` (or ``<module>``) that contains the construction."""
        parts = [
            *([self.scope.cls.name] if self.scope.cls else []),
            *(f.name for f in self.scope.funcs),
        ]
        return ".".join(parts) or "<module>"


def argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    """A call's argument given by keyword or at a position."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position < len(call.args) and not isinstance(call.args[position], ast.Starred):
        return call.args[position]
    return None


def _prometheus_aliases(tree: ast.Module) -> dict[str, str]:
    """``from prometheus_client import Counter as _PromCounter`` -> {"_PromCounter": "counter"}."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client"):
            for alias in node.names:
                if alias.name in TYPES:
                    aliases[alias.asname or alias.name] = TYPES[alias.name]
    return aliases


@dataclass
class _Walker:
    """Walks one module keeping its class, function and ``if`` context."""

    release: Release
    path: str
    aliases: dict[str, str]
    wrappers: dict[str, Wrapper]
    found: list[Definition] = field(default_factory=list)
    _cls: ast.ClassDef | None = None
    _funcs: tuple[Function, ...] = ()
    _guards: tuple[str, ...] = ()

    def body(self, statements: list[ast.stmt]) -> None:
        for stmt in statements:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.ClassDef):
            self._nested(stmt, cls=stmt)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self._nested(stmt, funcs=(*self._funcs, stmt))
        elif isinstance(stmt, ast.If):
            self._branches(stmt)
        else:
            self._expressions(stmt)
            for name in ("body", "orelse", "finalbody"):
                self.body(getattr(stmt, name, []))
            for handler in getattr(stmt, "handlers", []):
                self.body(handler.body)

    def _nested(
        self,
        node: ast.ClassDef | Function,
        cls: ast.ClassDef | None = None,
        funcs: tuple[Function, ...] | None = None,
    ) -> None:
        saved = (self._cls, self._funcs, self._guards)
        self._cls = cls or self._cls
        self._funcs = funcs if funcs is not None else ()
        self._guards = self._guards if funcs is not None and saved[1] else ()
        self.body(node.body)
        self._cls, self._funcs, self._guards = saved

    def _branches(self, stmt: ast.If) -> None:
        test = ast.unparse(stmt.test)
        self._expressions(stmt)
        saved = self._guards
        self._guards = (*saved, test)
        self.body(stmt.body)
        self._guards = (*saved, f"not ({test})")
        self.body(stmt.orelse)
        self._guards = saved

    def _expressions(self, stmt: ast.stmt) -> None:
        target = _target(stmt)
        for node in _own_calls(stmt):
            definition = self._definition(node, target)
            if definition is not None:
                self.found.append(definition)

    def _definition(self, call: ast.Call, target: ast.expr | None) -> Definition | None:
        kind, wrapper = self._kind(call)
        if kind is None or argument(call, "name", 0) is None:
            return None
        if argument(call, "documentation", 1) is None:
            return None
        scope = Scope(self.release, self.path, self._cls, self._funcs, call.lineno)
        return Definition(kind, call, scope, self._guards, target, wrapper)

    def _kind(self, call: ast.Call) -> tuple[str | None, Wrapper | None]:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in self.wrappers:
                return self.wrappers[func.id].kind, self.wrappers[func.id]
            return TYPES.get(func.id) or self.aliases.get(func.id), None
        if isinstance(func, ast.Attribute):
            factory = _FACTORY_ATTR.match(func.attr)
            return (factory.group(1) if factory else TYPES.get(func.attr)), None
        return None, None


def _target(stmt: ast.stmt) -> ast.expr | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign):
        return stmt.target
    return None


def _own_calls(stmt: ast.stmt) -> Iterator[ast.Call]:
    """Calls in a statement's own expressions (not in the blocks it contains)."""
    blocks = {id(s) for name in ("body", "orelse", "finalbody") for s in getattr(stmt, name, [])}
    pending: list[ast.AST] = [stmt]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call):
            yield node
        pending.extend(
            child
            for child in ast.iter_child_nodes(node)
            if id(child) not in blocks and not isinstance(child, ast.ExceptHandler)
        )


def _wrapper_of(definition: Definition) -> str | None:
    """The class a construction belongs to when its name is the class's own argument."""
    name = argument(definition.call, "name", 0)
    init = definition.scope.funcs[0] if definition.scope.funcs else None
    if not isinstance(name, ast.Name) or definition.scope.cls is None or init is None:
        return None
    if init.name != "__init__" or parameter(init, name.id) is None:
        return None
    if any(_assigns(init, name.id)):
        return None
    return definition.scope.cls.name


def _assigns(func: Function, name: str) -> Iterator[ast.stmt]:
    for stmt in own_statements(func.body):
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            yield stmt


def _walk(release: Release, path: str, wrappers: dict[str, Wrapper]) -> list[Definition]:
    tree = release.tree(path)
    if tree is None:
        return []
    walker = _Walker(release, path, _prometheus_aliases(tree), wrappers)
    walker.body(tree.body)
    return walker.found


def candidate_paths(release: Release) -> list[str]:
    """Package modules (tests excluded) that mention prometheus_client or an ``sglang:`` name."""
    paths = {p for word in _TRIGGERS for p in release.files_mentioning(word)}
    return sorted(p for p in paths if not is_test_path(p))


def definitions(release: Release) -> list[Definition]:
    """Every metric construction of the release, wrappers resolved, wrapper internals dropped."""
    paths = candidate_paths(release)
    first = [d for p in paths for d in _walk(release, p, {})]
    wrappers = {name: Wrapper(d.kind, d.call, d.scope) for d in first if (name := _wrapper_of(d))}
    if not wrappers:
        return first
    users = {p for name in wrappers for p in release.files_mentioning(name + "(")}
    paths = sorted({*paths, *(p for p in users if not is_test_path(p))})
    found = [d for p in paths for d in _walk(release, p, wrappers)]
    return [d for d in found if _wrapper_of(d) is None]
