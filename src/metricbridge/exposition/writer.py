"""Write families in either wire format: headers per format, raw bodies copied as they came."""

from __future__ import annotations

from collections.abc import Iterable

from metricbridge.exposition.sample_line import escape_label_value
from metricbridge.model.family import (
    AnyFamily,
    Body,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
    Sample,
)

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


# Header bytes by (meta, format): the same few hundred families are written on every scrape.
_HEADERS: dict[tuple[str, MetricType, str | None, str | None, Format], bytes] = {}
_HEADERS_MAX = 8192


def write_header(meta: FamilyMeta, fmt: Format) -> bytes:
    """The HELP/TYPE(/UNIT) lines of a family in the given format."""
    # A plain tuple: hashing it stays in C, unlike the dataclass's own __hash__ and __eq__.
    key = (meta.name, meta.type, meta.help, meta.unit, fmt)
    header = _HEADERS.get(key)
    if header is None:
        if len(_HEADERS) >= _HEADERS_MAX:
            _HEADERS.clear()  # a crude bound; the next scrape refills it
        header = _HEADERS[key] = _render_header(meta, fmt)
    return header


def _render_header(meta: FamilyMeta, fmt: Format) -> bytes:
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
    lines = []
    if meta.help is not None:
        lines.append(f"# HELP {name} {_escape_help(meta.help, fmt)}\n")
    lines.append(f"# TYPE {name} {type_name}\n")
    if fmt is Format.OPENMETRICS and meta.unit and name.endswith("_" + meta.unit):
        lines.append(f"# UNIT {name} {meta.unit}\n")
    return "".join(lines).encode()


# Label sets as written, by the label tuple: series keep their labels from scrape to scrape.
_LABEL_TEXT: dict[tuple[tuple[str, str], ...], str] = {}
_LABEL_TEXT_MAX = 65536


def label_set(labels: tuple[tuple[str, str], ...]) -> str:
    """``{k="v",...}`` as written in either format (escaped), cached by the label tuple."""
    text = _LABEL_TEXT.get(labels)
    if text is None:
        if len(_LABEL_TEXT) >= _LABEL_TEXT_MAX:
            _LABEL_TEXT.clear()  # a crude bound; the next scrape refills it
        pairs = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in labels)
        text = _LABEL_TEXT[labels] = "{" + pairs + "}"
    return text


def write_sample(sample: Sample, fmt: Format) -> str:
    """One sample line, without the newline."""
    parts = [sample.name]
    if sample.labels:
        parts.append(label_set(sample.labels))
    parts.append(" " + sample.raw_value)
    if sample.timestamp is not None:
        if fmt is Format.TEXT:
            parts.append(f" {round(sample.timestamp * 1000)}")
        else:
            parts.append(f" {sample.timestamp!r}")
    if sample.exemplar is not None and fmt is Format.OPENMETRICS:
        parts.append(" # " + sample.exemplar)
    return "".join(parts)


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
    meta = FamilyMeta(created_name, MetricType.GAUGE, family.meta.help)
    return Family(family.meta, rest), Family(meta, created)


def write_family(family: AnyFamily, fmt: Format) -> list[Body]:
    """The chunks of one family: header then body."""
    if isinstance(family, RawFamily):
        return [write_header(family.meta, fmt), family.body]
    chunks: list[Body] = []
    created = None
    if fmt is Format.TEXT:
        family, created = _split_created(family)
    chunks.append(write_header(family.meta, fmt))
    if family.samples:
        text = "\n".join(write_sample(sample, fmt) for sample in family.samples)
        chunks.append(text.encode() + b"\n")
    if created is not None:
        chunks.extend(write_family(created, fmt))
    return chunks


def write_chunks(families: Iterable[AnyFamily], fmt: Format) -> list[Body]:
    """Every family's header and body, in order, without ``# EOF``: views, nothing joined."""
    chunks: list[Body] = []
    for family in families:
        if isinstance(family, RawFamily):  # most families: two chunks, no list to build
            chunks.append(write_header(family.meta, fmt))
            chunks.append(family.body)
        else:
            chunks.extend(write_family(family, fmt))
    return chunks


def write_exposition(families: Iterable[AnyFamily], fmt: Format) -> bytes:
    """A complete exposition; OpenMetrics output ends with ``# EOF``."""
    chunks = write_chunks(families, fmt)
    if fmt is Format.OPENMETRICS:
        chunks.append(b"# EOF\n")
    return b"".join(chunks)


PIECE_SIZE = 512 << 10


def write_pieces(families: Iterable[AnyFamily], fmt: Format, size: int = PIECE_SIZE) -> list[bytes]:
    """The exposition without ``# EOF``, cut into pieces of ``size`` bytes (the last: fewer).

    For a server that keeps a render and writes it out many times. Pieces this size come from
    the heap and are reused from one render to the next, where one 10 MB buffer is mapped
    afresh, and faulted in page by page, on every render; written one by one, they also let
    the server drain the socket between them.
    """
    pieces: list[bytes] = []
    group: list[Body] = []
    room = size
    for chunk in write_chunks(families, fmt):
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
