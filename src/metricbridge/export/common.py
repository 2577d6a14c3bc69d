"""What both rule exports share: which format carries each rule, notes, and PromQL/RE2 spelling.

``metricbridge rules`` turns a rules file into Prometheus configuration in two complementary
parts: recording rules (``export_recording``) for everything that adds a series, and
``metric_relabel_configs`` (``export_relabel``) for what rewrites series at scrape time. ``route``
decides which part carries a rule, so that each family is handled once and the two headers can
point at each other.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from metricbridge.config.schema import Config, Disposition, FamilyRule
from metricbridge.model.family import TYPE_SUFFIXES, MetricType, sample_base


class Target(StrEnum):
    """The part of the export that reproduces a rule."""

    RECORDING = "prometheus-rules"
    RELABEL = "relabel"
    SIDECAR_ONLY = "sidecar only"  # histogram scale, /server_info: only the bridge can
    NOTHING = "nothing"  # native, engine, structural: the engine's names pass through untouched


class NoteKind(StrEnum):
    """Why (part of) a rule is not in an export; the header explains each kind once."""

    OTHER_FORMAT = "other_format"
    WARM_ZERO = "warm_zero"
    IDLE = "idle"
    HISTOGRAM_SCALE = "histogram_scale"
    SERVER_INFO = "server_info"
    APPROXIMATE = "approximate"
    NAMING = "naming"
    KEEP_SOURCE = "keep_source"
    RELABEL_STEP = "relabel_step"
    ADDS_SERIES = "adds_series"
    ORIGINAL_LABELS = "original_labels"


@dataclass(frozen=True, slots=True)
class Note:
    """One family (and a detail, when it helps) under one kind of limit."""

    kind: NoteKind
    family: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Export:
    """One export: the YAML document and the notes its header lists."""

    document: dict[str, object]
    notes: tuple[Note, ...]


_IN_PLACE_CAPABLE = {Disposition.RELABEL}
_RECORDED = {
    Disposition.ALIAS,
    Disposition.SCALE,
    Disposition.SELECT,
    Disposition.RELABEL,
    Disposition.DERIVE,
}


def is_in_place(rule: FamilyRule) -> bool:
    """Whether the rule rewrites its input family under the same name."""
    return rule.disposition in _IN_PLACE_CAPABLE and rule.input_name == rule.name


def needs_server_info(rule: FamilyRule) -> bool:
    """Whether a derive rule reads the engine's /server_info JSON (never scraped by Prometheus)."""
    derive = rule.derive
    if derive is None:
        return False
    operands = (derive.numerator, derive.denominator)
    return any(o is not None and o.server_info is not None for o in operands)


def _readers(config: Config) -> Counter[str]:
    """How many rules derive a new family from each upstream family."""
    return Counter(
        rule.input_name
        for rule in config.families
        if rule.disposition in _RECORDED
        and rule.disposition is not Disposition.DERIVE
        and not is_in_place(rule)
    )


def route(config: Config) -> dict[str, Target]:
    """Which export reproduces each contract family.

    Scrape-time relabelling can rewrite and rename series but never add one, so it takes drops,
    in-place relabels and pure renames (``keep_source: false``) whose source no other rule reads;
    everything else that derives a family needs a recording rule, except a histogram scale
    (bucket bounds are label values) and derivations from the engine's /server_info JSON.
    """
    readers = _readers(config)
    out: dict[str, Target] = {}
    for rule in config.families:
        disposition = rule.disposition
        if disposition is Disposition.DROP or is_in_place(rule):
            out[rule.name] = Target.RELABEL
        elif disposition not in _RECORDED and not (
            disposition is Disposition.APPROXIMATE and config.serves(rule)
        ):
            # an approximation is recorded only when a profile switches it on, as it is served
            out[rule.name] = Target.NOTHING
        elif (
            disposition is Disposition.SCALE and rule.type is MetricType.HISTOGRAM
        ) or needs_server_info(rule):
            out[rule.name] = Target.SIDECAR_ONLY
        elif (
            disposition in (Disposition.ALIAS, Disposition.RELABEL)
            and not rule.keep_source
            and readers[rule.input_name] == 1
        ):
            out[rule.name] = Target.RELABEL
        else:
            out[rule.name] = Target.RECORDING
    return out


