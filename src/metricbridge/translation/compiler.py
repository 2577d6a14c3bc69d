"""Compile a validated ``Config`` into ``CompiledRules``: the one place rules become transforms.

What each object holds, and why it is frozen and dict-free, is in ``translation.compiled``.
"""

from __future__ import annotations

import itertools
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
from metricbridge.config.synthesis import Derive, DeriveOp, Operand
from metricbridge.config.templates import Expansion, template_parts
from metricbridge.model.family import Labels
from metricbridge.model.regex import compile_regex
from metricbridge.translation.compiled import (
    CompiledDerive,
    CompiledRelabel,
    CompiledRule,
    CompiledRules,
    CompiledWarmZero,
    ContractRow,
    FamilySeries,
    Formula,
    FromServerInfo,
    Inheritance,
    Overlays,
    Ratio,
    RatioOfDeltas,
    Relabel,
    Rename,
    Scale,
    Select,
    ServerField,
    ShareZero,
    Transform,
)
from metricbridge.translation.rows import row_status


def _unchecked(rule: FamilyRule, what: str) -> ValueError:
    """For a rule that validation refuses: only a ``Config`` built by hand can have one."""
    return ValueError(f"{rule.name}: {what} (config.load refuses this rule)")


def _compile_step(step: RelabelConfig) -> CompiledRelabel:
    # Anchored like Prometheus' relabel.NewRegexp, which wraps the pattern in ^(?:...)$.
    pattern = compile_regex(f"(?:{step.regex})")
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
    kind = rule.transform
    if kind is Disposition.ALIAS:
        return Rename()
    if kind is Disposition.SELECT:
        return Select(frozenset(rule.match.items()), frozenset(rule.match))
    if kind is Disposition.RELABEL:
        join = None if rule.join is None else (rule.join.families, rule.join.labels)
        return Relabel(tuple(_compile_step(step) for step in rule.relabel), join)
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
        divide_by = None if derive.divide_by is None else _field(derive.divide_by, rule)
        return RatioOfDeltas(numerator, denominator, frozenset(derive.by), factor, divide_by)
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


def _contract_row(rule: FamilyRule, *, active: bool) -> ContractRow:
    name, disposition, input_name = rule.name, rule.disposition, rule.input_name
    kind = rule.transform or disposition
    statuses = tuple(
        row_status(
            name, disposition, input_name, present=present, served=served, active=active, kind=kind
        )
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
        elif rule.transform is not None and config.active(rule):
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
        rows=tuple(_contract_row(rule, active=config.active(rule)) for rule in config.families),
        derives=tuple(derives),
        warm_zero=tuple(warm),
        idle=config.idle,
        idle_zero=frozenset(zero),
    )
