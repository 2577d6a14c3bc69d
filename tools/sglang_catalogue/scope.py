"""Where a name in SGLang's source gets its value.

Locals, ``self.`` attributes, module globals and imports, looked up statically in one release.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, replace

from .sources import Release

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Scope:
    """The lexical position of an expression: module, class and enclosing functions."""

    release: Release
    path: str
    cls: ast.ClassDef | None = None
    funcs: tuple[Function, ...] = ()
    line: int = 1 << 30

    @property
    def module(self) -> ast.Module:
        """The parsed module (a Scope is only made for a module that parsed)."""
        tree = self.release.tree(self.path)
        if tree is None:
            raise LookupError(self.path)
        return tree

    def at_module(self, path: str | None = None) -> Scope:
        """The module-level scope of this (or another) module."""
        return Scope(self.release, path or self.path)


@dataclass(frozen=True)
class Binding:
    """One assignment of a name.

    Its value, the scope to read that value in, and whether it is the ``if x is None: x = ...``
    default of an optional argument.
    """

    value: ast.expr
    scope: Scope
    is_default: bool = False


def own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, nested blocks included, nested functions and classes excluded."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from own_statements(getattr(stmt, name, []))
        for handler in getattr(stmt, "handlers", []):
            yield from own_statements(handler.body)


def _none_test_names(stmt: ast.stmt) -> set[str]:
    """Names tested by ``if NAME is None:`` (the classic optional-argument default)."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return set()
    test = stmt.test
    if isinstance(test.left, ast.Name) and isinstance(test.ops[0], ast.Is):
        return {test.left.id}
    return set()


def _assignments(body: list[ast.stmt], target: ast.expr) -> Iterator[tuple[ast.stmt, bool]]:
    defaults: set[int] = set()
    for stmt in own_statements(body):
        is_default = isinstance(target, ast.Name) and target.id in _none_test_names(stmt)
        if is_default and isinstance(stmt, ast.If):
            defaults.update(id(inner) for inner in stmt.body)
        targets = _targets(stmt)
        if any(ast.dump(t, include_attributes=False) == ast.dump(target) for t in targets):
            yield stmt, id(stmt) in defaults


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return [_plain(t) for t in stmt.targets]
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return [_plain(stmt.target)]
    return []


def _plain(node: ast.expr) -> ast.expr:
    """An assignment target without its context, comparable with ``ast.dump``."""
    if isinstance(node, ast.Name):
        return ast.Name(node.id)
    if isinstance(node, ast.Attribute):
        return ast.Attribute(_plain(node.value), node.attr)
    return node


def _value(stmt: ast.stmt) -> ast.expr | None:
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        return stmt.value
    return None


def latest_binding(body: list[ast.stmt], target: ast.expr, scope: Scope) -> Binding | None:
    """The last assignment to ``target`` in ``body`` before ``scope.line``."""
    found: Binding | None = None
    for stmt, is_default in _assignments(body, _plain(target)):
        value = _value(stmt)
        if value is not None and stmt.lineno < scope.line:
            found = Binding(value, replace(scope, line=stmt.lineno), is_default=is_default)
    return found


def parameter(func: Function, name: str) -> tuple[ast.arg, ast.expr | None] | None:
    """A parameter of ``func`` by name, with its default expression if it has one."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = list(zip(positional, [*defaults, *args.defaults], strict=True))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    for arg, default in pairs:
        if arg.arg == name:
            return arg, default
    return None


def import_source(scope: Scope, name: str) -> tuple[str, str] | None:
    """``(module path, original name)`` of a name imported into the scope's module."""
    bodies = [*(f.body for f in scope.funcs), scope.module.body]
    for body in bodies:
        for stmt in own_statements(body):
            if not isinstance(stmt, ast.ImportFrom):
                continue
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    return _absolute(scope.path, stmt), alias.name
    return None


def _absolute(path: str, stmt: ast.ImportFrom) -> str:
    module = stmt.module or ""
    if not stmt.level:
        return module
    package = path.removesuffix(".py").split("/")[: -stmt.level]
    return ".".join([*package, *([module] if module else [])])


def find_class(scope: Scope, name: str) -> ast.ClassDef | None:
    """A class defined at the top level of the scope's module."""
    for stmt in scope.module.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return stmt
    return None


def method(cls: ast.ClassDef, name: str) -> Function | None:
    """A method defined directly in a class body."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            return stmt
    return None


@dataclass(frozen=True)
class Step:
    """A statement with the ``if`` conditions and ``for`` loops it sits in (within one body)."""

    stmt: ast.stmt
    guards: tuple[str, ...]
    loops: tuple[ast.For, ...]


def guarded(
    body: list[ast.stmt], guards: tuple[str, ...] = (), loops: tuple[ast.For, ...] = ()
) -> Iterator[Step]:
    """Every statement of a body in order, with its conditions; nested defs are not entered."""
    for stmt in body:
        yield Step(stmt, guards, loops)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            yield from guarded(stmt.body, (*guards, test), loops)
            yield from guarded(stmt.orelse, (*guards, f"not ({test})"), loops)
            continue
        inner = (*loops, stmt) if isinstance(stmt, ast.For) else loops
        for name in ("body", "orelse", "finalbody"):
            yield from guarded(getattr(stmt, name, []), guards, inner)
        for handler in getattr(stmt, "handlers", []):
            yield from guarded(handler.body, guards, inner)


def scoped_nodes(release: Release, path: str) -> Iterator[tuple[ast.AST, Scope]]:
    """Every node of a module with the class and functions around it."""
    tree = release.tree(path)
    if tree is None:
        return
    pending: list[tuple[ast.AST, ast.ClassDef | None, tuple[Function, ...]]] = [(tree, None, ())]
    while pending:
        node, cls, funcs = pending.pop()
        line = getattr(node, "lineno", 1 << 30)
        yield node, Scope(release, path, cls, funcs, line)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                pending.append((child, child, ()))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                pending.append((child, cls, (*funcs, child)))
            else:
                pending.append((child, cls, funcs))


def positional_index(func: Function, param: str, *, skip_self: bool) -> int | None:
    """The position of ``param`` among a function's positional parameters (after self)."""
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if skip_self and names and names[0] in {"self", "cls"}:
        names = names[1:]
    return names.index(param) if param in names else None


def bound_argument(call: ast.Call, param: str, index: int | None) -> ast.expr | None:
    """The argument a call binds to ``param`` (by keyword, or at ``index``)."""
    for keyword in call.keywords:
        if keyword.arg == param:
            return keyword.value
    if index is not None and index < len(call.args):
        return call.args[index]
    return None
