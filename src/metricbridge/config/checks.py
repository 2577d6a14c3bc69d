"""Cross-field and cross-rule checks of a parsed ``Config``, named after the rule they concern."""

from __future__ import annotations

import math

from metricbridge.config.outputs import check_outputs
from metricbridge.config.schema import Config, Disposition, FamilyRule, RelabelAction, RelabelConfig
from metricbridge.config.templates import template_parts
from metricbridge.config.yaml_nodes import Issues, RuleIssues
from metricbridge.errors import RegexError, TemplateError
from metricbridge.model.family import MetricType
from metricbridge.model.names import LABEL_NAME
from metricbridge.model.regex import compile_regex

_OPERATIONS = {"source", "factor", "match", "relabel", "derive"}
# Which optional fields each disposition requires; of the operations, the rest are refused.
_NEEDS: dict[Disposition, set[str]] = {
    Disposition.NATIVE: set(),
    Disposition.ENGINE: set(),
    Disposition.STRUCTURAL: set(),
    Disposition.DROP: set(),
    Disposition.ALIAS: {"source"},
    Disposition.SCALE: {"source", "factor"},
    Disposition.SELECT: {"source", "match"},
    Disposition.RELABEL: {"relabel"},
    Disposition.DERIVE: {"derive"},
    # and exactly one of derive or source (_check_approximation)
    Disposition.APPROXIMATE: {"help"},
}
APPROXIMATION_HELP = "Approximation:"  # how an approximate row's HELP starts
# Warm-zero serves 0 for a counter the engine defines and creates lazily: a row the engine has
# no source for (engine, approximate) would be a made-up value, not a pre-warm.
_NO_WARM_ZERO = {
    Disposition.STRUCTURAL,
    Disposition.DROP,
    Disposition.ENGINE,
    Disposition.APPROXIMATE,
}
_UNTYPED_OK = {Disposition.ENGINE, Disposition.STRUCTURAL, Disposition.DROP}
_SCALABLE = {MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM, MetricType.SUMMARY}
_RESERVED_LABELS = {"le", "quantile", "__name__"}
_EXPANDING = (RelabelAction.REPLACE, RelabelAction.LABELMAP)


def _present(rule: FamilyRule, name: str) -> bool:
    return getattr(rule, name) not in (None, (), {})


def _check_fields(rule: FamilyRule, check: RuleIssues) -> None:
    """Fields required or refused by the disposition, and the type where one is needed."""
    needs = _NEEDS[rule.disposition]
    refused = (_OPERATIONS - needs) | (
        {"warm_zero"} if rule.disposition in _NO_WARM_ZERO else set()
    )
    if rule.disposition is Disposition.RELABEL:
        refused -= {"source"}  # a relabel may read another family
    if rule.disposition is Disposition.APPROXIMATE:
        needs, refused = _approximation_fields(rule, check)
        refused |= {"warm_zero"}
    for name in sorted(needs):
        if not _present(rule, name):
            check.add(
                "", f"missing required field '{name}' while disposition is {rule.disposition}"
            )
    for name in sorted(refused):
        if _present(rule, name):
            check.add("", f"field '{name}' does not apply to disposition {rule.disposition}")
    needs_type = rule.disposition not in _UNTYPED_OK or rule.warm_zero or rule.idle
    if rule.type is MetricType.UNKNOWN and needs_type:
        check.add("", f"missing required field 'type' while disposition is {rule.disposition}")


def _approximation_fields(rule: FamilyRule, check: RuleIssues) -> tuple[set[str], set[str]]:
    """An approximation computes (derive) or reads one family (source, a factor or a match)."""
    needs = {"help"}
    if (rule.derive is None) == (rule.source is None):
        check.add("", "an approximation needs exactly one of 'derive' or 'source'")
        return needs, {"relabel"}
    if rule.derive is not None:
        return needs, {"source", "factor", "match", "relabel"}
    if rule.factor is not None and rule.match:
        check.add("", "an approximation read from a source scales (factor) or selects (match)")
    return needs, {"derive", "relabel"}


def _check_meaning(rule: FamilyRule, check: RuleIssues) -> None:
    """Combinations that parse but cannot mean anything."""
    if rule.source == rule.name and rule.disposition is not Disposition.RELABEL:
        check.add("", "source is the family itself; only relabel rewrites a family in place")
    if rule.type is MetricType.COUNTER and not rule.name.endswith("_total"):
        check.add("", "a counter's name must end in _total (the name its samples carry)")
    if rule.derive is not None and rule.type is not MetricType.GAUGE:
        check.add(".derive", f"derived families are gauges, not a {rule.type}")
    if rule.idle is not None and rule.type is not MetricType.GAUGE:
        check.add(".idle", f"idle zeroing applies to gauges, not to a {rule.type}")
    for label in rule.match:
        if label in _RESERVED_LABELS:
            check.add(".match", f"cannot select on {label!r}")
    if rule.join is not None and rule.disposition is not Disposition.RELABEL:
        check.add(".join", f"a join feeds relabel steps; it does not apply to {rule.disposition}")
    help_text = rule.help
    if rule.disposition is Disposition.APPROXIMATE and help_text is not None:  # noqa: SIM102
        if not help_text.startswith(APPROXIMATION_HELP):
            check.add(
                ".help",
                f"an approximation's HELP starts with {APPROXIMATION_HELP!r} and says what it is",
            )