def common_notes(rule: FamilyRule, target: Target) -> list[Note]:
    """Limits that hold whatever the format: what the bridge does and Prometheus cannot."""
    notes = []
    if target is Target.SIDECAR_ONLY and needs_server_info(rule):
        notes.append(Note(NoteKind.SERVER_INFO, rule.name, f"derive op {_op(rule)}"))
    elif target is Target.SIDECAR_ONLY:
        notes.append(Note(NoteKind.HISTOGRAM_SCALE, rule.name, f"from {rule.input_name}"))
    if rule.warm_zero is not None:
        notes.append(Note(NoteKind.WARM_ZERO, rule.name))
    if rule.idle is not None:
        notes.append(Note(NoteKind.IDLE, rule.name, f"idle: {rule.idle}"))
    return notes


def config_notes(config: Config) -> list[Note]:
    """Limits from the file-wide sections: idle zeroing and name spelling."""
    idle = config.idle
    state = "" if idle.enabled else "idle.enabled: false"
    notes = [Note(NoteKind.IDLE, gauge, state) for gauge in idle.zero]
    if config.naming.also_serve_escaped:
        prefix = config.naming.escaped_prefix
        notes.append(Note(NoteKind.NAMING, f"{prefix}*", "naming.also_serve_escaped copies"))
    return notes


def _op(rule: FamilyRule) -> str:
    return str(rule.derive.op) if rule.derive is not None else "?"


def series_names(name: str, mtype: MetricType) -> tuple[str, ...]:
    """The series a family's samples are stored under, ``_created`` left out (start times only)."""
    base = sample_base(name, mtype)
    return tuple(base + suffix for suffix in TYPE_SUFFIXES[mtype] if suffix != "_created")


def name_pattern(name: str, mtype: MetricType, *, capture: bool = False) -> str:
    """An RE2 pattern matching every series name of a family.

    With ``capture``, the suffix (``_bucket``, ``_total``, ...) is group 1, even when the type
    has none (then it captures the empty string), so a rename can always append ``${1}``.
    """
    base = re2_escape(sample_base(name, mtype))
    suffixes = "|".join(re2_escape(s) for s in TYPE_SUFFIXES[mtype] if s)
    if capture:
        return f"{base}({suffixes})"
    return f"{base}(?:{suffixes})" if suffixes else base


_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def re2_escape(text: str) -> str:
    """Escape ``text`` to match itself in Prometheus' RE2 regexes."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def promql_string(text: str) -> str:
    """A double-quoted PromQL string literal holding ``text``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def promql_number(value: float) -> str:
    """A PromQL number literal: ``100`` rather than ``100.0``."""
    text = repr(float(value))
    return text.removesuffix(".0")


_REFERENCE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([0-9]+)|([A-Za-z_][A-Za-z0-9_]*))|\$\$")


def go_template(template: str) -> str:
    """Spell every group reference as ``${ref}``.

    The bridge reads ``$1x`` as group 1 then ``x`` (``templates.template_parts``); Go's
    ``Regexp.Expand``, which Prometheus uses, would read a group named ``1x``. Braces make both
    read the same.
    """

    def braced(match: re.Match[str]) -> str:
        if match.group() == "$$":
            return "$$"
        return "${" + (match.group(1) or match.group(2) or match.group(3)) + "}"

    return _REFERENCE.sub(braced, template)


def literal_replacement(text: str) -> str:
    """A relabel replacement that yields ``text`` verbatim (``$`` doubled)."""
    return text.replace("$", "$$")
