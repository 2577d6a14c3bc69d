"""Compile a validated ``Config`` into the transforms the hot path runs, once per rules load.

The model is OpenTelemetry's metricstransformprocessor: the rules file is validated at load
(``config.load``), then built into internal transforms that hold exactly what validation
proved, in the shape the translator reads them. Nothing here keeps the ``Config`` or a
``FamilyRule``: per operation there is one object (rename, scale, select, relabel; a drop is
membership in ``consumed``), per derived family its resolved inputs and formula, per warm-zero
family its expected series (computed here when they do not depend on the payload), per family
its idle policy (``idle_zero``), and per contract row its status for each case translation
leaves undecided. Two small sections are kept as read, being frozen and dict-free already:
``naming`` and ``idle`` (its thresholds and family lists).

Every object is a frozen, slotted dataclass. None holds a dict: lookups by family name are
``types.MappingProxyType`` views of dicts built here and never touched again, sets are
frozensets, sequences tuples.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from metricbridge.config.schema import (
    Config,
    Disposition,
    FamilyRule,
    IdlePolicy,
    RelabelAction,
    RelabelConfig,
    WarmZero,
)
from metricbridge.config.synthesis import Derive, DeriveOp, IdleConfig, NamingConfig, Operand
from metricbridge.config.templates import Expansion, template_parts
from metricbridge.model.family import FamilyMeta, Labels, MetricType, Verify
from metricbridge.translation.rows import RowStatus, row_status


@dataclass(frozen=True, slots=True)
class CompiledRelabel:
    """A relabel step ready to run: anchored regex, templates parsed into parts."""

    action: RelabelAction
    source_labels: tuple[str, ...]
    separator: str
    regex: re.Pattern[str]
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
    """relabel: Prometheus-style steps, in order, per series."""

    steps: tuple[CompiledRelabel, ...]


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
    # An interval in which a counter was reset has no value (approximations), rather than the
    # increase since the reset (Prometheus' increase(), the default).
    skip_resets: bool = False


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


def _unchecked(rule: FamilyRule, what: str) -> ValueError:
    """For a rule that validation refuses: only a ``Config`` built by hand can have one."""
    return ValueError(f"{rule.name}: {what} (config.load refuses this rule)")


# Dispositions that read an upstream family and write something else (or the same, rewritten).
_TRANSFORMS = frozenset(
    {Disposition.ALIAS, Disposition.SCALE, Disposition.SELECT, Disposition.RELABEL}
)


def _compile_step(step: RelabelConfig) -> CompiledRelabel:
    # Anchored like Prometheus' relabel.NewRegexp, which wraps the pattern in ^(?:...)$.
    pattern = re.compile(f"(?:{step.regex})")
    target: Expansion | None = None
    replacement: Expansion = ()
    if step.action is RelabelAction.REPLACE:
        if step.target_label is not None:  # config.checks requires one
            target = template_parts(step.target_label, pattern)
        replacement = template_parts(step.replacement, pattern)
    elif step.action is RelabelAction.LABELMAP:
        replacement = template_parts(step.replacement, pattern)
    return CompiledRelabel(
        step.action, step.source_labels, step.separator, pattern, target, replacement
    )


def _transform(rule: FamilyRule) -> Transform:
    if rule.disposition is Disposition.ALIAS:
        return Rename()
    if rule.disposition is Disposition.SELECT:
        return Select(frozenset(rule.match.items()), frozenset(rule.match))
    if rule.disposition is Disposition.RELABEL:
        return Relabel(tuple(_compile_step(step) for step in rule.relabel))
    if rule.factor is None:  # a scale without a factor: config.checks refuses it
        raise _unchecked(rule, "a scale needs a factor")
    return Scale(rule.factor)


def _compile_rule(rule: FamilyRule) -> CompiledRule:
    return CompiledRule(
        name=rule.name,
        input_name=rule.input_name,
        type=rule.type,
        transform=_transform(rule),
        help=rule.help or None,
        unit=rule.unit,
        keeps_unit=rule.unit is None and rule.factor is None,
    )


def _series(operand: Operand | None, rule: FamilyRule) -> FamilySeries:
    if operand is None or operand.family is None:  # config.synthesis refuses it
        raise _unchecked(rule, "the derive reads a family here")
    match = operand.match
    excluded = frozenset((label, v) for label, values in operand.exclude.items() for v in values)
    key = f"{operand.family}{sorted(match.items())}"
    if excluded or operand.sample:
        key += f"!{sorted(excluded)}_{operand.sample or ''}"
    return FamilySeries(
        operand.family, frozenset(match.items()), frozenset(match), key, excluded, operand.sample
    )


def _field(operand: Operand | None, rule: FamilyRule) -> ServerField:
    if operand is None or operand.server_info is None:  # config.synthesis refuses it
        raise _unchecked(rule, "the derive reads a /server_info field here")
    return ServerField(operand.server_info, operand.per_dp_worker)


def _formula(derive: Derive, rule: FamilyRule) -> Formula:
    if derive.op is DeriveOp.RATIO_OF_DELTAS:
        numerator, denominator = _series(derive.numerator, rule), _series(derive.denominator, rule)
        factor = 1.0 if derive.factor is None else derive.factor
        approximate = rule.disposition is Disposition.APPROXIMATE
        return RatioOfDeltas(numerator, denominator, frozenset(derive.by), factor, approximate)
    if derive.op is DeriveOp.RATIO:
        below = derive.denominator
        reads_field = below is not None and below.server_info is not None
        over = _field(below, rule) if reads_field else _series(below, rule)
        return Ratio(_series(derive.numerator, rule), over, derive.minimum or 0.0)
    if derive.op is DeriveOp.SERVER_INFO:
        field = _field(derive.numerator, rule)
        return FromServerInfo(field, derive.labels_from, frozenset(derive.drop_labels))
    return ShareZero(_series(derive.numerator, rule), frozenset(derive.by))


def _compile_derive(rule: FamilyRule, derive: Derive) -> CompiledDerive:
    formula = _formula(derive, rule)
    if rule.disposition is Disposition.APPROXIMATE:
        reason = f"approximated: {derive.formula()}"
        return CompiledDerive(rule.name, rule.help, rule.unit, formula, reason, approximated=True)
    return CompiledDerive(
        rule.name, rule.help or rule.note, rule.unit, formula, f"derived ({derive.op})"
    )


def _overlays(warm: WarmZero) -> Overlays:
    """Each combination of ``values`` (in file order), with the fixed ``set`` labels over it."""
    value_lists = [[(label, value) for value in values] for label, values in warm.values.items()]
    fixed = tuple(warm.set.items())
    return tuple((*combo, *fixed) for combo in itertools.product(*value_lists))


def expected_labels(
    bases: list[Labels] | tuple[Labels, ...], overlays: Overlays
) -> tuple[Labels, ...]:
    """Every base with every overlay laid over it, sorted by label name, first occurrence kept.

    Bases are label sets as series_labels gives them: sorted by name, each name once.
    """
    if overlays == ((),):  # nothing laid over: the bases as they are
        return tuple(dict.fromkeys(bases))
    out: dict[Labels, None] = {}
    for base in bases:
        for overlay in overlays:
            labels = dict(base)
            labels.update(overlay)
            out.setdefault(tuple(sorted(labels.items())), None)
    return tuple(out)


def _compile_warm(rule: FamilyRule, warm: WarmZero) -> CompiledWarmZero:
    overlays = _overlays(warm)
    engine = rule.disposition is Disposition.ENGINE
    return CompiledWarmZero(
        name=rule.name,
        type=rule.type,
        help=rule.help or rule.note,
        unit=rule.unit,
        buckets=warm.buckets or (),
        absent_reason="engine has no source" if engine else "not yet seen upstream",
        expected=expected_labels([()], overlays) if warm.labels_from is None else None,
        inherit=None
        if warm.labels_from is None
        else Inheritance(
            labels_from=warm.labels_from,
            keep_labels=frozenset(warm.keep_labels) if warm.keep_labels is not None else None,
            drop_labels=warm.drop_labels,
            defaults=tuple(warm.defaults.items()),
            overlays=overlays,
        ),
    )


def _contract_row(rule: FamilyRule) -> ContractRow:
    name, disposition, input_name = rule.name, rule.disposition, rule.input_name
    statuses = tuple(
        row_status(name, disposition, input_name, present=present, served=served)
        for present in (False, True)
        for served in (False, True)
    )
    return ContractRow(
        name, disposition, input_name, (statuses[0], statuses[1], statuses[2], statuses[3])
    )


def compile_rules(config: Config) -> CompiledRules:
    """Build the transforms of a validated config, indexed by the upstream family each reads."""
    by_input: dict[str, list[CompiledRule]] = {}
    consumed: set[str] = set()
    derives: list[CompiledDerive] = []
    warm: list[CompiledWarmZero] = []
    for rule in config.families:
        if rule.disposition is Disposition.DROP:
            # Nothing to run: the family is consumed, not served, and counted as dropped.
            consumed.add(rule.input_name)
        elif rule.disposition in _TRANSFORMS:
            compiled = _compile_rule(rule)
            # In-place rewrites run first, so aliases of the same family see the original.
            bucket = by_input.setdefault(rule.input_name, [])
            bucket.insert(0, compiled) if compiled.in_place else bucket.append(compiled)
            if not compiled.in_place and not rule.keep_source:
                consumed.add(rule.input_name)
        if rule.derive is not None and config.serves(rule):
            derives.append(_compile_derive(rule, rule.derive))
        if rule.warm_zero is not None:
            warm.append(_compile_warm(rule, rule.warm_zero))
    policies = {rule.name: rule.idle for rule in config.families if rule.idle is not None}
    zero = {name for name in config.idle.zero if policies.get(name) is not IdlePolicy.PASS}
    zero |= {name for name, policy in policies.items() if policy is IdlePolicy.ZERO}
    return CompiledRules(
        by_input=MappingProxyType({name: tuple(rules) for name, rules in by_input.items()}),
        consumed=frozenset(consumed),
        validation=config.validation,
        naming=config.naming,
        rows=tuple(_contract_row(rule) for rule in config.families),
        derives=tuple(derives),
        warm_zero=tuple(warm),
        idle=config.idle,
        idle_zero=frozenset(zero),
    )
