"""A histogram's or summary's rules across samples, held against a block that is not parsed.

``semantics.first_breach`` judges a parsed family. The fast path serves most histograms and
summaries unparsed (``RawFamily``), and the rules that tie their samples together (each series'
samples together, ``le`` and ``quantile`` spelled as numbers, buckets in increasing ``le``
order up to ``+Inf``, ``_count`` beside ``_sum``, cumulative whole counts that agree with the
``+Inf`` bucket) must hold for them too: prometheus_client's OpenMetrics parser refuses a whole
answer over one breach.

The rules split in two. What depends on the heads alone (``name{labels}``: grouping, labels,
order, which samples are present, which line is whose bucket) is worked out once per distinct
list of heads into a ``Layout`` of line indexes, remembered by the heads' bytes
(``caches.raw_layouts``); an engine repeats its heads on every scrape, so this is a list
comparison in C. What depends on the values (cumulative, whole, ``_count`` equal to the
``+Inf`` bucket) is checked on every scrape with C-level iterators over those indexes.
A block that fails either is parsed and judged by ``first_breach``, which names the problem:
these checks only decide which blocks need that, and never accept what it would refuse.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from functools import partial
from operator import add, le

from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.line_match import values_agree as compiled_agree
from metricbridge.model.family import Format, MetricType, RawFamily, sample_base
from metricbridge.model.numbers import parse_value

# Per layout held by ``raw_layouts``, beyond its heads' len(): the object and its lists; and per
# head or index, its list slot (and the head's bytes header).
LAYOUT_OVERHEAD = 400
HEAD_OVERHEAD = 48
INDEX_OVERHEAD = 8
SERIES_OVERHEAD = 120  # a series' key: its bytes (or pairs) and the set's slot

CHECKED_TYPES = (MetricType.HISTOGRAM, MetricType.SUMMARY)


@dataclass(frozen=True, slots=True)
class BlockSplit:
    """A raw family's body as the reader split it to prove it: its heads and its values.

    Handed over so that ``needs_parse`` does not copy and split the same bytes again (at 10 MB,
    a quarter of the read). ``family`` is the family it was made for: a lookup by ``id()``
    checks it, and holding it keeps that id from being reused while the split is held.
    """

    family: RawFamily
    heads: list[bytes]
    values: list[bytes]


@dataclass(frozen=True, slots=True)
class Layout:
    """What a block's heads settle, as line indexes; ``sound`` False: a head breaks a rule."""

    heads: list[bytes]
    sound: bool
    whole: list[int]  # lines whose value must be a whole number (buckets, _count)
    lower: list[int]  # with ``upper``: consecutive buckets of one series, lower le first
    upper: list[int]
    counts: list[int]  # with ``infs``: a series' _count and its +Inf bucket
    infs: list[int]
    series: frozenset[Hashable] = frozenset()  # every series' key, for heads appended later

    def size(self) -> int:
        """The len() of what it holds, with overheads, for the cache's estimate."""
        indexes = len(self.whole) + 2 * (len(self.lower) + len(self.counts))
        heads = sum(map(len, self.heads)) + HEAD_OVERHEAD * len(self.heads)
        return (
            LAYOUT_OVERHEAD + heads + INDEX_OVERHEAD * indexes + SERIES_OVERHEAD * len(self.series)
        )

    def grown(self, heads: list[bytes], mtype: MetricType, base: str) -> Layout | None:
        """The layout of these heads if they are this layout's with new series after them.

        prometheus_client appends a new series after the others, so a scrape's heads are
        often the last scrape's and a tail: only the tail is laid out. None: lay out afresh.
        """
        known = len(self.heads)
        if not self.sound or len(heads) <= known or heads[:known] != self.heads:
            return None
        tail = layout_of(heads[known:], mtype, base)
        if not tail.sound or tail.series & self.series:
            return None  # (this also refuses a tail that continues the last series)
        shift = partial(add, known)
        return Layout(
            list(heads),
            True,  # noqa: FBT003 - the field: "sound"
            self.whole + list(map(shift, tail.whole)),
            self.lower + list(map(shift, tail.lower)),
            self.upper + list(map(shift, tail.upper)),
            self.counts + list(map(shift, tail.counts)),
            self.infs + list(map(shift, tail.infs)),
            self.series | tail.series,
        )


