"""Recording rules that reproduce a rules file's aliases, scales, selects and relabels centrally.

One ``record:`` per series name (a histogram needs ``_bucket``, ``_sum`` and ``_count``), so the
recorded family is queried exactly as the bridge serves it. Pure: a ``Config`` in, an
``Export`` out.
"""

from __future__ import annotations

from collections.abc import Callable

from metricbridge.config.schema import Config, Disposition, FamilyRule, RelabelAction, RelabelConfig
from metricbridge.config.synthesis import DeriveOp
from metricbridge.config.templates import expand, template_parts
from metricbridge.export.common import (
    Export,
    Note,
    NoteKind,
    Target,
    common_notes,
    config_notes,
    go_template,
    is_in_place,
    promql_number,
    promql_string,
    route,
    series_names,
)
from metricbridge.export.derive import derive_expr
from metricbridge.model.family import MetricType
from metricbridge.model.regex import compile_regex

GROUP_NAME = "metricbridge-contract"
DEFAULT_WINDOW = "5m"
_JOINED = "__metricbridge_joined"  # scratch label for multi-label relabel steps, removed again
Wrap = Callable[[str], str]


# Not in metricbridge.errors: recording_rules catches it and writes it as a note; it never
# leaves this module.
class _InexpressibleError(ValueError):
    """A part of a rule that PromQL cannot reproduce; the message says which."""


def recording_rules(config: Config, matchers: str = "", window: str = DEFAULT_WINDOW) -> Export:
    """Recording rules for every rule routed to ``prometheus-rules``, and notes for the rest.

    ``matchers`` (``job="sglang"``) is added to every input selector, so the rules read only
    the raw engines' series, not those of pods that already run the sidecar. ``window`` is the
    ``rate()`` range of derivations the bridge computes from deltas between two fetches.
    """
    routes = route(config)
    relabelled = _scrape_time_effects(config, routes)
    records: list[dict[str, str]] = []
    notes: list[Note] = config_notes(config)
    for rule in config.families:
        target = routes[rule.name]
        notes += common_notes(rule, target)
        if target is Target.RELABEL:
            notes.append(Note(NoteKind.OTHER_FORMAT, rule.name, _what(rule)))
        if target is not Target.RECORDING:
            continue
        if rule.derive is not None:
            records.append(
                {"record": rule.name, "expr": derive_expr(rule.derive, matchers, window)}
            )
            notes += _derive_notes(rule, window, relabelled)
            continue
        try:
            pairs = _expressions(rule, matchers)
        except _InexpressibleError as exc:
            notes.append(Note(NoteKind.RELABEL_STEP, rule.name, str(exc)))
            continue
        records += [{"record": name, "expr": expr} for name, expr in pairs]
        if not rule.keep_source:
            notes.append(Note(NoteKind.KEEP_SOURCE, rule.name, f"{rule.input_name} stays"))
        if rule.input_name in relabelled:
            notes.append(Note(NoteKind.ORIGINAL_LABELS, rule.name, relabelled[rule.input_name]))
    document: dict[str, object] = {"groups": [{"name": GROUP_NAME, "rules": records}]}
    return Export(document, tuple(notes))


def _derive_notes(rule: FamilyRule, window: str, relabelled: dict[str, str]) -> list[Note]:
    """Where a derived rule's result can differ from the bridge's."""
    derive = rule.derive
    assert derive is not None  # noqa: S101 - only called for derive rules
    notes = [
        Note(NoteKind.ORIGINAL_LABELS, rule.name, relabelled[operand.family])
        for operand in (derive.numerator, derive.denominator)
        if operand is not None and operand.family in relabelled
    ]
    if derive.op is DeriveOp.RATIO_OF_DELTAS:
        detail = f"rate over {window}, not the deltas since the bridge's previous fetch"
        notes.append(Note(NoteKind.APPROXIMATE, rule.name, detail))
    return notes


def _what(rule: FamilyRule) -> str:
    if rule.disposition is Disposition.DROP:
        return "drop"
    if is_in_place(rule):
        return "in-place relabel"
    return f"rename of {rule.input_name} ({rule.disposition}, keep_source: false)"


def _scrape_time_effects(config: Config, routes: dict[str, Target]) -> dict[str, str]:
    """Upstream families that the relabel part rewrites or drops at scrape time, and how."""
    out: dict[str, str] = {}
    for rule in config.families:
        if routes[rule.name] is not Target.RELABEL:
            continue
        if is_in_place(rule):
            out[rule.name] = f"reads {rule.name} after its scrape-time relabel"
        elif rule.disposition is Disposition.DROP:
            out[rule.name] = f"reads {rule.name}, which the relabel part drops at scrape"
    return out


def _selector(name: str, matchers: tuple[str, ...]) -> str:
    return f"{name}{{{','.join(matchers)}}}" if matchers else name


