"""Stateless per-family operations: rename, scale, select, relabel, as compile_rules built them."""

from __future__ import annotations

import re
from collections.abc import Callable

from metricbridge.config.schema import RelabelAction
from metricbridge.config.templates import expand
from metricbridge.errors import ScaleError
from metricbridge.model.family import (
    SHAPE_LABELS,
    AnyFamily,
    Family,
    FamilyMeta,
    Labels,
    MetricType,
    RawFamily,
    Sample,
    sample_base,
    series_key,
)
from metricbridge.model.names import LABEL_NAME, quoted
from metricbridge.model.numbers import format_value, parse_value
from metricbridge.translation.compiled import CompiledRelabel, Select
from metricbridge.translation.relabel_cache import Miss, Outcome, RelabelCache, Relabelled


def rename(family: AnyFamily, meta: FamilyMeta) -> AnyFamily:
    """The same samples under ``meta.name``; suffixes (``_total``, ``_bucket``, ...) follow."""
    old = sample_base(family.meta.name, family.meta.type)
    new = sample_base(meta.name, meta.type)
    if isinstance(family, RawFamily):
        # Every body line starts with the old base (the reader proved it), so replacing it after
        # each newline renames every sample at C speed; label values cannot hold a raw newline.
        # The first line has no newline before it: its new name goes on in the concatenation
        # that also turns a view into bytes. Two copies in all.
        old_bytes, new_bytes = old.encode(), new.encode()
        body = family.body
        spliced = (
            (new_bytes + body[len(old_bytes) :]).replace(b"\n" + old_bytes, b"\n" + new_bytes)
            if body
            else b""
        )
        count = family.sample_count
        return RawFamily(meta, spliced, family.source_format, family.first_line, count)
    samples = tuple(_renamed(s, new + s.name[len(old) :]) for s in family.samples)
    return Family(meta, samples)


# A sample with one field changed, the others kept (Sample is a frozen dataclass).
def _renamed(sample: Sample, name: str) -> Sample:
    return Sample(
        name, sample.labels, sample.value, sample.raw_value, sample.timestamp, sample.exemplar
    )


def _relabelled(sample: Sample, labels: Labels) -> Sample:
    return Sample(
        sample.name, labels, sample.value, sample.raw_value, sample.timestamp, sample.exemplar
    )


def _revalued(sample: Sample, value: float, exemplar: str | None) -> Sample:
    raw = format_value(value)
    return Sample(sample.name, sample.labels, value, raw, sample.timestamp, exemplar)


# An OpenMetrics exemplar: its label set (quoted values may hold "}"), its value, the rest.
_EXEMPLAR = re.compile(r'(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})( +)(\S+)(.*)', re.DOTALL)


def _scaled_exemplar(exemplar: str | None, apply: Callable[[float], float]) -> str | None:
    """The exemplar with its value in the new unit, as OTel's metricstransformprocessor scales it.

    An exemplar's value is one observation of the family's quantity: a histogram scaled from
    ms to s whose exemplars kept ``4200.0`` would show an observation 1,000 times too large.
    One that cannot be read is left as it came (the reader let it through as it is).
    """
    if exemplar is None or (match := _EXEMPLAR.fullmatch(exemplar)) is None:
        return exemplar
    parsed = parse_value(match[3])
    if parsed is None:
        return exemplar
    return f"{match[1]}{match[2]}{format_value(apply(parsed[0]))}{match[4]}"


def _multiplier(factor: float) -> Callable[[float], float]:
    # 1.0 / 1000 reads better than 1.0 * 0.001 (= 0.001 vs 0.0010000000000000002 for some inputs),
    # so a factor that is the reciprocal of an integer divides instead of multiplying.
    inverse = 1.0 / factor
    if inverse == round(inverse) and abs(inverse) > 1:
        return lambda value: value / inverse
    return lambda value: value * factor


def scale(family: Family, factor: float) -> Family:
    """Multiply values by ``factor``; histograms scale ``le`` bounds and ``_sum`` together.

    Bucket counts, ``_count`` and ``_created`` are counts or times, never in the family's unit,
    so they are left alone; that keeps a scaled histogram a valid histogram of the same events.
    """
    apply = _multiplier(factor)
    base = sample_base(family.meta.name, family.meta.type)
    mtype = family.meta.type
    scaled_names = {
        MetricType.HISTOGRAM: {base + "_sum"},
        MetricType.SUMMARY: {base, base + "_sum"},
    }.get(mtype, {s.name for s in family.samples if not s.name.endswith("_created")})
    out = []
    for sample in family.samples:
        if sample.name in scaled_names:
            exemplar = _scaled_exemplar(sample.exemplar, apply)
            out.append(_revalued(sample, apply(sample.value), exemplar))
        elif mtype is MetricType.HISTOGRAM and sample.name == base + "_bucket":
            labels = _scale_le(sample.labels, apply)
            exemplar = _scaled_exemplar(sample.exemplar, apply)
            out.append(
                Sample(
                    sample.name, labels, sample.value, sample.raw_value, sample.timestamp, exemplar
                )
            )
        else:
            out.append(sample)
    return Family(family.meta, tuple(out))


def _bound(value: str) -> float:
    parsed = parse_value(value)
    if parsed is None:
        raise ScaleError(f"bucket bound le={quoted(value)} is not a number")
    return parsed[0]


