"""Cross-rule checks of what a config serves and reads.

One producer per family, no rule reading another's output where it cannot see it (no chaining),
and no two served families sharing a name on the wire.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from metricbridge.config.schema import Config, Disposition, FamilyRule
from metricbridge.config.yaml_nodes import Issues, RuleIssues
from metricbridge.model.family import MetricType, sample_base
from metricbridge.model.family_names import served_names

# Rules that read an upstream family by name, before any rule has run (translate.py by_input).
_FROM_UPSTREAM = {Disposition.ALIAS, Disposition.SCALE, Disposition.SELECT, Disposition.RELABEL}
_NOT_SERVED = {Disposition.STRUCTURAL, Disposition.DROP}


def check_outputs(config: Config, issues: Issues) -> None:
    """Record every cross-rule problem of ``config`` in ``issues``."""
    _check_outputs(config, issues)
    _check_chaining(config, issues)
    _check_wire_names(config, issues)


def _check_outputs(config: Config, issues: Issues) -> None:
    """No two rules may produce the same family, and a renamed-away source cannot be kept."""
    producers: dict[str, list[FamilyRule]] = defaultdict(list)
    for rule in config.families:
        producers[rule.name].append(rule)
    consumed = _renamed_away(config)
    for rules in producers.values():
        if len(rules) > 1:
            lines = ", ".join(str(rule.line) for rule in rules)
            RuleIssues(issues, rules[1]).add("", f"produced by {len(rules)} rules (lines {lines})")
    for rule in config.families:
        check = RuleIssues(issues, rule)
        source = rule.source
        if source and source != rule.name and rule.keep_source and source in consumed:
            other = consumed[source]
            check.add(
                ".keep_source",
                f"keeps {source}, which families.{other.name} (line {other.line}) "
                "renames away (keep_source: false)",
            )
        if rule.name in consumed and consumed[rule.name] is not rule:
            other = consumed[rule.name]
            check.add(
                "",
                f"is also the source that families.{other.name} (line {other.line}) renames away",
            )


def _renamed_away(config: Config) -> dict[str, FamilyRule]:
    """Upstream families a rule serves under another name only, by the first such rule."""
    consumed: dict[str, FamilyRule] = {}
    for rule in config.families:
        if rule.source and rule.source != rule.name and not rule.keep_source:
            consumed.setdefault(rule.source, rule)
    return consumed


def _reads_upstream(rule: FamilyRule) -> bool:
    """Whether the rule reads a family other than its own name, before any rule has run."""
    return rule.transform in _FROM_UPSTREAM and rule.input_name != rule.name


def _check_chaining(config: Config, issues: Issues) -> None:
    """Every family a rule reads must be one that kind of rule can see (translate.py, derive.py).

    Alias, scale, select and relabel are looked up by upstream family, so another rule's output
    never reaches them. Derives read the families served once those have run, all derives side
    by side, so neither a derive's result nor a family renamed away or dropped reaches one;
    warm-zero reads the served families after the derives, so only the last two are hidden. A
    patched engine could serve a translated name itself, but the rule would then work only
    there, silently serving nothing on the unpatched engine it exists for: refused all the same.
    """
    translated: dict[str, FamilyRule] = {}
    derived: dict[str, FamilyRule] = {}
    hidden = dict(_renamed_away(config))
    for rule in config.families:
        if rule.derive is not None:  # derive and approximate rows
            derived.setdefault(rule.name, rule)
        if rule.derive is not None or _reads_upstream(rule):
            translated.setdefault(rule.name, rule)
        if rule.disposition is Disposition.DROP:
            hidden.setdefault(rule.name, rule)
    for rule in config.families:
        check = RuleIssues(issues, rule)
        if _reads_upstream(rule) and rule.source in translated:
            _refuse_chained_source(rule, translated[rule.source], check)
        _check_derive_reads(rule, derived, hidden, check)
        warm = rule.warm_zero
        if warm is not None and warm.labels_from in hidden:
            check.add(
                ".warm_zero.labels_from",
                f"reads {warm.labels_from}, {_hiding(hidden[warm.labels_from])}; warm-zero "
                f"reads the families being served, and {warm.labels_from} is not one of them",
            )


def _check_derive_reads(
    rule: FamilyRule,
    derived: dict[str, FamilyRule],
    hidden: dict[str, FamilyRule],
    check: RuleIssues,
) -> None:
    for path, name in _derive_reads(rule):
        if name in derived:
            other = derived[name]
            whose = (
                "this rule's own result"
                if other is rule
                else f"the result of families.{other.name} (line {other.line})"
            )
            check.add(
                path,
                f"reads {name}, {whose}; derives are computed side by side from the families "
                "served before any of them, so one never sees another's result (no chaining)",
            )
        elif name in hidden:
            check.add(
                path,
                f"reads {name}, {_hiding(hidden[name])}; derives read the families being "
                f"served, and {name} is not one of them",
            )


def _refuse_chained_source(rule: FamilyRule, producer: FamilyRule, check: RuleIssues) -> None:
    hint = (
        f": read the upstream family it reads ({producer.source}) instead"
        if producer.source and producer.derive is None
        else ""
    )
    check.add(
        ".source",
        f"reads {rule.source}, which families.{producer.name} (line {producer.line}) produces "
        f"by {producer.disposition}; {rule.disposition} rules read upstream families only, never "
        f"another rule's output (no chaining), so this family would never be served{hint}",
    )


def _hiding(rule: FamilyRule) -> str:
    if rule.disposition is Disposition.DROP:
        return f"which families.{rule.name} (line {rule.line}) drops"
    return f"which families.{rule.name} (line {rule.line}) renames away (keep_source: false)"


def _derive_reads(rule: FamilyRule) -> list[tuple[str, str]]:
    """(path, family) of every family a derive rule reads."""
    derive = rule.derive
    if derive is None:
        return []
    reads = [
        (f".derive.{side}.family", operand.family)
        for side, operand in (("numerator", derive.numerator), ("denominator", derive.denominator))
        if operand is not None and operand.family is not None
    ]
    if derive.labels_from is not None:
        reads.append((".derive.labels_from", derive.labels_from))
    return reads


@dataclass(frozen=True, slots=True)
class _Occupant:
    """A family the config puts on the wire: a rule's output, or an upstream source it keeps."""

    name: str
    type: MetricType
    rule: FamilyRule  # the rule producing it, or the first rule keeping it
    kept: bool  # an upstream family served beside the contract names (keep_source)

    def names(self) -> frozenset[str]:
        """Its names in either wire format (a shared name clashes in at least one)."""
        return served_names(self.name, self.type)

    @property
    def noun(self) -> str:
        return "untyped family" if self.type is MetricType.UNKNOWN else str(self.type)

    def role(self, wire: str) -> str:
        """What ``wire`` is to this family: its name, its OpenMetrics name or a sample name."""
        if wire == self.name:
            return "family name"
        if wire == sample_base(self.name, self.type):
            return "OpenMetrics family name"
        return "sample name"


