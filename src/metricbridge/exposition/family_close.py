"""Closing a family once its lines are in: admitting its names, judging its samples, placing it.

The part of the reader's exact path (``family_builder.GeneralReader``) that turns a finished
``Builder`` into the family it serves, or refuses it: a family whose names clash with an
earlier one's, repeated series, orphaned creation times and exemplars too long out, then its
type's rules
(``semantics.checked``), each problem reported.
"""

from __future__ import annotations

import dataclasses

from metricbridge.errors import ExpositionError
from metricbridge.exposition.created_series import created_orphans
from metricbridge.exposition.family_state import Builder, Exposition
from metricbridge.exposition.sample_line import EXEMPLAR_LABELS_MAX, exemplar_labels_length
from metricbridge.exposition.semantics import checked
from metricbridge.exposition.writer import label_set
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    Labels,
    RawFamily,
    Sample,
)
from metricbridge.model.family_names import allowed_suffixes, wire_names


class Closing:
    """The closing half of ``GeneralReader``: the state it reads is the reader's own."""

    result: Exposition
    fmt: Format
    canonical: dict[str, int]  # family names as served, to refuse clashes
    owner: dict[str, str]  # each of those names -> the declared name that took it
    slots: dict[str, AnyFamily]  # a reopened family's first form, where it goes

    def _close(self, builder: Builder) -> tuple[AnyFamily | None, frozenset[str]]:
        """The family a builder makes, or None when it is refused; and the names it took."""
        if builder.problem is not None:
            if builder.problem not in self.result.problems:
                self.result.problems.append(builder.problem)
            return None, frozenset()
        known = builder.known
        if known is not None and known.meta.unit == builder.unit:
            meta, occupied = known.meta, known.occupied
        else:
            _, canonical, _ = allowed_suffixes(builder.declared, builder.type, self.fmt)
            spellings = builder.spellings(canonical)
            meta = FamilyMeta(canonical, builder.type, builder.help, builder.unit, spellings)
            occupied = wire_names(meta.name, meta.type, self.fmt)
        if not self._admit(builder.declared, builder.first_line, occupied):
            return None, frozenset()
        if builder.samples is None:
            pieces = builder.pieces
            if len(pieces) == 1:
                body, first, count = pieces[0]
            else:
                body = b"".join(block for block, _, _ in pieces)
                first = pieces[0][1] if pieces else builder.first_line
                count = sum(piece[2] for piece in pieces)
            return RawFamily(meta, body, self.fmt, first, count), occupied
        return self._close_parsed(builder, meta), occupied

    def _place(self, declared: str, family: AnyFamily | None, *, reopened: bool) -> None:
        """Put a closed family in the result: where its first form was, if it was reopened."""
        families = self.result.families
        first = self.slots.pop(declared, None) if reopened else None
        if first is None:
            if family is not None:
                families.append(family)
            return
        index = next(i for i, served in enumerate(families) if served is first)
        if family is None:
            del families[index]
        else:
            families[index] = family

    def _close_parsed(self, builder: Builder, meta: FamilyMeta) -> Family | None:
        """Repeats and orphaned creation times out, then held to its type's rules (semantics)."""
        samples, lines = self._unique(builder)
        orphans = created_orphans(meta.type, tuple(samples))
        if orphans:
            message = f"{len(orphans)} creation time(s) of no series of {meta.name}; left out"
            self.result.problems.append(ExpositionError(message, family=builder.declared))
            kept = [i for i, s in enumerate(samples) if s not in orphans]
            samples, lines = [samples[i] for i in kept], [lines[i] for i in kept]
        samples = self._exemplars_bounded(builder, samples, lines)
        family, problem = checked(meta, samples, lines, self.fmt, builder.declared)
        if problem is not None:
            self.result.problems.append(problem)
        return family

    def _exemplars_bounded(
        self, builder: Builder, samples: list[Sample], lines: list[int]
    ) -> list[Sample]:
        """Samples with every exemplar OpenMetrics can carry; one too long dropped, reported.

        Prometheus reads the sample and its storage refuses the exemplar alone
        (``ErrExemplarLabelLength``); the text format carries no exemplar at all.
        """
        out = samples
        for index, sample in enumerate(samples):
            if sample.exemplar is None:
                continue
            length = exemplar_labels_length(sample.exemplar)
            if length <= EXEMPLAR_LABELS_MAX:
                continue
            message = (
                f"exemplar: its labels are {length} characters long; at most "
                f"{EXEMPLAR_LABELS_MAX} are allowed; the sample is kept without it"
            )
            self.result.problems.append(
                ExpositionError(
                    message,
                    line=lines[index],
                    family=builder.declared,
                    reason="exemplar",
                    family_kept=True,
                )
            )
            if out is samples:
                out = list(samples)
            out[index] = dataclasses.replace(sample, exemplar=None)
        return out

    def _admit(self, declared: str, first_line: int, occupied: frozenset[str]) -> bool:
        """Claim a family's names; a clash with an earlier family drops this one, reported."""
        canonical = self.canonical
        clashes = canonical.keys() & occupied
        if clashes:
            # e.g. OpenMetrics counter `a` (samples a_total) beside an untyped family `a_total`
            first = min(canonical[name] for name in clashes)
            self.result.problems.append(
                ExpositionError(
                    f"{' and '.join(sorted(clashes))} already taken by the family at line "
                    f"{first} (a family's name and sample names must be its own); this one is "
                    "dropped",
                    line=first_line,
                    family=declared,
                )
            )
            return False
        for name in occupied:
            canonical[name] = first_line
            self.owner[name] = declared
        return True

    def _unique(self, builder: Builder) -> tuple[list[Sample], list[int]]:
        """A parsed family's samples and their lines, repeats dropped (the first wins), reported."""
        samples = builder.samples or []
        # A series may repeat with distinct timestamps (OpenMetrics: a Metric's MetricPoints);
        # whether those go forward is the semantic check's (``semantics``).
        first_seen: dict[tuple[str, Labels, float | None], int] = {}
        out: list[Sample] = []
        out_lines: list[int] = []
        for sample, line in zip(samples, builder.sample_lines, strict=True):
            key = (sample.name, tuple(sorted(sample.labels)), sample.timestamp)
            first = first_seen.setdefault(key, line)
            if first != line:
                series = sample.name + (label_set(sample.labels) if sample.labels else "")
                message = f"series {series} repeats the one at line {first}; the repeat is dropped"
                problem = ExpositionError(
                    message, line=line, family=builder.declared, family_kept=True
                )
                self.result.problems.append(problem)
                continue
            out.append(sample)
            out_lines.append(line)
        return out, out_lines
