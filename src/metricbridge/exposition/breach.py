"""A rule a family breaks, and the fixed words that name each rule in the self-metrics.

Shared by the rules of one sample and of a family (``semantics``) and those of a histogram's
points (``histogram_points``), which ``openmetrics_fit`` also asks whether OpenMetrics can
carry a family.
"""

from __future__ import annotations

from dataclasses import dataclass

REASONS = frozenset(
    {
        "nan_value",  # a counter-like sample (total, sum, count, bucket, gsum, gcount) is NaN
        "negative_value",  # a counter-like sample or a quantile is negative
        "non_integer_count",  # a bucket, _count or _gcount that is not a whole number
        "le_label",  # a bucket without le, or le not a number, NaN, or +Inf spelled otherwise
        "bucket_order",  # buckets not in increasing le order
        "not_cumulative",  # a bucket smaller than the one before
        "missing_inf_bucket",  # a histogram point without its le="+Inf" bucket
        "count_mismatch",  # _count (_gcount) different from the +Inf bucket
        "sum_without_count",  # _sum without _count, or _count without _sum (g-forms alike)
        "sum_with_negative_buckets",  # _sum beside negative le, or negative _gsum without them
        "quantile_label",  # a quantile sample without quantile, or outside [0, 1], or NaN
        "info_value",  # an info sample other than 1
        "stateset_value",  # a stateset sample other than 0 or 1
        "stateset_label",  # a stateset sample without the label named after its family
        "unit",  # a UNIT on info or stateset, or one that is not the name's suffix
        "exemplar",  # an exemplar on a sample that may not carry one
        "interleaved_series",  # a series' samples split by another series' (OpenMetrics)
        "timestamps",  # a series mixing samples with and without timestamps, or going back
    }
)


@dataclass(frozen=True, slots=True)
class Breach:
    """A rule a family breaks: which (one of ``REASONS``), where (the sample's index) and how.

    ``carried``: the text format carries the family as it is and Prometheus ingests it, so the
    family is kept and answered in text; OpenMetrics cannot carry it (``openmetrics_fit``).
    """

    reason: str
    index: int | None  # the sample's, or None for the family's header
    message: str
    carried: bool = False