def needs_parse(
    family: RawFamily, fmt: Format, caches: CodecCaches | None, split: BlockSplit | None = None
) -> bool:
    """Whether a raw histogram or summary may break a rule across its samples (then parse it).

    Other types have no such rule a raw block can break: their series are one line each, and
    the fast path proved no two heads name one series. ``split``: the body already split.
    """
    mtype = family.meta.type
    if mtype not in CHECKED_TYPES:
        return False
    if split is not None:
        heads, values = split.heads, split.values
    else:
        parts = bytes(family.body).replace(b"\n", b" \n").split(b" ")
        heads, values = parts[0:-1:2], parts[1::2]
    if not heads:
        return False
    base = sample_base(family.meta.name, mtype)
    cache = caches.raw_layouts if caches is not None else None
    key = (fmt, mtype, base, heads[0])
    layout = cache.get(key) if cache is not None else None
    # The layout keeps a list of its own (no two caches hold one mutable object), of the head
    # objects the proven heads cache holds when the reader split them (``split``): then no head
    # is held twice, and comparing them is pointer-fast from the next scrape on.
    if layout is None or layout.heads != heads:
        layout = (layout and layout.grown(heads, mtype, base)) or layout_of(
            list(heads), mtype, base
        )
    elif split is not None and layout.heads[0] is not heads[0]:
        layout = dataclasses.replace(layout, heads=list(heads))
    else:
        return not (layout.sound and values_agree(layout, values, mtype))
    if cache is not None:
        cache.put(key, layout, layout.size() + len(base))
    return not (layout.sound and values_agree(layout, values, mtype))


def values_agree(layout: Layout, values: list[bytes], mtype: MetricType) -> bool:
    """Counts whole, buckets cumulative, each _count its +Inf bucket: C-level loops only.

    The values are numbers the fast path proved, none negative, NaN or infinite
    (``semantics.screen_raw`` parsed any family with one), so ``float`` takes each as written.
    Each distinct spelling is converted once: an engine's buckets repeat a few counts (0, and
    the same count up a series' upper buckets), so a histogram has a tenth as many distinct
    values as lines or fewer, and ``float`` of bytes was two thirds of this check. The compiled
    pass (``line_match.values_agree``), when built, gives the same verdict over C doubles.
    """
    if compiled_agree is not None:
        verdict = compiled_agree(
            values,
            layout.whole,
            layout.lower,
            layout.upper,
            layout.counts,
            layout.infs,
            mtype is MetricType.SUMMARY,
        )
        if verdict is not None:
            return verdict
    distinct = set(values)
    floats = dict(zip(distinct, map(float, distinct), strict=True))
    fractional = {value for value, number in floats.items() if not number.is_integer()}
    if fractional and not fractional.isdisjoint(map(values.__getitem__, layout.whole)):
        return False
    if mtype is MetricType.SUMMARY:
        return True
    at = list(map(floats.__getitem__, values)).__getitem__
    cumulative = all(map(le, map(at, layout.lower), map(at, layout.upper)))
    return cumulative and list(map(at, layout.counts)) == list(map(at, layout.infs))


@dataclass(slots=True)
class _Series:
    """One series' lines as the heads are read: bucket lines with their bounds, count, sum."""

    buckets: list[tuple[int, float]]
    count: int = -1
    has_sum: bool = False


def layout_of(heads: list[bytes], mtype: MetricType, base: str) -> Layout:
    """The layout of proven heads (``byte_scan.heads_proven``: ``NAME{a="x",b="y"}`` each)."""
    unsound = Layout(heads, False, [], [], [], [], [])  # noqa: FBT003 - the field: "sound"
    line = _bucket_line if mtype is MetricType.HISTOGRAM else _summary_line
    encoded = base.encode()
    bounds: dict[bytes | None, float | None] = {}
    whole: list[int] = []
    series: dict[Hashable, _Series] = {}
    current: Hashable = None
    for index, head in enumerate(heads):
        split = line(head, encoded)
        if split is None:
            return unsound
        suffix, key, text = split
        if key != current:
            if key in series:
                return unsound  # interleaved: parsed, and regrouped
            series[key], current = _Series([]), key
        point = series[key]
        if suffix == b"_count":
            point.count = index
            whole.append(index)
        elif suffix == b"_sum":
            point.has_sum = True
        else:
            bound = bounds[text] if text in bounds else bounds.setdefault(text, _bound(text, mtype))
            if not _placed(point, index, bound, mtype, whole):
                return unsound
    keys = frozenset(series)
    if mtype is MetricType.SUMMARY:
        return Layout(heads, True, whole, [], [], [], [], keys)  # noqa: FBT003
    layout = _histogram_layout(heads, whole, series.values())
    if layout is None:
        return unsound
    return Layout(*layout, keys)


