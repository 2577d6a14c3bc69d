"""The compiled rules: the transforms the hot path runs, built once per rules load.

The model is OpenTelemetry's metricstransformprocessor: the rules file is validated at load
(``config.load``), then built (``translation.compiler``) into internal transforms that hold
exactly what validation proved, in the shape the translator reads them. Nothing here keeps the
``Config`` or a ``FamilyRule``: per operation there is one object (rename, scale, select,
relabel; a drop is membership in ``consumed``), per derived family its resolved inputs and
formula, per warm-zero family its expected series (computed at compile time when they do not
depend on the payload), per family its idle policy (``idle_zero``), and per contract row its
status for each case translation leaves undecided. Two small sections are kept as read, being
frozen and dict-free already: ``naming`` and ``idle`` (its thresholds and family lists).

Every object is a frozen, slotted dataclass. None holds a dict: lookups by family name are
``types.MappingProxyType`` views of dicts built by the compiler and never touched again, sets are
frozensets, sequences tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metricbridge.config.schema import (
    Disposition,
    RelabelAction,
)
from metricbridge.config.synthesis import IdleConfig, NamingConfig
from metricbridge.config.templates import Expansion
from metricbridge.model.family import FamilyMeta, Labels, MetricType, Verify
from metricbridge.model.regex import Pattern
from metricbridge.translation.rows import RowStatus


# Compared and hashed by identity (eq=False): the relabel results cache is keyed by a rule's
# steps themselves, once per projection, and a step is one compiled object per rule.
@dataclass(frozen=True, slots=True, eq=False)
class CompiledRelabel:
    """A relabel step ready to run: anchored regex, templates parsed into parts."""

    action: RelabelAction
    source_labels: tuple[str, ...]
    separator: str
    regex: Pattern  # RE2, as Prometheus: see model.regex
    target_label: Expansion | None  # replace: the target's template; other actions: None
    replacement: Expansion  # replace and labelmap: the template; other actions: ()


# One transform per operation a rule runs on its upstream family.
@dataclass(frozen=True, slots=True)
class Rename:
    """alias: the same samples under the rule's name."""


@dataclass(frozen=True, slots=True)
class Scale:
    """scale: values (a histogram's bounds and sum) multiplied by ``factor``."""

    factor: float


@dataclass(frozen=True, slots=True)
class Select:
    """select: the series with every ``pairs`` label, those labels removed."""

    pairs: frozenset[tuple[str, str]]
    labels: frozenset[str]  # the names in ``pairs``


@dataclass(frozen=True, slots=True)
class Relabel:
    """relabel: Prometheus-style steps, in order, per series.

    ``join``: the families (first present wins) and labels the steps read as ``__<label>``.
    """

    steps: tuple[CompiledRelabel, ...]
    join: tuple[tuple[str, ...], tuple[str, ...]] | None = None


Transform = Rename | Scale | Select | Relabel


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule as the translator applies it to the upstream family ``input_name``."""

    name: str
    input_name: str
    type: MetricType
    transform: Transform
    help: str | None  # the output's HELP; None keeps the source's
    unit: str | None  # the output's unit, when the rule sets one
    keeps_unit: bool  # no unit and no scale: the output keeps the source's unit

    @property
    def in_place(self) -> bool:
        """Whether the rule rewrites its input family under the same name."""
        return self.input_name == self.name

    @property
    def relabel(self) -> tuple[CompiledRelabel, ...]:
        """The relabel steps (none unless the transform is a relabel)."""
        return self.transform.steps if isinstance(self.transform, Relabel) else ()

    def meta(self, source: FamilyMeta) -> FamilyMeta:
        """The output family's metadata, given its source's."""
        unit = source.unit if self.keeps_unit else self.unit
        return FamilyMeta(self.name, source.type, self.help or source.help, unit)


# Derive inputs, resolved: which kind each operand is was checked at load (config.synthesis).
@dataclass(frozen=True, slots=True)
class FamilySeries:
    """A family's series, filtered by ``match``; ``memory_key`` names them in counter memory."""

    family: str
    pairs: frozenset[tuple[str, str]]
    labels: frozenset[str]  # the names in ``pairs``, removed from the selected series
    memory_key: str
    excluded: frozenset[tuple[str, str]] = frozenset()  # series with any of these are left out
    sample: str | None = None  # the samples read: the family's own name, or its _sum/_count


