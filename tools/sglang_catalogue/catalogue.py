"""Turns a release's metric definitions into the catalogue records written as JSON."""

from __future__ import annotations

import ast
import math
from typing import Any

from . import classify
from .evaluate import Evaluator, Unresolved
from .labels import LabelResolver, LabelSet
from .scan import Definition, argument, definitions
from .sources import Release
from .usage import lifecycle

SCHEMA_VERSION = 1
# prometheus_client's Histogram.DEFAULT_BUCKETS (without +Inf)
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_POSITIONS = {
    "name": 0,
    "documentation": 1,
    "labelnames": 2,
    "namespace": 3,
    "subsystem": 4,
    "unit": 5,
}


def template(node: ast.expr | None, definition: Definition) -> tuple[str, list[str]]:
    """A string expression's value; parts known only at run time become ``{expr}``."""
    if node is None:
        return "", []
    try:
        return str(Evaluator().value(node, definition.scope)), []
    except (Unresolved, TypeError, ValueError, KeyError, IndexError):
        pass
    if isinstance(node, ast.JoinedStr):
        parts = [_part(p, definition) for p in node.values]
        return "".join(p for p, _ in parts), [u for _, us in parts for u in us]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left, definition), template(node.right, definition)
        return left[0] + right[0], left[1] + right[1]
    text = ast.unparse(node)
    return "{" + text + "}", [text]


def _part(node: ast.expr, definition: Definition) -> tuple[str, list[str]]:
    if isinstance(node, ast.FormattedValue):
        return template(node.value, definition)
    return template(node, definition)


def _text_argument(definition: Definition, name: str) -> tuple[str, list[str]]:
    return template(argument(definition.call, name, _POSITIONS[name]), definition)


def family_name(definition: Definition) -> tuple[str, list[str]]:
    """The family name prometheus_client registers.

    Namespace, subsystem and unit applied; a counter's ``_total`` removed: it is put back on the
    sample).
    """
    name, unresolved = _text_argument(definition, "name")
    prefix = [_text_argument(definition, key) for key in ("namespace", "subsystem")]
    full = "_".join([*(p for p, _ in prefix if p), name])
    unit, unit_unresolved = _text_argument(definition, "unit")
    if unit and not full.endswith("_" + unit):
        full += "_" + unit
    if definition.kind == "counter":
        full = full.removesuffix("_total")
    return full, unresolved + [u for _, us in prefix for u in us] + unit_unresolved


def _buckets(definition: Definition) -> tuple[list[float] | None, str | None]:
    if definition.kind != "histogram":
        return None, None
    node = argument(definition.call, "buckets", 99)
    if node is None:
        return list(DEFAULT_BUCKETS), "prometheus_client default buckets"
    evaluator = Evaluator()
    try:
        found = [float(b) for b in evaluator.value(node, definition.scope)]
    except (Unresolved, TypeError, ValueError, KeyError, IndexError) as error:
        return None, f"set at run time: depends on `{error}` in `{ast.unparse(node)[:240]}`"
    bounds = sorted(b for b in found if not math.isinf(b))
    note = "; ".join(dict.fromkeys(evaluator.notes)) or None
    return bounds, note


def _labels(definition: Definition, resolver: LabelResolver) -> LabelSet:
    own = resolver.names(argument(definition.call, "labelnames", 2), definition.scope)
    wrapper = definition.wrapper
    if wrapper is None:
        return own
    inner = argument(wrapper.inner, "labelnames", 2)
    param = inner_param(inner)
    resolver.bindings = {param: own} if param else {}
    try:
        return resolver.names(inner, wrapper.scope)
    finally:
        resolver.bindings = {}


def inner_param(node: ast.expr | None) -> str | None:
    """The wrapper's own argument name inside its inner ``labelnames=`` expression."""
    for child in ast.walk(node) if node else []:
        if isinstance(child, ast.Name) and child.id not in {"list", "tuple", "sorted"}:
            return child.id
    return None


def _multiprocess_mode(definition: Definition) -> str | None:
    """A gauge's multiprocess mode (prometheus_client's default is ``all``: a ``pid`` label)."""
    if definition.kind != "gauge":
        return None
    node = argument(definition.call, "multiprocess_mode", 99)
    if node is not None:
        return template(node, definition)[0]
    wrapper = definition.wrapper
    inner = None if wrapper is None else argument(wrapper.inner, "multiprocess_mode", 99)
    if wrapper is None or inner is None:
        return "all"
    try:
        return str(Evaluator().value(inner, wrapper.scope))
    except Unresolved:
        return "{" + ast.unparse(inner) + "}"


