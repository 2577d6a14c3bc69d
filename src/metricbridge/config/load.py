"""Rules files: YAML in, a validated frozen ``Config`` out, every issue reported at once."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from importlib import resources
from importlib.resources.abc import Traversable
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
    frozen_map,
    label_map,
    parse_derive,
    parse_idle,
    parse_naming,
)
from metricbridge.config.yaml_nodes import (
    Entries,
    Fields,
    Issues,
    boolean,
    compose,
    mapping,
    number,
    sequence,
    string,
    strings,
)
from metricbridge.errors import ConfigError, ConfigIssue, UnknownProfileError
from metricbridge.model.family import MetricType, Verify
from metricbridge.model.names import METRIC_NAME

DEFAULT_CONFIG_NAME = "aliases.yaml"
PROFILES_DIR = "profiles"  # under metricbridge/data: one NAME.yaml per shipped profile
_PROFILE_KEYS = {"version", "description", "families", "items", "approximate"}
_TOP_KEYS = {"version", "validation", "families", "items", "idle", "naming", "profiles"}
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


def _action(node: yaml.Node, path: str, issues: Issues) -> RelabelAction | None:
    return _enum(RelabelAction, node, path, issues)


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
    return _enum(Disposition, node, path, issues)


def _type(node: yaml.Node, path: str, issues: Issues) -> MetricType | None:
    return _enum(MetricType, node, path, issues)


def _idle(node: yaml.Node, path: str, issues: Issues) -> IdlePolicy | None:
    return _enum(IdlePolicy, node, path, issues)


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
        help=fields.get("help", string, no.help),
        unit=fields.get("unit", string, no.unit),
        note=fields.get("note", string, no.note),
        branches=fields.get("branches", strings, no.branches),
        warm_zero=fields.get("warm_zero", _warm_zero, no.warm_zero),
        idle=fields.get("idle", _idle, no.idle),
        derive=fields.get("derive", parse_derive, no.derive),
    )
    return rule if fields.done() and disposition is not None else None


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


def _document(text: str, issues: Issues, keys: set[str]) -> tuple[yaml.Node, Entries] | None:
    root = compose(text, issues)
    if root is None:
        if not issues.items:
            issues.items.append(
                ConfigIssue(
                    issues.source,
                    1,
                    "",
                    "the file has no YAML document (it is empty, or only comments)",
                )
            )
        return None
    return root, mapping(root, "", issues, keys)


def _profile_files() -> dict[str, Traversable]:
    folder = resources.files("metricbridge.data").joinpath(PROFILES_DIR)
    return {
        entry.name.removesuffix(".yaml"): entry
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }


def shipped_profiles() -> dict[str, str]:
    """Every shipped profile's name and one-line description, sorted by name."""
    out = {}
    for name in sorted(_profile_files()):
        profile = _parse_profile(name, [])
        out[name] = profile.description
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Profile:
    name: str
    source: str
    description: str
    families: tuple[FamilyRule, ...]
    items: tuple[ContractItem, ...]
    approximate: bool


def _parse_profile(name: str, sink: list[ConfigIssue]) -> _Profile:
    """A shipped profile: a rules fragment (``families``, ``items``) with a ``description``."""
    source = f"<profile {name}.yaml>"
    issues = Issues(source)
    document = _document(_profile_files()[name].read_text("utf-8"), issues, _PROFILE_KEYS)
    top = document[1] if document is not None else {}
    description = ""
    if "description" in top:
        description = string(top["description"][1], "description", issues) or ""
    elif top:
        issues.items.append(ConfigIssue(source, 1, "", "missing required field 'description'"))
    families = _families(top["families"][1], issues) if "families" in top else []
    items = _items(top["items"][1], issues) if "items" in top else []
    approximate = False
    if "approximate" in top:
        approximate = bool(boolean(top["approximate"][1], "approximate", issues))
    sink.extend(issues.items)
    families = [dataclasses.replace(rule, origin=source) for rule in families]
    return _Profile(name, source, description, tuple(families), tuple(items), approximate)


def _profile_names(top: Entries, issues: Issues) -> list[str]:
    if "profiles" not in top:
        return []
    node = top["profiles"][1]
    names = strings(node, "profiles", issues)
    known = _profile_files()
    for name in names:
        if name not in known:
            issues.add(node, "profiles", _unknown_profile(name, known))
    return [name for name in names if name in known]


def _unknown_profile(name: str, known: Mapping[str, Traversable]) -> str:
    return f"unknown profile {name!r} (shipped profiles: {', '.join(sorted(known)) or 'none'})"


def _layer(
    config_source: str,
    families: list[FamilyRule],
    items: list[ContractItem],
    profile: _Profile,
    issues: Issues,
) -> None:
    """Add the profile's rows; a row the file or an earlier profile already has is an issue."""
    where = {rule.name: (rule.origin or config_source, rule.line) for rule in families}
    for rule in profile.families:
        if rule.name in where:
            source, line = where[rule.name]
            message = (
                f"also defined at {source}:{line}; a profile adds families, it never overrides "
                "one (remove the row from one of the two files)"
            )
            issues.items.append(
                ConfigIssue(profile.source, rule.line, f"families.{rule.name}", message)
            )
            continue
        families.append(rule)
    taken = {item.name for item in items}
    for item in profile.items:
        if item.name in taken:
            message = (
                "also defined by the rules file or an earlier profile; a profile never overrides"
            )
            issues.items.append(
                ConfigIssue(profile.source, item.line, f"items.{item.name}", message)
            )
            continue
        items.append(item)


def parse_config(text: str, source: str, profiles: Sequence[str] = ()) -> Config:
    """Parse and validate a rules file, with its ``profiles`` and then ``profiles`` layered over.

    Raise ``ConfigError`` listing every issue; ``UnknownProfileError`` for a name in
    ``profiles`` (the command line's) that is not shipped.
    """
    known = _profile_files()
    for name in profiles:
        if name not in known:
            issue = ConfigIssue("--profile", None, "", _unknown_profile(name, known))
            raise UnknownProfileError([issue])
    issues = Issues(source)
    document = _document(text, issues, _TOP_KEYS)
    if document is None:
        raise ConfigError(issues.items)
    root, top = document
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
    active = list(dict.fromkeys([*_profile_names(top, issues), *profiles]))
    approximate = False
    for name in active:
        profile = _parse_profile(name, issues.items)
        _layer(source, families, items, profile, issues)
        approximate = approximate or profile.approximate
    config = Config(
        source,
        tuple(families),
        tuple(items),
        validation,
        idle,
        naming,
        profiles=tuple(active),
        approximate=approximate,
    )
    check_config(config, issues)
    if issues.items:
        raise ConfigError(issues.items)
    return config


def load_config(path: Path | None = None, profiles: Sequence[str] = ()) -> Config:
    """Load a rules file, or the shipped default contract when ``path`` is None.

    ``profiles``: shipped profiles to layer over it, after those the file names itself.
    """
    if path is None:
        text = resources.files("metricbridge.data").joinpath(DEFAULT_CONFIG_NAME).read_text("utf-8")
        return parse_config(text, f"<default {DEFAULT_CONFIG_NAME}>", profiles)
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
    return parse_config(text, str(path), profiles)
