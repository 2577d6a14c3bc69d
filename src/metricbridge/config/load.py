"""Rules files: YAML in, a validated frozen ``Config`` out, every issue reported at once."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TypeVar

import yaml

from metricbridge.config.checks import check_config
from metricbridge.config.schema import (
    Config,
    ContractItem,
    Disposition,
    FamilyRule,
    IdlePolicy,
    RelabelAction,
    RelabelConfig,
    WarmZero,
)
from metricbridge.config.synthesis import (
    IdleConfig,
    NamingConfig,
    parse_derive,
    parse_idle,
    parse_naming,
)
from metricbridge.config.yaml_nodes import (
    Issues,
    boolean,
    compose,
    mapping,
    number,
    sequence,
    string,
    string_map,
    strings,
)
from metricbridge.errors import ConfigError, ConfigIssue
from metricbridge.model.family import MetricType, Verify
from metricbridge.model.names import LABEL_NAME, METRIC_NAME

DEFAULT_CONFIG_NAME = "aliases.yaml"
_TEMPLATE_FIELD = re.compile(r"\{([a-z_]+)\}")

_RULE_KEYS = {
    "disposition", "type", "source", "keep_source", "factor", "match", "relabel", "help", "unit",
    "note", "branches", "warm_zero", "idle", "template", "derive",
}  # fmt: skip
_RELABEL_KEYS = {"action", "source_labels", "separator", "regex", "target_label", "replacement"}
_WARM_KEYS = {"labels_from", "keep_labels", "drop_labels", "defaults", "values", "set", "buckets"}


_E = TypeVar("_E", bound=StrEnum)


def _enum(kind: type[_E], node: yaml.Node, path: str, issues: Issues) -> _E | None:
    text = string(node, path, issues)
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        choices = "|".join(member.value for member in kind)
        issues.add(node, path, f"unknown value {text!r} (expected {choices})")
        return None


def _relabel(node: yaml.Node, path: str, issues: Issues) -> RelabelConfig | None:
    entries = mapping(node, path, issues, _RELABEL_KEYS)
    values: dict[str, object] = {}
    for key, (_, value_node) in entries.items():
        sub = f"{path}.{key}"
        if key == "action":
            values[key] = _enum(RelabelAction, value_node, sub, issues)
        elif key == "source_labels":
            values[key] = strings(value_node, sub, issues)
        else:
            values[key] = string(value_node, sub, issues)
    if any(value is None for value in values.values()):
        return None
    return RelabelConfig(line=node.start_mark.line + 1, **values)  # type: ignore[arg-type]


def _warm_zero(node: yaml.Node, path: str, issues: Issues) -> WarmZero | None:
    entries = mapping(node, path, issues, _WARM_KEYS)
    out: dict[str, object] = {}
    for key, (_, value_node) in entries.items():
        sub = f"{path}.{key}"
        if key == "labels_from":
            out[key] = string(value_node, sub, issues)
        elif key in ("keep_labels", "drop_labels"):
            out[key] = strings(value_node, sub, issues)
        elif key in ("defaults", "set"):
            out[key] = string_map(value_node, sub, issues, key_pattern=LABEL_NAME)
        elif key == "values":
            out[key] = {
                label: strings(values, f"{sub}.{label}", issues)
                for label, (_, values) in mapping(value_node, sub, issues).items()
            }
        else:
            bounds = (
                number(item, f"{sub}[{i}]", issues)
                for i, item in enumerate(sequence(value_node, sub, issues))
            )
            out[key] = tuple(bound for bound in bounds if bound is not None)
    return WarmZero(**out)  # type: ignore[arg-type]


_Reader = Callable[[yaml.Node, str, Issues], object]
_RULE_READERS: dict[str, _Reader] = {
    "disposition": lambda node, path, issues: _enum(Disposition, node, path, issues),
    "type": lambda node, path, issues: _enum(MetricType, node, path, issues),
    "idle": lambda node, path, issues: _enum(IdlePolicy, node, path, issues),
    "keep_source": boolean,
    "factor": number,
    "match": lambda node, path, issues: string_map(node, path, issues, key_pattern=LABEL_NAME),
    "relabel": lambda node, path, issues: tuple(
        _relabel(item, f"{path}[{i}]", issues)
        for i, item in enumerate(sequence(node, path, issues))
    ),
    "branches": strings,
    "warm_zero": _warm_zero,
    "derive": parse_derive,
}


def _rule_fields(
    entries: dict[str, tuple[yaml.Node, yaml.Node]], path: str, issues: Issues
) -> dict[str, object]:
    """Each field read by its own reader; strings (source, help, unit, note) by default."""
    return {
        key: _RULE_READERS.get(key, string)(value_node, f"{path}.{key}", issues)
        for key, (_, value_node) in entries.items()
        if key != "template"
    }


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
    names = []
    for combo in itertools.product(*(values[f] for f in fields)):
        concrete = name
        for field_name, value in zip(fields, combo, strict=True):
            concrete = concrete.replace("{" + field_name + "}", value)
        names.append(concrete)
    return names


def _families(node: yaml.Node, issues: Issues) -> list[FamilyRule]:
    rules: list[FamilyRule] = []
    for name, (key_node, value_node) in mapping(node, "families", issues).items():
        path = f"families.{name}"
        entries = mapping(value_node, path, issues, _RULE_KEYS)
        fields = _rule_fields(entries, path, issues)
        if "disposition" not in entries:
            issues.add(key_node, path, "missing required field 'disposition'")
        if any(value is None for value in fields.values()) or "disposition" not in fields:
            continue
        for concrete in _expand(name, key_node, entries, path, issues):
            if not METRIC_NAME.fullmatch(concrete):
                issues.add(key_node, path, f"invalid metric family name {concrete!r}")
                continue
            rules.append(FamilyRule(name=concrete, line=key_node.start_mark.line + 1, **fields))  # type: ignore[arg-type]
    return rules


def _items(node: yaml.Node, issues: Issues) -> list[ContractItem]:
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


def parse_config(text: str, source: str) -> Config:
    """Parse and validate a rules file; raise ``ConfigError`` listing every issue."""
    issues = Issues(source)
    root = compose(text, issues)
    if root is None:
        if not issues.items:
            issues.items.append(
                ConfigIssue(
                    source, 1, "", "the file has no YAML document (it is empty, or only comments)"
                )
            )
        raise ConfigError(issues.items)
    top = mapping(
        root, "", issues, {"version", "validation", "families", "items", "idle", "naming"}
    )
    if "version" not in top:
        issues.add(
            root, "version", "missing required field 'version' (this release reads version 1)"
        )
    elif (version := number(top["version"][1], "version", issues)) is not None and version != 1:
        issues.add(
            top["version"][1], "version", f"unsupported version {version:g} (this release reads 1)"
        )
    validation = Verify.STRUCTURE
    if "validation" in top:
        validation = _enum(Verify, top["validation"][1], "validation", issues) or validation
    families = _families(top["families"][1], issues) if "families" in top else []
    items = _items(top["items"][1], issues) if "items" in top else []
    idle = parse_idle(top["idle"][1], issues) if "idle" in top else IdleConfig()
    naming = parse_naming(top["naming"][1], issues) if "naming" in top else NamingConfig()
    config = Config(source, tuple(families), tuple(items), validation, idle, naming)
    check_config(config, issues)
    if issues.items:
        raise ConfigError(issues.items)
    return config


def load_config(path: Path | None = None) -> Config:
    """Load a rules file, or the shipped default contract when ``path`` is None."""
    if path is None:
        text = resources.files("metricbridge.data").joinpath(DEFAULT_CONFIG_NAME).read_text("utf-8")
        return parse_config(text, f"<default {DEFAULT_CONFIG_NAME}>")
    try:
        data = path.read_bytes()
    except OSError as exc:
        # The one issue without a line: there is no content to point into.
        reason = exc.strerror or str(exc)
        raise ConfigError([ConfigIssue(str(path), None, "", f"cannot read: {reason}")]) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end].hex(" ")
        message = f"cannot read: not UTF-8 (bytes {bad}: {exc.reason})"
        raise ConfigError([ConfigIssue(str(path), line, "", message)]) from exc
    return parse_config(text, str(path))
