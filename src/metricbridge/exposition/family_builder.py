"""The reader's exact path: comment lines, sample lines parsed one by one, and closing families.

``GeneralReader`` holds the state of one pass over one payload and everything that does not
rest on the fast path's invariant: every header and free comment, every block the fast path
does not vouch for (each line parsed by ``sample_line``), and closing each family once its
lines are in, which refuses a family whose names clash with an earlier one's, drops repeated
series and orphaned creation times, and reports each. A family whose lines appear again
after another family's is reopened: its closing undone, read on as one family (``_reopen``).
``exposition.reader`` drives the pass and adds the fast path; its docstring says when a block
may skip this module.
"""

from __future__ import annotations

import dataclasses
import re

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.created_series import created_orphans
from metricbridge.exposition.family_parse import parse_lines, unescape_help
from metricbridge.exposition.family_state import Builder, Closed, Exposition
from metricbridge.exposition.sample_line import parse_sample, unescape
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
    Verify,
)
from metricbridge.model.family_names import TEXT_TYPES, allowed_suffixes, belongs, wire_names
from metricbridge.model.names import METRIC_NAME, legacy_name, quoted

__all__ = ["Builder", "Closed", "Exposition", "GeneralReader"]

_HEADER = re.compile(r'# (HELP|TYPE|UNIT) ("(?:[^"\\]|\\.)*"|\S+)(?: (.*))?')


