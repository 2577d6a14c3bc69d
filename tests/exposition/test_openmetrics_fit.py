"""Which families OpenMetrics cannot carry as the text format does, and that the verdict is real.

Each case is checked against the parsers themselves: written in OpenMetrics, prometheus_client's
OpenMetrics parser refuses it or reads back another type; written in text, prometheus_client's
text parser and ``promtool check metrics`` read every sample.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES
from helpers.promtool import promtool_check_metrics
from helpers.strength import examples
from metricbridge.config.load import load_config
from metricbridge.exposition.openmetrics_fit import Misfit, openmetrics_misfit
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.semantics import breaches
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
    Sample,
    Verify,
)
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import run_pipeline

C, G, H, S = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM, MetricType.SUMMARY


def fam(name: str, mtype: MetricType, *samples: tuple[str, dict[str, str], str]) -> Family:
    """A parsed family from (sample name, labels, value text) triples."""
    return Family(
        FamilyMeta(name, mtype, f"{name} help"),
        tuple(
            Sample(sample, tuple(labels.items()), float(raw), raw)
            for sample, labels, raw in samples
        ),
    )


def stamped(name: str, *samples: tuple[dict[str, str], str, float | None]) -> Family:
    """A gauge from (labels, value text, timestamp) triples."""
    return Family(
        FamilyMeta(name, G, f"{name} help"),
        tuple(Sample(name, tuple(lb.items()), float(raw), raw, ts) for lb, raw, ts in samples),
    )


def histogram(bucket: str = "1", inf: str = "2", total: str = "2", sum_: str = "3", le: str = "1"):
    return fam(
        "lat",
        H,
        ("lat_bucket", {"le": le}, bucket),
        ("lat_bucket", {"le": "+Inf"}, inf),
        ("lat_sum", {}, sum_),
        ("lat_count", {}, total),
    )


def summary(quantile: str = "1", sum_: str = "3", count: str = "2") -> Family:
    return fam(
        "temp",
        S,
        ("temp", {"quantile": "0.5"}, quantile),
        ("temp_sum", {}, sum_),
        ("temp_count", {}, count),
    )


MISFITS: dict[str, tuple[Misfit, list[AnyFamily]]] = {
    "counter not named _total": (Misfit.COUNTER_NAME, [fam("jobs", C, ("jobs", {"a": "1"}, "3"))]),
    "client_golang's gauge beside its counter": (
        Misfit.NAME_CLASH,
        [
            fam("go_memstats_alloc_bytes", G, ("go_memstats_alloc_bytes", {}, "1.5e+06")),
            fam("go_memstats_alloc_bytes_total", C, ("go_memstats_alloc_bytes_total", {}, "6e+06")),
        ],
    ),
    "NaN counter": (Misfit.COUNTER_VALUE, [fam("errs_total", C, ("errs_total", {}, "NaN"))]),
    "-Inf counter": (Misfit.COUNTER_VALUE, [fam("errs_total", C, ("errs_total", {}, "-Inf"))]),
    "non-integer bucket": (Misfit.COUNT_VALUE, [histogram(bucket="0.5", inf="1.5", total="1.5")]),
    "non-integer summary count": (Misfit.COUNT_VALUE, [summary(count="2.5")]),
    "negative histogram sum": (Misfit.SUM_VALUE, [histogram(sum_="-3")]),
    "sum beside a negative bucket": (Misfit.SUM_VALUE, [histogram(le="-1")]),
    "negative summary sum": (Misfit.SUM_VALUE, [summary(sum_="-2")]),
    "negative quantile": (Misfit.QUANTILE_VALUE, [summary(quantile="-1")]),
    "quantile above one": (
        Misfit.QUANTILE_LABEL,
        [fam("temp", S, ("temp", {"quantile": "1.5"}, "1"), ("temp_count", {}, "1"))],
    ),
    "NaN quantile": (
        Misfit.QUANTILE_LABEL,
        [fam("temp", S, ("temp", {"quantile": "NaN"}, "1"), ("temp_count", {}, "1"))],
    ),
    "+Inf spelled +INF": (
        Misfit.LE_LABEL,
        [fam("lat", H, ("lat_bucket", {"le": "+INF"}, "2"), ("lat_count", {}, "2"))],
    ),
    "NaN gauge histogram sum": (
        Misfit.SUM_VALUE,
        [
            fam(
                "q",
                MetricType.GAUGEHISTOGRAM,
                ("q_bucket", {"le": "+Inf"}, "2"),
                ("q_gcount", {}, "2"),
                ("q_gsum", {}, "NaN"),
            )
        ],
    ),
    "negative gauge histogram sum without a negative bucket": (
        Misfit.SUM_VALUE,
        [
            fam(
                "q",
                MetricType.GAUGEHISTOGRAM,
                ("q_bucket", {"le": "1"}, "1"),
                ("q_bucket", {"le": "+Inf"}, "2"),
                ("q_gcount", {}, "2"),
                ("q_gsum", {}, "-4"),
            )
        ],
    ),
    "a series with and without a timestamp": (
        Misfit.TIMESTAMPS,
        [stamped("temp", ({"a": "1"}, "1", None), ({"a": "1"}, "2", 5.0))],
    ),
    "a series going back in time": (
        Misfit.TIMESTAMPS,
        [stamped("temp", ({"a": "1"}, "1", 10.0), ({"a": "1"}, "2", 5.0))],
    ),
}


@pytest.mark.parametrize("case", list(MISFITS))
def test_each_misfit_is_named(case: str) -> None:
    reason, families = MISFITS[case]
    gauge = fam("up", G, ("up", {}, "1"))
    assert openmetrics_misfit([gauge, *families]) is reason


@pytest.mark.parametrize("case", list(MISFITS))
def test_openmetrics_cannot_carry_it_and_text_can(case: str) -> None:
    """The verdict is the parsers': OpenMetrics refuses or retypes it, text reads every sample."""
    _, families = MISFITS[case]
    om = write_exposition(families, Format.OPENMETRICS).decode()
    try:
        read = list(parse_om(om))
    except ValueError:
        pass
    else:  # read, but not as what it is: the counter comes back as another type
        assert [f.type for f in read] != [f.meta.type.value for f in families], om
    text = write_exposition(families, Format.TEXT)
    promtool_check_metrics(text)
    samples = [s for f in parse_text(text.decode()) for s in f.samples]
    expected = [s for f in families if isinstance(f, Family) for s in f.samples]
    assert len(samples) == len(expected)
    for got, want in zip(samples, expected, strict=True):
        # prometheus_client's text parser names a counter's sample ..._total; Prometheus does not
        assert got.name in {want.name, want.name + "_total"}
        assert got.labels == dict(want.labels)
        assert got.value == want.value or (math.isnan(got.value) and math.isnan(want.value))