def _scale_le(labels: Labels, apply: Callable[[float], float]) -> Labels:
    return tuple(
        (key, format_value(apply(_bound(value))) if key == "le" and value != "+Inf" else value)
        for key, value in labels
    )


def select(family: Family, selection: Select) -> Family:
    """The series whose labels include every selected pair, with those labels removed."""
    wanted, names = selection.pairs, selection.labels
    out = [
        _relabelled(sample, tuple(p for p in sample.labels if p[0] not in names))
        for sample in family.samples
        if wanted.issubset(sample.labels)
    ]
    return Family(family.meta, tuple(out))


def _relabel_one(labels: dict[str, str], step: CompiledRelabel) -> bool:
    """Apply one step to ``labels`` in place; False means the series is dropped."""
    action = step.action
    if action in (RelabelAction.LABELDROP, RelabelAction.LABELKEEP, RelabelAction.LABELMAP):
        for key in [k for k in labels if k not in SHAPE_LABELS]:
            hit = step.regex.fullmatch(key)
            if (action is RelabelAction.LABELDROP and hit) or (
                action is RelabelAction.LABELKEEP and not hit
            ):
                del labels[key]
            elif action is RelabelAction.LABELMAP and hit:
                labels[expand(step.replacement, hit)] = labels[key]
        return True
    joined = step.separator.join(labels.get(name, "") for name in step.source_labels)
    hit = step.regex.fullmatch(joined)
    if action is RelabelAction.KEEP:
        return hit is not None
    if action is RelabelAction.DROP:
        return hit is None
    if hit is not None and step.target_label is not None:
        target = expand(step.target_label, hit)
        if not LABEL_NAME.fullmatch(target) or target in SHAPE_LABELS or target.startswith("__"):
            return True  # Prometheus skips a target that expands to an unusable name
        value = expand(step.replacement, hit)
        if value:
            labels[target] = value
        else:
            labels.pop(target, None)  # Prometheus: an empty value removes the label
    return True


def relabel_labels(labels: Labels, steps: tuple[CompiledRelabel, ...]) -> Relabelled:
    """What ``steps`` make of one series' labels (the steps read nothing else: no value)."""
    rewritten_labels = dict(labels)
    if not all(_relabel_one(rewritten_labels, step) for step in steps):
        return None
    rewritten = rewritten_labels != dict(labels)
    new_labels = tuple(sorted(rewritten_labels.items())) if rewritten else labels
    ordered = new_labels if rewritten else tuple(sorted(new_labels))
    return new_labels, rewritten, series_key(labels), series_key(new_labels), ordered


def _relabel_cached(
    labels: Labels, steps: tuple[CompiledRelabel, ...], cache: RelabelCache | None
) -> Relabelled:
    """``relabel_labels``, through ``cache`` when there is one."""
    if cache is None:
        return relabel_labels(labels, steps)
    held = cache.get(labels, steps)
    if not isinstance(held, Miss):
        return held
    outcome = relabel_labels(labels, steps)
    cache.put(labels, steps, outcome)
    return outcome


def relabel(
    family: Family, steps: tuple[CompiledRelabel, ...], cache: RelabelCache | None = None
) -> tuple[Family, int, int]:
    """Apply relabel steps per series; return the family, series dropped and duplicates removed.

    Two series the steps make one are resolved whole, never sample by sample (a histogram's
    buckets from two series would not add up). A series the engine serves under the rewritten
    labels already wins, wherever it stands: the engine's own series is the true one (a patched
    engine writing ``cache_source="storage_MooncakeStore"`` itself, say). Otherwise the first
    series rewritten onto those labels is kept. ``cache`` (the caller's) remembers what the
    steps made of each label set, for the next payload: the same result, without the regexes.
    """
    # (sample, what its labels became)
    kept: list[tuple[Sample, Outcome]] = []
    dropped = duplicates = 0
    for sample in family.samples:
        outcome = _relabel_cached(sample.labels, steps, cache)
        if outcome is None:
            dropped += 1
            continue
        kept.append((sample, outcome))
    # Which original series each resulting series comes from: the engine's own first.
    owner: dict[Labels, Labels] = {}
    for _, (_, rewritten, before, after, _) in kept:
        if not rewritten:
            owner.setdefault(after, before)
    for _, (_, rewritten, before, after, _) in kept:
        if rewritten:
            owner.setdefault(after, before)
    out: list[Sample] = []
    seen: set[tuple[str, Labels]] = set()
    for sample, (new_labels, rewritten, before, after, ordered) in kept:
        key = (sample.name, ordered)
        if owner[after] != before or key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(_relabelled(sample, new_labels) if rewritten else sample)
    return Family(family.meta, tuple(out)), dropped, duplicates


def joined(family: Family, pairs: Labels) -> Family:
    """Every series with ``pairs`` (``__`` labels a relabel's steps read) added, sorted."""
    if not pairs:
        return family
    samples = tuple(
        _relabelled(sample, tuple(sorted((*sample.labels, *pairs)))) for sample in family.samples
    )
    return Family(family.meta, samples)


def without_hidden_labels(family: Family) -> Family:
    """Every series without its ``__`` labels: they are for relabel steps, never served."""
    samples = []
    for sample in family.samples:
        kept = tuple(p for p in sample.labels if not p[0].startswith("__"))
        samples.append(sample if len(kept) == len(sample.labels) else _relabelled(sample, kept))
    return Family(family.meta, tuple(samples))
