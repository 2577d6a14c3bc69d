"""Rules files: YAML in, a validated frozen ``Config`` out, every issue reported at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from metricbridge.config.checks import check_config
from metricbridge.config.schema import (
    Config,
    ContractItem,
    FamilyRule,
)
from metricbridge.config.sections import enum_value, read_families, read_items
from metricbridge.config.synthesis import (
    IdleConfig,
    NamingConfig,
    parse_idle,
    parse_naming,
)
from metricbridge.config.yaml_nodes import (
    Entries,
    Issues,
    boolean,
    compose,
    mapping,
    number,
    string,
    strings,
)
from metricbridge.errors import ConfigError, ConfigIssue, UnknownProfileError
from metricbridge.model.family import Verify

DEFAULT_CONFIG_NAME = "aliases.yaml"
PROFILES_DIR = "profiles"  # under metricbridge/data: one NAME.yaml per shipped profile
_PROFILE_KEYS = {"version", "description", "families", "items", "approximate"}
_TOP_KEYS = {"version", "validation", "families", "items", "idle", "naming", "profiles"}


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
    families = read_families(top["families"][1], issues) if "families" in top else []
    items = read_items(top["items"][1], issues) if "items" in top else []
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
        validation = enum_value(Verify, top["validation"][1], "validation", issues) or validation
    families = read_families(top["families"][1], issues) if "families" in top else []
    items = read_items(top["items"][1], issues) if "items" in top else []
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
