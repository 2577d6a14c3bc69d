"""A small static evaluator for constant expressions in SGLang's source.

Metric names, HELP texts, bucket lists: their value, or :class:`Unresolved` saying what they
depend on.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from . import scope as sc
from .scope import Binding, Scope

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.BitOr: operator.or_,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_BUILTINS: dict[str, Callable[..., Any]] = {
    "range": range,
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "sorted": sorted,
    "len": len,
    "float": float,
    "int": int,
    "str": str,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
}
_METHODS = frozenset({"format", "join", "upper", "lower", "replace", "strip", "keys", "copy"})
_MAX_DEPTH = 40


class Unresolved(Exception):  # noqa: N818 - it reads as the answer, not as a failure
    """The expression depends on something only known at run time.

    An argument, the environment, a server flag); ``str()`` is the source text it stopped at.
    """


def exponential_buckets(start: float, width: float, length: int) -> list[float]:
    """SGLang's ``exponential_buckets(start, width, length)``: ``start * width**i``."""
    return [start * (width**i) for i in range(length)]


def two_sides_exponential_buckets(middle: float, base: float, count: int) -> list[float]:
    """SGLang's ``two_sides_exponential_buckets``: ``middle +- base**i`` (clamped at 0)."""
    buckets = [middle]
    distance = 1.0
    for _ in range(math.ceil(count / 2)):
        distance *= base
        buckets += [middle + distance, max(0, middle - distance)]
    return sorted(set(buckets))


_HELPERS: dict[str, Callable[..., Any]] = {
    "exponential_buckets": exponential_buckets,
    "two_sides_exponential_buckets": two_sides_exponential_buckets,
}


