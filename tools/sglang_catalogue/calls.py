"""Who calls what in a release: enough of a call graph to tell dead code from live code."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from . import scope as sc
from .scope import Function, Scope, bound_argument, parameter, positional_index
from .sources import Release, is_test_path


def referenced(release: Release, name: str) -> bool:
    """Whether anything but its own ``def`` names a function (a call, a decorator...)."""
    key = ("referenced", name)
    if key not in release.memo:
        used = re.compile(rf"(?<!def )\b{re.escape(name)}\b")
        paths = [p for p in release.files_mentioning(name) if used.search(release.texts[p])]
        release.memo[key] = any(_names(release, path, name) for path in paths)
    return bool(release.memo[key])


def _names(release: Release, path: str, name: str) -> bool:
    tree = release.tree(path)
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Name) and node.id == name:
            return True
        if isinstance(node, ast.Attribute) and node.attr == name:
            return True
    return False


def calls_of(release: Release, name: str) -> list[tuple[str, ast.Call]]:
    """Every call of a function or method called ``name``, with its module (tests excluded)."""
    key = ("calls", name)
    if key not in release.memo:
        release.memo[key] = [
            (path, node)
            for path in release.files_mentioning(f"{name}(")
            if not is_test_path(path)
            for node in ast.walk(release.tree(path) or ast.Module([], []))
            if isinstance(node, ast.Call) and called(node) == name
        ]
    return release.memo[key]  # type: ignore[return-value]


def called(call: ast.Call) -> str | None:
    """The function or method name a call calls."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def _unpacks(call: ast.Call) -> bool:
    """``f(*args)`` or ``f(**kwargs)``: what it binds is not known statically."""
    starred = any(isinstance(arg, ast.Starred) for arg in call.args)
    return starred or any(keyword.arg is None for keyword in call.keywords)


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def always_none(release: Release, func: Function | None, guards: tuple[str, ...]) -> bool:
    """Code under ``if arg is not None`` whose every caller passes ``arg=None``.

    (Or omits it, its default being None): dead code in practice.
    """
    match = re.fullmatch(r"(\w+) is not None", guards[-1]) if guards else None
    found = parameter(func, match.group(1)) if match and func else None
    if match is None or func is None or found is None:
        return False
    index = positional_index(func, match.group(1), skip_self=True)
    calls = [call for _, call in calls_of(release, func.name)]
    if not calls or any(_unpacks(call) for call in calls):
        return False
    passed = [bound_argument(call, match.group(1), index) for call in calls]
    return all(_is_none(arg if arg is not None else found[1]) for arg in passed)


def call_sites(scope: Scope, func: Function, param: str) -> Iterator[tuple[ast.expr | None, Scope]]:
    """The argument bound to ``param`` at each place the function (or class) is called."""
    is_init = func.name == "__init__" and scope.cls is not None
    callee = scope.cls.name if is_init and scope.cls else func.name
    index = sc.positional_index(func, param, skip_self=is_init or scope.cls is not None)
    for path in scope.release.files_mentioning(callee):
        if is_test_path(path):
            continue
        aliases = {callee, *_factory_aliases(scope.release.tree(path), callee)}
        for node, site in sc.scoped_nodes(scope.release, path):
            if isinstance(node, ast.Call) and called(node) in aliases:
                yield sc.bound_argument(node, param, index), site
        if is_init and path == scope.path:
            yield from _cls_calls(scope, param, index)


def _cls_calls(
    scope: Scope, param: str, index: int | None
) -> Iterator[tuple[ast.expr | None, Scope]]:
    """``cls(...)`` in the class's own classmethods, also through ``x = factory(role, cls)``."""
    cls = scope.cls
    for stmt in cls.body if cls else []:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name == "__init__":
            continue
        aliases = {"cls", *_factory_aliases(stmt, "cls")}
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and called(node) in aliases:
                site = Scope(scope.release, scope.path, cls, (stmt,), node.lineno)
                yield sc.bound_argument(node, param, index), site


def _factory_aliases(tree: ast.AST | None, callee: str) -> set[str]:
    """Variables assigned from a call that takes the class (``resolve_collector_class(R, C)``)."""
    aliases: set[str] = set()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            passed = [a for a in node.value.args if isinstance(a, ast.Name)]
            if any(a.id == callee for a in passed):
                aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return aliases