def test_raw_counter_not_named_total_is_a_misfit() -> None:
    """A family served as the engine's bytes is judged by its name and type too."""
    raw = RawFamily(FamilyMeta("jobs", C), b'jobs{a="1"} 3\n', Format.TEXT, 2, 1)
    assert openmetrics_misfit([raw]) is Misfit.COUNTER_NAME


@pytest.mark.parametrize(
    "families",
    [
        [fam("jobs_total", C, ("jobs_total", {}, "3"), ("jobs_created", {}, "1.7e9"))],
        [histogram(), summary(quantile="NaN")],
        [fam("g", G, ("g", {}, "-1")), fam("g2", G, ("g2", {}, "NaN"))],
        [fam("lat", H, ("lat_bucket", {"le": "-1"}, "1"), ("lat_bucket", {"le": "+Inf"}, "2"))],
        [
            stamped(
                "temp",
                ({"a": "1"}, "1", 5.0),
                ({"a": "1"}, "2", 10.0),
                ({"a": "2"}, "3", None),
                ({"a": "3"}, "4", 1.0),
            )
        ],
    ],
    ids=[
        "counter",
        "histogram and NaN quantile",
        "negative and NaN gauges",
        "no sum",
        "timestamps forward in each series",
    ],
)
def test_what_openmetrics_carries_fits(families: list[AnyFamily]) -> None:
    assert openmetrics_misfit(families) is None
    list(parse_om(write_exposition(families, Format.OPENMETRICS).decode()))