@dataclass(frozen=True, slots=True)
class ServerField:
    """A number from the engine's /server_info JSON."""

    field: str
    per_dp_worker: bool  # divide by dp_size under DP attention, as SGLang does


@dataclass(frozen=True, slots=True)
class RatioOfDeltas:
    """Δnumerator / Δdenominator between two fetches, per ``by`` group."""

    numerator: FamilySeries
    denominator: FamilySeries
    by: frozenset[str]
    factor: float = 1.0  # the ratio times this
    divide_by: ServerField | None = None  # the ratio over this /server_info number as well


@dataclass(frozen=True, slots=True)
class Ratio:
    """numerator / max(minimum, denominator), per numerator series."""

    numerator: FamilySeries
    denominator: FamilySeries | ServerField
    minimum: float


@dataclass(frozen=True, slots=True)
class FromServerInfo:
    """A /server_info field, one series per label set of ``labels_from`` (or one unlabelled)."""

    field: ServerField
    labels_from: str | None
    drop_labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class ShareZero:
    """The share of a family's series that are 0, per ``by`` group."""

    numerator: FamilySeries
    by: frozenset[str]


Formula = RatioOfDeltas | Ratio | FromServerInfo | ShareZero


@dataclass(frozen=True, slots=True)
class CompiledDerive:
    """A derived gauge: its formula and the metadata of the family it makes."""

    name: str
    help: str | None
    unit: str | None
    formula: Formula
    reason: str  # the row's reason when it is derived
    approximated: bool = False  # an approximate row: its state reads approximated


Overlays = tuple[tuple[tuple[str, str], ...], ...]  # label pairs laid over each base series


@dataclass(frozen=True, slots=True)
class Inheritance:
    """How a warm-zero family's series follow the label sets of ``labels_from`` in a payload.

    Each label set becomes a base (only ``keep_labels``, without ``drop_labels``, ``defaults``
    where it lacks them) and every overlay is laid over every base. Hashable and compared by
    value: rules that inherit alike (the shipped contract has pairs) share one computation.
    """

    labels_from: str
    keep_labels: frozenset[str] | None
    drop_labels: tuple[str, ...]
    defaults: tuple[tuple[str, str], ...]
    overlays: Overlays

    @property
    def keeps_all(self) -> bool:
        """Whether a base is the reference's label set as it is."""
        return self.keep_labels is None and not self.drop_labels and not self.defaults


@dataclass(frozen=True, slots=True)
class CompiledWarmZero:
    """A warm-zero family and the series it must have before the engine's first event.

    Exactly one of ``expected`` (every series, known without a payload) and ``inherit`` (the
    series follow a family of the payload) is set.
    """

    name: str
    type: MetricType
    help: str | None
    unit: str | None
    buckets: tuple[float, ...]  # a histogram's bounds, +Inf implied
    absent_reason: str  # why the row is synthesized: the engine has no source, or not yet
    expected: tuple[Labels, ...] | None
    inherit: Inheritance | None

    @property
    def labels_from(self) -> str | None:
        """The family whose label sets the series follow, if any."""
        return self.inherit.labels_from if self.inherit is not None else None


@dataclass(frozen=True, slots=True)
class ContractRow:
    """A contract metric row and its status whenever translation leaves no reason of its own.

    ``statuses`` is the answer of ``rows.row_status`` for each (the engine sent the name,
    the name is served): index ``2 * present + served``, decided here once per row.
    """

    name: str
    disposition: Disposition
    input_name: str
    statuses: tuple[RowStatus, RowStatus, RowStatus, RowStatus]

    def status(self, *, present: bool, served: bool) -> RowStatus:
        """The row's status given whether the engine sent its name and whether it is served."""
        return self.statuses[2 * present + served]


@dataclass(frozen=True, slots=True)
class CompiledRules:
    """Everything ``translate`` needs, keyed for O(1) lookups per upstream family."""

    # Upstream family -> the rules reading it, in-place rewrites first (a read-only view).
    by_input: Mapping[str, tuple[CompiledRule, ...]]
    consumed: frozenset[str]  # upstream families not served under their own name
    validation: Verify
    naming: NamingConfig
    rows: tuple[ContractRow, ...]  # every contract metric row, in file order
    derives: tuple[CompiledDerive, ...]  # in file order
    warm_zero: tuple[CompiledWarmZero, ...]  # in file order
    idle: IdleConfig
    idle_zero: frozenset[str]  # gauges served as 0 while the engine is idle
