"""Cross-field and cross-rule checks of a parsed ``Config``, named after the rule they concern."""

from __future__ import annotations

import re
from collections import defaultdict

from metricbridge.config import Config, Disposition, FamilyRule, RelabelAction, RelabelConfig
from metricbridge.errors import ConfigIssue
from metricbridge.model import MetricType
from metricbridge.sample_line import LABEL_NAME
from metricbridge.templates import TemplateError, compile_template
from metricbridge.yaml_nodes import Issues

# Which optional fields each disposition requires (+) or forbids (-); others are optional.
_NEEDS: dict[Disposition, tuple[set[str], set[str]]] = {
    Disposition.NATIVE: (set(), {"source", "factor", "match", "relabel", "derive"}),
    Disposition.ENGINE: (set(), {"source", "factor", "match", "relabel", "derive"}),
    Disposition.STRUCTURAL: (
        set(),
        {"source", "factor", "match", "relabel", "warm_zero", "derive"},
    ),
    Disposition.DROP: (set(), {"source", "factor", "match", "relabel", "warm_zero", "derive"}),
    Disposition.ALIAS: ({"source"}, {"factor", "match", "relabel", "derive"}),
    Disposition.SCALE: ({"source", "factor"}, {"match", "relabel", "derive"}),
    Disposition.SELECT: ({"source", "match"}, {"factor", "relabel", "derive"}),
    Disposition.RELABEL: ({"relabel"}, {"factor", "match", "derive"}),
    Disposition.DERIVE: ({"derive"}, {"source", "factor", "match", "relabel"}),
}
_SCALABLE = {MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM, MetricType.SUMMARY}
_RESERVED_LABELS = {"le", "quantile", "__name__"}


def _present(rule: FamilyRule, name: str) -> bool:
    value = getattr(rule, name)
    return value not in (None, (), {})


def _check_shape(rule: FamilyRule, issues: Issues) -> None:
    where = f"families.{rule.name}"
    needs, forbids = _NEEDS[rule.disposition]
    for name in sorted(needs):
        if not _present(rule, name):
            issues.items.append(
                _issue(
                    issues,
                    rule,
                    where,
                    f"missing required field '{name}' while disposition is {rule.disposition}",
                )
            )
    for name in sorted(forbids):
        if _present(rule, name):
            issues.items.append(
                _issue(
                    issues,
                    rule,
                    where,
                    f"field '{name}' does not apply to disposition {rule.disposition}",
                )
            )
    typed = rule.disposition not in (Disposition.ENGINE, Disposition.STRUCTURAL, Disposition.DROP)
    if rule.type is MetricType.UNKNOWN and (typed or rule.warm_zero or rule.idle):
        issues.items.append(
            _issue(
                issues,
                rule,
                where,
                f"missing required field 'type' while disposition is {rule.disposition}",
            )
        )
    if rule.source == rule.name and rule.disposition is not Disposition.RELABEL:
        issues.items.append(
            _issue(
                issues,
                rule,
                where,
                "source is the family itself; only relabel rewrites a family in place",
            )
        )
    if rule.type is MetricType.COUNTER and not rule.name.endswith("_total"):
        issues.items.append(
            _issue(
                issues,
                rule,
                where,
                "a counter's name must end in _total (the name its samples carry)",
            )
        )
    if rule.factor is not None:
        _check_factor(rule, where, issues)
    if rule.warm_zero is not None:
        _check_warm_zero(rule, where, issues)
    if rule.derive is not None and rule.type is not MetricType.GAUGE:
        issues.items.append(
            _issue(
                issues, rule, f"{where}.derive", f"derived families are gauges, not a {rule.type}"
            )
        )
    if rule.idle is not None and rule.type is not MetricType.GAUGE:
        issues.items.append(
            _issue(
                issues,
                rule,
                f"{where}.idle",
                f"idle zeroing applies to gauges, not to a {rule.type}",
            )
        )
    for label in rule.match:
        if label in _RESERVED_LABELS:
            issues.items.append(
                _issue(issues, rule, f"{where}.match", f"cannot select on {label!r}")
            )


def _check_factor(rule: FamilyRule, where: str, issues: Issues) -> None:
    factor = rule.factor or 0.0
    if rule.type not in _SCALABLE:
        issues.items.append(
            _issue(issues, rule, f"{where}.factor", f"a scale cannot apply to type {rule.type}")
        )
    elif factor == 0:
        issues.items.append(
            _issue(issues, rule, f"{where}.factor", "factor 0 would erase every value")
        )
    elif factor < 0 and rule.type is not MetricType.GAUGE:
        issues.items.append(
            _issue(
                issues,
                rule,
                f"{where}.factor",
                f"a negative factor would break a {rule.type}'s monotonic values and bucket order",
            )
        )


