"""The synthesis parts of a rules file: ``derive`` blocks and the ``idle`` section."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

import yaml

from metricbridge.config.yaml_nodes import (
    Entries,
    Fields,
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
_K = TypeVar("_K")
_V = TypeVar("_V")


def frozen_map(items: Mapping[_K, _V] | None = None) -> Mapping[_K, _V]:
    """A read-only copy of ``items``: how a frozen config object holds a mapping.

    A ``types.MappingProxyType`` over a dict of its own, so nobody can change the mapping behind
    the frozen object (a tuple of pairs would do too, but rules compare and read these as dicts).
    """
    return MappingProxyType(dict(items or {}))


def label_map(node: yaml.Node, path: str, issues: Issues) -> Mapping[str, str]:
    """A read-only mapping of label names to values (``match``, warm-zero ``set``, ...)."""
    return frozen_map(string_map(node, path, issues, key_pattern=LABEL_NAME))


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
    match: Mapping[str, str] = field(default_factory=frozen_map)  # types.MappingProxyType
    server_info: str | None = None
    per_dp_worker: bool = False  # divide the field by dp_size under DP attention, as SGLang does
    # series whose label has one of these values are left out (PromQL's !=, or !~ "a|b")
    exclude: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)
    sample: str | None = None  # a histogram's or summary's "sum" or "count" samples

    def selector(self) -> str:
        """The operand as a PromQL-like selector: ``family_sum{a="x",b!="y"}``."""
        if self.family is None:
            return f"/server_info {self.server_info}"
        matchers = [f'{k}="{v}"' for k, v in self.match.items()]
        matchers += [f'{k}!="{v}"' for k, values in self.exclude.items() for v in values]
        name = self.family + (f"_{self.sample}" if self.sample else "")
        return f"{name}{{{','.join(matchers)}}}" if matchers else name


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
    factor: float | None = None  # ratio_of_deltas: the ratio times this (a unit change)
    # ratio_of_deltas: the ratio divided by this /server_info field (a budget per pass)
    divide_by: Operand | None = None

    def formula(self) -> str:
        """The definition in one line, as reports show it."""
        num, den = self.numerator, self.denominator
        if self.op is DeriveOp.RATIO_OF_DELTAS and num is not None and den is not None:
            by = f"sum by ({', '.join(self.by)}) " if self.by else "sum "
            text = f"Δ {by}{num.selector()} / Δ {by}{den.selector()}"
            if self.divide_by is not None:
                text += f" / {self.divide_by.selector()}"
            return text + (f" * {self.factor:g}" if self.factor is not None else "")
        if self.op is DeriveOp.RATIO and num is not None and den is not None:
            return f"{num.selector()} / max({self.minimum or 0:g}, {den.selector()})"
        if self.op is DeriveOp.SHARE_ZERO and num is not None:
            return f"share of {num.selector()} series that are 0"
        return f"{num.selector() if num is not None else '?'}"


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


_OPERAND_KEYS = {"family", "match", "server_info", "per_dp_worker", "exclude", "sample"}
_DERIVE_KEYS = {
    "op", "numerator", "denominator", "by", "minimum", "labels_from", "drop_labels", "factor",
    "divide_by",
}  # fmt: skip
_SAMPLES = ("sum", "count")
_IDLE_KEYS = {"enabled", "after_seconds", "heartbeat_seconds", "when_zero", "when_flat", "zero"}
# What each op needs (+) and refuses (-), checked at load so a typo never reaches the hot path.
_DERIVE_NEEDS: dict[DeriveOp, tuple[set[str], set[str]]] = {
    DeriveOp.RATIO_OF_DELTAS: (
        {"numerator", "denominator"},
        {"labels_from", "drop_labels", "minimum"},
    ),
    DeriveOp.RATIO: (
        {"numerator", "denominator"},
        {"by", "labels_from", "drop_labels", "factor", "divide_by"},
    ),
    DeriveOp.SERVER_INFO: ({"numerator"}, {"denominator", "by", "minimum", "factor", "divide_by"}),
    DeriveOp.SHARE_ZERO: (
        {"numerator"},
        {"denominator", "labels_from", "drop_labels", "minimum", "factor", "divide_by"},
    ),
}


# Whether each op reads a family (True) or a /server_info field (False) on each side; a ratio's
# denominator may be either. The other kind could never give a value, so it is refused at load.
_READS_FAMILY: dict[DeriveOp, dict[str, bool]] = {
    DeriveOp.RATIO_OF_DELTAS: {"numerator": True, "denominator": True, "divide_by": False},
    DeriveOp.RATIO: {"numerator": True},
    DeriveOp.SERVER_INFO: {"numerator": False},
    DeriveOp.SHARE_ZERO: {"numerator": True},
}
_NO_OPERAND = Operand()  # the defaults, declared once in the dataclass


def _operand(node: yaml.Node, path: str, issues: Issues) -> Operand | None:
    fields, no = Fields(mapping(node, path, issues, _OPERAND_KEYS), path, issues), _NO_OPERAND
    operand = Operand(
        family=fields.get("family", string, no.family),
        match=fields.get("match", label_map, no.match),
        server_info=fields.get("server_info", string, no.server_info),
        per_dp_worker=fields.get("per_dp_worker", boolean, no.per_dp_worker),
        exclude=fields.get("exclude", _excluded, no.exclude),
        sample=fields.get("sample", string, no.sample),
    )
    if not fields.done():
        return None
    if operand.sample is not None and operand.sample not in _SAMPLES:
        issues.add(node, f"{path}.sample", f"unknown value {operand.sample!r} (expected sum|count)")
    if operand.family is None and (operand.exclude or operand.sample or operand.match):
        issues.add(node, path, "match, exclude and sample select a family's series")
    if (operand.family is None) == (operand.server_info is None):
        issues.add(node, path, "give exactly one of 'family' or 'server_info'")
    elif operand.family is not None and not METRIC_NAME.fullmatch(operand.family):
        issues.add(node, f"{path}.family", f"invalid metric family name {operand.family!r}")
    elif operand.server_info is not None and not _FIELD.fullmatch(operand.server_info):
        issues.add(node, f"{path}.server_info", f"invalid field name {operand.server_info!r}")
    return operand


def _excluded(node: yaml.Node, path: str, issues: Issues) -> Mapping[str, tuple[str, ...]]:
    """``{label: value}`` or ``{label: [values]}``: the series to leave out."""
    out: dict[str, tuple[str, ...]] = {}
    for label, (key, value) in mapping(node, path, issues).items():
        where = f"{path}.{label}"
        if not LABEL_NAME.fullmatch(label):
            issues.add(key, where, f"invalid label name {label!r}")
        if isinstance(value, yaml.ScalarNode):
            one = string(value, where, issues)
            out[label] = () if one is None else (one,)
        else:
            out[label] = strings(value, where, issues)
    return frozen_map(out)


_OPS = "|".join(op.value for op in DeriveOp)
_NO_DERIVE = Derive(DeriveOp.RATIO)  # the defaults, declared once in the dataclass


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
    fields, no = Fields(entries, path, issues), _NO_DERIVE
    derive = Derive(
        op=op,
        numerator=fields.get("numerator", _operand, no.numerator),
        denominator=fields.get("denominator", _operand, no.denominator),
        by=fields.get("by", strings, no.by),
        minimum=fields.get("minimum", number, no.minimum),
        labels_from=fields.get("labels_from", string, no.labels_from),
        drop_labels=fields.get("drop_labels", strings, no.drop_labels),
        factor=fields.get("factor", number, no.factor),
        divide_by=fields.get("divide_by", _operand, no.divide_by),
    )
    if not fields.done():
        return None
    if derive.factor == 0:
        issues.add(entries["factor"][1], f"{path}.factor", "factor 0 would erase every value")
    sides = (
        ("numerator", derive.numerator),
        ("denominator", derive.denominator),
        ("divide_by", derive.divide_by),
    )
    for side, operand in sides:
        if (problem := _check_operand_kind(op, side, operand)) is not None:
            issues.add(entries[side][1], f"{path}.{side}", problem)
    return derive


def _check_operand_kind(op: DeriveOp, side: str, operand: Operand | None) -> str | None:
    """Why ``operand`` cannot be the op's ``side``, if it cannot."""
    reads_family = _READS_FAMILY[op].get(side)
    if operand is None or reads_family is None:
        return None
    has_family, has_field = operand.family is not None, operand.server_info is not None
    if has_family in (has_field, reads_family):
        return None  # _operand refused it already (neither or both kinds), or it is right
    if reads_family:
        return f"op {op} reads a family here, not a /server_info field"
    return f"op {op} reads a /server_info field here, not a family"