def _occupants(config: Config) -> list[_Occupant]:
    """Every family the config serves under a name it knows, one entry per name."""
    names = {rule.name for rule in config.families}
    consumed = _renamed_away(config)
    occupants: dict[str, _Occupant] = {}
    for rule in config.families:
        if rule.disposition not in _NOT_SERVED:
            occupants.setdefault(rule.name, _Occupant(rule.name, rule.type, rule, kept=False))
    for rule in config.families:
        source = rule.source
        # A source that is itself a row is that row's family (or a chaining error reported
        # elsewhere); one renamed away is not served, or is already reported as kept.
        kept = _reads_upstream(rule) and rule.keep_source
        if kept and source is not None and source not in names and source not in consumed:
            occupants.setdefault(source, _Occupant(source, rule.type, rule, kept=True))
    return list(occupants.values())


def _check_wire_names(config: Config, issues: Issues) -> None:
    """No two served families may share a name in either wire format.

    A counter ``a_total`` is family ``a`` in OpenMetrics, a histogram ``h`` writes ``h_count``,
    and so on (family_names.wire_names): beside a gauge ``a`` or ``h_count`` promtool refuses
    the text output (a second TYPE line) and prometheus_client the OpenMetrics output (a
    clashing name). Upstream families that rules keep beside their outputs count as served.
    """
    occupants = _occupants(config)
    claims: dict[str, list[int]] = defaultdict(list)
    for index, occupant in enumerate(occupants):
        for wire in occupant.names():
            claims[wire].append(index)
    shared: dict[tuple[int, int], list[str]] = defaultdict(list)
    for wire, holders in claims.items():
        for pos, first in enumerate(holders):
            for second in holders[pos + 1 :]:
                shared[(first, second)].append(wire)
    clashes = []
    for (first, second), wires in shared.items():
        a, b = occupants[first], occupants[second]
        if a.kept and b.kept:
            continue  # two upstream families: the engine's own exposition, not the config's
        # Reported at the later rule, and at the output rather than the kept source on a tie.
        if (a.rule.line, not a.kept) > (b.rule.line, not b.kept):
            a, b = b, a
        clashes.append((b, a, sorted(wires)))
    for reported, other, wires in sorted(clashes, key=lambda c: (c[0].rule.line, c[1].rule.line)):
        _report_clash(reported, other, wires, issues)


def _report_clash(reported: _Occupant, other: _Occupant, wires: list[str], issues: Issues) -> None:
    wire = wires[0]
    also = f" (also {', '.join(repr(w) for w in wires[1:])})" if wires[1:] else ""
    if reported.kept:
        here = f"the kept {reported.noun}"
        theirs = (
            "this rule's output"
            if other.rule is reported.rule
            else f"families.{other.name} (line {other.rule.line})"
        )
        path, lead = ".keep_source", f"keeps upstream {reported.name}, which clashes"
    else:
        here = f"this {reported.noun}"
        if other.kept:
            keeper = (
                "this rule"
                if other.rule is reported.rule
                else f"families.{other.rule.name} (line {other.rule.line})"
            )
            theirs = f"upstream {other.name}, which {keeper} keeps"
        else:
            theirs = f"families.{other.name} (line {other.rule.line})"
        path, lead = "", "clashes"
    RuleIssues(issues, reported.rule).add(
        path,
        f"{lead} on the wire with {theirs}: {wire!r} is the {reported.role(wire)} of {here} "
        f"and the {other.role(wire)} of that {other.noun}{also}",
    )
