"""``metric_relabel_configs`` that reproduce a rules file's drops, renames and in-place relabels.

Relabel steps in a rules file apply to one family; in a scrape config they apply to every
series of the target. So each step is scoped: ``__name__`` joins its source labels and the
regex starts with the family's series names. The step's own groups keep their numbers, because
the scoping part captures nothing. Pure: a ``Config`` in, an ``Export`` out.
"""

from __future__ import annotations

from metricbridge.config.schema import Config, Disposition, FamilyRule, RelabelAction, RelabelConfig
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
    literal_replacement,
    name_pattern,
    re2_escape,
    route,
)
from metricbridge.model.family import MetricType, sample_base
from metricbridge.model.regex import compile_regex

_MARK = "__tmp_metricbridge_keep"  # Prometheus reserves __tmp for scratch labels while relabelling

Step = dict[str, object]


# Not in metricbridge.errors: relabel_configs catches it and writes it as a note; it never
# leaves this module.
class _InexpressibleError(ValueError):
    """A relabel step that cannot be scoped to one family; the message says which."""


def relabel_configs(config: Config) -> Export:
    """``metric_relabel_configs`` for every rule routed to ``relabel``, and notes for the rest.

    Drops come first, then renames (so a renamed family keeps the labels the community gave
    it, as the bridge derives families from the original), then scoped relabel steps.
    """
    routes = route(config)
    drops: list[Step] = []
    renames: list[Step] = _restore_spelling(config)
    rewrites: list[Step] = []
    notes: list[Note] = config_notes(config)
    for rule in config.families:
        target = routes[rule.name]
        notes += common_notes(rule, target)
        if target is Target.RECORDING:
            notes.append(Note(NoteKind.ADDS_SERIES, rule.name, _what(rule)))
        if target is not Target.RELABEL:
            continue
        if rule.disposition is Disposition.DROP:
            drops.append(_drop_family(rule.name, rule.type))
            continue
        try:
            steps = _scoped_steps(rule)
        except _InexpressibleError as exc:
            notes.append(Note(NoteKind.RELABEL_STEP, rule.name, str(exc)))
            continue
        if not is_in_place(rule):
            renames.append(_rename(rule))
        rewrites += steps
    document: dict[str, object] = {"metric_relabel_configs": drops + renames + rewrites}
    return Export(document, tuple(notes))


def _restore_spelling(config: Config) -> list[Step]:
    """Serve ``sglang_x`` (an escaping scraper or router wrote it) as ``sglang:x``, like the bridge.

    Unlike the bridge, a relabel step cannot see whether the contract spelling of the same
    family also arrived; then both spellings end up under one name.
    """
    naming = config.naming
    if not naming.restore_escaped or naming.escaped_prefix == naming.prefix:
        return []
    return [
        {
            "source_labels": ["__name__"],
            "regex": f"{re2_escape(naming.escaped_prefix)}(.+)",
            "target_label": "__name__",
            "replacement": literal_replacement(naming.prefix) + "${1}",
        }
    ]


def _what(rule: FamilyRule) -> str:
    kept = "" if rule.keep_source else ", keep_source: false"
    return f"{rule.disposition} of {rule.input_name}{kept}"


def _drop_family(name: str, mtype: MetricType) -> Step:
    return {"source_labels": ["__name__"], "regex": name_pattern(name, mtype), "action": "drop"}


def _rename(rule: FamilyRule) -> Step:
    """Rename every series of the source family, suffixes (``_bucket``, ``_total``) kept."""
    new_base = sample_base(rule.name, rule.type)
    return {
        "source_labels": ["__name__"],
        "regex": name_pattern(rule.input_name, rule.type, capture=True),
        "target_label": "__name__",
        "replacement": literal_replacement(new_base) + "${1}",
    }


def _scoped_steps(rule: FamilyRule) -> list[Step]:
    """The rule's relabel steps, each limited to the series of the output family."""
    if rule.join is not None:
        # A scrape-time step sees one series: another family's labels are not there.
        joined = ", ".join(rule.join.families)
        raise _InexpressibleError(f"its steps read labels of another family ({joined})")
    steps: list[Step] = []
    for index, step in enumerate(rule.relabel):
        if step.action in (
            RelabelAction.LABELDROP,
            RelabelAction.LABELKEEP,
            RelabelAction.LABELMAP,
        ):
            raise _InexpressibleError(
                f"relabel[{index}]: {step.action} acts on every series of the scrape and "
                "cannot be limited to one family"
            )
        if step.source_labels:
            steps += _scoped(rule, step)
        else:
            steps += _constant(rule, step)
    return steps


def _scoped(rule: FamilyRule, step: RelabelConfig) -> list[Step]:
    names = name_pattern(rule.name, rule.type)
    regex = f"{names}{re2_escape(step.separator)}(?:{_unanchored(step.regex)})"
    scope: Step = {
        "source_labels": ["__name__", *step.source_labels],
        "separator": step.separator,
        "regex": regex,
    }
    if step.action is RelabelAction.DROP:
        return [{**scope, "action": "drop"}]
    if step.action is RelabelAction.KEEP:
        # keep = drop the family's series that lack a mark set where the regex matched.
        return [
            {**scope, "target_label": _MARK, "replacement": "1"},
            {
                "source_labels": ["__name__", _MARK],
                "separator": ";",
                "regex": f"{names};",
                "action": "drop",
            },
            {"regex": re2_escape(_MARK), "action": "labeldrop"},
        ]
    return [
        {
            **scope,
            "target_label": go_template(step.target_label or ""),
            "replacement": go_template(step.replacement),
        }
    ]


def _unanchored(regex: str) -> str:
    """``regex`` without a leading ``^`` or trailing ``$``: after a family's name they never match.

    Prometheus anchors the whole joined text, not each part. Both are no-ops where they stand,
    since relabel regexes match whole values anyway; an anchor anywhere else cannot be carried
    over and is refused.
    """
    body = regex.removeprefix("^")
    if body.endswith("$") and not _escaped(body, len(body) - 1):
        body = body[:-1]
    in_class = False
    for index, char in enumerate(body):
        if _escaped(body, index):
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif char in "^$" and not in_class:
            raise _InexpressibleError(
                f"regex {regex!r}: an anchor ({char}) inside it cannot be placed after the "
                "family's name in one Prometheus regex"
            )
    return body


def _escaped(text: str, index: int) -> bool:
    """Whether ``text[index]`` follows an odd number of backslashes."""
    slashes = len(text[:index]) - len(text[:index].rstrip("\\"))
    return slashes % 2 == 1


def _constant(rule: FamilyRule, step: RelabelConfig) -> list[Step]:
    """A step without source labels sees "": it always or never applies, decided here."""
    pattern = compile_regex(f"(?:{step.regex})")  # as the bridge reads it: RE2
    hit = pattern.fullmatch("")
    if step.action is RelabelAction.KEEP:
        return [] if hit is not None else [_drop_family(rule.name, rule.type)]
    if step.action is RelabelAction.DROP:
        return [_drop_family(rule.name, rule.type)] if hit is not None else []
    if hit is None:
        return []
    target = expand(template_parts(step.target_label or "", pattern), hit)
    value = expand(template_parts(step.replacement, pattern), hit)
    return [
        {
            "source_labels": ["__name__"],
            "regex": name_pattern(rule.name, rule.type),
            "target_label": target,
            "replacement": literal_replacement(value),
        }
    ]
