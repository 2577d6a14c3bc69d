"""Split an exposition into families, vouching for untouched bytes without parsing them.

The hot path rests on one observation: almost every family the engine serves passes through
the bridge unchanged, and prometheus_client writes each family as ``# HELP``, ``# TYPE``, then
lines that all start with the family's own sample names. So the reader finds the comment lines
(a few per family, located with ``bytes.find``), and proves each block of sample lines belongs
to its family by counting line prefixes with ``bytes.count``, both in C. The blocks' line
shapes (one ``}`` right before the only space) are then tested together, in one
``bytes.translate`` of the whole payload (``shapes_match``); if that fails, the payload is read
again testing each block on its own, so a bad block costs a second read and never a different
result. A block that passes is kept as a view of those bytes (``RawFamily``); anything else is
parsed line by line (``Family``), which is also what a rule that must look inside a family gets
(``parse_family``).

Before vouching for a block the reader also knows the whole payload is valid UTF-8 without NUL
bytes (one pass each, in C) and that the block holds no backslash (escapes go to the exact
parser). What it does not check inside a vouched-for block: that each value is a number, that
each label set is well formed, and that no series repeats. prometheus_client, which writes
SGLang's /metrics, cannot produce those faults; ``Verify.FULL`` parses every line for upstreams
that might (about 50x split+join on 10 MB, 70x on 1 MB: see bench/).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from metricbridge.errors import ExpositionError
from metricbridge.exposition.byte_scan import (
    count_prefixes,
    is_utf8,
    needs_exact_parser,
    next_comment,
    shapes_match,
    vouch,
)
from metricbridge.exposition.created_series import created_orphans, merge_created_families
from metricbridge.exposition.family_parse import parse_lines, unescape_help
from metricbridge.exposition.sample_line import LineError, parse_sample, unescape
from metricbridge.exposition.writer import label_set
from metricbridge.model.family import (
    AnyFamily,
    Body,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
    Sample,
    Verify,
)
from metricbridge.model.family_names import (
    TEXT_TYPES,
    allowed_suffixes,
    belongs,
    fast_needles,
    wire_names,
)
from metricbridge.model.names import METRIC_NAME, legacy_name

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
class _Builder:
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
    known: _KnownHeader | None = None  # set when the header pair came from the cache
    declared_spelling: bool = False  # a sample spelled as declared was seen (see _belongs)


@dataclass(frozen=True, slots=True)
class _KnownHeader:
    """A HELP/TYPE pair seen before, with everything the hot path derives from it."""

    declared: str
    meta: FamilyMeta
    needles: tuple[bytes, ...]  # see fast_needles
    occupied: frozenset[str]  # the names it takes on the wire (see wire_names)
    own_headers: tuple[bytes, ...]  # what follows "# HELP"/"# TYPE" in the family's own lines

    def ends_before(self, payload: bytes, pos: int) -> bool:
        """Whether the line at ``pos`` is a HELP or TYPE line of another family."""
        return (
            payload.startswith(b"# HELP ", pos) or payload.startswith(b"# TYPE ", pos)
        ) and not payload.startswith(self.own_headers, pos + 6)


# Header pairs seen before, per format, by their raw bytes.
_KNOWN_HEADERS: dict[Format, dict[bytes, _KnownHeader]] = {fmt: {} for fmt in Format}
_KNOWN_HEADERS_MAX = 8192


class _Reader:
    """One pass over one payload; see the module docstring for the strategy."""

    def __init__(self, payload: bytes, fmt: Format, verify: Verify, *, batch: bool = True) -> None:
        self.payload = payload
        self.view = memoryview(payload)  # vouched blocks are views: no copy of the bulk
        self.fmt = fmt
        self.verify = verify
        self.known = _KNOWN_HEADERS[fmt]
        # One C-speed pass settles encoding for the whole payload; only a payload that fails it
        # has its blocks decoded one by one, so the bad bytes are pinned to their family.
        # Escapes need the exact parser too; SGLang never writes one, so one memchr settles it.
        self.suspect = b"\x00" in payload or b"\\" in payload or not is_utf8(payload)
        self.fast = verify is Verify.STRUCTURE
        # Blocks are first taken on their needle counts alone and their shapes tested together
        # at the end (shapes_match); if that fails, the payload is read again block by block.
        self.batch = batch and self.fast and not self.suspect
        self.unproven: list[tuple[int, int, int]] = []
        self.result = Exposition([], [], fmt)
        self.current: _Builder | None = None
        self.finished: dict[str, int] = {}
        self.canonical: dict[str, int] = {}  # family names as served, to refuse clashes
        self.line = 1

    def run(self) -> Exposition:
        payload, size, pos = self.payload, len(self.payload), 0
        while pos < size:
            if payload[pos] == 0x23:  # '#'
                after = self._known_family(pos, size) if self.batch else -1
                if after < 0:
                    after = self._known_header(pos)
                if after >= 0:
                    pos = after
                    continue
                eol = payload.find(b"\n", pos)
                eol = size if eol < 0 else eol
                if self._comment(payload[pos:eol]):
                    # Blank lines after it are an editor's doing, not content.
                    if payload.count(b"\n", eol + 1) != size - eol - 1:
                        self._finish()
                        self.result.problems.append(
                            ExpositionError(
                                "content after '# EOF', which ends an exposition",
                                line=self.line + 1,
                            )
                        )
                    break
                pos, self.line = eol + 1, self.line + 1
            elif payload[pos] == 0x0A:  # blank line: tolerated in both formats
                pos, self.line = pos + 1, self.line + 1
            else:
                end = next_comment(payload, pos, size)
                self.line += self._block(pos, end)
                pos = end
        self._finish()
        if self.unproven and not shapes_match(payload, self.unproven):
            return _Reader(payload, self.fmt, self.verify, batch=False).run()
        return self.result

    def _known_family(self, pos: int, size: int) -> int:
        """The hot path: a cached header pair and the labelled block after it, in one step.

        Returns the offset after the block, or -1 for anything else (the general path decides).
        The family stays open, so a block after a comment still joins it.
        """
        payload = self.payload
        eol = payload.find(b"\n", pos)
        end = payload.find(b"\n", eol + 1) if eol >= 0 else -1
        if end < 0:
            return -1
        known = self.known.get(payload[pos:end])
        start = end + 1
        if known is None or not known.needles or start >= size or payload[start] in b"#\n":
            return -1
        declared, current = known.declared, self.current
        if declared in self.finished or (current is not None and current.declared == declared):
            return -1
        stop = next_comment(payload, start, size)
        lines = count_prefixes(payload, start, stop, known.needles)
        if lines <= 0:
            return -1
        if current is not None:
            self._finish()
        self.result.headers_seen = True
        self.unproven.append((start, stop, lines))
        if stop == size or known.ends_before(payload, stop):
            # Nothing more can join the family: it is complete without a builder.
            self.finished.setdefault(declared, self.line)
            if self._admit(declared, self.line, known.occupied):
                body = self.view[start:stop]
                family = RawFamily(known.meta, body, self.fmt, self.line + 2, lines)
                self.result.families.append(family)
            self.line += 2 + lines
            return stop
        meta = known.meta
        builder = self.current = _Builder(
            declared, self.line, meta.type, meta.help, typed=True, known=known
        )
        builder.has_samples = builder.declared_spelling = True
        builder.pieces.append((self.view[start:stop], self.line + 2, lines))
        self.line += 2 + lines
        return stop

    def _known_header(self, pos: int) -> int:
        """Take a ``# HELP``/``# TYPE`` pair seen in an earlier payload; return the next offset.

        Engines repeat the same header bytes on every scrape, so their parsed form is cached;
        anything unusual (first sight, a lone line, a repeated family) returns -1 and takes
        the general path, which parses and checks it.
        """
        payload = self.payload
        eol = payload.find(b"\n", pos)
        end = payload.find(b"\n", eol + 1) if eol >= 0 else -1
        if end < 0:
            return -1
        key = payload[pos:end]
        known = self.known.get(key)
        if known is None:
            pair = payload.startswith(b"# HELP ", pos) and payload.startswith(b"# TYPE ", eol + 1)
            if pair and b"\x00" not in key:  # NUL bytes are judged on the general path
                self._remember(key, payload[pos:eol], payload[eol + 1 : end])
            return -1
        declared = known.declared
        current = self.current
        if declared in self.finished or (current is not None and current.declared == declared):
            return -1
        if current is not None:
            self._finish()
        self.result.headers_seen = True
        meta = known.meta
        self.current = _Builder(declared, self.line, meta.type, meta.help, typed=True, known=known)
        self.line += 2
        return end + 1

    def _remember(self, key: bytes, help_line: bytes, type_line: bytes) -> None:
        """Cache a well-formed header pair for later payloads (this one takes the general path)."""
        try:
            _, _, name, help_text = help_line.decode().split(" ", 3)
            _, _, type_name, mtype = type_line.decode().split(" ", 3)
        except (UnicodeDecodeError, ValueError):
            return
        if name != type_name or mtype not in TEXT_TYPES or name.startswith('"'):
            return
        if len(self.known) >= _KNOWN_HEADERS_MAX:
            self.known.clear()  # a crude bound; hit rates recover within one scrape
        declared_type = TEXT_TYPES[mtype]
        _, canonical, _ = allowed_suffixes(name, declared_type, self.fmt)
        try:
            meta = FamilyMeta(canonical, declared_type, unescape_help(help_text, self.fmt))
        except LineError:
            return  # the general path reports it
        needles = fast_needles(name, declared_type, self.fmt)
        own = (f" {name} ".encode(), f" {name}\n".encode())
        occupied = wire_names(meta.name, meta.type, self.fmt)
        self.known[key] = _KnownHeader(name, meta, needles, occupied, own)

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
                f"invalid metric name {name!r} in a {keyword} line", line=self.line
            )
            self.result.problems.append(problem)
            return False
        builder = self._builder_for(name)
        if builder is None:
            return False
        self._header(builder, keyword, rest)
        return False

    def _header(self, builder: _Builder, keyword: str, rest: str) -> None:
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
                self._fail(builder, f"unknown metric type {rest.strip()!r}")
            else:
                builder.type, builder.typed = mtype, True
        else:
            builder.unit = rest.strip() or None

    def _builder_for(self, declared: str) -> _Builder | None:
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
            self.current = _Builder(declared, self.line, problem=self.result.problems[-1])
            return self.current
        self.current = _Builder(declared, self.line)
        return self.current

    def _block(self, start: int, end: int) -> int:
        """Take the sample lines in ``payload[start:end]``; return how many lines they span."""
        builder, payload = self.current, self.payload
        if (
            builder is not None
            and start > 0
            and self.fast
            and builder.samples is None
            and not (self.suspect and needs_exact_parser(payload[start:end]))
        ):
            known = builder.known
            needles = (
                known.needles
                if known is not None
                else fast_needles(builder.declared, builder.type, self.fmt)
            )
            if self.batch:
                lines = count_prefixes(payload, start, end, needles) if needles else 0
                if lines > 0:
                    self.unproven.append((start, end, lines))
                else:
                    lines = -1  # not one labelled line of the family's: the exact parser decides
            else:
                lines = vouch(payload, payload[start:end], start, end, needles)
            if lines >= 0:
                builder.pieces.append((self.view[start:end], self.line, lines))
                builder.has_samples = builder.declared_spelling = True
                return lines
        block = payload[start:end]
        lines = block.count(b"\n")
        text = self._decode(block)
        if text is not None:
            for offset, line in enumerate(text.split("\n")[:lines]):
                if line:
                    self._slow_line(line, self.line + offset)
        return lines

    def _slow_line(self, line: str, line_no: int) -> None:
        try:
            sample = parse_sample(line, self.fmt)
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
                message = f"sample {sample.name!r} is not a valid sample name for a {builder.type}"
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

    def _to_samples(self, builder: _Builder) -> list[Sample]:
        """Switch a builder to parsed samples, parsing the raw blocks it holds so far."""
        if builder.samples is None:
            builder.samples = []
            for block, line, _ in builder.pieces:
                parsed = parse_lines(str(block, "utf-8"), line, self.fmt)
                builder.samples.extend(parsed)
                # A vouched block is sample lines only, one per line.
                builder.sample_lines.extend(range(line, line + len(parsed)))
            builder.pieces.clear()
        return builder.samples

    def _fail(self, builder: _Builder, message: str, line: int | None = None) -> None:
        if builder.problem is None:
            builder.problem = ExpositionError(
                message, line=line or self.line, family=builder.declared
            )

    def _decode(self, raw: bytes, *, header: bool = False) -> str | None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad_line = self.line + raw.count(b"\n", 0, exc.start)
            problem = ExpositionError(f"invalid UTF-8 ({exc.reason})", line=bad_line)
        else:
            if "\x00" not in text:
                return text
            problem = ExpositionError(
                "NUL byte", line=self.line + text.count("\n", 0, text.index("\x00"))
            )
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
        samples = self._unique(builder)
        orphans = created_orphans(meta.type, samples)
        if orphans:
            message = f"{len(orphans)} creation time(s) of no series of {meta.name}; left out"
            self.result.problems.append(ExpositionError(message, family=builder.declared))
            samples = tuple(s for s in samples if s not in orphans)
        self.result.families.append(Family(meta, samples))

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

    def _unique(self, builder: _Builder) -> tuple[Sample, ...]:
        """A parsed family's samples with repeats dropped (the first one wins), each reported."""
        samples = builder.samples or []
        first_seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        out = []
        for sample, line in zip(samples, builder.sample_lines, strict=True):
            key = (sample.name, tuple(sorted(sample.labels)))
            first = first_seen.setdefault(key, line)
            if first != line:
                series = sample.name + (label_set(sample.labels) if sample.labels else "")
                message = f"series {series} repeats the one at line {first}; the repeat is dropped"
                problem = ExpositionError(message, line=line, family=builder.declared)
                self.result.problems.append(problem)
                continue
            out.append(sample)
        return tuple(out)


