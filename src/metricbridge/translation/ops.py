"""Stateless per-family operations: rename, scale, select, as compile_rules built them.

Relabelling has a module of its own, ``translation.relabel``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from metricbridge.errors import ScaleError
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Labels,
    MetricType,
    RawFamily,
    Sample,
    sample_base,
)
from metricbridge.model.names import quoted
from metricbridge.model.numbers import format_value, parse_value
from metricbridge.translation.compiled import Select


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
    if old == new:  # most rules keep the name (a relabel, a scale): no sample to rebuild
        return Family(meta, family.samples)
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
    bounds: dict[str, str] = {}  # each bound text scaled once: a histogram has a few dozen
    for sample in family.samples:
        if sample.name in scaled_names:
            exemplar = _scaled_exemplar(sample.exemplar, apply)
            out.append(_revalued(sample, apply(sample.value), exemplar))
        elif mtype is MetricType.HISTOGRAM and sample.name == base + "_bucket":
            labels = _scale_le(sample.labels, apply, bounds)
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


def _scale_le(labels: Labels, apply: Callable[[float], float], bounds: dict[str, str]) -> Labels:
    """The labels with ``le`` in the new unit; ``bounds`` remembers each bound's new text."""
    for position, (key, value) in enumerate(labels):
        if key == "le":
            scaled = bounds.get(value)
            if scaled is None:
                scaled = value if value == "+Inf" else format_value(apply(_bound(value)))
                bounds[value] = scaled
            return (*labels[:position], (key, scaled), *labels[position + 1 :])
    return labels


def select(family: Family, selection: Select) -> Family:
    """The series whose labels include every selected pair, with those labels removed."""
    wanted, names = selection.pairs, selection.labels
    out = [
        _relabelled(sample, tuple(p for p in sample.labels if p[0] not in names))
        for sample in family.samples
        if wanted.issubset(sample.labels)
    ]
    return Family(family.meta, tuple(out))
