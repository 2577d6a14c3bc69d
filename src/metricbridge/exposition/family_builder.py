"""The reader's exact path: comment lines, sample lines parsed one by one, and closing families.

``GeneralReader`` holds the state of one pass over one payload and everything that does not
rest on the fast path's invariant: every header and free comment, every block the fast path
does not vouch for (each line parsed by ``sample_line``), and closing each family once its
lines are in (``family_close``: a family whose names clash with an earlier one's refused,
repeated series and orphaned creation times dropped, each reported). A family whose lines
appear again after another family's is reopened: its closing undone, read on as one family
(``_reopen``). ``exposition.reader`` drives the pass and adds the fast path; its docstring
says when a block may skip this module.
"""

from __future__ import annotations

import dataclasses

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.family_close import Closing
from metricbridge.exposition.family_parse import parse_lines, unescape_help
from metricbridge.exposition.family_state import Builder, Closed, Exposition
from metricbridge.exposition.sample_line import Spelled, header_words, parse_sample, unescape
from metricbridge.model.family import AnyFamily, Format, MetricType, Sample, Verify
from metricbridge.model.family_names import TEXT_TYPES, belongs
from metricbridge.model.names import METRIC_NAME, legacy_name, quoted

__all__ = ["Builder", "Closed", "Exposition", "GeneralReader"]


class GeneralReader(Closing):
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
        self.parked: dict[str, Builder] = {}  # reopened families, closed at the pass's end
        self.line = 1

    def _comment(self, raw: bytes) -> bool:
        """Handle a comment line; return True at ``# EOF``."""
        text = self._decode(raw, header=True)
        if text is None:
            return False
        if text == "# EOF":
            return self.fmt is Format.OPENMETRICS
        words = self._header_words(text)
        if words is None:
            return False  # free-form comments are allowed in the text format
        keyword, name, rest, original = words
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
        if original is not None and original != name:
            builder.spell(name, original, label=False)
        self._header(builder, keyword, rest)
        return False

    def _header_words(self, text: str) -> tuple[str, str, str, str | None] | None:
        """A header's keyword, legacy name, rest, and the UTF-8 name it quoted; else None.

        None for a comment that is no header, and for a quoted name that does not unescape
        (reported).
        """
        words = header_words(text, self.fmt)
        if words is None:
            return None
        keyword, name, rest = words
        if not name.startswith('"'):
            return keyword, name, rest, None
        original = self._quoted_name(name)
        if original is None:
            return None
        return keyword, legacy_name(original), rest, original

    def _quoted_name(self, name: str) -> str | None:
        """The name a header quotes (``# TYPE "my.metric" gauge``), or None, reported."""
        try:
            return unescape(name[1:-1])
        except LineError as exc:
            self.result.problems.append(ExpositionError(f"family name: {exc}", line=self.line))
            return None

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
        parked = self.parked.pop(declared, None)
        if parked is not None:  # reopened before: nothing was closed since
            self.current = parked
            return parked
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
        for name in closed.claimed:  # its owner stays known, for its samples to find it
            del self.canonical[name]
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
            text_format = self.fmt is Format.TEXT
            for offset, raw_line in enumerate(text.split("\n")[:lines]):
                line = raw_line
                if text_format and line[:1] in (" ", "\t"):
                    line = self._indented(line, self.line + offset)
                if line:
                    self._slow_line(line, self.line + offset)
        return lines

    def _indented(self, line: str, line_no: int) -> str:
        """A text line that starts with blanks: the sample line without them, or "".

        Prometheus' text lexer skips blanks at the start of a line, before a sample or a
        comment (expfmt's TestTextParse: `  #    TYPE    name2 gauge`); a comment is handled
        here, and "" returned.
        """
        line = line.lstrip(" \t")
        if line.startswith("#"):
            block_line, self.line = self.line, line_no
            try:
                self._comment(line.encode())
            finally:
                self.line = block_line
            return ""
        return line

    def _slow_line(self, line: str, line_no: int) -> None:
        spelled: Spelled = []
        try:
            sample = parse_sample(line, self.fmt, caches=self.caches, spelled=spelled)
        except LineError as exc:
            builder = self._owner_of_bad_line(line, line_no)
            if builder is None:
                self.result.problems.append(ExpositionError(str(exc), line=line_no))
            else:
                self._fail(builder, str(exc), line_no)
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
        if builder is not None and verdict is None and self._bare_info(builder, sample.name):
            verdict = (sample.name, True)
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
            builder.spell_all(spelled)

    def _bare_info(self, builder: Builder, name: str) -> bool:
        """Whether an OpenMetrics info family's first sample bears the family's own name.

        OpenMetrics names an info's samples ``NAME_info``; Prometheus' parser does not check,
        and stores ``NAME{...}`` under that name (openmetricsparse_test.go's ``ii``). Neither
        format can write an info so named: the family is read as the gauge Prometheus keeps,
        as the text format writes every info.
        """
        if (
            self.fmt is not Format.OPENMETRICS
            or builder.type is not MetricType.INFO
            or builder.has_samples
            or name != builder.declared
        ):
            return False
        builder.type, builder.known = MetricType.GAUGE, None
        return True

    def _owner_of_bad_line(self, line: str, line_no: int) -> Builder | None:
        """The family a line the grammar refuses is blamed on: the one its name starts.

        The current family only if the line's leading name may be one of its samples, so
        that a broken line of a new family (text without TYPE lines) does not take the
        family before it down with it.
        """
        builder = self.current
        match = METRIC_NAME.match(line)
        if match is None or (builder is not None and match.group() == builder.declared):
            return builder
        name = match.group()
        if builder is not None:
            mtype = builder.type if builder.typed else None
            if belongs(name, builder.declared, mtype, self.fmt, may_restore=True) is not None:
                return builder
        return self._builder_for(self.owner.get(name, name), line_no)

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
        if builder.reopened and builder.problem is None:
            # Closed once, at the end of the pass (``close_parked``): closing it at each of its
            # reappearances would judge its samples again each time, quadratic in its lines.
            self.parked[builder.declared] = builder
            return
        self._close_builder(builder)

    def close_parked(self) -> None:
        """Close the reopened families, the pass over: each is judged once, all its lines in."""
        parked, self.parked = self.parked, {}
        for builder in parked.values():
            self._close_builder(builder)

    def _close_builder(self, builder: Builder) -> None:
        declared = builder.declared
        self.finished.setdefault(declared, builder.first_line)
        before = len(self.result.problems)
        family, claimed = self._close(builder)
        self._place(declared, family, reopened=builder.reopened)
        # A refused repeat never hides the record of the family it repeats.
        if builder.problem is None or declared not in self.closed:
            problems = self.result.problems[before:]
            self.closed[declared] = Closed(family, problems, claimed, builder)