def _check_warm_zero(rule: FamilyRule, where: str, issues: Issues) -> None:
    warm = rule.warm_zero
    assert warm is not None  # noqa: S101 - guarded by the caller
    path = f"{where}.warm_zero"
    if rule.type not in (MetricType.COUNTER, MetricType.HISTOGRAM):
        issues.items.append(
            _issue(
                issues,
                rule,
                path,
                f"warm-zero is for counters and histograms; a {rule.type} has no 'not yet happened' state",
            )
        )
    if rule.type is MetricType.HISTOGRAM and not warm.buckets:
        issues.items.append(
            _issue(
                issues, rule, path, "a histogram's warm-zero needs 'buckets' (the engine's bounds)"
            )
        )
    if warm.buckets and list(warm.buckets) != sorted(set(warm.buckets)):
        issues.items.append(
            _issue(issues, rule, f"{path}.buckets", "bounds must be strictly increasing")
        )
    if warm.keep_labels is not None and warm.drop_labels:
        issues.items.append(_issue(issues, rule, path, "use keep_labels or drop_labels, not both"))
    if (
        warm.keep_labels is not None or warm.drop_labels or warm.defaults
    ) and warm.labels_from is None:
        issues.items.append(
            _issue(issues, rule, path, "keep_labels/drop_labels/defaults need labels_from")
        )
    clash = set(warm.values) & set(warm.set)
    if clash:
        issues.items.append(
            _issue(issues, rule, path, f"label(s) {sorted(clash)} are in both 'values' and 'set'")
        )


def _check_relabel(rule: FamilyRule, index: int, step: RelabelConfig, issues: Issues) -> None:
    path = f"families.{rule.name}.relabel[{index}]"
    try:
        pattern = re.compile(step.regex)
    except re.error as exc:
        issues.items.append(
            _issue(
                issues, rule, path + ".regex", f"cannot compile {step.regex!r}: {exc}", step.line
            )
        )
        return
    action = step.action
    if action is RelabelAction.REPLACE and step.target_label is None:
        issues.items.append(
            _issue(
                issues,
                rule,
                path,
                "missing required field 'target_label' while action is replace",
                step.line,
            )
        )
    if action in (RelabelAction.KEEP, RelabelAction.DROP) and not step.source_labels:
        issues.items.append(
            _issue(issues, rule, path, f"{action} action requires 'source_labels'", step.line)
        )
    if action in (RelabelAction.LABELDROP, RelabelAction.LABELKEEP) and (
        step.source_labels or step.target_label
    ):
        issues.items.append(
            _issue(
                issues,
                rule,
                path,
                f"{action} action requires only 'regex', and no other fields",
                step.line,
            )
        )
    labels = [
        *step.source_labels,
        *([step.target_label] if step.target_label and "$" not in step.target_label else []),
    ]
    for label in labels:
        if label in _RESERVED_LABELS:
            issues.items.append(
                _issue(
                    issues,
                    rule,
                    path,
                    f"cannot relabel {label!r}: it shapes the histogram or summary",
                    step.line,
                )
            )
        elif not LABEL_NAME.fullmatch(label):
            issues.items.append(
                _issue(issues, rule, path, f"invalid label name {label!r}", step.line)
            )
    for field_name in ("replacement", "target_label"):
        template = getattr(step, field_name)
        if template is not None and action in (RelabelAction.REPLACE, RelabelAction.LABELMAP):
            try:
                compile_template(template, pattern)
            except TemplateError as exc:
                issues.items.append(
                    _issue(issues, rule, f"{path}.{field_name}", f"{template!r} {exc}", step.line)
                )


def _check_outputs(config: Config, issues: Issues) -> None:
    """No two rules may produce the same family, and a renamed-away source cannot be kept."""
    producers: dict[str, list[FamilyRule]] = defaultdict(list)
    consumed: dict[str, FamilyRule] = {}
    for rule in config.families:
        producers[rule.name].append(rule)
        if rule.source and rule.source != rule.name and not rule.keep_source:
            consumed.setdefault(rule.source, rule)
    for name, rules in producers.items():
        if len(rules) > 1:
            lines = ", ".join(str(rule.line) for rule in rules)
            issues.items.append(
                _issue(
                    issues,
                    rules[1],
                    f"families.{name}",
                    f"produced by {len(rules)} rules (lines {lines})",
                )
            )
    for rule in config.families:
        if (
            rule.source
            and rule.source != rule.name
            and rule.keep_source
            and rule.source in consumed
        ):
            other = consumed[rule.source]
            issues.items.append(
                _issue(
                    issues,
                    rule,
                    f"families.{rule.name}.keep_source",
                    f"keeps {rule.source}, which families.{other.name} (line {other.line}) renames away (keep_source: false)",
                )
            )
        if rule.name in consumed and consumed[rule.name] is not rule:
            other = consumed[rule.name]
            issues.items.append(
                _issue(
                    issues,
                    rule,
                    f"families.{rule.name}",
                    f"is also the source that families.{other.name} (line {other.line}) renames away",
                )
            )


def _issue(
    issues: Issues, rule: FamilyRule, path: str, message: str, line: int | None = None
) -> ConfigIssue:
    return ConfigIssue(issues.source, line or rule.line, path, message)


def check_config(config: Config, issues: Issues) -> None:
    """Record every cross-field problem of ``config`` in ``issues``."""
    for rule in config.families:
        _check_shape(rule, issues)
        for index, step in enumerate(rule.relabel):
            _check_relabel(rule, index, step, issues)
    _check_outputs(config, issues)