@dataclass
class Evaluator:
    """Evaluates expressions; ``notes`` collects the defaults it had to assume."""

    notes: list[str] = field(default_factory=list)
    _bound: dict[str, Any] = field(default_factory=dict)
    _depth: int = 0

    def value(self, node: ast.expr, scope: Scope) -> Any:  # noqa: ANN401 - any constant
        """The expression's value, or raise :class:`Unresolved`."""
        if self._depth > _MAX_DEPTH:
            raise Unresolved(ast.unparse(node))
        self._depth += 1
        try:
            return self._dispatch(node, scope)
        finally:
            self._depth -= 1

    def _dispatch(self, node: ast.expr, scope: Scope) -> Any:  # noqa: ANN401
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise Unresolved(ast.unparse(node))
        return handler(self, node, scope)

    def _constant(self, node: ast.Constant, _scope: Scope) -> Any:  # noqa: ANN401
        return node.value

    def _joined(self, node: ast.JoinedStr, scope: Scope) -> str:
        return "".join(self._fstring_part(part, scope) for part in node.values)

    def _binop(self, node: ast.BinOp, scope: Scope) -> Any:  # noqa: ANN401
        if type(node.op) not in _BINARY:
            raise Unresolved(ast.unparse(node))
        left, right = self.value(node.left, scope), self.value(node.right, scope)
        return _BINARY[type(node.op)](left, right)

    def _unary(self, node: ast.UnaryOp, scope: Scope) -> Any:  # noqa: ANN401
        if type(node.op) not in _UNARY:
            raise Unresolved(ast.unparse(node))
        return _UNARY[type(node.op)](self.value(node.operand, scope))

    def _name_node(self, node: ast.Name, scope: Scope) -> Any:  # noqa: ANN401
        return self._name(node.id, scope)

    def _attribute_node(self, node: ast.Attribute, scope: Scope) -> Any:  # noqa: ANN401
        return self._binding_value(self.attribute(node, scope))

    def _subscript(self, node: ast.Subscript, scope: Scope) -> Any:  # noqa: ANN401
        return self.value(node.value, scope)[self.value(node.slice, scope)]

    def _ifexp(self, node: ast.IfExp, scope: Scope) -> Any:  # noqa: ANN401
        chosen = node.body if self.value(node.test, scope) else node.orelse
        return self.value(chosen, scope)

    def _sequence(self, node: ast.List | ast.Tuple | ast.Set, scope: Scope) -> Any:  # noqa: ANN401
        items: list[Any] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                items.extend(self.value(element.value, scope))
            else:
                items.append(self.value(element, scope))
        if isinstance(node, ast.Tuple):
            return tuple(items)
        return set(items) if isinstance(node, ast.Set) else items

    def _dict(self, node: ast.Dict, scope: Scope) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                result.update(self.value(item, scope))
            else:
                result[self.value(key, scope)] = self.value(item, scope)
        return result

    def _fstring_part(self, part: ast.expr, scope: Scope) -> str:
        if isinstance(part, ast.FormattedValue):
            spec = "" if part.format_spec is None else self.value(part.format_spec, scope)
            return format(self.value(part.value, scope), spec)
        return str(self.value(part, scope))

    def _boolop(self, node: ast.BoolOp, scope: Scope) -> Any:  # noqa: ANN401
        if not isinstance(node.op, ast.Or):
            values = [self.value(item, scope) for item in node.values]
            return all(values) and values[-1]
        for item in node.values[:-1]:
            try:
                found = self.value(item, scope)
            except Unresolved:
                self.notes.append(f"default used when `{ast.unparse(item)}` is not set")
                continue
            if found:
                return found
        return self.value(node.values[-1], scope)

    def _name(self, name: str, scope: Scope) -> Any:  # noqa: ANN401
        if name in self._bound:
            return self._bound[name]
        return self._binding_value(self.lookup(name, scope))

    def _binding_value(self, binding: Binding) -> Any:  # noqa: ANN401
        if binding.is_default:
            self.notes.append(f"default of `{ast.unparse(binding.value)[:60]}`")
        return self.value(binding.value, binding.scope)

    def lookup(self, name: str, scope: Scope) -> Binding:
        """Where a bare name gets its value: enclosing functions, module, then imports."""
        for depth in range(len(scope.funcs), 0, -1):
            inner = replace(scope, funcs=scope.funcs[:depth])
            func = scope.funcs[depth - 1]
            found = sc.latest_binding(func.body, ast.Name(name), inner)
            if found is not None:
                return found
            param = sc.parameter(func, name)
            if param is not None:
                return _parameter_binding(name, param[1], inner)
        return self.global_binding(name, scope)

    def global_binding(self, name: str, scope: Scope) -> Binding:
        """A module-level name of the scope's module, following ``from X import name``."""
        module = scope.at_module()
        found = sc.latest_binding(module.module.body, ast.Name(name), module)
        if found is not None:
            return found
        imported = sc.import_source(scope, name)
        path = None if imported is None else scope.release.resolve_module(imported[0])
        if imported is None or path is None or scope.release.tree(path) is None:
            raise Unresolved(name)
        return self.global_binding(imported[1], scope.at_module(path))

    def attribute(self, node: ast.Attribute, scope: Scope) -> Binding:
        """Where ``self.x``, ``Class.x`` or ``module.x`` gets its value."""
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id == "self" and scope.cls is not None:
            return self_attribute(node.attr, scope)
        if isinstance(owner, ast.Name):
            cls = sc.find_class(scope, owner.id)
            if cls is not None:
                return _class_attribute(cls, node.attr, scope)
        raise Unresolved(ast.unparse(node))

    def _call(self, node: ast.Call, scope: Scope) -> Any:  # noqa: ANN401
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _METHODS:
            receiver = self.value(func.value, scope)
            return getattr(receiver, func.attr)(*self._args(node, scope)[0])
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "generate_buckets" and len(node.args) == 2:
            self.notes.append(f"default buckets; `{ast.unparse(node.args[0])}` may override")
            return sorted(set(self.value(node.args[1], scope)))
        handler = _HELPERS.get(name) or _BUILTINS.get(name)
        if handler is None or (name in _BUILTINS and not isinstance(func, ast.Name)):
            raise Unresolved(ast.unparse(node))
        args, kwargs = self._args(node, scope)
        return handler(*args, **kwargs)

    def _args(self, node: ast.Call, scope: Scope) -> tuple[list[Any], dict[str, Any]]:
        args = [self.value(arg, scope) for arg in node.args]
        kwargs = {kw.arg: self.value(kw.value, scope) for kw in node.keywords if kw.arg}
        return args, kwargs

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, scope: Scope
    ) -> Any:  # noqa: ANN401
        results: list[Any] = []
        self._generate(node, node.generators, scope, results)
        return set(results) if isinstance(node, ast.SetComp) else results

    def _generate(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp,
        generators: list[ast.comprehension],
        scope: Scope,
        results: list[Any],
    ) -> None:
        if not generators:
            results.append(self.value(node.elt, scope))
            return
        first = generators[0]
        if not isinstance(first.target, ast.Name):
            raise Unresolved(ast.unparse(node))
        for item in self.value(first.iter, scope):
            self._bound[first.target.id] = item
            if all(self.value(test, scope) for test in first.ifs):
                self._generate(node, generators[1:], scope, results)
        self._bound.pop(first.target.id, None)


