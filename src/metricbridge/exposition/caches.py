"""The wire code's memory between payloads: one byte-bounded cache per job, owned by the caller.

Engines repeat almost every byte from one scrape to the next: the same header pairs, the same
label sets, the same line shapes. The reader, the sample-line parser and the writer remember
what they made of those bytes, in the caches of a ``CodecCaches`` their caller passes in
(``caches=``). Nothing is remembered without one: there is no default instance. The service's
bridge owns one for its life and resets it on every rules reload; ``metricbridge translate``
and the other offline commands make one per command; tests make their own.

A hit returns what a miss would compute (invariant 6 of the reader's fast path, in
``exposition.reader``): the caches change speed, never a result.

The default budgets hold everything the real SGLang fixtures and a 10 MB simulated engine need;
see ``DEFAULT_BUDGETS``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from metricbridge.model.cache import ByteLRU, chosen_budgets
from metricbridge.model.family import FamilyMeta, Format, Labels, MetricType, Sample

MiB = 1 << 20

# Per cache, in bytes; 63 MiB in all. Measured with the default rules, reading,
# translating and writing in both formats: every SGLang fixture together needs under 0.2 MiB in
# each cache but proven_heads; a 10 MB engine (88 DP x 2 TP) about 11 MiB of proven heads (its
# label sets, about the payload's size), about 8 MiB of raw_layouts (its histograms' heads) and
# under 0.5 MiB in each other cache, so an EPD pair of 10 MB engines fits; proven_values holds a
# few dozen value shapes (under 10 KiB).
# With ``validation: full`` every line is parsed and written from its parse: a 1 MB engine
# (8 x 2) then needs 5.4 MiB of label sets each way, which fit; a 10 MB engine's 55 MiB do not,
# and its label sets are split and written afresh (what a miss costs, about 1 us a line).
DEFAULT_BUDGETS: Mapping[str, int] = MappingProxyType(
    {
        "read_headers": 2 * MiB,  # exposition.reader: header pairs seen before
        "proven_heads": 24 * MiB,  # exposition.byte_scan.prove_block: label sets already proven
        "proven_values": MiB // 4,  # exposition.byte_scan.values_proven: value shapes proven
        "raw_layouts": 10 * MiB,  # exposition.raw_rules: unparsed histograms' heads, as laid out
        "last_parse": 4 * MiB,  # exposition.family_parse: each family's lines as parsed last time
        "read_label_sets": 8 * MiB,  # exposition.sample_line: label sets split into pairs
        "written_headers": 2 * MiB,  # exposition.writer: HELP/TYPE lines as written
        "written_label_sets": 8 * MiB,  # exposition.writer: label sets as written
    }
)

# The caches that only a later payload can use: for one payload (a command's input) they would
# hold what they proved, laid out, parsed and planned (at 10 MB, about the payload's size
# again) for nobody. The others pay off within one payload too (its repeated label sets).
ONE_PAYLOAD_BUDGETS: Mapping[str, int] = MappingProxyType(
    {"proven_heads": 0, "raw_layouts": 0, "last_parse": 0}
)

# Per parsed line held by ``last_parse``, beyond the len() of its text: the Sample, its labels
# tuple, its value, and the dict slot.
LINE_OVERHEAD = 320
# Per label pair, beyond the len() of its strings: the pair tuple and two string headers.
PAIR_OVERHEAD = 160


@dataclass(frozen=True, slots=True)
class KnownHeader:
    """A HELP/TYPE pair seen before, with everything the reader's fast path derives from it."""

    declared: str
    meta: FamilyMeta
    needles: tuple[bytes, ...]  # see family_names.fast_needles
    occupied: frozenset[str]  # the names it takes on the wire (see wire_names)
    own_headers: tuple[bytes, ...]  # what follows "# HELP"/"# TYPE" in the family's own lines

    def ends_before(self, payload: bytes, pos: int) -> bool:
        """Whether the line at ``pos`` is a HELP or TYPE line of another family."""
        return (
            payload.startswith(b"# HELP ", pos) or payload.startswith(b"# TYPE ", pos)
        ) and not payload.startswith(self.own_headers, pos + 6)

    def size(self) -> int:
        """The len() of the strings it holds, for the cache's estimate."""
        meta = self.meta
        own = sum(map(len, self.own_headers)) + sum(map(len, self.needles))
        names = len(self.declared) + len(meta.name) + sum(map(len, self.occupied))
        return len(meta.help or "") + len(meta.unit or "") + own + names


