"""Write families in either wire format: headers per format, raw bodies copied as they came.

Every function takes the caller's ``CodecCaches`` (``caches=``) for the header and label-set
texts it writes again and again; without one, nothing is remembered (see ``caches``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from metricbridge.exposition.caches import PAIR_OVERHEAD, CodecCaches, HeaderKey, labels_size
from metricbridge.exposition.name_spelling import Spelling
from metricbridge.exposition.sample_line import escape_label_value
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import (
    AnyFamily,
    Body,
    Family,
    FamilyMeta,
    Format,
    Labels,
    MetricType,
    RawFamily,
    Sample,
)
from metricbridge.model.names import Escaping

# The text format has fewer types; these are prometheus_client's own mappings.
_TEXT_TYPE = {
    MetricType.UNKNOWN: "untyped",
    MetricType.GAUGEHISTOGRAM: "histogram",
    MetricType.STATESET: "gauge",
    MetricType.INFO: "gauge",
}

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def content_type(fmt: Format) -> str:
    """The Content-Type header value for a wire format."""
    return OPENMETRICS_CONTENT_TYPE if fmt is Format.OPENMETRICS else TEXT_CONTENT_TYPE


def _escape_help(text: str, fmt: Format) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if fmt is Format.OPENMETRICS else text


def write_header(meta: FamilyMeta, fmt: Format, *, caches: CodecCaches | None = None) -> bytes:
    """The HELP/TYPE(/UNIT) lines of a family in the given format.

    With ``caches``, kept by (meta, format) in ``caches.written_headers``: the same few hundred
    families are written on every scrape.
    """
    if caches is None:
        return _render_header(meta, fmt)
    return _cached_header(meta, fmt, caches.written_headers)


def _cached_header(meta: FamilyMeta, fmt: Format, cache: ByteLRU[HeaderKey, bytes]) -> bytes:
    # A plain tuple: hashing it stays in C, unlike the dataclass's own __hash__ and __eq__.
    key = (meta.name, meta.type, meta.help, meta.unit, fmt)
    header = cache.get(key)
    if header is None:
        header = _render_header(meta, fmt)
        size = len(meta.name) + len(meta.help or "") + len(meta.unit or "") + len(header)
        cache.put(key, header, size)
    return header


def _render_header(meta: FamilyMeta, fmt: Format, spelling: Spelling | None = None) -> bytes:
    name, type_name = meta.name, meta.type.value
    if fmt is Format.TEXT:
        type_name = _TEXT_TYPE.get(meta.type, type_name)
        if meta.type is MetricType.INFO:
            name += "_info"
    elif meta.type is MetricType.COUNTER:
        if name.endswith("_total"):
            name = name[: -len("_total")]
        else:
            type_name = "unknown"  # an OpenMetrics counter's samples must end in _total
    unit = fmt is Format.OPENMETRICS and meta.unit and name.endswith("_" + meta.unit)
    if spelling is not None:
        name = spelling.metric(name)[0]
    lines = []
    if meta.help is not None:
        lines.append(f"# HELP {name} {_escape_help(meta.help, fmt)}\n")
    lines.append(f"# TYPE {name} {type_name}\n")
    if unit:
        lines.append(f"# UNIT {name} {meta.unit}\n")
    return "".join(lines).encode()


def label_set(labels: Labels, *, caches: CodecCaches | None = None) -> str:
    """``{k="v",...}`` as written in either format (escaped).

    With ``caches``, kept by the label tuple in ``caches.written_label_sets``: series keep their
    labels from scrape to scrape.
    """
    return _label_set(labels, caches.written_label_sets if caches is not None else None)


def _label_set(labels: Labels, cache: ByteLRU[Labels, str] | None) -> str:
    text = cache.get(labels) if cache is not None else None
    if text is None:
        pairs = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in labels)
        text = "{" + pairs + "}"
        if cache is not None:
            cache.put(labels, text, len(text) + labels_size(labels))
    return text


def write_sample(sample: Sample, fmt: Format, *, caches: CodecCaches | None = None) -> str:
    """One sample line, without the newline."""
    return _write_sample(sample, fmt, caches.written_label_sets if caches is not None else None)


def _write_sample(
    sample: Sample,
    fmt: Format,
    cache: ByteLRU[Labels, str] | None,
    spelling: Spelling | None = None,
) -> str:
    if spelling is not None:
        parts = [_spelled_head(sample, spelling)]
    else:
        parts = [sample.name]
        if sample.labels:
            parts.append(_label_set(sample.labels, cache))
    parts.append(" " + sample.raw_value)
    if sample.timestamp is not None:
        if fmt is Format.TEXT:
            parts.append(f" {round(sample.timestamp * 1000)}")
        else:
            parts.append(f" {sample.timestamp!r}")
    if sample.exemplar is not None and fmt is Format.OPENMETRICS:
        parts.append(" # " + sample.exemplar)
    return "".join(parts)


def _spelled_head(sample: Sample, spelling: Spelling) -> str:
    """A sample's name and label set, names spelled for the scraper's escaping."""
    name, inside = spelling.metric(sample.name)
    pairs = [name] if inside else []
    pairs.extend(
        f'{spelling.label(key)}="{escape_label_value(value)}"' for key, value in sample.labels
    )
    if inside:
        return "{" + ",".join(pairs) + "}"
    return name + ("{" + ",".join(pairs) + "}" if pairs else "")


def _split_created(family: Family) -> tuple[Family, Family | None]:
    """The text format carries ``_created`` samples as a gauge family of their own."""
    created_name = family.name.removesuffix("_total") + "_created"
    created = tuple(s for s in family.samples if s.name == created_name)
    if not created or family.meta.type not in (
        MetricType.COUNTER,
        MetricType.HISTOGRAM,
        MetricType.SUMMARY,
    ):
        return family, None
    rest = tuple(s for s in family.samples if s.name != created_name)
    spellings = family.meta.spellings
    if spellings is not None and spellings.family == family.name:
        spellings = dataclasses.replace(spellings, family=created_name)
    meta = FamilyMeta(created_name, MetricType.GAUGE, family.meta.help, spellings=spellings)
    return Family(family.meta, rest), Family(meta, created)


def write_family(
    family: AnyFamily,
    fmt: Format,
    *,
    caches: CodecCaches | None = None,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> list[Body]:
    """The chunks of one family: header then body, names spelled as ``escaping`` wants them.

    A raw family's names are legacy names (the reader's invariant): the same under every
    escaping.
    """
    if isinstance(family, RawFamily):
        return [write_header(family.meta, fmt, caches=caches), family.body]
    chunks: list[Body] = []
    created = None
    if fmt is Format.TEXT:
        family, created = _split_created(family)
    spelling = Spelling.of(family.meta, escaping)
    if spelling is None:
        chunks.append(write_header(family.meta, fmt, caches=caches))
    else:  # rare and uncached: the caches hold legacy spellings
        chunks.append(_render_header(family.meta, fmt, spelling))
    if family.samples:
        cache = caches.written_label_sets if caches is not None else None
        if cache is not None and PAIR_OVERHEAD * len(family.samples) > cache.budget:
            cache = None  # a family too big for the cache would only churn it
        text = "\n".join(_write_sample(s, fmt, cache, spelling) for s in family.samples)
        chunks.append(text.encode() + b"\n")
    if created is not None:
        chunks.extend(write_family(created, fmt, caches=caches, escaping=escaping))
    return chunks


def write_chunks(
    families: Iterable[AnyFamily],
    fmt: Format,
    *,
    caches: CodecCaches | None = None,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> list[Body]:
    """Every family's header and body, in order, without ``# EOF``: views, nothing joined."""
    chunks: list[Body] = []
    headers = caches.written_headers if caches is not None else None
    for family in families:
        if isinstance(family, RawFamily):  # most families: two chunks, no list to build
            meta = family.meta
            chunks.append(
                _render_header(meta, fmt) if headers is None else _cached_header(meta, fmt, headers)
            )
            chunks.append(family.body)
        else:
            chunks.extend(write_family(family, fmt, caches=caches, escaping=escaping))
    return chunks


