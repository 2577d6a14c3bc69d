"""Which sample names belong to a family, per type and wire format."""

from __future__ import annotations

from metricbridge.model.family import TYPE_SUFFIXES, Format, MetricType, sample_base
from metricbridge.model.names import legacy_name

TEXT_TYPES = {"untyped": MetricType.UNKNOWN} | {t.value: t for t in MetricType}


def allowed_suffixes(
    declared: str, mtype: MetricType, fmt: Format
) -> tuple[str, str, tuple[str, ...]]:
    """The sample base, the family's canonical name and the suffixes its samples may carry."""
    if mtype is MetricType.COUNTER:
        if fmt is Format.OPENMETRICS:
            return declared, declared + "_total", ("_total", "_created")
        if declared.endswith("_total"):
            return declared[: -len("_total")], declared, ("_total", "_created")
        return declared, declared, ("",)
    suffixes = {
        MetricType.HISTOGRAM: ("_bucket", "_sum", "_count", "_created"),
        MetricType.GAUGEHISTOGRAM: ("_bucket", "_gsum", "_gcount"),
        MetricType.SUMMARY: ("", "_sum", "_count", "_created"),
        MetricType.INFO: ("_info",),
    }.get(mtype, ("",))
    return declared, declared, suffixes


def wire_names(name: str, mtype: MetricType, fmt: Format) -> frozenset[str]:
    """Every name a family takes in one wire format: its own, its family name there, its samples'.

    Two families sharing one of these clash: promtool refuses a second TYPE line for a name
    and prometheus_client a "clashing name" (a histogram ``a`` beside a gauge ``a_count``, an
    info ``a`` beside a gauge ``a_info``). ``name`` is the canonical family name. In the text
    format a ``_created`` series is a gauge family of its own, merged into its counter or
    histogram after reading, so it is not claimed there.
    """
    base = sample_base(name, mtype)
    suffixes = TYPE_SUFFIXES[mtype]
    if fmt is Format.TEXT:
        suffixes = tuple(suffix for suffix in suffixes if suffix != "_created")
        if mtype is MetricType.GAUGEHISTOGRAM:
            # Written as TYPE histogram, which promtool takes to own _sum and _count too.
            suffixes += ("_sum", "_count")
        if mtype is MetricType.COUNTER and base != name:
            # Text has no family name apart from ``a_total``: client_golang serves the gauge
            # ``go_memstats_alloc_bytes`` beside the counter ``go_memstats_alloc_bytes_total``.
            return frozenset((name,))
    return frozenset((name, base, *(base + suffix for suffix in suffixes)))


def served_names(name: str, mtype: MetricType) -> frozenset[str]:
    """The names a family takes in either wire format: what a rules file may serve.

    Families read from an engine are held only to the text format's names (``wire_names``):
    a snapshot whose families share a name only in OpenMetrics is answered in text
    (``exposition.openmetrics_fit``).
    """
    return wire_names(name, mtype, Format.TEXT) | wire_names(name, mtype, Format.OPENMETRICS)


def fast_needles(declared: str, mtype: MetricType, fmt: Format) -> tuple[bytes, ...]:
    """Line prefixes that are valid, unchanged, in both wire formats; empty: never fast.

    Part of the reader's fast path: its invariant is in ``exposition.reader``'s docstring.
    """
    base, _, suffixes = allowed_suffixes(declared, mtype, fmt)
    if mtype in (MetricType.INFO, MetricType.STATESET, MetricType.GAUGEHISTOGRAM):
        return ()
    # Only labelled lines are vouched for: one needle per suffix keeps the scans few, and an
    # unlabelled series (a single line) costs little on the exact path.
    return tuple(
        ("\n" + base + suffix + "{").encode() for suffix in suffixes if suffix != "_created"
    )


def belongs(
    sample_name: str, declared: str, mtype: MetricType | None, fmt: Format, *, may_restore: bool
) -> tuple[str, bool] | None:
    """(name, spelled as declared) if the sample belongs to the family, else None.

    ``mtype`` None means the family has no TYPE line: only its own name belongs. prometheus_client
    >= 0.23 escapes OpenMetrics sample names but not the HELP/TYPE names (client_python#1177):
    `sglang_x_total` under `# TYPE sglang:x counter`; such names are restored when
    ``may_restore`` (OpenMetrics, and no sample spelled as declared yet: after one, an
    escaped-looking name is a family of its own).
    """
    if mtype is None:
        return (sample_name, True) if sample_name == declared else None
    base, _, suffixes = allowed_suffixes(declared, mtype, fmt)
    if sample_name.startswith(base) and sample_name[len(base) :] in suffixes:
        return sample_name, True
    if not may_restore or fmt is not Format.OPENMETRICS:
        return None
    escaped = legacy_name(base, label=True)
    if escaped != base and sample_name.startswith(escaped):
        suffix = sample_name[len(escaped) :]
        if suffix in suffixes:
            return base + suffix, False
    return None