class GeneralReader:
    """One pass over one payload: its state, and the exact path (see the module docstring)."""

    def __init__(
        self, payload: bytes, fmt: Format, verify: Verify, caches: CodecCaches | None
    ) -> None:
        self.payload = payload
        self.view = memoryview(payload)  # vouched blocks are views: no copy of the bulk
        self.fmt = fmt
        self.verify = verify
        self.caches = caches
        self.result = Exposition([], [], fmt)
        self.current: Builder | None = None
        self.finished: dict[str, int] = {}
        self.canonical: dict[str, int] = {}  # family names as served, to refuse clashes
        self.owner: dict[str, str] = {}  # each of those names -> the declared name that took it
        self.closed: dict[str, Closed] = {}  # by declared name, to reopen it (``_reopen``)
        self.slots: dict[str, AnyFamily] = {}  # a reopened family's first form, where it goes
        self.line = 1

    def _comment(self, raw: bytes) -> bool:  # noqa: PLR0911 - each return is a kind of line
        """Handle a comment line; return True at ``# EOF``."""
        text = self._decode(raw, header=True)
        if text is None:
            return False
        if text == "# EOF":
            return self.fmt is Format.OPENMETRICS
        parts = text.split(" ", 3)
        if (
            len(parts) >= 3
            and parts[0] == "#"
            and parts[1] in ("HELP", "TYPE", "UNIT")
            and not parts[2].startswith('"')
        ):
            keyword, name, rest = parts[1], parts[2], parts[3] if len(parts) == 4 else ""
        else:
            match = _HEADER.fullmatch(text)  # quoted UTF-8 names, or not a header at all
            if match is None:
                return False  # free-form comments are allowed in the text format
            keyword, name, rest = match.group(1), match.group(2), match.group(3) or ""
            if name.startswith('"'):
                try:
                    name = legacy_name(unescape(name[1:-1]))
                except LineError as exc:
                    problem = ExpositionError(f"family name: {exc}", line=self.line)
                    self.result.problems.append(problem)
                    return False
        if not METRIC_NAME.fullmatch(name):
            # Prometheus refuses a whole scrape over one ("invalid metric name in comment").
            problem = ExpositionError(
                f"invalid metric name {quoted(name)} in a {keyword} line", line=self.line
            )
            self.result.problems.append(problem)
            return False
        builder = self._builder_for(name)
        if builder is None:
            return False
        self._header(builder, keyword, rest)
        return False

    def _header(self, builder: Builder, keyword: str, rest: str) -> None:
        self.result.headers_seen = True
        if builder.reopened:
            self._header_again(builder, keyword, rest)
        elif keyword == "HELP":
            if builder.help is not None:
                self._fail(builder, "duplicate HELP line")
            try:
                builder.help = unescape_help(rest, self.fmt)
            except LineError as exc:
                self._fail(builder, f"HELP text: {exc}")
        elif keyword == "TYPE":
            mtype = TEXT_TYPES.get(rest.strip())
            if builder.typed:
                self._fail(builder, "duplicate TYPE line")
            elif builder.has_samples:
                self._fail(builder, "TYPE line after the family's samples")
            elif mtype is None:
                self._fail(builder, f"unknown metric type {quoted(rest.strip())}")
            else:
                builder.type, builder.typed = mtype, True
        else:
            builder.unit = rest.strip() or None

    def _header_again(self, builder: Builder, keyword: str, rest: str) -> None:
        """A header of a reopened family: the one it had is welcome again, another one is not.

        One family has one type, HELP text and unit; the lines after a different one are
        dropped, reported, and the family is served as read so far.
        """
        if keyword == "HELP":
            try:
                same = unescape_help(rest, self.fmt) == builder.help or builder.help is None
            except LineError:
                same = False
            if builder.help is None and same:
                builder.help = unescape_help(rest, self.fmt)
            what = "another HELP text"
        elif keyword == "TYPE":
            same = builder.typed and TEXT_TYPES.get(rest.strip()) is builder.type
            what = "another type" if builder.typed else "a TYPE line after its samples"
        else:
            same, what = (rest.strip() or None) == builder.unit, "another unit"
        if not same:
            line, first = self.line, builder.first_line
            self._finish()
            problem = ExpositionError(
                f"family appears again with {what} (first at line {first}); this occurrence "
                "is dropped",
                line=line,
                family=builder.declared,
            )
            self.current = Builder(builder.declared, line, problem=problem)

    def _builder_for(self, declared: str, line: int | None = None) -> Builder | None:
        """The builder for ``declared`` starting at ``line`` (the current line by default)."""
        current = self.current
        if current is not None and current.declared == declared:
            return current
        self._finish()
        line = self.line if line is None else line
        if declared in self.finished:
            return self._reopen(declared, line)
        self.current = Builder(declared, line)
        return self.current

    def _reopen(self, declared: str, line: int) -> Builder:
        """A family whose lines appear again: its closing undone, its builder current again.

        Prometheus ingests every sample of a family whose lines are not contiguous (a text
        payload without TYPE lines, a family repeated further on), so the bridge reads them as
        one family, served once where it first was (``_place``). Its samples are parsed: a
        block's proof says nothing of series repeated across blocks, and ``_unique`` does. A
        family refused at its first lines stays refused, these lines with it.
        """
        closed = self.closed.pop(declared)
        builder = closed.reopened()
        if builder.problem is not None:
            problem = ExpositionError(
                f"family appears again (first at line {builder.first_line}), and its first "
                "lines were refused; this occurrence is dropped too",
                line=line,
                family=declared,
            )
            self.current = Builder(declared, line, problem=problem)
            return self.current
        undone = {id(problem) for problem in closed.problems}
        self.result.problems[:] = [p for p in self.result.problems if id(p) not in undone]
        for name in closed.claimed:
            del self.canonical[name], self.owner[name]
        if closed.family is not None:
            self.slots[declared] = closed.family
            self._forget(closed.family)
        builder.reopened = True
        self._to_samples(builder)
        self.current = builder
        return builder

    def _forget(self, family: AnyFamily) -> None:
        """Drop what the pass noted of a family that was reopened (the fast path notes some)."""

    def _parse_block(self, start: int, end: int) -> int:
        """Parse the sample lines in ``payload[start:end]``; return how many lines they span."""
        block = self.payload[start:end]
        lines = block.count(b"\n")
        text = self._decode(block)
        if text is not None:
            for offset, line in enumerate(text.split("\n")[:lines]):
                if line:
                    self._slow_line(line, self.line + offset)
        return lines

    def _slow_line(self, line: str, line_no: int) -> None:
        try:
            sample = parse_sample(line, self.fmt, caches=self.caches)
        except LineError as exc:
            if self.current is None:
                self.result.problems.append(ExpositionError(str(exc), line=line_no))
            else:
                self._fail(self.current, str(exc), line_no)
            return
        builder = self.current
        verdict = None
        if builder is not None:
            mtype = builder.type if builder.typed else None
            verdict = belongs(
                sample.name,
                builder.declared,
                mtype,
                self.fmt,
                may_restore=not builder.declared_spelling,
            )
        if builder is None or verdict is None:
            # Both formats allow a family without metadata: a foreign sample starts one.
            if builder is not None and sample.name == builder.declared:
                message = (
                    f"sample {quoted(sample.name)} is not a valid sample name for a {builder.type}"
                )
                self._fail(builder, message, line_no)
                return
            builder, verdict = self._start_family(sample.name, line_no)
            if builder is None or builder.problem is not None:
                return
        name, as_declared = verdict
        builder.declared_spelling |= as_declared
        if name != sample.name:
            self.result.renamed_samples += 1
            sample = dataclasses.replace(sample, name=name)
        if builder.problem is None:
            self._to_samples(builder).append(sample)
            builder.sample_lines.append(line_no)
            builder.has_samples = True

    def _start_family(self, name: str, line_no: int) -> tuple[Builder | None, tuple[str, bool]]:
        """The builder a sample of no current family starts, and how the sample is named in it.

        A sample name taken by a family closed earlier (a counter's ``_total``, a histogram's
        ``_bucket``) is that family appearing again.
        """
        owner = self.owner.get(name)
        if owner is not None and owner != name:
            builder = self._builder_for(owner, line_no)
            if builder is not None and builder.problem is None:
                mtype = builder.type if builder.typed else None
                restore = not builder.declared_spelling
                verdict = belongs(name, owner, mtype, self.fmt, may_restore=restore)
                if verdict is not None:
                    return builder, verdict
        return self._builder_for(name, line_no), (name, True)

    def _to_samples(self, builder: Builder) -> list[Sample]:
        """Switch a builder to parsed samples, parsing the raw blocks it holds so far."""
        if builder.samples is None:
            builder.samples = []
            for block, line, _ in builder.pieces:
                parsed = parse_lines(str(block, "utf-8"), line, self.fmt, caches=self.caches)
                builder.samples.extend(parsed)
                # A vouched block is sample lines only, one per line.
                builder.sample_lines.extend(range(line, line + len(parsed)))
            builder.pieces.clear()
        return builder.samples

    def _fail(self, builder: Builder, message: str, line: int | None = None) -> None:
        if builder.problem is None:
            builder.problem = ExpositionError(
                message, line=line or self.line, family=builder.declared
            )

    def _decode(self, raw: bytes, *, header: bool = False) -> str | None:
        # A NUL byte is a character like any other (OpenMetrics: "NULL (ASCII 0x0) MUST be
        # supported" in strings); the line grammar refuses it wherever a string is not allowed.
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad_line = self.line + raw.count(b"\n", 0, exc.start)
            problem = ExpositionError(f"invalid UTF-8 ({exc.reason})", line=bad_line)
        builder = self.current
        parts = raw.split(b" ", 3)
        if header and len(parts) >= 3 and parts[1] in (b"HELP", b"TYPE", b"UNIT"):
            # A bad byte in a header is the named family's fault, not the previous family's.
            builder = self._builder_for(parts[2].decode("utf-8", "replace"))
        if builder is not None:
            self._fail(builder, problem.message, problem.line)
        else:
            self.result.problems.append(problem)
        return None

    def _finish(self) -> None:
        builder, self.current = self.current, None
        if builder is None:
            return
        declared = builder.declared
        self.finished.setdefault(declared, builder.first_line)
        before = len(self.result.problems)
        family, claimed = self._close(builder)
        self._place(declared, family)
        # A refused repeat never hides the record of the family it repeats.
        if builder.problem is None or declared not in self.closed:
            problems = self.result.problems[before:]
            self.closed[declared] = Closed(family, problems, claimed, builder)

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
            meta = FamilyMeta(canonical, builder.type, builder.help, builder.unit)
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

    def _place(self, declared: str, family: AnyFamily | None) -> None:
        """Put a closed family in the result: where its first form was, if it was reopened."""
        families = self.result.families
        first = self.slots.pop(declared, None)
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
        regroup = builder.reopened  # its parts may each hold samples of one series
        family, problem = checked(meta, samples, lines, self.fmt, builder.declared, regroup=regroup)
        if problem is not None:
            self.result.problems.append(problem)
        return family

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
                problem = ExpositionError(message, line=line, family=builder.declared)
                self.result.problems.append(problem)
                continue
            out.append(sample)
            out_lines.append(line)
        return out, out_lines