def _check_factor(rule: FamilyRule, check: RuleIssues) -> None:
    factor = rule.factor
    if factor is None:
        return
    if rule.type not in _SCALABLE:
        check.add(".factor", f"a scale cannot apply to type {rule.type}")
    elif factor == 0:
        check.add(".factor", "factor 0 would erase every value")
    elif factor < 0 and rule.type is not MetricType.GAUGE:
        check.add(
            ".factor",
            f"a negative factor would break a {rule.type}'s monotonic values and bucket order",
        )


# Series one warm-zero rule may make from its ``values`` lists (their product): the shipped
# contract uses none; a product in the millions is a mistake, not a contract.
MAX_WARM_ZERO_COMBINATIONS = 10_000


def _check_warm_zero(rule: FamilyRule, check: RuleIssues) -> None:
    warm = rule.warm_zero
    if warm is None:
        return
    if rule.type not in (MetricType.COUNTER, MetricType.HISTOGRAM):
        check.add(
            ".warm_zero",
            "warm-zero is for counters and histograms; "
            f"a {rule.type} has no 'not yet happened' state",
        )
    if rule.type is MetricType.HISTOGRAM and not warm.buckets:
        check.add(".warm_zero", "a histogram's warm-zero needs 'buckets' (the engine's bounds)")
    if warm.buckets and list(warm.buckets) != sorted(set(warm.buckets)):
        check.add(".warm_zero.buckets", "bounds must be strictly increasing")
    if warm.keep_labels is not None and warm.drop_labels:
        check.add(".warm_zero", "use keep_labels or drop_labels, not both")
    inheriting = warm.keep_labels is not None or warm.drop_labels or warm.defaults
    if inheriting and warm.labels_from is None:
        check.add(".warm_zero", "keep_labels/drop_labels/defaults need labels_from")
    clash = set(warm.values) & set(warm.set)
    if clash:
        check.add(".warm_zero", f"label(s) {sorted(clash)} are in both 'values' and 'set'")
    combinations = math.prod(len(values) for values in warm.values.values())
    if combinations > MAX_WARM_ZERO_COMBINATIONS:
        check.add(
            ".warm_zero.values",
            f"the value lists make {combinations:,} label combinations, each a series to serve "
            f"(at most {MAX_WARM_ZERO_COMBINATIONS:,})",
        )


def _check_relabel_fields(step: RelabelConfig, path: str, check: RuleIssues) -> None:
    """relabel.go's per-action field rules, and label names that may be touched."""
    action, line = step.action, step.line
    if action is RelabelAction.REPLACE and step.target_label is None:
        check.add(path, "missing required field 'target_label' while action is replace", line)
    if action in (RelabelAction.KEEP, RelabelAction.DROP) and not step.source_labels:
        check.add(path, f"{action} action requires 'source_labels'", line)
    only_regex = action in (RelabelAction.LABELDROP, RelabelAction.LABELKEEP)
    if only_regex and (step.source_labels or step.target_label):
        check.add(path, f"{action} action requires only 'regex', and no other fields", line)
    target = step.target_label
    for label in [*step.source_labels, *([target] if target and "$" not in target else [])]:
        if label in _RESERVED_LABELS:
            check.add(path, f"cannot relabel {label!r}: it shapes the histogram or summary", line)
        elif not LABEL_NAME.fullmatch(label):
            check.add(path, f"invalid label name {label!r}", line)


def _check_relabel(index: int, step: RelabelConfig, check: RuleIssues) -> None:
    path = f".relabel[{index}]"
    try:
        pattern = compile_regex(step.regex)
    except RegexError as exc:
        check.add(f"{path}.regex", f"cannot compile {step.regex!r} as RE2: {exc}", step.line)
        return
    _check_relabel_fields(step, path, check)
    if step.action not in _EXPANDING:
        return
    for field_name in ("replacement", "target_label"):
        template = getattr(step, field_name)
        if template is not None:
            try:
                template_parts(template, pattern)
            except TemplateError as exc:
                check.add(f"{path}.{field_name}", f"{template!r} {exc}", step.line)


def check_config(config: Config, issues: Issues) -> None:
    """Record every cross-field problem of ``config`` in ``issues``."""
    for rule in config.families:
        check = RuleIssues(issues, rule)
        _check_fields(rule, check)
        _check_meaning(rule, check)
        _check_factor(rule, check)
        _check_warm_zero(rule, check)
        for index, step in enumerate(rule.relabel):
            _check_relabel(index, step, check)
    check_outputs(config, issues)
