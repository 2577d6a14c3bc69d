"""The state of a pass's families: what a payload made, a family being read, one closed.

``family_builder`` (the exact path) and ``reader`` (the fast path) fill them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import KnownHeader
from metricbridge.model.family import AnyFamily, Body, Format, MetricType, Sample, Spellings


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
    reopened: bool = False  # its lines appeared again after another family's (``_reopen``)
    # Names read outside the legacy charset: (legacy name, is a label) -> UTF-8 name, "" where
    # two UTF-8 names map to one legacy name (then the legacy one is served under any escaping).
    spelled: dict[tuple[str, bool], str] | None = None

    def spell(self, legacy: str, original: str, *, label: bool) -> None:
        """Note that ``original`` was read, and is known by ``legacy``."""
        if self.spelled is None:
            self.spelled = {}
        seen = self.spelled.setdefault((legacy, label), original)
        if seen != original:
            self.spelled[(legacy, label)] = ""

    def spell_all(self, spelled: list[tuple[str, str, bool]]) -> None:
        """Note each (legacy, UTF-8, is a label) that one line's parse met."""
        for legacy, original, label in spelled:
            self.spell(legacy, original, label=label)

    def spellings(self, family: str) -> Spellings | None:
        """The UTF-8 names this family was read with, once it is named ``family``."""
        if not self.spelled:
            return None
        names = tuple(
            (key, text) for (key, label), text in self.spelled.items() if text and not label
        )
        labels = tuple((key, text) for (key, label), text in self.spelled.items() if text and label)
        return Spellings(family, names, labels) if names or labels else None


@dataclass(slots=True)
class Closed:
    """A family closed in this pass, kept so that its closing can be undone if it appears again."""

    family: AnyFamily | None  # what closing it served; None if it was refused
    problems: list[ExpositionError]  # what closing it reported
    claimed: frozenset[str]  # the names it took (``_admit``)
    builder: Builder | None  # None for a family the fast path took whole, with:
    known: KnownHeader | None = None
    header_line: int = 0
    piece: tuple[Body, int, int] | None = None

    def reopened(self) -> Builder:
        """The family's builder, made again from the header and block it was taken with."""
        if self.builder is not None:
            return self.builder
        known = self.known
        assert known is not None  # noqa: S101 - a Closed holds a builder or what makes one
        meta = known.meta
        builder = Builder(known.declared, self.header_line, meta.type, meta.help, meta.unit)
        builder.typed = builder.has_samples = builder.declared_spelling = True
        builder.known = known
        if self.piece is not None:
            builder.pieces.append(self.piece)
        return builder