def _own_labels(labels: LabelSet, resolver: LabelResolver) -> tuple[list[str], str | None]:
    """The labels the definition adds to its shared label set (all of them without one)."""
    base = resolver.sets.get(labels.base or "")
    if base is None or labels.required[: len(base.required)] != base.required:
        return list(labels.required), None
    return list(labels.required[len(base.required) :]), labels.base


def _features(definition: Definition, reach: frozenset[str]) -> list[str] | None:
    path, qualname = definition.scope.path, definition.qualname
    found = {*classify.features(path, qualname, definition.guards), *reach}
    return sorted(found) or None


# prometheus_client's multiprocess modes that keep each process's value apart, under a ``pid``
# label it appends to the gauge's own (SGLang always runs prometheus_client multiprocess).
_PER_PROCESS_MODES = frozenset({"all", "liveall"})


def record(definition: Definition, resolver: LabelResolver) -> dict[str, Any]:
    """One family's catalogue record (keys whose value is empty or false are left out)."""
    name, unresolved = family_name(definition)
    help_text, help_unresolved = _text_argument(definition, "documentation")
    labels = _labels(definition, resolver)
    own, label_set = _own_labels(labels, resolver)
    mode = _multiprocess_mode(definition)
    if mode in _PER_PROCESS_MODES and "pid" not in own:
        own.append("pid")
    buckets, note = _buckets(definition)
    labelled = bool(labels.required or labels.optional or labels.dynamic or labels.unresolved)
    life = lifecycle(definition, labelled)
    declared_unit, _ = _text_argument(definition, "unit")
    path, qualname = definition.scope.path, definition.qualname
    found: dict[str, Any] = {
        "name": name,
        "type": definition.kind,
        "labels": own,
        "help": help_text,
        "process": classify.process(path, qualname),
        "lifecycle": life.kind,
        "event": life.event,
        "source": f"{path}:{definition.call.lineno}",
    }
    extras = {
        "label_set": label_set,
        "scope": None if qualname == f"{label_set}.__init__" else qualname,
        "unit": classify.unit(name, definition.kind, declared_unit or None),
        "dead": life.dead or None,
        "features": _features(definition, life.features),
        "guards": list(definition.guards) or None,
        "buckets": buckets,
        "buckets_note": note,
        "multiprocess_mode": mode,
        "unresolved": unresolved + help_unresolved + list(labels.unresolved) or None,
    }
    found.update({k: v for k, v in extras.items() if v is not None})
    return found


def _label_set(labels: LabelSet) -> dict[str, Any]:
    return {
        "labels": list(labels.required),
        "optional": [{"name": n, "when": w} for n, w in labels.optional],
        "dynamic": list(labels.dynamic),
    }


def _merge_duplicates(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per family name; further definitions are listed under ``also_defined``."""
    by_name: dict[str, dict[str, Any]] = {}
    for found in records:
        first = by_name.setdefault(found["name"], found)
        if first is not found:
            keys: tuple[str, ...] = ("type", "labels", "help")
            same = all(first[k] == found[k] for k in keys)
            shown = ("source", "scope") if same else ("source", "scope", *keys)
            other: dict[str, Any] = {k: found[k] for k in shown if k in found}
            first.setdefault("also_defined", []).append(other)
    return [by_name[name] for name in sorted(by_name)]


def build(release: Release) -> dict[str, Any]:
    """The whole catalogue of one release."""
    resolver = LabelResolver()
    found = sorted(definitions(release), key=lambda d: (d.scope.path, d.call.lineno))
    records = [record(d, resolver) for d in found]
    families = [r for r in records if r["name"].startswith("sglang") or "{" in r["name"]]
    skipped = [replace_source(r) for r in records if r not in families]
    catalogue: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "engine": "sglang",
        "version": release.version,
        "archive": {"file": release.archive_name, "sha256": release.archive_sha256},
        "label_sets": {k: _label_set(v) for k, v in sorted(resolver.sets.items())},
        "families": _merge_duplicates(families),
    }
    if skipped:
        catalogue["other_metrics"] = skipped
    return catalogue


def replace_source(found: dict[str, Any]) -> dict[str, Any]:
    """A non-``sglang`` metric, kept only as name, type and source."""
    return {k: found[k] for k in ("name", "type", "source", "scope") if k in found}
