"""The synthesis parts of a rules file: ``derive`` blocks and the ``idle`` section."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

import yaml

from metricbridge.config.yaml_nodes import (
    Entries,
    Issues,
    boolean,
    mapping,
    number,
    string,
    string_map,
    strings,
)
from metricbridge.model.names import LABEL_NAME, METRIC_NAME

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DeriveOp(StrEnum):
    """Generic derivations; see docs/configuration.md for each definition."""

    RATIO_OF_DELTAS = "ratio_of_deltas"  # Δnumerator / Δdenominator between two fetches, per group
    RATIO = "ratio"  # numerator / max(minimum, denominator), per numerator series
    SERVER_INFO = "server_info"  # a field of the engine's /server_info JSON
    SHARE_ZERO = "share_zero"  # share of a family's series that are 0, per group


@dataclass(frozen=True, slots=True)
class Operand:
    """A family's series (optionally filtered by ``match``) or a /server_info field."""

    family: str | None = None
    match: dict[str, str] = field(default_factory=dict)
    server_info: str | None = None
    per_dp_worker: bool = False  # divide the field by dp_size under DP attention, as SGLang does


@dataclass(frozen=True, slots=True)
class Derive:
    """How a derived family is computed."""

    op: DeriveOp
    numerator: Operand | None = None
    denominator: Operand | None = None
    by: tuple[str, ...] = ()
    minimum: float | None = None
    labels_from: str | None = None
    drop_labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IdleConfig:
    """When the engine counts as idle and which gauges then read 0."""

    enabled: bool = False
    after_seconds: float = 10.0
    heartbeat_seconds: float = 5.0
    when_zero: tuple[str, ...] = ()  # gauges whose every series must be 0
    when_flat: tuple[str, ...] = ()  # counters whose sum must not move
    zero: tuple[str, ...] = ()  # gauges served as 0 while idle


@dataclass(frozen=True, slots=True)
class NamingConfig:
    """The contract prefix and what to do about its escaped spelling."""

    prefix: str = "sglang:"
    restore_escaped: bool = True  # upstream `sglang_x` families are served as `sglang:x`
    also_serve_escaped: bool = False  # also serve `sglang_x` copies of every `sglang:x` family

    @property
    def escaped_prefix(self) -> str:
        """The prefix as underscore escaping writes it."""
        return self.prefix.replace(":", "_")


_OPERAND_KEYS = {"family", "match", "server_info", "per_dp_worker"}
_DERIVE_KEYS = {"op", "numerator", "denominator", "by", "minimum", "labels_from", "drop_labels"}
_IDLE_KEYS = {"enabled", "after_seconds", "heartbeat_seconds", "when_zero", "when_flat", "zero"}
# What each op needs (+) and refuses (-), checked at load so a typo never reaches the hot path.
_DERIVE_NEEDS: dict[DeriveOp, tuple[set[str], set[str]]] = {
    DeriveOp.RATIO_OF_DELTAS: (
        {"numerator", "denominator"},
        {"labels_from", "drop_labels", "minimum"},
    ),
    DeriveOp.RATIO: ({"numerator", "denominator"}, {"by", "labels_from", "drop_labels"}),
    DeriveOp.SERVER_INFO: ({"numerator"}, {"denominator", "by", "minimum"}),
    DeriveOp.SHARE_ZERO: ({"numerator"}, {"denominator", "labels_from", "drop_labels", "minimum"}),
}


def _operand(node: yaml.Node, path: str, issues: Issues) -> Operand | None:
    entries = mapping(node, path, issues, _OPERAND_KEYS)
    values: dict[str, object] = {}
    for key, (_, value) in entries.items():
        sub = f"{path}.{key}"
        if key == "match":
            values[key] = string_map(value, sub, issues, key_pattern=LABEL_NAME)
        elif key == "per_dp_worker":
            values[key] = boolean(value, sub, issues)
        else:
            values[key] = string(value, sub, issues)
    if any(v is None for v in values.values()):
        return None
    operand = Operand(**values)  # type: ignore[arg-type]
    if (operand.family is None) == (operand.server_info is None):
        issues.add(node, path, "give exactly one of 'family' or 'server_info'")
    elif operand.family is not None and not METRIC_NAME.fullmatch(operand.family):
        issues.add(node, f"{path}.family", f"invalid metric family name {operand.family!r}")
    elif operand.server_info is not None and not _FIELD.fullmatch(operand.server_info):
        issues.add(node, f"{path}.server_info", f"invalid field name {operand.server_info!r}")
    return operand


