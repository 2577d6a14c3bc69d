"""Label names of a metric.

Follows ``labelnames=labels.keys()`` back to where the collector is constructed and its ``labels``
dict is built (and grown under flags).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from . import scope as sc
from .calls import call_sites
from .evaluate import Evaluator, Unresolved, self_attribute
from .scope import Function, Scope

_MAX_DEPTH = 24
_T = TypeVar("_T")
_Mode = Callable[[ast.expr, Scope], "LabelSet"]


@dataclass(frozen=True)
class LabelSet:
    """Label names known statically.

    Always present, present under a condition, and label names only known at run time (user-
    configured extra labels), as source text.
    """

    required: tuple[str, ...] = ()
    optional: tuple[tuple[str, str], ...] = ()
    dynamic: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    base: str | None = None

    def __add__(self, other: LabelSet) -> LabelSet:
        return LabelSet(
            _unique(self.required + other.required),
            _unique(self.optional + other.optional),
            _unique(self.dynamic + other.dynamic),
            _unique(self.unresolved + other.unresolved),
            self.base or other.base,
        )


def _unique(items: tuple[_T, ...]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


@dataclass
class LabelResolver:
    """Resolves label expressions; ``sets`` collects the shared base sets by name."""

    sets: dict[str, LabelSet] = field(default_factory=dict)
    bindings: dict[str, LabelSet] = field(default_factory=dict)
    _depth: int = 0

    def names(self, node: ast.expr | None, scope: Scope) -> LabelSet:
        """Label names of a ``labelnames=`` expression."""
        if node is None:
            return LabelSet()
        if self._depth > _MAX_DEPTH:
            return LabelSet(unresolved=(ast.unparse(node),))
        self._depth += 1
        try:
            return self._names(node, scope)
        finally:
            self._depth -= 1

    def _names(self, node: ast.expr, scope: Scope) -> LabelSet:
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return sum((self._element(e, scope) for e in node.elts), LabelSet())
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.names(node.left, scope) + self.names(node.right, scope)
        if _is_keys_call(node):
            return self.keys(node.func.value, scope)  # type: ignore[attr-defined]
        if _is_call_of(node, "list", "tuple", "sorted", "set") and len(node.args) == 1:  # type: ignore[attr-defined]
            return self.names(node.args[0], scope)  # type: ignore[attr-defined]
        if isinstance(node, ast.Name | ast.Attribute):
            return self._follow(node, scope, self.names)
        return self._constant(node, scope)

    def _element(self, node: ast.expr, scope: Scope) -> LabelSet:
        if isinstance(node, ast.Starred):
            return self.names(node.value, scope)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return LabelSet((node.value,))
        return self._constant(node, scope)

    def _constant(self, node: ast.expr, scope: Scope) -> LabelSet:
        try:
            found = Evaluator().value(node, scope)
        except (Unresolved, TypeError, ValueError, KeyError, IndexError):
            return LabelSet(unresolved=(ast.unparse(node),))
        if isinstance(found, str):
            return LabelSet((found,))
        return LabelSet(tuple(str(item) for item in found))

    def keys(self, node: ast.expr, scope: Scope) -> LabelSet:
        """The keys of a labels dict expression."""
        if self._depth > _MAX_DEPTH:
            return LabelSet(unresolved=(ast.unparse(node),))
        self._depth += 1
        try:
            return self._keys(node, scope)
        finally:
            self._depth -= 1

    def _keys(self, node: ast.expr, scope: Scope) -> LabelSet:
        if isinstance(node, ast.Dict):
            return _literal_keys(node)
        if isinstance(node, ast.BoolOp):
            return self.keys(node.values[0], scope)
        if _is_call_of(node, "dict") and len(node.args) == 1:  # type: ignore[attr-defined]
            return self.keys(node.args[0], scope)  # type: ignore[attr-defined]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._returned_keys(node.func.id, scope)
        if isinstance(node, ast.Name | ast.Attribute):
            return self._follow(node, scope, self.keys)
        return LabelSet(unresolved=(ast.unparse(node),))

    def _follow(self, node: ast.Name | ast.Attribute, scope: Scope, then: _Mode) -> LabelSet:
        """A name's labels: its assignment (plus later mutations), or its callers' argument."""
        if isinstance(node, ast.Name) and node.id in self.bindings:
            return self.bindings[node.id]
        try:
            if isinstance(node, ast.Attribute):
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    return LabelSet(unresolved=(ast.unparse(node),))
                binding = self_attribute(node.attr, scope)
            else:
                binding = Evaluator().lookup(node.id, scope)
        except Unresolved:
            return self._argument(node, scope, then)
        found = then(binding.value, binding.scope)
        if isinstance(node, ast.Name) and then == self.keys and binding.scope.funcs:
            found += _mutations(binding.scope.funcs[-1], node.id, binding.value)
        return found

    def _argument(self, node: ast.expr, scope: Scope, then: _Mode) -> LabelSet:
        if not isinstance(node, ast.Name) or not scope.funcs:
            return LabelSet(unresolved=(ast.unparse(node),))
        func = scope.funcs[-1]
        if sc.parameter(func, node.id) is None:
            return LabelSet(unresolved=(ast.unparse(node),))
        key = _set_name(scope, func)
        if key in self.sets:
            return self.sets[key]
        default = sc.parameter(func, node.id)[1]  # type: ignore[index]
        results = [
            self._passed(arg if arg is not None else default, site, then)
            for arg, site in call_sites(scope, func, node.id)
        ]
        merged = _merge(results) if results else LabelSet(unresolved=(f"argument `{node.id}`",))
        if merged == LabelSet():
            return merged
        merged = LabelSet(merged.required, merged.optional, merged.dynamic, merged.unresolved, key)
        self.sets.setdefault(key, merged)
        return merged

    def _passed(self, arg: ast.expr | None, site: Scope, then: _Mode) -> LabelSet:
        """What one call site passes (its default when it passes nothing: None means none)."""
        if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
            return LabelSet()
        return then(arg, site)

    def _returned_keys(self, name: str, scope: Scope) -> LabelSet:
        func = _function(scope, name)
        if func is None:
            return LabelSet(unresolved=(f"{name}()",))
        inner = Scope(func[1].release, func[1].path, None, (func[0],))
        for stmt in sc.own_statements(func[0].body):
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                return self.keys(stmt.value, inner)
        return LabelSet(unresolved=(f"{name}()",))


def _is_call_of(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _is_keys_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "keys"
        and not node.args
    )


def _literal_keys(node: ast.Dict) -> LabelSet:
    found = LabelSet()
    for key in node.keys:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found += LabelSet((key.value,))
        else:
            found += LabelSet(dynamic=("**..." if key is None else ast.unparse(key),))
    return found


def _mutations(func: Function, name: str, origin: ast.expr) -> LabelSet:
    """Keys a function adds to the dict ``name`` after building it."""
    found = LabelSet()
    started = False
    for step in sc.guarded(func.body):
        started = started or any(node is origin for node in ast.walk(step.stmt))
        if started:
            found += _mutation(step, name)
    return found


def _mutation(step: sc.Step, name: str) -> LabelSet:
    stmt, when = step.stmt, " and ".join(step.guards)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
        target = stmt.targets[0]
        if isinstance(target.value, ast.Name) and target.value.id == name:
            key = target.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return LabelSet(optional=((key.value, when),)) if when else LabelSet((key.value,))
            loops = [ast.unparse(loop.iter) for loop in step.loops]
            return LabelSet(dynamic=(f"each of {loops[-1]}" if loops else ast.unparse(key),))
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        receiver = func.value if isinstance(func, ast.Attribute) else None
        is_update = isinstance(func, ast.Attribute) and func.attr == "update" and call.args
        if is_update and isinstance(receiver, ast.Name) and receiver.id == name:
            return _update(call.args[0], when)
    return LabelSet()


def _update(arg: ast.expr, when: str) -> LabelSet:
    if isinstance(arg, ast.Dict):
        keys = _literal_keys(arg).required
        return LabelSet(optional=tuple((k, when) for k in keys)) if when else LabelSet(keys)
    return LabelSet(dynamic=(ast.unparse(arg),))


def _merge(results: list[LabelSet]) -> LabelSet:
    """Several construction sites: labels they all pass are required, the rest optional."""
    everywhere = [r for r in results[0].required if all(r in o.required for o in results)]
    optional = tuple(
        (label, "depends on the construction site")
        for result in results
        for label in result.required
        if label not in everywhere
    )
    merged = LabelSet(tuple(everywhere), optional)
    for result in results:
        merged += LabelSet(
            optional=result.optional, dynamic=result.dynamic, unresolved=result.unresolved
        )
    return merged


def _set_name(scope: Scope, func: Function) -> str:
    if scope.cls is not None and func.name == "__init__":
        return scope.cls.name
    return ".".join([*([scope.cls.name] if scope.cls else []), func.name])


def _function(scope: Scope, name: str) -> tuple[Function, Scope] | None:
    """The top-level ``def name`` of the module, of the module it is imported from, or any."""
    imported = sc.import_source(scope, name)
    origin = None if imported is None else scope.release.resolve_module(imported[0])
    real = imported[1] if imported else name
    paths = [
        scope.path,
        *([origin] if origin else []),
        *scope.release.files_mentioning(f"def {real}("),
    ]
    for path in paths:
        tree = scope.release.tree(path)
        for stmt in tree.body if tree else []:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == real:
                return stmt, Scope(scope.release, path)
    return None