def _expressions(rule: FamilyRule, extra: str) -> list[tuple[str, str]]:
    """(record, expr) per series name of the rule's output family."""
    sources = series_names(rule.input_name, rule.type)
    outputs = series_names(rule.name, rule.type)
    base_matchers = (extra,) if extra else ()
    if rule.disposition is Disposition.SELECT:
        matches = tuple(f"{k}={promql_string(v)}" for k, v in rule.match.items())
        dropped = ", ".join(rule.match)
        return [
            (out, f"max without ({dropped}) ({_selector(src, matches + base_matchers)})")
            for src, out in zip(sources, outputs, strict=True)
        ]
    if rule.disposition is Disposition.SCALE:
        unscaled = {f"{outputs[0]}_count"} if rule.type is MetricType.SUMMARY else set()
        return [
            (out, _selector(src, base_matchers) if out in unscaled else _scaled(src, rule, extra))
            for src, out in zip(sources, outputs, strict=True)
        ]
    if rule.disposition is Disposition.RELABEL:
        filters, wrap = _relabel_chain(rule.relabel)
        return [
            (out, wrap(_selector(src, filters + base_matchers)))
            for src, out in zip(sources, outputs, strict=True)
        ]
    return [(out, _selector(src, base_matchers)) for src, out in zip(sources, outputs, strict=True)]


def _scaled(source: str, rule: FamilyRule, extra: str) -> str:
    factor = rule.factor or 1.0
    selector = _selector(source, (extra,) if extra else ())
    # As ops._multiplier does: dividing by 1000 is exact where multiplying by 0.001 is not.
    inverse = 1.0 / factor
    if inverse == round(inverse) and abs(inverse) > 1:
        return f"{selector} / {promql_number(inverse)}"
    return f"{selector} * {promql_number(factor)}"


def _relabel_chain(steps: tuple[RelabelConfig, ...]) -> tuple[tuple[str, ...], Wrap]:
    """Leading keep/drop steps become selector matchers, replace steps ``label_replace`` calls."""
    filters: list[str] = []
    wrappers: list[Wrap] = []
    for index, step in enumerate(steps):
        if step.action in (RelabelAction.KEEP, RelabelAction.DROP) and not wrappers:
            filters.append(_filter(index, step))
        elif step.action is RelabelAction.REPLACE:
            wrappers += _replace(index, step)
        elif step.action in (RelabelAction.KEEP, RelabelAction.DROP):
            raise _InexpressibleError(f"relabel[{index}]: {step.action} after a replace")
        else:
            raise _InexpressibleError(f"relabel[{index}]: {step.action} acts on label names")

    def wrap(inner: str) -> str:
        for wrapper in wrappers:
            inner = wrapper(inner)
        return inner

    return tuple(filters), wrap


def _filter(index: int, step: RelabelConfig) -> str:
    if len(step.source_labels) != 1:
        raise _InexpressibleError(
            f"relabel[{index}]: {step.action} over {len(step.source_labels)} labels "
            "(a selector matcher reads one)"
        )
    op = "=~" if step.action is RelabelAction.KEEP else "!~"
    return f"{step.source_labels[0]}{op}{promql_string(step.regex)}"


def _replace(index: int, step: RelabelConfig) -> list[Wrap]:
    """``label_replace`` calls doing one replace step (none if it can never apply)."""
    target = promql_string(step.target_label or "")
    if "$" in target:
        raise _InexpressibleError(f"relabel[{index}]: label_replace cannot template target_label")
    replacement = promql_string(go_template(step.replacement))
    regex = promql_string(step.regex)
    if not step.source_labels:
        # Prometheus joins no labels into "": the step sets a constant, or never applies.
        pattern = compile_regex(f"(?:{step.regex})")  # as the bridge reads it: RE2
        hit = pattern.fullmatch("")
        if hit is None:
            return []
        value = expand(template_parts(step.replacement, pattern), hit)
        constant = promql_string(value.replace("$", "$$"))  # a literal for Go's Expand
        return [lambda inner: f'label_replace({inner}, {target}, {constant}, "", "")']
    if len(step.source_labels) == 1:
        source = promql_string(step.source_labels[0])
        return [lambda inner: f"label_replace({inner}, {target}, {replacement}, {source}, {regex})"]
    names = ", ".join(promql_string(label) for label in step.source_labels)
    separator = promql_string(step.separator)
    return [
        lambda inner: f'label_join({inner}, "{_JOINED}", {separator}, {names})',
        lambda inner: f'label_replace({inner}, {target}, {replacement}, "{_JOINED}", {regex})',
        lambda inner: f'label_replace({inner}, "{_JOINED}", "", "{_JOINED}", ".*")',
    ]