def read_exposition(payload: bytes, fmt: Format, verify: Verify = Verify.STRUCTURE) -> Exposition:
    """Read a whole payload; raise ``ExpositionError`` only when nothing in it can be trusted."""
    if not payload:
        raise ExpositionError("empty exposition (0 bytes)")
    # `in` with one byte is a memchr; a two-byte find would crawl through every newline.
    crlf = payload.find(b"\r\n") if b"\r" in payload else -1
    if crlf >= 0:
        line = payload.count(b"\n", 0, crlf) + 1
        raise ExpositionError("CRLF line ending; exposition lines end with \\n only", line=line)
    if fmt is Format.OPENMETRICS:
        if b"\n# EOF" not in payload and not payload.startswith(b"# EOF"):
            raise ExpositionError("OpenMetrics exposition has no '# EOF' line (truncated body?)")
    elif not payload.endswith(b"\n"):
        line = payload.count(b"\n") + 1
        raise ExpositionError("last line has no terminating newline (truncated body?)", line=line)
    exposition = _Reader(payload, fmt, verify).run()
    if not exposition.families and exposition.problems and not exposition.headers_seen:
        # An HTML error page or a health check's "OK" served as text/plain: not an exposition.
        first = exposition.problems[0]
        raise ExpositionError(f"nothing in the body is an exposition ({first})")
    if fmt is Format.TEXT:
        exposition.families, problems = merge_created_families(exposition.families)
        exposition.problems.extend(problems)
    return exposition
