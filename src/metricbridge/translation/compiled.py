"""Compile a ``Config`` into what the hot path looks up: dicts by family, compiled regexes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from metricbridge.config.schema import Config, Disposition, FamilyRule, IdlePolicy, RelabelAction
from metricbridge.config.synthesis import IdleConfig
from metricbridge.config.templates import compile_template
from metricbridge.model.family import Verify

# Dispositions that read an upstream family and write something else (or the same, rewritten).
_TRANSFORMS = {
    Disposition.ALIAS,
    Disposition.SCALE,
    Disposition.SELECT,
    Disposition.RELABEL,
    Disposition.DROP,
}


@dataclass(frozen=True, slots=True)
class CompiledRelabel:
    """A relabel step ready to run: anchored regex, templates in ``re`` expansion syntax."""

    action: RelabelAction
    source_labels: tuple[str, ...]
    separator: str
    regex: re.Pattern[str]
    target_label: str | None
    replacement: str


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule as the translator applies it."""

    rule: FamilyRule
    relabel: tuple[CompiledRelabel, ...]

    @property
    def in_place(self) -> bool:
        """Whether the rule rewrites its input family under the same name."""
        return self.rule.input_name == self.rule.name


@dataclass(frozen=True, slots=True)
class CompiledRules:
    """Everything ``translate`` needs, keyed for O(1) lookups per upstream family."""

    config: Config
    by_input: dict[str, tuple[CompiledRule, ...]]
    consumed: frozenset[str]  # upstream families not served under their own name
    validation: Verify
    dispositions: dict[str, Disposition]
    idle: IdleConfig
    idle_zero: frozenset[str]  # gauges served as 0 while the engine is idle

    @property
    def rows(self) -> tuple[FamilyRule, ...]:
        """Every contract metric row, in file order."""
        return self.config.families


def _compile_relabel(rule: FamilyRule) -> tuple[CompiledRelabel, ...]:
    steps = []
    for step in rule.relabel:
        # Anchored like Prometheus' relabel.NewRegexp, which wraps the pattern in ^(?:...)$.
        pattern = re.compile(f"(?:{step.regex})")
        target = step.target_label
        expands = step.action in (RelabelAction.REPLACE, RelabelAction.LABELMAP)
        steps.append(
            CompiledRelabel(
                action=step.action,
                source_labels=step.source_labels,
                separator=step.separator,
                regex=pattern,
                target_label=compile_template(target, pattern) if expands and target else target,
                replacement=compile_template(step.replacement, pattern) if expands else "",
            )
        )
    return tuple(steps)


def compile_rules(config: Config) -> CompiledRules:
    """Index a validated config by the upstream family each rule reads."""
    by_input: dict[str, list[CompiledRule]] = {}
    consumed: set[str] = set()
    for rule in config.families:
        if rule.disposition not in _TRANSFORMS:
            continue
        if rule.disposition is Disposition.DROP:
            # Nothing to run: the family is consumed, not served, and counted as dropped.
            consumed.add(rule.input_name)
            continue
        compiled = CompiledRule(rule, _compile_relabel(rule))
        # In-place rewrites run first, so aliases of the same family see the community original.
        bucket = by_input.setdefault(rule.input_name, [])
        bucket.insert(0, compiled) if compiled.in_place else bucket.append(compiled)
        if not compiled.in_place and not rule.keep_source:
            consumed.add(rule.input_name)
    frozen = {name: tuple(rules) for name, rules in by_input.items()}
    dispositions = {rule.name: rule.disposition for rule in config.families}
    policies = {rule.name: rule.idle for rule in config.families if rule.idle is not None}
    zero = {name for name in config.idle.zero if policies.get(name) is not IdlePolicy.PASS}
    zero |= {name for name, policy in policies.items() if policy is IdlePolicy.ZERO}
    return CompiledRules(
        config,
        frozen,
        frozenset(consumed),
        config.validation,
        dispositions,
        config.idle,
        frozenset(zero),
    )