def write_exposition(
    families: Iterable[AnyFamily],
    fmt: Format,
    *,
    caches: CodecCaches | None = None,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> bytes:
    """A complete exposition; OpenMetrics output ends with ``# EOF``."""
    chunks = write_chunks(families, fmt, caches=caches, escaping=escaping)
    if fmt is Format.OPENMETRICS:
        chunks.append(b"# EOF\n")
    return b"".join(chunks)


PIECE_SIZE = 512 << 10
# A chunk this long is kept as it is: a tenth of a 1 MB engine's chunks, three quarters of its
# bytes; a third of a 10 MB engine's chunks, nearly all of its bytes.
SHARE_MIN = 16 << 10


def write_pieces(  # noqa: PLR0913 - the render's settings, keyword-only
    families: Iterable[AnyFamily],
    fmt: Format,
    size: int = PIECE_SIZE,
    *,
    caches: CodecCaches | None = None,
    share_from: int = SHARE_MIN,
    escaping: Escaping = Escaping.UNDERSCORES,
) -> list[Body]:
    """The exposition without ``# EOF``, in pieces: large bodies as they are, the rest joined.

    For a server that keeps a render and writes it out many times. A chunk of ``share_from``
    bytes or more (a family's body, a view of the engine's payload that the translation holds
    anyway) is a piece of its own, not copied: copying it would hold a second copy of most of
    the payload for as long as the render is kept, and a third while the next render is made.
    The chunks between are joined into pieces of ``size`` bytes at most, so that a response is
    a few dozen writes, not one per family; pieces this size come from the heap and are reused
    from one render to the next, where one 10 MB buffer is mapped afresh, and faulted in page
    by page, on every render.
    """
    pieces: list[Body] = []
    group: list[Body] = []
    room = size
    for chunk in write_chunks(families, fmt, caches=caches, escaping=escaping):
        if len(chunk) >= share_from:
            if group:
                pieces.append(b"".join(group))
                group, room = [], size
            pieces.append(chunk)
            continue
        view = memoryview(chunk)
        while len(view) >= room:
            group.append(view[:room])
            pieces.append(b"".join(group))
            group, view, room = [], view[room:], size
        if view:
            group.append(view)
            room -= len(view)
    if group:
        pieces.append(b"".join(group))
    return pieces
