"""The reader's exact path: comment lines, sample lines parsed one by one, and closing families.

``GeneralReader`` holds the state of one pass over one payload and everything that does not
rest on the fast path's invariant: every header and free comment, every block the fast path
does not vouch for (each line parsed by ``sample_line``), and closing each family once its
lines are in, which refuses a family whose names clash with an earlier one's, drops repeated
series and orphaned creation times, and reports each. ``exposition.reader`` drives the pass
and adds the fast path; its docstring says when a block may skip this module.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.caches import CodecCaches, KnownHeader
from metricbridge.exposition.created_series import created_orphans
from metricbridge.exposition.family_parse import parse_lines, unescape_help
from metricbridge.exposition.sample_line import parse_sample, unescape
from metricbridge.exposition.semantics import checked
from metricbridge.exposition.writer import label_set
from metricbridge.model.family import (
    AnyFamily,
    Body,
    FamilyMeta,
    Format,
    Labels,
    MetricType,
    RawFamily,
    Sample,
    Verify,
)
from metricbridge.model.family_names import TEXT_TYPES, allowed_suffixes, belongs, wire_names
from metricbridge.model.names import METRIC_NAME, legacy_name, quoted

_HEADER = re.compile(r'# (HELP|TYPE|UNIT) ("(?:[^"\\]|\\.)*"|\S+)(?: (.*))?')


@dataclass(slots=True)
class Exposition:
    """What the reader made of a payload: the usable families and why others were dropped."""

    families: list[AnyFamily]
    problems: list[ExpositionError]
    format: Format
    renamed_samples: int = 0  # sample names restored from underscore escaping (client_python#1177)
    headers_seen: bool = False  # any HELP/TYPE/UNIT line: the body is at least meant as one


@dataclass(slots=True)
class Builder:
    """A family being read: its header so far, and its lines as vouched blocks or samples."""

    declared: str
    first_line: int
    type: MetricType = MetricType.UNKNOWN
    help: str | None = None
    unit: str | None = None
    typed: bool = False
    has_samples: bool = False
    pieces: list[tuple[Body, int, int]] = field(default_factory=list)  # vouched block, line, lines
    samples: list[Sample] | None = None  # set once any block needed parsing
    sample_lines: list[int] = field(default_factory=list)  # each parsed sample's line number
    problem: ExpositionError | None = None
    known: KnownHeader | None = None  # set when the header pair came from the cache
    declared_spelling: bool = False  # a sample spelled as declared was seen (see _belongs)


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
        if keyword == "HELP":
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

    def _builder_for(self, declared: str) -> Builder | None:
        current = self.current
        if current is not None and current.declared == declared:
            return current
        self._finish()
        if declared in self.finished:
            first = self.finished[declared]
            self.result.problems.append(
                ExpositionError(
                    f"family appears again (first at line {first}); a family's lines must be "
                    "contiguous, so this occurrence is dropped",
                    line=self.line,
                    family=declared,
                )
            )
            self.current = Builder(declared, self.line, problem=self.result.problems[-1])
            return self.current
        self.current = Builder(declared, self.line)
        return self.current

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
            builder = self._builder_for(sample.name)
            if builder is None or builder.problem is not None:
                return
            verdict = (sample.name, True)
        name, as_declared = verdict
        builder.declared_spelling |= as_declared
        if name != sample.name:
            self.result.renamed_samples += 1
            sample = dataclasses.replace(sample, name=name)
        if builder.problem is None:
            self._to_samples(builder).append(sample)
            builder.sample_lines.append(line_no)
            builder.has_samples = True

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
        self.finished.setdefault(builder.declared, builder.first_line)
        if builder.problem is not None:
            if builder.problem not in self.result.problems:
                self.result.problems.append(builder.problem)
            return
        known = builder.known
        if known is not None and known.meta.unit == builder.unit:
            meta, occupied = known.meta, known.occupied
        else:
            _, canonical, _ = allowed_suffixes(builder.declared, builder.type, self.fmt)
            meta = FamilyMeta(canonical, builder.type, builder.help, builder.unit)
            occupied = wire_names(meta.name, meta.type, self.fmt)
        if not self._admit(builder.declared, builder.first_line, occupied):
            return
        if builder.samples is None:
            pieces = builder.pieces
            if len(pieces) == 1:
                body, first, count = pieces[0]
            else:
                body = b"".join(block for block, _, _ in pieces)
                first = pieces[0][1] if pieces else builder.first_line
                count = sum(piece[2] for piece in pieces)
            self.result.families.append(RawFamily(meta, body, self.fmt, first, count))
            return
        self._close_parsed(builder, meta)

    def _close_parsed(self, builder: Builder, meta: FamilyMeta) -> None:
        """Repeats and orphaned creation times out, then held to its type's rules (semantics)."""
        samples, lines = self._unique(builder)
        orphans = created_orphans(meta.type, tuple(samples))
        if orphans:
            message = f"{len(orphans)} creation time(s) of no series of {meta.name}; left out"
            self.result.problems.append(ExpositionError(message, family=builder.declared))
            kept = [i for i, s in enumerate(samples) if s not in orphans]
            samples, lines = [samples[i] for i in kept], [lines[i] for i in kept]
        family, problem = checked(meta, samples, lines, self.fmt, builder.declared)
        if problem is not None:
            self.result.problems.append(problem)
        elif family is not None:
            self.result.families.append(family)

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
