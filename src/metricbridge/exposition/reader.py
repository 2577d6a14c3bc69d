r"""Split an exposition into families, vouching for untouched bytes without parsing them.

The hot path rests on one observation: almost every family the engine serves passes through
the bridge unchanged, and prometheus_client writes each family as ``# HELP``, ``# TYPE``, then
lines that all start with the family's own sample names, with the same label sets scrape after
scrape. So the reader finds the comment lines (a few per family, located with ``bytes.find``),
and proves each block of sample lines with a few C calls: split into each line's head (name and
label set) and value, heads compared with the ones proven for the block before, values judged
by their shapes. A block it vouches for is kept as a view of those bytes (``RawFamily``) and
served as it came; anything else takes the exact path (``family_builder``), which parses it
line by line (``Family``), reports what is wrong at its line and drops the family, as
``parse_family`` does for a family a rule must look inside.

The fast path's invariant
=========================

This module enforces it, and this is the one place it is written down; ``byte_scan`` (the
proofs), ``model.numbers`` (the value grammar), ``model.family_names.fast_needles`` (the
prefixes), ``caches`` (the remembered header pairs, heads and value shapes) and
``family_builder`` (the exact path) each supply a part and point here. A block of sample
lines becomes a ``RawFamily`` only when all of these hold, so that every byte of it is valid
in both wire formats, as Prometheus, promtool and prometheus_client read them:

1. Encoding. The whole payload is valid UTF-8 with no NUL byte and no backslash (one C pass
   each); in a payload that is not, the block itself is (``needs_exact_parser``). Escapes are
   the exact parser's business.
2. Verification. ``Verify.STRUCTURE``: ``Verify.FULL`` parses every line.
3. Lines. The block starts a line, follows its family's header and runs to the next line that
   starts with ``#`` (``next_comment``); the family has no parsed samples yet. With a space put
   before every newline, splitting the block at spaces gives exactly ``2n + 1`` pieces, the
   last a lone newline: each of its ``n`` lines is a head, one space, a value (so no
   timestamp, no exemplar, no space in a label value, no blank line) (``prove_block``).
4. Values. Every value is a number every reader accepts as written: a decimal or ``+Inf``,
   ``-Inf``, ``NaN``, inside a float's range (so not ``1e999999``, ``0x1p3``, ``1_000``,
   ``inf`` or ``+nan``). Digits read as 0, a payload's thousands of values have a few dozen
   shapes, each judged once (``model.numbers.canonical_shape``). The values of every block
   are judged together at the end of the pass; if that fails, the payload is read again with
   the blocks whose values fail left to the exact parser (``exact``): a bad value costs a
   second read, never a different result. A block whose values the compiled pass read as
   unsigned canonical decimals (``line_match.SIMPLE_VALUE``) has them proven already.
5. Heads. Each head is one of the family's needles (newline + sample name + ``{``) followed
   by one or more ``name="value"`` labels separated by single commas and closed by ``}``
   (label names valid, none twice, no trailing comma), and no two heads name one series
   (equal bytes, or the same label names in another order, which the exact path judges)
   (``heads_proven``). Needles exist only where a sample line is valid, unchanged, in both
   wire formats: none for info, stateset and gaugehistogram families nor for ``_created``
   samples, and only labelled lines have one (``fast_needles``). Heads equal, element by
   element, to the heads proven for the same block before (``caches.proven_heads``, keyed by
   format, needles and first head) are proven; when some are new, only the new ones are
   checked, as if all were (``prove_block``). The compiled pass (``line_match``), when built,
   compares them in place and answers only where the split would have matched them.
6. Headers. A header pair comes from ``caches.read_headers`` only if its bytes are a pair the
   exact path takes as is: ``# HELP`` then ``# TYPE`` of one unquoted name, a known type, no
   NUL byte, a HELP text that unescapes (``_remember``); a family whose name was already seen
   in this payload takes the exact path, which reopens it. A family taken in one step with its
   block (``_known_family``) is closed only at the payload's end or before another family's
   HELP or TYPE line (``KnownHeader.ends_before``), where the exact path would close it too;
   after anything else (a free comment, its own header again) it stays open for the exact path.
7. Caches. Every cached value is a function of its key's bytes and the format alone (a proof
   is used only for bytes equal to those it was made for), so a hit gives what a miss would
   compute: the caches, their budgets and their resets change speed, never a result.

What the fast path proves of a block is that each line is valid; what a family's type asks of
its samples together (each series' samples together, ``le`` and ``quantile`` numbers in order,
a +Inf bucket, ``_count`` beside ``_sum`` and equal to it, cumulative whole counts) is proven
of every ``RawFamily`` after the read, by ``exposition.semantics.screen_raw``: a value search
per body and, for a histogram or summary, ``exposition.raw_rules`` (its heads' layout,
remembered by their bytes like the heads, and its values compared in C). A family that may
break a rule is parsed and judged as ``Verify.FULL`` judges it, so what is served raw meets
every rule ``Verify.FULL`` checks.
"""