_NO_IDLE = IdleConfig()


def _seconds(node: yaml.Node, path: str, issues: Issues) -> float | None:
    seconds = number(node, path, issues)
    if seconds is not None and seconds <= 0:
        issues.add(node, path, "must be positive")
    return seconds


def _family_names(node: yaml.Node, path: str, issues: Issues) -> tuple[str, ...]:
    names = strings(node, path, issues)
    for name in names:
        if not METRIC_NAME.fullmatch(name):
            issues.add(node, path, f"invalid metric family name {name!r}")
    return names


def parse_idle(node: yaml.Node, issues: Issues) -> IdleConfig:
    """Read the top-level ``idle`` section (a refused value leaves its default: issue recorded)."""
    fields, no = Fields(mapping(node, "idle", issues, _IDLE_KEYS), "idle", issues), _NO_IDLE
    idle = IdleConfig(
        enabled=fields.get("enabled", boolean, no.enabled),
        after_seconds=fields.get("after_seconds", _seconds, no.after_seconds),
        heartbeat_seconds=fields.get("heartbeat_seconds", _seconds, no.heartbeat_seconds),
        when_zero=fields.get("when_zero", _family_names, no.when_zero),
        when_flat=fields.get("when_flat", _family_names, no.when_flat),
        zero=fields.get("zero", _family_names, no.zero),
    )
    fields.done()
    return idle


_NAMING_KEYS = {"prefix", "restore_escaped", "also_serve_escaped"}
_NO_NAMING = NamingConfig()


def _prefix(node: yaml.Node, path: str, issues: Issues) -> str | None:
    prefix = string(node, path, issues)
    if prefix is not None and not METRIC_NAME.fullmatch(prefix + "x"):
        issues.add(node, path, f"invalid metric name prefix {prefix!r}")
    return prefix


def parse_naming(node: yaml.Node, issues: Issues) -> NamingConfig:
    """Read the top-level ``naming`` section (a refused value leaves its default)."""
    fields, no = Fields(mapping(node, "naming", issues, _NAMING_KEYS), "naming", issues), _NO_NAMING
    naming = NamingConfig(
        prefix=fields.get("prefix", _prefix, no.prefix),
        restore_escaped=fields.get("restore_escaped", boolean, no.restore_escaped),
        also_serve_escaped=fields.get("also_serve_escaped", boolean, no.also_serve_escaped),
    )
    fields.done()
    return naming