def test_a_created_without_a_timestamp_beside_a_timestamped_total_fits() -> None:
    """Prometheus reads it so (the oracle test scrapes it), though prometheus_client refuses."""
    total = Family(
        FamilyMeta("foo_total", C, "help"),
        (Sample("foo_total", (), 17.0, "17.0", 5.0), Sample("foo_created", (), 1.5e9, "1.5e9")),
    )
    assert openmetrics_misfit([total]) is None


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.prom")))
def test_sglang_payloads_translated_fit(fixture: str) -> None:
    """A real SGLang payload through the shipped rules is served in OpenMetrics, as asked."""
    rules = compile_rules(load_config())
    outcome = run_pipeline((FIXTURES / fixture).read_bytes(), Format.TEXT, rules)
    assert openmetrics_misfit(outcome.translation.families) is None


_VALUES = st.sampled_from(["0", "1", "2", "3", "0.5", "-1", "NaN", "+Inf", "-Inf", "1e3"])
_BOUNDS = st.sampled_from(["-1", "0", "0.5", "1", "2.5", "+Inf", "+INF", "inf", "1.5", "NaN"])
_KINDS = st.sampled_from(["counter", "histogram", "gaugehistogram", "summary"])


@st.composite
def _family_text(draw: st.DrawFn) -> tuple[str, Format]:
    """One family of each kind, with values and bounds drawn from the ones the rules are about."""
    kind = draw(_KINDS)
    lines = [f"# TYPE f {kind}"]
    for series in range(draw(st.integers(1, 2))):
        labels = f'a="{series}"'
        if kind == "counter":
            lines.append(f"f_total{{{labels}}} {draw(_VALUES)}")
            continue
        if kind == "summary":
            quantiles = draw(st.lists(st.tuples(_BOUNDS, _VALUES), max_size=2))
            lines += [f'f{{{labels},quantile="{q}"}} {value}' for q, value in quantiles]
            lines += [f"f_sum{{{labels}}} {draw(_VALUES)}", f"f_count{{{labels}}} {draw(_VALUES)}"]
            continue
        bounds = [*draw(st.lists(_BOUNDS, max_size=3)), "+Inf"]
        for bound in bounds:
            lines.append(f'f_bucket{{{labels},le="{bound}"}} {draw(_VALUES)}')
        count, total = ("_gcount", "_gsum") if kind == "gaugehistogram" else ("_count", "_sum")
        lines += [f"f{count}{{{labels}}} {draw(_VALUES)}", f"f{total}{{{labels}}} {draw(_VALUES)}"]
    fmt = Format.TEXT if kind != "gaugehistogram" and draw(st.booleans()) else Format.OPENMETRICS
    return "\n".join(lines) + ("\n# EOF\n" if fmt is Format.OPENMETRICS else "\n"), fmt


@settings(deadline=None, max_examples=examples(400, 100))
@given(case=_family_text())
def test_what_the_reader_keeps_is_valid_in_the_format_it_is_answered_in(
    case: tuple[str, Format],
) -> None:
    """Kept families are valid in text always, in OpenMetrics whenever no misfit is named; and
    every breach the reader lets through (carried) is named a misfit."""
    payload, fmt = case
    exposition = read_exposition(payload.encode(), fmt, Verify.FULL)
    families = exposition.families
    list(parse_text(write_exposition(families, Format.TEXT).decode()))
    misfit = openmetrics_misfit(families)
    if misfit is None:
        list(parse_om(write_exposition(families, Format.OPENMETRICS).decode()))
    carried = [
        breach
        for family in families
        if isinstance(family, Family)
        for breach in breaches(family, Format.OPENMETRICS)
        if breach.carried
    ]
    if carried:
        assert misfit is not None, carried
