"""The data model every other module speaks: families, samples and their types.

Two shapes of family exist. ``RawFamily`` keeps its sample lines as the exact bytes the upstream
sent, so the hot path can copy families that no rule touches without parsing them (see
``exposition.reader``). ``Family`` holds parsed samples, for families a rule must look inside.
Both are frozen; operations return new objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

Labels = tuple[tuple[str, str], ...]
# A raw family's lines: a view into the upstream payload (no copy; it keeps the payload alive)
# or bytes of their own (a renamed copy, or blocks joined).
Body = bytes | memoryview


class MetricType(StrEnum):
    """Metric family types, spelled as OpenMetrics spells them."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    GAUGEHISTOGRAM = "gaugehistogram"
    SUMMARY = "summary"
    INFO = "info"
    STATESET = "stateset"
    UNKNOWN = "unknown"


class Format(StrEnum):
    """Wire formats metricbridge reads and writes."""

    TEXT = "text"  # Prometheus text format 0.0.4
    OPENMETRICS = "openmetrics"  # OpenMetrics 1.0.0


# Sample-name suffixes each type may carry, beyond the family name itself. The family name of a
# counter is its ``_total`` sample name (what a PromQL user types), so its suffixes are relative
# to the name without ``_total``; see ``sample_base``.
TYPE_SUFFIXES: dict[MetricType, tuple[str, ...]] = {
    MetricType.COUNTER: ("_total", "_created"),
    MetricType.GAUGE: ("",),
    MetricType.HISTOGRAM: ("_bucket", "_sum", "_count", "_created"),
    MetricType.GAUGEHISTOGRAM: ("_bucket", "_gsum", "_gcount"),
    MetricType.SUMMARY: ("", "_sum", "_count", "_created"),
    MetricType.INFO: ("_info",),
    MetricType.STATESET: ("",),
    MetricType.UNKNOWN: ("",),
}


# Labels that place a sample within its series (a bucket, a quantile), not name a series.
SHAPE_LABELS = frozenset({"le", "quantile"})


def series_key(labels: Labels) -> Labels:
    """A series' identity within its family: its labels but ``le``/``quantile``, sorted."""
    return tuple(sorted(pair for pair in labels if pair[0] not in SHAPE_LABELS))


def sample_base(name: str, mtype: MetricType) -> str:
    """The prefix that every sample name of a family starts with (counters drop ``_total``)."""
    if mtype is MetricType.COUNTER and name.endswith("_total"):
        return name[: -len("_total")]
    return name


@dataclass(frozen=True, slots=True)
class Spellings:
    """The UTF-8 names a family was read with, by the legacy names the bridge knows them by.

    The bridge reads ``{"my.metric","lab.el"="b"}`` as ``my_metric{lab_el="b"}`` and serves it
    so unless the scraper allows UTF-8 names (``model.names.Escaping``); then the writer spells
    them as they came. They hold only while the family keeps the name it was read with
    (``family``): a rule that renames it serves its own, legacy, names.
    """

    family: str
    names: tuple[tuple[str, str], ...] = ()  # (legacy, UTF-8) metric and sample names
    labels: tuple[tuple[str, str], ...] = ()  # (legacy, UTF-8) label names


@dataclass(frozen=True, slots=True)
class FamilyMeta:
    """What the HELP, TYPE and UNIT lines say about a family."""

    name: str
    type: MetricType
    help: str | None = None
    unit: str | None = None
    spellings: Spellings | None = None  # names read outside the legacy charset


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample line; ``raw_value`` is the value as read, so untouched values round-trip."""

    name: str
    labels: Labels
    value: float
    raw_value: str
    timestamp: float | None = None  # seconds, whatever the wire format said
    exemplar: str | None = None  # OpenMetrics exemplar text after " # ", kept verbatim


@dataclass(frozen=True, slots=True)
class Family:
    """A family whose samples have been parsed."""

    meta: FamilyMeta
    samples: tuple[Sample, ...]

    @property
    def name(self) -> str:
        """The family name (counters: the ``_total`` name)."""
        return self.meta.name


@dataclass(frozen=True, slots=True)
class RawFamily:
    """A family whose sample lines are kept as the bytes the upstream sent.

    ``body`` holds complete lines, each ending in a newline: usually a view into the upstream
    payload, built by ``exposition.reader`` after it checked that every line starts with this
    family's sample base followed by a suffix valid for its type in both wire formats, with
    exactly one space (so no timestamp and no exemplar): the invariant in that module's
    docstring. Bytes of its own after a rename.
    ``first_line`` is the 1-based line of the first body line in the payload, for error
    messages.
    """

    meta: FamilyMeta
    body: Body
    source_format: Format
    first_line: int
    sample_count: int

    @property
    def name(self) -> str:
        """The family name (counters: the ``_total`` name)."""
        return self.meta.name


AnyFamily = Family | RawFamily


class Verify(StrEnum):
    """How much of an exposition the reader checks."""

    STRUCTURE = "structure"  # families, headers, line prefixes; bytes of untouched lines trusted
    FULL = "full"  # every sample line parsed
