"""A rules file's ``families`` and ``items`` sections read into frozen rules, with line marks.

Templates (``{field}`` names with ``values``) are expanded here into one rule per row.
``config.load`` reads the document and its profiles around these.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

import yaml

from metricbridge.config.schema import (
    ContractItem,
    Disposition,
    FamilyRule,
    IdlePolicy,
    Join,
    RelabelAction,
    RelabelConfig,
    WarmZero,
)
from metricbridge.config.synthesis import (
    frozen_map,
    label_map,
    parse_derive,
)
from metricbridge.config.yaml_nodes import (
    Entries,
    Fields,
    Issues,
    boolean,
    mapping,
    number,
    sequence,
    string,
    strings,
)
from metricbridge.model.family import MetricType
from metricbridge.model.names import LABEL_NAME, METRIC_NAME

_TEMPLATE_FIELD = re.compile(r"\{([a-z_]+)\}")

_RULE_KEYS = {
    "disposition", "type", "source", "keep_source", "factor", "match", "relabel", "help", "unit",
    "note", "branches", "warm_zero", "idle", "template", "derive", "join",
}  # fmt: skip
_JOIN_KEYS = {"families", "labels"}
_RELABEL_KEYS = {"action", "source_labels", "separator", "regex", "target_label", "replacement"}
_WARM_KEYS = {"labels_from", "keep_labels", "drop_labels", "defaults", "values", "set", "buckets"}


_E = TypeVar("_E", bound=StrEnum)


def enum_value(kind: type[_E], node: yaml.Node, path: str, issues: Issues) -> _E | None:
    """The member of ``kind`` the node names, or None with an issue listing the choices."""
    text = string(node, path, issues)
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        choices = "|".join(member.value for member in kind)
        issues.add(node, path, f"unknown value {text!r} (expected {choices})")
        return None


def _action(node: yaml.Node, path: str, issues: Issues) -> RelabelAction | None:
    return enum_value(RelabelAction, node, path, issues)


_NO_STEP = RelabelConfig(line=0)  # the defaults, declared once in the dataclass


def _relabel(node: yaml.Node, path: str, issues: Issues) -> RelabelConfig | None:
    fields, no = Fields(mapping(node, path, issues, _RELABEL_KEYS), path, issues), _NO_STEP
    step = RelabelConfig(
        line=node.start_mark.line + 1,
        action=fields.get("action", _action, no.action),
        source_labels=fields.get("source_labels", strings, no.source_labels),
        separator=fields.get("separator", string, no.separator),
        regex=fields.get("regex", string, no.regex),
        target_label=fields.get("target_label", string, no.target_label),
        replacement=fields.get("replacement", string, no.replacement),
    )
    return step if fields.done() else None


def _relabel_steps(node: yaml.Node, path: str, issues: Issues) -> tuple[RelabelConfig, ...] | None:
    """Every step (each one's issues recorded), or None if any step was refused."""
    steps = [
        _relabel(item, f"{path}[{i}]", issues)
        for i, item in enumerate(sequence(node, path, issues))
    ]
    read = tuple(step for step in steps if step is not None)
    return read if len(read) == len(steps) else None


def _value_lists(node: yaml.Node, path: str, issues: Issues) -> Mapping[str, tuple[str, ...]]:
    return frozen_map(
        {
            label: strings(values, f"{path}.{label}", issues)
            for label, (_, values) in mapping(node, path, issues).items()
        }
    )


def _bounds(node: yaml.Node, path: str, issues: Issues) -> tuple[float, ...]:
    bounds = (
        number(item, f"{path}[{i}]", issues) for i, item in enumerate(sequence(node, path, issues))
    )
    return tuple(bound for bound in bounds if bound is not None)


_NO_WARM = WarmZero()  # the defaults, declared once in the dataclass


def _warm_zero(node: yaml.Node, path: str, issues: Issues) -> WarmZero | None:
    """A warm-zero block; a refused value leaves its default (its issue fails the load)."""
    fields, no = Fields(mapping(node, path, issues, _WARM_KEYS), path, issues), _NO_WARM
    warm = WarmZero(
        labels_from=fields.get("labels_from", string, no.labels_from),
        keep_labels=fields.get("keep_labels", strings, no.keep_labels),
        drop_labels=fields.get("drop_labels", strings, no.drop_labels),
        defaults=fields.get("defaults", label_map, no.defaults),
        values=fields.get("values", _value_lists, no.values),
        set=fields.get("set", label_map, no.set),
        buckets=fields.get("buckets", _bounds, no.buckets),
    )
    fields.done()
    return warm


def _disposition(node: yaml.Node, path: str, issues: Issues) -> Disposition | None:
    return enum_value(Disposition, node, path, issues)


def _type(node: yaml.Node, path: str, issues: Issues) -> MetricType | None:
    return enum_value(MetricType, node, path, issues)


def _idle(node: yaml.Node, path: str, issues: Issues) -> IdlePolicy | None:
    return enum_value(IdlePolicy, node, path, issues)


def _join(node: yaml.Node, path: str, issues: Issues) -> Join | None:
    """``join: {families: [...], labels: [...]}``: labels a relabel's steps may read."""
    entries = mapping(node, path, issues, _JOIN_KEYS)
    fields = Fields(entries, path, issues)
    none: tuple[str, ...] = ()
    families = fields.get("families", strings, none)
    labels = fields.get("labels", strings, none)
    if not fields.done():
        return None
    if not families or not labels:
        issues.add(node, path, "a join needs 'families' and 'labels'")
    for name in families:
        if not METRIC_NAME.fullmatch(name):
            issues.add(node, f"{path}.families", f"invalid metric family name {name!r}")
    for label in labels:
        if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
            issues.add(node, f"{path}.labels", f"invalid label name {label!r}")
    return Join(families, labels)


_NO_RULE = FamilyRule(name="", line=0, disposition=Disposition.NATIVE)  # the defaults


def _rule(name: str, line: int, entries: Entries, path: str, issues: Issues) -> FamilyRule | None:
    """The row's rule (``template`` is read by ``_expand``), or None if a value was refused."""
    fields, no = Fields(entries, path, issues), _NO_RULE
    disposition = fields.get("disposition", _disposition, None)  # required: no default
    rule = FamilyRule(
        name=name,
        line=line,
        disposition=no.disposition if disposition is None else disposition,
        type=fields.get("type", _type, no.type),
        source=fields.get("source", string, no.source),
        keep_source=fields.get("keep_source", boolean, no.keep_source),
        factor=fields.get("factor", number, no.factor),
        match=fields.get("match", label_map, no.match),
        relabel=fields.get("relabel", _relabel_steps, no.relabel),
        join=fields.get("join", _join, no.join),
        help=fields.get("help", string, no.help),
        unit=fields.get("unit", string, no.unit),
        note=fields.get("note", string, no.note),
        branches=fields.get("branches", strings, no.branches),
        warm_zero=fields.get("warm_zero", _warm_zero, no.warm_zero),
        idle=fields.get("idle", _idle, no.idle),
        derive=fields.get("derive", parse_derive, no.derive),
    )
    return rule if fields.done() and disposition is not None else None


# Rows one templated name may expand to: the shipped contract's largest template makes 8.
# Checked before expanding, so a short file (8 fields of 10 values through one YAML alias is
# 10^8 rows) is refused at once instead of loading for ever.
MAX_TEMPLATE_ROWS = 1_000


def _expand(
    name: str,
    name_node: yaml.Node,
    entries: dict[str, tuple[yaml.Node, yaml.Node]],
    path: str,
    issues: Issues,
) -> list[str]:
    """Concrete names of a templated row such as ``sglang:{stage}_batch_size``."""
    fields = _TEMPLATE_FIELD.findall(name)
    if "template" not in entries:
        if fields:
            issues.add(name_node, path, f"name uses {{{fields[0]}}} but the rule has no 'template'")
            return []
        return [name]
    key_node, value_node = entries["template"]
    values = {
        f: strings(v, f"{path}.template.{f}", issues)
        for f, (_, v) in mapping(value_node, f"{path}.template", issues).items()
    }
    if set(values) != set(fields):
        issues.add(
            key_node,
            f"{path}.template",
            f"template fields {sorted(values)} do not match the name's {sorted(fields)}",
        )
        return []
    rows = math.prod(len(values[f]) for f in fields)
    if rows > MAX_TEMPLATE_ROWS:
        issues.add(
            key_node,
            f"{path}.template",
            f"the template makes {rows:,} rows (at most {MAX_TEMPLATE_ROWS:,}); split it",
        )
        return []
    names = []
    for combo in itertools.product(*(values[f] for f in fields)):
        concrete = name
        for field_name, value in zip(fields, combo, strict=True):
            concrete = concrete.replace("{" + field_name + "}", value)
        names.append(concrete)
    return names


def read_families(node: yaml.Node, issues: Issues) -> list[FamilyRule]:
    """The ``families`` section: one rule per family (templates expanded), each with its line."""
    rules: list[FamilyRule] = []
    for name, (key_node, value_node) in mapping(node, "families", issues).items():
        path = f"families.{name}"
        entries = mapping(value_node, path, issues, _RULE_KEYS)
        rule = _rule(name, key_node.start_mark.line + 1, entries, path, issues)
        if "disposition" not in entries:
            issues.add(key_node, path, "missing required field 'disposition'")
        if rule is None:
            continue
        for concrete in _expand(name, key_node, entries, path, issues):
            if not METRIC_NAME.fullmatch(concrete):
                issues.add(key_node, path, f"invalid metric family name {concrete!r}")
                continue
            rules.append(dataclasses.replace(rule, name=concrete))
    return rules


def read_items(node: yaml.Node, issues: Issues) -> list[ContractItem]:
    """The ``items`` section: the contract rows that are not families, each with its line."""
    items = []
    for name, (key_node, value_node) in mapping(node, "items", issues).items():
        path = f"items.{name}"
        entries = mapping(value_node, path, issues, {"disposition", "note"})
        disposition = (
            string(entries["disposition"][1], f"{path}.disposition", issues)
            if "disposition" in entries
            else None
        )
        note = string(entries["note"][1], f"{path}.note", issues) if "note" in entries else None
        if disposition is None:
            if "disposition" not in entries:
                issues.add(key_node, path, "missing required field 'disposition'")
            continue
        items.append(ContractItem(name, key_node.start_mark.line + 1, disposition, note))
    return items
