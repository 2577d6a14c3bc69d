"""When a family first appears on ``/metrics``: from start-up, or lazily on some event.

prometheus_client exports an unlabelled metric from registration, but a labelled one only once a
child exists (``.labels(...)``). So the question is where the source first touches the metric:
in the constructor that defines it (pre-seeded children) or in some later method (lazy).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from . import callers, classify
from .calls import always_none, referenced
from .scan import Definition
from .scope import Function, Scope, guarded, scoped_nodes
from .sources import Release

_MAX_EVENTS = 4


@dataclass(frozen=True)
class Use:
    """A place that touches the metric: its function, conditions, and whether it makes a child."""

    qualname: str
    top: str
    guards: tuple[str, ...]
    makes_child: bool
    func: Function | None = None
    path: str = ""


@dataclass(frozen=True)
class Lifecycle:
    """``startup`` or ``lazy``; ``event`` says what creates it; ``dead`` when nothing can.

    ``features``: those of the code that records its values, up the call chain.
    """

    kind: str
    event: str
    dead: bool = False
    features: frozenset[str] = frozenset()


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
                found.append(Use(_qualname(scope), _top(scope), guards, makes_child, func, path))
    return found


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
    if top and definition.scope.cls is None and not referenced(definition.scope.release, top):
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
        if not u.top or u.top == home.split(".")[-1] or referenced(definition.scope.release, u.top)
    ]
    live = [u for u in live if not always_none(definition.scope.release, u.func, u.guards)]
    if not live:
        return Lifecycle("lazy", "never: no code path in this release records a value", dead=True)
    owner = definition.scope.cls.name if definition.scope.cls else None
    release = definition.scope.release
    event, features = _event(live, owner), _features(release, live)
    origin = _startup_origin(release, live)
    if origin is not None:
        # Labelled, so exported only once a child exists, but the child is made while the
        # process starts: on /metrics from the first scrape, as an unlabelled family is.
        return Lifecycle("startup", f"{event}, at start-up (from {origin}())", features=features)
    return Lifecycle("lazy", event, features=features)


def _features(release: Release, live: list[Use]) -> frozenset[str]:
    """The features every chain of callers of every use belongs to."""
    chains: list[set[str]] = []
    for use in live:
        if use.top:
            chains += callers.reach(release, use.top, use.path)
        else:
            chains.append(set(classify.reach_features(frozenset({use.path}))))
    return frozenset(set.intersection(*chains)) if chains else frozenset()


def _startup_origin(release: Release, live: list[Use]) -> str | None:
    """The start-up function all uses are called from, when every one is unconditional.

    A use inside a nested function (a middleware's handler, a monitor thread's loop) runs
    whenever that function is called, not when its enclosing one is: never start-up here.
    """
    if any(use.guards or use.func is None or use.func.name != use.top for use in live):
        return None
    origins = [callers.startup_origin(release, use.top) for use in live]
    return None if None in origins else min(o for o in origins if o)