HeaderKey = tuple[str, MetricType, str | None, str | None, Format]


class CodecCaches:
    """The reader's, parser's and writer's caches, each with a byte budget of its own.

    ``budgets`` overrides ``DEFAULT_BUDGETS`` by cache name (0 turns a cache off).
    """

    __slots__ = (
        "last_parse",
        "proven_heads",
        "proven_values",
        "raw_layouts",
        "read_headers",
        "read_label_sets",
        "written_headers",
        "written_label_sets",
    )

    def __init__(self, budgets: Mapping[str, int] | None = None) -> None:
        chosen = chosen_budgets(DEFAULT_BUDGETS, budgets)
        self.read_headers: ByteLRU[tuple[Format, bytes], KnownHeader] = ByteLRU(
            "read_headers", chosen["read_headers"]
        )
        # Keyed by format, needles and first head: a block's heads (byte_scan.ProvenHeads).
        self.proven_heads: ByteLRU[tuple[Format, tuple[bytes, ...], bytes], Any] = ByteLRU(
            "proven_heads", chosen["proven_heads"]
        )
        self.proven_values: ByteLRU[bytes, bool] = ByteLRU("proven_values", chosen["proven_values"])
        # Keyed by format, type, sample base and first head: raw_rules.Layout.
        self.raw_layouts: ByteLRU[tuple[Format, MetricType, str, bytes], Any] = ByteLRU(
            "raw_layouts", chosen["raw_layouts"]
        )
        self.last_parse: ByteLRU[tuple[str, Format], dict[str, Sample]] = ByteLRU(
            "last_parse", chosen["last_parse"]
        )
        self.read_label_sets: ByteLRU[str, Labels] = ByteLRU(
            "read_label_sets", chosen["read_label_sets"]
        )
        self.written_headers: ByteLRU[HeaderKey, bytes] = ByteLRU(
            "written_headers", chosen["written_headers"]
        )
        self.written_label_sets: ByteLRU[Labels, str] = ByteLRU(
            "written_label_sets", chosen["written_label_sets"]
        )

    def __iter__(self) -> Iterator[ByteLRU[Any, Any]]:
        """Every cache, in a fixed order."""
        yield self.read_headers
        yield self.proven_heads
        yield self.proven_values
        yield self.raw_layouts
        yield self.last_parse
        yield self.read_label_sets
        yield self.written_headers
        yield self.written_label_sets

    @property
    def budget(self) -> int:
        """The budgets of all the caches together, in bytes."""
        return sum(cache.budget for cache in self)

    @property
    def bytes(self) -> int:
        """What all the caches hold together, in bytes (estimated: see ``model.cache``)."""
        return sum(cache.bytes for cache in self)

    def reset(self) -> None:
        """Empty every cache (their counters keep counting)."""
        for cache in self:
            cache.reset()


def lines_size(lines: Mapping[str, Sample]) -> int:
    """The estimated bytes of a family's parsed lines: the text twice (line and Sample) and more."""
    return 2 * sum(map(len, lines)) + LINE_OVERHEAD * len(lines)


def labels_size(labels: Labels) -> int:
    """The estimated bytes of a label tuple."""
    return sum(len(key) + len(value) for key, value in labels) + PAIR_OVERHEAD * len(labels)
