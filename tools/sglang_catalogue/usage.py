"""When a family first appears on ``/metrics``: from start-up, or lazily on some event.

prometheus_client exports an unlabelled metric from registration, but a labelled one only once a
child exists (``.labels(...)``). So the question is where the source first touches the metric:
in the constructor that defines it (pre-seeded children) or in some later method (lazy).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .scan import Definition
from .scope import (
    Function,
    Scope,
    bound_argument,
    guarded,
    parameter,
    positional_index,
    scoped_nodes,
)
from .sources import Release

_RECORDING = frozenset({"labels", "inc", "dec", "set", "observe", "info", "state", "time"})
_MAX_EVENTS = 4


@dataclass(frozen=True)
class Use:
    """A place that touches the metric: its function, conditions, and whether it makes a child."""

    qualname: str
    top: str
    guards: tuple[str, ...]
    makes_child: bool
    func: Function | None = None


@dataclass(frozen=True)
class Lifecycle:
    """``startup`` or ``lazy``; ``event`` says what creates it; ``dead`` when nothing can."""

    kind: str
    event: str
    dead: bool = False


def _qualname(scope: Scope) -> str:
    parts = [*([scope.cls.name] if scope.cls else []), *(f.name for f in scope.funcs)]
    return ".".join(parts) or "<module>"


def _top(scope: Scope) -> str:
    if scope.cls is not None and scope.funcs:
        return scope.funcs[0].name
    return scope.funcs[0].name if scope.funcs else ""


def _handle(definition: Definition) -> tuple[str, str] | None:
    """``("attr", x)`` for ``self.x = Metric(...)``, ``("name", x)`` for ``x = Metric(...)``."""
    target = definition.target
    if isinstance(target, ast.Attribute):
        return "attr", target.attr
    if isinstance(target, ast.Name):
        return "name", target.id
    return None


def _matches(
    node: ast.AST,
    handle: tuple[str, str],
    scope: Scope,
    definition: Definition,
    *,
    makes_child: bool,
) -> bool:
    kind, name = handle
    if kind == "name":
        return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
    if not isinstance(node, ast.Attribute) or node.attr != name:
        return False
    if not isinstance(node.ctx, ast.Load):
        return False
    receiver = ast.unparse(node.value)
    same_class = receiver == "self" and scope.cls is not None and definition.scope.cls is not None
    if same_class:
        return scope.cls.name == definition.scope.cls.name  # type: ignore[union-attr]
    return "collector" in receiver or "metric" in receiver.lower() or makes_child


def _guards_of(scope: Scope, node: ast.AST) -> tuple[str, ...]:
    if not scope.funcs:
        return ()
    line = getattr(node, "lineno", 0)
    best: tuple[str, ...] = ()
    for step in guarded(scope.funcs[-1].body):
        end = getattr(step.stmt, "end_lineno", 0) or 0
        if step.stmt.lineno <= line <= end and not isinstance(step.stmt, ast.If):
            best = step.guards
    return best


def _paths(definition: Definition, handle: tuple[str, str]) -> list[str]:
    release = definition.scope.release
    if handle[0] == "name":
        importers = release.files_mentioning(f"import {handle[1]}")
        return sorted({definition.scope.path, *importers})
    attr = re.escape(handle[1])
    outside = re.compile(
        rf"(?:collector|metric)\w*(?:\(\))?\.{attr}\b|\.{attr}\.labels\(", re.IGNORECASE
    )
    others = [
        p for p in release.files_mentioning("." + handle[1]) if outside.search(release.texts[p])
    ]
    return sorted({definition.scope.path, *others})


_Ref = tuple[ast.Name | ast.Attribute, Scope, bool]


def _references(release: Release, path: str) -> list[_Ref]:
    """Names and attributes of a module with their scope, and whether ``.labels`` follows."""
    key = ("references", path)
    if key not in release.memo:
        refs: list[_Ref] = []
        followed: set[int] = set()
        for node, scope in scoped_nodes(release, path):
            if isinstance(node, ast.Attribute) and node.attr == "labels":
                followed.add(id(node.value))
            if isinstance(node, ast.Name | ast.Attribute):
                refs.append((node, scope, False))
        release.memo[key] = [(n, s, id(n) in followed) for n, s, _ in refs]
    return release.memo[key]  # type: ignore[return-value]


def uses(definition: Definition) -> list[Use]:
    """Every statically visible use of the metric object in the release."""
    handle = _handle(definition)
    if handle is None:
        return []
    found: list[Use] = []
    release = definition.scope.release
    for path in _paths(definition, handle):
        for node, scope, makes_child in _references(release, path):
            if _matches(node, handle, scope, definition, makes_child=makes_child):
                func = scope.funcs[-1] if scope.funcs else None
                guards = _guards_of(scope, node)
                found.append(Use(_qualname(scope), _top(scope), guards, makes_child, func))
    return found


def _referenced(definition: Definition, name: str) -> bool:
    """Whether anything but its own definition names a function (a call, a decorator...)."""
    release = definition.scope.release
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


def _always_none(release: Release, use: Use) -> bool:
    """A use under ``if arg is not None`` whose every caller passes ``arg=None``.

    (Or omits it, its default being None): dead code in practice.
    """
    match = re.fullmatch(r"(\w+) is not None", use.guards[-1]) if use.guards else None
    func = use.func
    if match is None or func is None or parameter(func, match.group(1)) is None:
        return False
    param = match.group(1)
    default = parameter(func, param)[1]  # type: ignore[index]
    index = positional_index(func, param, skip_self=True)
    calls = _calls_of(release, func.name)
    if any(_unpacks(call) for call in calls):
        return False
    passed = [bound_argument(call, param, index) for call in calls]
    return bool(calls) and all(_is_none(arg if arg is not None else default) for arg in passed)


def _calls_of(release: Release, name: str) -> list[ast.Call]:
    """Every call of a function or method called ``name`` in the release."""
    key = ("calls", name)
    if key not in release.memo:
        release.memo[key] = [
            node
            for path in release.files_mentioning(f"{name}(")
            for node in ast.walk(release.tree(path) or ast.Module([], []))
            if isinstance(node, ast.Call) and _called(node) == name
        ]
    return release.memo[key]  # type: ignore[return-value]


def _unpacks(call: ast.Call) -> bool:
    """``f(*args)`` or ``f(**kwargs)``: what it binds is not known statically."""
    starred = any(isinstance(arg, ast.Starred) for arg in call.args)
    return starred or any(keyword.arg is None for keyword in call.keywords)


def _called(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _event(found: list[Use], owner: str | None) -> str:
    """``first call of m()`` (a method of the defining class) or ``of Other.m()``."""
    prefix = f"{owner}." if owner else None
    names = sorted({f"{_relative(u.qualname, prefix)}()" for u in found})
    shown = ", ".join(names[:_MAX_EVENTS]) + (" ..." if len(names) > _MAX_EVENTS else "")
    conditions = sorted({" and ".join(u.guards) for u in found if u.guards})
    when = f" (when {'; or '.join(conditions)})" if conditions and len(conditions) <= 2 else ""
    return f"first call of {shown}{when}"


def _relative(qualname: str, prefix: str | None) -> str:
    return qualname.removeprefix(prefix) if prefix else qualname


def lifecycle(definition: Definition, labelled: bool) -> Lifecycle:
    """Start-up or lazy, from where the metric is defined and first touched."""
    home = definition.qualname
    top = definition.scope.funcs[0].name if definition.scope.funcs else ""
    if top and definition.scope.cls is None and not _referenced(definition, top):
        return Lifecycle(
            "lazy", f"never: `{top}()` is not called anywhere in this release", dead=True
        )
    if not labelled:
        return Lifecycle("startup", f"exported from registration in {home}()")
    found = [u for u in uses(definition) if u.qualname != home or u.makes_child]
    if any(u.qualname == home and u.makes_child for u in found):
        return Lifecycle("startup", f"children pre-created in {home}()")
    live = [
        u
        for u in found
        if not u.top or u.top == home.split(".")[-1] or _referenced(definition, u.top)
    ]
    live = [u for u in live if not _always_none(definition.scope.release, u)]
    if not live:
        return Lifecycle("lazy", "never: no code path in this release records a value", dead=True)
    owner = definition.scope.cls.name if definition.scope.cls else None
    return Lifecycle("lazy", _event(live, owner))