def _bucket_line(head: bytes, base: bytes) -> tuple[bytes, Hashable, bytes | None] | None:
    """(suffix, series, le) of a histogram's head, in C calls on its bytes.

    The series is the label set's bytes without ``le``. The same labels in another order make
    another key: the fast path proved a sample name never orders them two ways, so that can
    only part a series' ``_count`` or ``_sum`` from its buckets, a series without buckets,
    which is unsound; the parse then judges it.
    """
    start = 1 if head[:1] == b"\n" else 0
    brace = head.find(b"{")
    if not head.startswith(base, start):
        return None
    suffix = head[start + len(base) : brace]
    if suffix != b"_bucket":
        return (suffix, head[brace:], None) if suffix in (b"_count", b"_sum") else None
    at = head.find(b'le="', brace)
    while at >= 0 and head[at - 1] not in b"{,":  # the tail of another label's name
        at = head.find(b'le="', at + 1)
    if at < 0:
        return None
    end = head.index(b'"', at + 4)
    rest = head[end + 1 :]
    if head[at - 1] == 0x7B:  # '{': le first, the labels after it keep the brace
        key = b"{" + rest[1:] if rest[:1] == b"," else b"{" + rest
    else:
        key = head[brace : at - 1] + rest
    return suffix, key, head[at + 4 : end]


def _summary_line(head: bytes, base: bytes) -> tuple[bytes, Hashable, bytes | None] | None:
    """(suffix, series, quantile) of a summary's head; the series is a set of label pairs.

    A set, not bytes: a series may have no quantile lines, so label order must not part one.
    """
    name, labels = _split_head(head)
    suffix = name[len(base) :].encode()
    if not name.encode().startswith(base) or suffix not in (b"", b"_count", b"_sum"):
        return None
    quantile = labels.pop("quantile", None) if suffix == b"" else None
    text = quantile.encode() if quantile is not None else None
    return suffix, frozenset(labels.items()), text


def _placed(
    point: _Series, index: int, bound: float | None, mtype: MetricType, whole: list[int]
) -> bool:
    """Whether a quantile or bucket line is sound; a bucket is added to its series."""
    if bound is None:
        return False
    if mtype is MetricType.HISTOGRAM:
        if point.buckets and bound <= point.buckets[-1][1]:
            return False  # out of order, or an le repeated
        point.buckets.append((index, bound))
        whole.append(index)
    return True


def _histogram_layout(
    heads: list[bytes], whole: list[int], series: Iterable[_Series]
) -> tuple[list[bytes], bool, list[int], list[int], list[int], list[int], list[int]] | None:
    lower: list[int] = []
    upper: list[int] = []
    counts: list[int] = []
    infs: list[int] = []
    for point in series:
        buckets = point.buckets
        if not buckets or buckets[-1][1] != math.inf or point.has_sum != (point.count >= 0):
            return None
        if point.has_sum and buckets[0][1] < 0:
            return None  # a _sum beside negative buckets is no counter
        lines = [index for index, _ in buckets]
        lower.extend(lines[:-1])
        upper.extend(lines[1:])
        if point.count >= 0:
            counts.append(point.count)
            infs.append(lines[-1])
    return heads, True, whole, lower, upper, counts, infs


def _split_head(head: bytes) -> tuple[str, dict[str, str]]:
    r"""``\nNAME{a="x",b="y"}`` -> (NAME, {a: x, b: y}); the head is proven, so no escapes."""
    pieces = head.lstrip(b"\n").decode().split('"')
    opening = pieces[0]
    brace = opening.index("{")
    names = [opening[brace + 1 : -1], *(piece[1:-1] for piece in pieces[2:-1:2])]
    return opening[:brace], dict(zip(names, pieces[1::2], strict=True))


def _bound(raw: bytes | None, mtype: MetricType) -> float | None:
    """An le (+Inf spelled so) or a quantile in [0, 1], as a number; None if it is not one."""
    if raw is None:
        return None
    text = raw.decode()
    parsed = parse_value(text)  # Go's ParseFloat: no blanks, no "1_0", as expfmt reads a bound
    if parsed is None:
        return None
    number = parsed[0]
    if math.isnan(number):
        return None
    if mtype is MetricType.SUMMARY:
        return number if 0 <= number <= 1 else None
    return None if number == math.inf and text != "+Inf" else number
