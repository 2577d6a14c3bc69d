"""A payload walked against its upstream's remembered layout: one pass, one result per family.

``scrape_memory`` keeps the layout of the last payload read in full, and its ``walk`` holds
the next payload against it in one pass.

``read_walked`` turns a walk into the families the full read would have made: a ``RawFamily``
per block kept as it came, and for a family the exact path read, that family's lines read
again on their own (``read_exact``). Their values are proven as the full read proves them
(invariant 4 of ``exposition.reader``); anything that fails sends the payload to the full read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

from metricbridge.exposition.byte_scan import any_signed, prove_block, value_shapes, values_proven
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.created_series import merge_created_families
from metricbridge.exposition.family_state import Exposition
from metricbridge.exposition.raw_rules import CHECKED_TYPES, BlockSplit
from metricbridge.exposition.scrape_memory import PayloadLayout, ScrapeMemory, walk
from metricbridge.exposition.semantics import SCANNED_TYPES, screen_raw
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
)


def screen(
    exposition: Exposition,
    caches: CodecCaches | None,
    splits: dict[int, BlockSplit],
    *,
    signed: bool,
) -> None:
    """What a read does after its pass: ``_created`` families folded in, raw families screened."""
    fmt = exposition.format
    if fmt is Format.TEXT:
        exposition.families, problems = merge_created_families(exposition.families, caches=caches)
        exposition.problems.extend(problems)
    # Parsed families met their type's rules as they closed; the raw ones are screened here.
    exposition.families, problems = screen_raw(
        exposition.families, fmt, caches=caches, splits=splits, signed=signed
    )
    exposition.problems.extend(problems)


def read_by_layout(
    payload: bytes,
    memory: ScrapeMemory,
    layout: PayloadLayout,
    caches: CodecCaches | None,
    read_exact: Callable[[bytes], Exposition],
) -> Exposition | None:
    """The payload read as the full read reads it, if it matches the layout; else None.

    Blocks whose heads changed were proven afresh; the memory keeps the layout with them.

    Only the families ``semantics.screen_raw`` would look at are screened: the raw histograms
    and summaries, the raw counters when a value may be negative, NaN or infinite, and in
    OpenMetrics a family with a unit; it hands every other family back as it is.
    """
    found = read_walked(payload, layout, caches, read_exact)
    if found is None:
        return None
    exposition, gathered, signed = found
    splits = gathered.splits
    if gathered.changed:
        memory.remember(layout.with_heads(gathered.changed))
    fmt = exposition.format
    if layout.created and fmt is Format.TEXT:
        # ``_created`` families are folded in across families: the whole screen, as read.
        screen(exposition, caches, {id(split.family): split for split in splits}, signed=signed)
        return exposition
    by_family = {id(split.family): split for split in splits}
    families: list[AnyFamily] = []
    for family in exposition.families:
        if isinstance(family, RawFamily) and (
            family.meta.type in CHECKED_TYPES
            or (signed and family.meta.type in SCANNED_TYPES)
            or (fmt is Format.OPENMETRICS and family.meta.unit)
        ):
            kept, problems = screen_raw(
                [family], fmt, caches=caches, splits=by_family, signed=signed
            )
            families += kept
            exposition.problems += problems
        else:
            families.append(family)
    exposition.families = families
    return exposition


@dataclass(slots=True)
class _Walk:
    """What a walk gathers beside the families: splits, values to prove, heads that changed."""

    splits: list[BlockSplit] = field(default_factory=list)
    unproven: list[tuple[MetricType, list[bytes]]] = field(default_factory=list)
    changed: list[tuple[int, list[bytes]]] = field(default_factory=list)


def read_walked(
    payload: bytes,
    layout: PayloadLayout,
    caches: CodecCaches | None,
    read_exact: Callable[[bytes], Exposition],
) -> tuple[Exposition, _Walk, bool] | None:
    """The payload's families as the full read makes them, if it matches the layout.

    Returns the exposition (its families not yet screened), what the walk gathered (the split
    of each block ``raw_rules`` checks, the blocks whose heads changed, as proven now), and
    whether a counter's, histogram's or summary's value may be negative, NaN or infinite
    (``byte_scan.any_signed``); None: read it in full. ``read_exact`` reads one family's
    header and lines on their own, as the exact path does.
    """
    walked = walk(payload, layout)
    if walked is None:
        return None
    fmt, view = layout.fmt, memoryview(payload)
    families: list[AnyFamily] = []
    gathered = _Walk()
    pos, line = 0, 1
    for index, (segment, (end, simple, values)) in enumerate(
        zip(layout.segments, walked, strict=True)
    ):
        start = pos + len(segment.header)
        family: AnyFamily | None
        if segment.heads is None:
            family = _read_alone(read_exact(payload[pos:end]), segment.known.meta)
            lines = payload.count(b"\n", start, end)
        else:
            proven = (segment.heads, simple, values)
            if simple is None:
                # Other heads than remembered (a new series): proven as the full read proves
                # a block after a header pair it knows.
                needles, checked = segment.known.needles, segment.checked
                proof = prove_block(payload, start, end, needles, fmt, caches, keep_values=checked)
                if proof is None or proof.heads is None:
                    return None  # a block grown past any cache: read in full, not remembered
                proven = (proof.heads, proof.settled, proof.values)
                gathered.changed.append((index, list(proof.heads)))
            lines = len(proven[0])
            family = RawFamily(segment.known.meta, view[start:end], fmt, line + 2, lines)
            _gather(gathered, family, segment.checked, proven)
        if family is None:
            return None
        families.append(family)
        line += 2 + lines
        pos = end
    if payload[pos:] != layout.tail:
        return None
    unproven = gathered.unproven
    if unproven and not values_proven(chain.from_iterable(v for _, v in unproven), caches):
        return None
    scanned = chain.from_iterable(v for mtype, v in unproven if mtype in SCANNED_TYPES)
    # As the full read says it: whether any HELP, TYPE or UNIT line came (none in "# EOF" alone).
    seen = any(segment.header for segment in layout.segments)
    exposition = Exposition(families, [], fmt, headers_seen=seen)
    return exposition, gathered, any_signed(value_shapes(scanned))


def _gather(
    gathered: _Walk,
    family: RawFamily,
    checked: bool,
    proven: tuple[list[bytes], bool | None, list[bytes] | None],
) -> None:
    """A raw block's values to prove with the others', and its split for ``raw_rules``."""
    heads, simple, values = proven
    if values is None:
        return
    if not simple:
        gathered.unproven.append((family.meta.type, values))
    if checked:
        gathered.splits.append(BlockSplit(family, heads, values))


def _read_alone(alone: Exposition, meta: FamilyMeta) -> Family | None:
    """The one family the exact path read, if it read it as the full read did: else None."""
    read = alone.families
    if alone.problems or alone.renamed_samples or len(read) != 1:
        return None
    family = read[0]
    return family if isinstance(family, Family) and family.meta == meta else None