_DERIVE_READERS = {
    "numerator": _operand,
    "denominator": _operand,
    "by": strings,
    "drop_labels": strings,
    "minimum": number,
    "labels_from": string,
}
_OPS = "|".join(op.value for op in DeriveOp)


def _derive_op(node: yaml.Node, entries: Entries, path: str, issues: Issues) -> DeriveOp | None:
    if "op" not in entries:
        issues.add(node, path, f"missing required field 'op' ({_OPS})")
        return None
    op_node = entries["op"][1]
    text = string(op_node, f"{path}.op", issues)
    try:
        return DeriveOp(text or "")
    except ValueError:
        issues.add(op_node, f"{path}.op", f"unknown value {text!r} (expected {_OPS})")
        return None


def parse_derive(node: yaml.Node, path: str, issues: Issues) -> Derive | None:
    """Read a rule's ``derive`` block, checking the fields its ``op`` needs."""
    entries = mapping(node, path, issues, _DERIVE_KEYS)
    op = _derive_op(node, entries, path, issues)
    if op is None:
        return None
    needs, refuses = _DERIVE_NEEDS[op]
    for key in sorted(needs - entries.keys()):
        issues.add(node, path, f"missing required field '{key}' while op is {op}")
    for key in sorted(refuses & entries.keys()):
        issues.add(entries[key][0], f"{path}.{key}", f"does not apply to op {op}")
    values: dict[str, object] = {
        key: _DERIVE_READERS[key](value, f"{path}.{key}", issues)
        for key, (_, value) in entries.items()
        if key != "op"
    }
    if any(v is None for v in values.values()):
        return None
    return Derive(op=op, **values)  # type: ignore[arg-type]


def parse_idle(node: yaml.Node, issues: Issues) -> IdleConfig:
    """Read the top-level ``idle`` section."""
    values: dict[str, object] = {}
    for key, (_, value) in mapping(node, "idle", issues, _IDLE_KEYS).items():
        sub = f"idle.{key}"
        if key == "enabled":
            values[key] = boolean(value, sub, issues)
        elif key in ("after_seconds", "heartbeat_seconds"):
            seconds = number(value, sub, issues)
            if seconds is not None and seconds <= 0:
                issues.add(value, sub, "must be positive")
            values[key] = seconds
        else:
            names = strings(value, sub, issues)
            for name in names:
                if not METRIC_NAME.fullmatch(name):
                    issues.add(value, sub, f"invalid metric family name {name!r}")
            values[key] = names
    clean = {k: v for k, v in values.items() if v is not None}
    return IdleConfig(**clean)  # type: ignore[arg-type]


_NAMING_KEYS = {"prefix", "restore_escaped", "also_serve_escaped"}


def parse_naming(node: yaml.Node, issues: Issues) -> NamingConfig:
    """Read the top-level ``naming`` section."""
    values: dict[str, object] = {}
    for key, (_, value) in mapping(node, "naming", issues, _NAMING_KEYS).items():
        sub = f"naming.{key}"
        if key == "prefix":
            prefix = string(value, sub, issues)
            if prefix is not None and not METRIC_NAME.fullmatch(prefix + "x"):
                issues.add(value, sub, f"invalid metric name prefix {prefix!r}")
            values[key] = prefix
        else:
            values[key] = boolean(value, sub, issues)
    return NamingConfig(**{k: v for k, v in values.items() if v is not None})  # type: ignore[arg-type]