_HANDLERS: dict[type[ast.AST], Callable[[Evaluator, Any, Scope], Any]] = {
    ast.Constant: Evaluator._constant,  # noqa: SLF001 - the class's own dispatch table
    ast.List: Evaluator._sequence,  # noqa: SLF001
    ast.Tuple: Evaluator._sequence,  # noqa: SLF001
    ast.Set: Evaluator._sequence,  # noqa: SLF001
    ast.Dict: Evaluator._dict,  # noqa: SLF001
    ast.JoinedStr: Evaluator._joined,  # noqa: SLF001
    ast.BinOp: Evaluator._binop,  # noqa: SLF001
    ast.UnaryOp: Evaluator._unary,  # noqa: SLF001
    ast.BoolOp: Evaluator._boolop,  # noqa: SLF001
    ast.Name: Evaluator._name_node,  # noqa: SLF001
    ast.Attribute: Evaluator._attribute_node,  # noqa: SLF001
    ast.Call: Evaluator._call,  # noqa: SLF001
    ast.ListComp: Evaluator._comprehension,  # noqa: SLF001
    ast.SetComp: Evaluator._comprehension,  # noqa: SLF001
    ast.GeneratorExp: Evaluator._comprehension,  # noqa: SLF001
    ast.Subscript: Evaluator._subscript,  # noqa: SLF001
    ast.IfExp: Evaluator._ifexp,  # noqa: SLF001
}


def _parameter_binding(name: str, default: ast.expr | None, scope: Scope) -> Binding:
    if default is None or (isinstance(default, ast.Constant) and default.value is None):
        raise Unresolved(f"argument `{name}`")
    return Binding(default, scope, is_default=True)


def self_attribute(attr: str, scope: Scope) -> Binding:
    """The assignment of ``self.attr`` in the scope's class: this method first, then others."""
    cls = scope.cls
    if cls is None:
        raise Unresolved(f"self.{attr}")
    target = ast.Attribute(ast.Name("self"), attr)
    current = scope.funcs[:1]
    others = [s for s in cls.body if isinstance(s, sc.Function) and s not in current]
    for func in [*current, *others]:
        inner = Scope(
            scope.release, scope.path, cls, (func,), scope.line if func in current else 1 << 30
        )
        found = sc.latest_binding(func.body, target, inner)
        if found is not None:
            return found
    return _class_attribute(cls, attr, scope)


def _class_attribute(cls: ast.ClassDef, attr: str, scope: Scope) -> Binding:
    class_scope = Scope(scope.release, scope.path, cls)
    found = sc.latest_binding(cls.body, ast.Name(attr), class_scope)
    if found is None:
        raise Unresolved(f"{cls.name}.{attr}")
    return found
