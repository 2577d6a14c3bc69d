"""The frozen ``Config``: a rules file's shape, its enums and the defaults, declared once.

``config.load`` reads YAML into it; per-rule checks live in ``config.checks``, cross-rule ones in
``config.outputs``; compiling for the hot path lives in ``translation.compiled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from metricbridge.config.synthesis import (
    Derive,
    IdleConfig,
    NamingConfig,
    frozen_map,
)
from metricbridge.model.family import MetricType, Verify


class Disposition(StrEnum):
    """How a contract row is honoured; see docs/configuration.md."""

    NATIVE = "native"  # the engine emits it under the contract name
    ALIAS = "alias"  # same meaning, other name
    SCALE = "scale"  # same meaning, other unit
    SELECT = "select"  # one labelled slice of a family becomes its own family
    RELABEL = "relabel"  # labels rewritten
    DROP = "drop"  # the family is not served
    DERIVE = "derive"  # computed from community families or /server_info
    # computed like a derive, but not what the contract defines: served only when a profile
    # switches approximations on (``--profile approximations``), else an engine row
    APPROXIMATE = "approximate"
    ENGINE = "engine"  # needs instrumentation inside the engine
    STRUCTURAL = "structural"  # never emitted, by contract


_TRANSFORMS = frozenset(
    {Disposition.ALIAS, Disposition.SCALE, Disposition.SELECT, Disposition.RELABEL}
)


class RelabelAction(StrEnum):
    """Prometheus relabel actions that make sense for one exposition's series."""

    REPLACE = "replace"
    KEEP = "keep"
    DROP = "drop"
    LABELMAP = "labelmap"
    LABELDROP = "labeldrop"
    LABELKEEP = "labelkeep"


class IdlePolicy(StrEnum):
    """What an idle engine's gauge is served as."""

    ZERO = "zero"
    PASS = "pass"  # noqa: S105 - a policy name, not a password


@dataclass(frozen=True, slots=True)
class RelabelConfig:
    """One Prometheus-style relabel step, with Prometheus' defaults."""

    line: int
    action: RelabelAction = RelabelAction.REPLACE
    source_labels: tuple[str, ...] = ()
    separator: str = ";"
    regex: str = "(.*)"
    target_label: str | None = None
    replacement: str = "$1"


@dataclass(frozen=True, slots=True)
class WarmZero:
    """Which series a warm-zero family must have before the engine's first event."""

    labels_from: str | None = None  # a family present from start-up whose label sets are inherited
    keep_labels: tuple[str, ...] | None = None  # inherit only these labels
    drop_labels: tuple[str, ...] = ()
    # Read-only mappings (types.MappingProxyType, see frozen_map): a frozen rule holds no dict.
    defaults: Mapping[str, str] = field(default_factory=frozen_map)  # when the reference lacks it
    values: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)  # a series per value
    set: Mapping[str, str] = field(default_factory=frozen_map)  # fixed label values
    buckets: tuple[float, ...] | None = None  # histogram bucket bounds, +Inf implied


@dataclass(frozen=True, slots=True)
class Join:
    """Labels a relabel rule's steps may read from another family of the same payload.

    The first of ``families`` the payload has gives each of ``labels`` if all its series agree
    on one value; every series of the rule's family then carries it as ``__<label>`` while the
    steps run, and no label starting with ``__`` is served (Prometheus' relabelling convention).
    """

    families: tuple[str, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FamilyRule:
    """One metric row of the contract and how the bridge honours it."""

    name: str
    line: int
    disposition: Disposition
    type: MetricType = MetricType.UNKNOWN  # unknown: an engine row whose type the engine decides
    source: str | None = None
    keep_source: bool = True
    factor: float | None = None
    match: Mapping[str, str] = field(default_factory=frozen_map)  # types.MappingProxyType
    relabel: tuple[RelabelConfig, ...] = ()
    join: Join | None = None  # relabel: labels the steps read from another family
    help: str | None = None
    unit: str | None = None
    note: str | None = None
    branches: tuple[str, ...] = ()
    warm_zero: WarmZero | None = None
    idle: IdlePolicy | None = None
    derive: Derive | None = None
    origin: str | None = None  # the profile file the rule came from; None: the rules file

    @property
    def input_name(self) -> str:
        """The upstream family the rule reads."""
        return self.source or self.name

    @property
    def transform(self) -> Disposition | None:
        """What the rule does to one upstream family: alias, scale, select or relabel; or None.

        An approximation read from a ``source`` runs a scale (with a factor), a select (with a
        match) or an alias; one with a ``derive`` block runs no transform.
        """
        if self.disposition in _TRANSFORMS:
            return self.disposition
        if self.disposition is not Disposition.APPROXIMATE or self.source is None:
            return None
        if self.factor is not None:
            return Disposition.SCALE
        return Disposition.SELECT if self.match else Disposition.ALIAS


@dataclass(frozen=True, slots=True)
class ContractItem:
    """A contract row that is not a metric family (log schema, traces, ...)."""

    name: str
    line: int
    disposition: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """A whole rules file."""

    source: str
    families: tuple[FamilyRule, ...] = ()
    items: tuple[ContractItem, ...] = ()
    validation: Verify = Verify.STRUCTURE
    idle: IdleConfig = IdleConfig()
    naming: NamingConfig = NamingConfig()
    profiles: tuple[str, ...] = ()  # the shipped profiles layered over the file, in order
    approximate: bool = False  # a profile switched the ``approximate`` rows on

    def serves(self, rule: FamilyRule) -> bool:
        """Whether the bridge computes ``rule``'s derive block (an approximation only if on)."""
        if rule.derive is None:
            return False
        return self.active(rule)

    def active(self, rule: FamilyRule) -> bool:
        """Whether the bridge serves ``rule`` at all: an approximation only if switched on."""
        return rule.disposition is not Disposition.APPROXIMATE or self.approximate
