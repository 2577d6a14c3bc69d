"""Resolve a PromQL selector to the served series it reaches, or say why it reaches none.

A selector names a sample (``x_bucket``), not a family, so an unknown name is first normalised
to a family by its suffix: a served family with the wrong suffix for its type (``x`` for the
counter ``x_total``, ``x_sum`` for a gauge) is a different finding from a family that is not
served at all, which the contract then classifies, and the engine release, when one is given,
explains (created later, behind a feature switch, removed). Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from metricbridge.analysis.catalog import Catalog, ServedFamily
from metricbridge.analysis.engine_notes import EngineNote, EngineView
from metricbridge.analysis.findings import FindingKind
from metricbridge.analysis.promql import VARIABLE_PLACEHOLDER, Selector
from metricbridge.analysis.series_match import MatcherRegexes, accepts, name_pattern
from metricbridge.engines.diff import similarity
from metricbridge.model.family import TYPE_SUFFIXES
from metricbridge.translation.contract_index import ContractIndex, MissingClass, Verdict

__all__ = ["Miss", "Resolver", "Target"]

# difflib's ratio from which two names are taken for one another (num_retracted_reqs and
# num_retracted_requests: 0.9); engines.diff takes renames from the same measure.
_SIMILAR = 0.8
# Longest first, so ``_bucket`` is tried before the bare name.
_SUFFIXES = ("_created", "_bucket", "_gcount", "_count", "_total", "_gsum", "_info", "_sum", "")


@dataclass(frozen=True, slots=True)
class Target:
    """The served (family, sample name) pairs a selector reaches.

    ``opaque`` says why the series exist although the payload cannot show them (a recording
    rule's output, a series Prometheus makes itself); their labels are then not checked.
    """

    parts: tuple[tuple[ServedFamily, str], ...]
    opaque: str | None = None

    @property
    def names(self) -> str:
        """The sample names reached, for messages (at most three, then a count)."""
        names = sorted({name for _, name in self.parts})
        shown = ", ".join(names[:3])
        return shown if len(names) <= 3 else f"{shown} and {len(names) - 3} more"

    @property
    def label_names(self) -> frozenset[str]:
        """Every label name on the series reached."""
        return frozenset(n for labels in self.series() for n in labels)

    def series(self) -> Iterator[dict[str, str]]:
        """The label sets of every series reached."""
        for family, name in self.parts:
            for labels in family.series.get(name, ()):
                yield dict(labels)


@dataclass(frozen=True, slots=True)
class Miss:
    """Why a selector reaches no served series."""

    kind: FindingKind
    subject: str
    reason: str
    verdict: Verdict | None = None
    hint: str | None = None
    engine: EngineNote | None = None


class Resolver:
    """Resolves selectors against one catalog; ``external`` names exist outside the payload."""

    def __init__(
        self,
        catalog: Catalog,
        contract: ContractIndex,
        external: dict[str, str],
        engine: EngineView | None = None,
    ) -> None:
        """``external`` maps a metric name to why it exists (e.g. "recording rule in x.yaml").

        ``engine``: the engine release the payload is of, to explain a family it lacks.
        """
        self.catalog = catalog
        self.contract = contract
        self.external = external
        self.engine = engine
        self.regexes = MatcherRegexes()  # the run's dashboards' regexes, compiled once each

    def resolve(self, selector: Selector) -> Target | Miss:
        """The series ``selector`` reaches, or a ``Miss``."""
        metric = selector.metric
        if metric is not None and not selector.metric_is_variable:
            return self._by_name(metric)
        names = self.catalog.sample_names
        if metric is not None:
            pattern = name_pattern(metric)
            names = tuple(n for n in names if pattern.fullmatch(n))
            subject = metric.replace(VARIABLE_PLACEHOLDER, "$var")
            if not names:
                reason = f"no served metric name matches {subject} for any variable value"
                return Miss(FindingKind.NO_MATCHING_NAME, subject, reason)
        fixed = [m for m in selector.name_matchers if not m.is_variable]
        names = tuple(n for n in names if all(accepts(m, n, self.regexes) for m in fixed))
        if names:
            return Target(tuple((self._family(n), n) for n in names))
        subject = ",".join(str(m) for m in fixed)
        return self._no_name(subject, fixed[0].value if len(fixed) == 1 else None)

    def _family(self, name: str) -> ServedFamily:
        family = self.catalog.family_of(name)
        if family is None:  # names come from the catalog itself
            raise AssertionError(name)
        return family

    def _no_name(self, subject: str, regex: str | None) -> Miss:
        pattern = self.regexes.compile(regex) if regex is not None else None
        verdict = self.contract.classify_pattern(pattern) if pattern is not None else None
        hint = None
        if regex is not None and (other := _other_spelling(regex)) is not None:
            alternative = self.regexes.compile(other)
            if alternative is not None and any(
                alternative.fullmatch(n) for n in self.catalog.sample_names
            ):
                hint = f'the other prefix spelling {{__name__=~"{other}"}} matches served names'
        reason = f"no served metric name matches {{{subject}}}"
        if verdict is not None and verdict.cls is not MissingClass.UNKNOWN:
            reason += f"; {_explain(verdict)}"
        return Miss(FindingKind.NO_MATCHING_NAME, subject, reason, verdict, hint)

    def _by_name(self, name: str) -> Target | Miss:
        if name in self.external:
            return Target((), opaque=self.external[name])
        family = self.catalog.family_of(name)
        if family is not None:
            return Target(((family, name),))
        declared = self.catalog.families.get(name)
        if declared is not None and not declared.series:  # a HELP/TYPE header, no samples
            verdict = self.contract.classify(name)
            reason = f"{name} is declared, but has no samples, so Prometheus stores nothing"
            return Miss(FindingKind.MISSING_FAMILY, name, reason, verdict)
        return self._wrong_suffix(name) or self._missing(name)

    def _wrong_suffix(self, name: str) -> Miss | None:
        for suffix in _SUFFIXES:
            if not name.endswith(suffix):
                continue
            stem = name[: len(name) - len(suffix)]
            family_name = self.catalog.by_base.get(stem)
            if family_name is None:
                continue
            family = self.catalog.families[family_name]
            served = ", ".join(sorted(family.series))
            if suffix in TYPE_SUFFIXES[family.type]:
                reason = f"{family.name} ({family.type}) is served without {name} samples"
                return Miss(FindingKind.MISSING_FAMILY, name, f"{reason}; it has {served}")
            reason = f"{family.name} is a {family.type}: it has no {name}"
            sibling = self._sibling(stem, suffix, family.name)
            if sibling is None:
                return Miss(FindingKind.WRONG_SUFFIX, name, f"{reason}; select {served}")
            other, where = sibling
            reason += f"; {other}, of a similar name, {where}"
            return Miss(FindingKind.WRONG_SUFFIX, name, reason, hint=f"{other} {where}")
        return None

    def _sibling_of_other_type(self, name: str) -> str | None:
        """For ``x_total`` where the release's ``x`` is a gauge: a similar family that has it."""
        suffix = next((s for s in _SUFFIXES if s and name.endswith(s)), "")
        stem = name.removesuffix(suffix)
        other = self.engine.catalogue.get(stem) if self.engine is not None and suffix else None
        if other is None or name in other.sample_names:
            return None
        sibling = self._sibling(stem, suffix, other.name)
        return None if sibling is None else " ".join(sibling)

    def _sibling(self, stem: str, suffix: str, family: str) -> tuple[str, str] | None:
        """A sample ``x{suffix}`` of another family named like ``stem``, and where it is.

        ``num_retracted_reqs_total`` selects a counter; the gauge ``num_retracted_reqs`` has no
        such sample, but the counter ``num_retracted_requests`` does: the query most likely
        means it. A served family first, else one the engine release defines.
        """
        served = [
            (similarity(stem, other.base), other.base + suffix)
            for other in self.catalog.families.values()
            if other.name != family and suffix in TYPE_SUFFIXES[other.type]
        ]
        best = max(served, default=None)
        if best is not None and best[0] >= _SIMILAR:
            return best[1], "is served"
        if self.engine is None:
            return None
        defined = [
            (similarity(stem, other.name), sample)
            for other in self.engine.catalogue.families
            if other.name != stem
            for sample in other.sample_names
            if sample == other.name + suffix
        ]
        best = max(defined, default=None)
        if best is None or best[0] < _SIMILAR:
            return None
        engine = "SGLang" if self.engine.engine == "sglang" else self.engine.engine
        return best[1], f"is what {engine} {self.engine.release} defines"

    def _missing(self, name: str) -> Miss:
        verdict = self.contract.classify(name)
        hint = None
        other = _other_spelling(name)
        if other is not None and self.catalog.family_of(other) is not None:
            hint = f"the other prefix spelling {other} is served"
        if hint is None:
            hint = self._sibling_of_other_type(name)
        reason = f"{name} is not served"
        if verdict.cls is MissingClass.UNKNOWN:
            reason += " and is not a contract row"
        else:
            reason += f": {_explain(verdict)}"
        note = self._engine_note(name, verdict)
        if note is None:
            return Miss(FindingKind.MISSING_FAMILY, name, reason, verdict, hint)
        reason += f": {note.detail}" if verdict.cls is MissingClass.UNKNOWN else f"; {note.detail}"
        if not note.failing:
            reason += " (not failing)"
        if hint is None and note.replacement is not None:
            served = self.catalog.family_of(note.replacement) is not None
            hint = f"{note.replacement} is {'served' if served else 'its new name'}"

        return Miss(FindingKind.MISSING_FAMILY, name, reason, verdict, hint, note)

    def _engine_note(self, name: str, verdict: Verdict) -> EngineNote | None:
        """What the engine release says: of the name itself, or of a row's absent sources.

        Only for a name that is no contract row, or a row the bridge serves from community
        families this payload lacks; structural, pending and engine rows are the contract's.
        """
        if self.engine is None:
            return None
        if verdict.cls is MissingClass.UNKNOWN:
            return self.engine.explain(name)
        if verdict.cls is MissingClass.UPSTREAM and verdict.row is not None:
            sources = self.contract.sources(verdict.row)
            return None if sources is None else self.engine.explain_sources(sources)
        return None


def _explain(verdict: Verdict) -> str:
    """The contract's words for a verdict."""
    if verdict.cls is MissingClass.STRUCTURAL:
        return f"contract row {verdict.row} is structural, expected absent ({verdict.detail})"
    if verdict.cls is MissingClass.ENGINE:
        return f"contract row {verdict.row} needs engine instrumentation: {verdict.detail}"
    if verdict.cls is MissingClass.PENDING:
        return (
            f"contract row {verdict.row} is a rate between two fetches, served by the running "
            "bridge from its second fetch; one payload cannot show it (not failing)"
        )
    return f"contract row {verdict.row} is not served from this payload: {verdict.detail}"


def _other_spelling(name: str) -> str | None:
    """``sglang_x`` for ``sglang:x`` and back: the first ``:`` or ``_`` swapped."""
    colon, underscore = name.find(":"), name.find("_")
    if colon > 0 and (underscore < 0 or colon < underscore):
        return f"{name[:colon]}_{name[colon + 1 :]}"
    if underscore > 0:
        return f"{name[:underscore]}:{name[underscore + 1 :]}"
    return None