from __future__ import annotations

from itertools import chain

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.byte_scan import (
    BlockProof,
    any_signed,
    is_utf8,
    needs_exact_parser,
    next_comment,
    prove_block,
    value_shapes,
    values_proven,
)
from metricbridge.exposition.caches import CodecCaches, KnownHeader
from metricbridge.exposition.family_builder import Builder, Closed, Exposition, GeneralReader
from metricbridge.exposition.family_parse import unescape_help
from metricbridge.exposition.layout_walk import read_by_layout, screen
from metricbridge.exposition.raw_rules import CHECKED_TYPES, BlockSplit
from metricbridge.exposition.scrape_memory import ScrapeMemory, layout_of
from metricbridge.exposition.semantics import SCANNED_TYPES
from metricbridge.model.family import AnyFamily, FamilyMeta, Format, MetricType, RawFamily, Verify
from metricbridge.model.family_names import TEXT_TYPES, allowed_suffixes, fast_needles, wire_names

__all__ = ["Exposition", "read_exposition"]


class _Reader(GeneralReader):
    """One pass over one payload: the fast path, over the exact path it falls back to."""

    def __init__(
        self,
        payload: bytes,
        fmt: Format,
        verify: Verify,
        *,
        caches: CodecCaches | None = None,
        exact: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(payload, fmt, verify, caches)
        self.known = caches.read_headers if caches is not None else None
        # One C-speed pass settles encoding for the whole payload; only a payload that fails it
        # has its blocks decoded one by one, so the bad bytes are pinned to their family.
        # Escapes need the exact parser too; SGLang never writes one, so one memchr settles it.
        self.suspect = b"\x00" in payload or b"\\" in payload or not is_utf8(payload)
        self.fast = verify is Verify.STRUCTURE
        # Blocks are taken on their heads, and the values of all of them proven together at the
        # end (invariant 4); if that fails, the payload is read again with the blocks whose
        # values fail (``exact``, their offsets) left to the exact parser.
        self.exact = exact
        self.value_blocks: list[int] = []
        self.values: list[list[bytes]] = []
        # Raw histograms and summaries as split to be proven, for screen_raw to check again.
        self.splits: dict[int, BlockSplit] = {}
        # The values of the blocks of counters, histograms and summaries (which may not have a
        # negative, NaN or infinite value), and whether one of them may be such a value: then
        # screen_raw searches those families' bodies. A NaN gauge is common and allowed.
        self.scanned: list[list[bytes]] = []
        self.signed = True

    def run(self) -> Exposition:
        payload, size, pos = self.payload, len(self.payload), 0
        while pos < size:
            if payload[pos] == 0x23:  # '#'
                after = self._known_header(pos, size)
                if after >= 0:
                    pos = after
                    continue
                eol = payload.find(b"\n", pos)
                eol = size if eol < 0 else eol
                if self._comment(payload[pos:eol]):
                    # Blank lines after it are an editor's doing, not content; and '# EOF' may
                    # be the very last bytes (the ABNF's "HASH SP eof [ LF ]").
                    if eol < size and payload.count(b"\n", eol + 1) != size - eol - 1:
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
        self.close_parked()
        if self.values and not values_proven(chain.from_iterable(self.values), self.caches):
            bad = frozenset(
                start
                for start, values in zip(self.value_blocks, self.values, strict=True)
                if not values_proven(values, self.caches)
            )
            again = _Reader(self.payload, self.fmt, self.verify, caches=self.caches, exact=bad)
            exposition = again.run()
            self.splits, self.signed = again.splits, again.signed
            return exposition
        self.signed = any_signed(value_shapes(chain.from_iterable(self.scanned)))
        return self.result

    def _prove(
        self, start: int, end: int, needles: tuple[bytes, ...], mtype: MetricType, *, keep: bool
    ) -> BlockProof | None:
        """``prove_block`` for ``payload[start:end]``, its values left for the end of the pass."""
        if start in self.exact:
            return None
        proof = prove_block(
            self.payload, start, end, needles, self.fmt, self.caches, keep_values=keep
        )
        if proof is not None and not proof.settled and proof.values is not None:
            self.value_blocks.append(start)
            self.values.append(proof.values)
            if mtype in SCANNED_TYPES:
                self.scanned.append(proof.values)
        return proof

    def _known_header(self, pos: int, size: int) -> int:
        """Take a ``# HELP``/``# TYPE`` pair seen in an earlier payload; return the next offset.

        Engines repeat the same header bytes on every scrape, so their parsed form is cached;
        anything unusual (first sight, a lone line, a repeated family) returns -1 and takes
        the general path, which parses and checks it (and remembers a pair seen first).
        """
        payload = self.payload
        eol = payload.find(b"\n", pos)
        end = payload.find(b"\n", eol + 1) if eol >= 0 else -1
        if end < 0 or self.known is None:
            return -1
        key = payload[pos:end]
        known = self.known.get((self.fmt, key))
        if known is None:
            pair = payload.startswith(b"# HELP ", pos) and payload.startswith(b"# TYPE ", eol + 1)
            if pair and b"\x00" not in key:  # NUL bytes are judged on the general path
                self._remember(key, payload[pos:eol], payload[eol + 1 : end])
            return -1
        declared = known.declared
        current = self.current
        if declared in self.finished or (current is not None and current.declared == declared):
            return -1
        if self.fast and not self.suspect:
            after = self._known_family(known, end + 1, size)
            if after >= 0:
                return after
        if current is not None:
            self._finish()
        self.result.headers_seen = True
        meta = known.meta
        self.current = Builder(declared, self.line, meta.type, meta.help, typed=True, known=known)
        self.line += 2
        return end + 1

    def _known_family(self, known: KnownHeader, start: int, size: int) -> int:
        """The hot path: a cached header pair and the labelled block after it, in one step.

        ``start`` is where the line after the pair starts. Returns the offset after the block,
        or -1 for anything else (``_known_header`` and the general path decide). The family
        stays open unless nothing more can join it (invariant 5 in the module docstring).
        """
        payload = self.payload
        if not known.needles or start >= size or payload[start] in b"#\n":
            return -1
        stop = next_comment(payload, start, size)
        checked = known.meta.type in CHECKED_TYPES
        proof = self._prove(start, stop, known.needles, known.meta.type, keep=checked)
        if proof is None:
            return -1
        lines = proof.lines
        if self.current is not None:
            self._finish()
        self.result.headers_seen = True
        declared = known.declared
        if stop == size or known.ends_before(payload, stop):
            # Nothing more can join the family: it is complete without a builder.
            self.finished.setdefault(declared, self.line)
            body = self.view[start:stop]
            piece = (body, self.line + 2, lines)
            family: RawFamily | None = None
            if self._admit(declared, self.line, known.occupied):
                family = RawFamily(known.meta, body, self.fmt, self.line + 2, lines)
                self.result.families.append(family)
                if checked and proof.heads is not None and proof.values is not None:
                    self.splits[id(family)] = BlockSplit(family, proof.heads, proof.values)
                closed = Closed(family, [], known.occupied, None, known, self.line, piece)
            else:
                refused = self.result.problems[-1:]
                closed = Closed(None, refused, frozenset(), None, known, self.line, piece)
            self.closed[declared] = closed  # to be reopened if it appears again
            self.line += 2 + lines
            return stop
        meta = known.meta
        builder = self.current = Builder(
            declared, self.line, meta.type, meta.help, typed=True, known=known
        )
        builder.has_samples = builder.declared_spelling = True
        builder.pieces.append((self.view[start:stop], self.line + 2, lines))
        self.line += 2 + lines
        return stop

    def _forget(self, family: AnyFamily) -> None:
        """A reopened family is parsed again: its split must not outlive it (ids are reused)."""
        self.splits.pop(id(family), None)

    def _remember(self, key: bytes, help_line: bytes, type_line: bytes) -> None:
        """Cache a well-formed header pair for later payloads (this one takes the general path)."""
        try:
            _, _, name, help_text = help_line.decode().split(" ", 3)
            _, _, type_name, mtype = type_line.decode().split(" ", 3)
        except (UnicodeDecodeError, ValueError):
            return
        if name != type_name or mtype not in TEXT_TYPES or name.startswith('"'):
            return
        declared_type = TEXT_TYPES[mtype]
        _, canonical, _ = allowed_suffixes(name, declared_type, self.fmt)
        try:
            meta = FamilyMeta(canonical, declared_type, unescape_help(help_text, self.fmt))
        except LineError:
            return  # the general path reports it
        needles = fast_needles(name, declared_type, self.fmt)
        own = (f" {name} ".encode(), f" {name}\n".encode())
        occupied = wire_names(meta.name, meta.type, self.fmt)
        known = KnownHeader(name, meta, needles, occupied, own)
        if self.known is not None:
            self.known.put((self.fmt, key), known, len(key) + known.size())

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
            proof = self._prove(start, end, needles, builder.type, keep=False)
            if proof is not None:
                lines = proof.lines
                builder.pieces.append((self.view[start:end], self.line, lines))
                builder.has_samples = builder.declared_spelling = True
                return lines
        return self._parse_block(start, end)


def read_exposition(
    payload: bytes,
    fmt: Format,
    verify: Verify = Verify.STRUCTURE,
    *,
    caches: CodecCaches | None = None,
    memory: ScrapeMemory | None = None,
) -> Exposition:
    """Read a whole payload; raise ``ExpositionError`` only when nothing in it can be trusted.

    ``caches`` remembers header pairs, proven heads and parsed lines for the next payload;
    without one, nothing is remembered (see ``caches``). ``memory``, the upstream's own,
    remembers the payload's layout, so that the next payload of that layout is walked in one
    pass (``layout_walk``) instead of read family by family; the result is the same.
    """
    if not payload:
        raise ExpositionError("empty exposition (0 bytes)")
    # `in` with one byte is a memchr; a two-byte find would crawl through every newline.
    crlf = payload.find(b"\r\n") if b"\r" in payload else -1
    if crlf >= 0:
        line = payload.count(b"\n", 0, crlf) + 1
        raise ExpositionError("CRLF line ending; exposition lines end with \\n only", line=line)
    if fmt is Format.OPENMETRICS and not _has_eof(payload):
        raise ExpositionError("OpenMetrics exposition has no '# EOF' line (truncated body?)")
    unterminated = None
    if fmt is Format.TEXT and not payload.endswith(b"\n"):
        # Prometheus' text parser appends the newline itself (``NewPromParser``), so a last
        # line without one is read as if it had it. A body cut short is the transport's to
        # catch (Content-Length, chunked framing: ``service.scrape``), not the last byte's.
        unterminated = payload.count(b"\n") + 1
        payload += b"\n"
    # The upstream's memory, where the payload can be walked by a layout (else None).
    walkable = memory if unterminated is None and _walkable(payload, verify, caches) else None
    if walkable is not None and caches is not None:
        walked = _read_by_layout(payload, fmt, walkable, caches)
        if walked is not None:
            return walked
    reader = _Reader(payload, fmt, verify, caches=caches)
    exposition = reader.run()
    if not exposition.families and exposition.problems and not exposition.headers_seen:
        # An HTML error page or a health check's "OK" served as text/plain: not an exposition.
        first = exposition.problems[0]
        raise ExpositionError(f"nothing in the body is an exposition ({first})")
    if unterminated is not None and any(p.line == unterminated for p in exposition.problems):
        # Unless that line does not parse: then the body is cut short where no framing could
        # say so (a close-delimited response), and Prometheus' parser refuses it too.
        raise ExpositionError(
            "last line has no terminating newline and does not parse (truncated body?)",
            line=unterminated,
        )
    screen(exposition, caches, reader.splits, signed=reader.signed)
    if walkable is not None and caches is not None:
        _remember_layout(payload, exposition, walkable, caches)
    return exposition


def _remember_layout(
    payload: bytes, exposition: Exposition, memory: ScrapeMemory, caches: CodecCaches
) -> None:
    """Keep the payload's layout in its upstream's memory, if the walk can repeat it there."""
    layout = layout_of(payload, exposition, caches, memory.layouts.budget)
    if layout is not None:
        memory.remember(layout)


def _has_eof(payload: bytes) -> bool:
    """Whether a line of the payload is ``# EOF`` (or starts with it).

    Where it belongs, at the end, is looked at first: a search for a newline then ``# EOF``
    stops at every newline of the payload (half a millisecond per MB); a look at the end does not.
    """
    if payload.endswith((b"\n# EOF\n", b"\n# EOF")) or payload.startswith(b"# EOF"):
        return True
    return b"\n# EOF" in payload


def _walkable(payload: bytes, verify: Verify, caches: CodecCaches | None) -> bool:
    """Whether the payload may be walked by a layout: every block can be served as it came.

    Not with ``Verify.FULL``, nor without caches (their header pairs make a layout), nor in a
    payload with NUL bytes, escapes or invalid UTF-8, whose blocks need the exact parser.
    """
    if verify is not Verify.STRUCTURE or caches is None:
        return False
    return b"\x00" not in payload and b"\\" not in payload and is_utf8(payload)


def _read_by_layout(
    payload: bytes, fmt: Format, memory: ScrapeMemory, caches: CodecCaches
) -> Exposition | None:
    """The payload read by its upstream's remembered layout, or None if it is not that layout."""
    layout = memory.layout(fmt)
    if layout is None:
        return None

    def read_alone(block: bytes) -> Exposition:
        # One family's header and lines, read as a payload of their own by the exact path.
        alone = block + b"# EOF\n" if fmt is Format.OPENMETRICS else block
        try:
            return read_exposition(alone, fmt, caches=caches)
        except ExpositionError as exc:
            return Exposition([], [exc], fmt)

    exposition = read_by_layout(payload, memory, layout, caches, read_alone)
    if exposition is None:
        memory.unmatched()
    return exposition
