"""An unparsed histogram or summary is held to its type's rules across samples by default.

Each case breaks one rule in a labelled block the fast path would otherwise serve as it came
(the valid block is asserted to come out a ``RawFamily``). The default validation must drop
the family with the same located problem as ``validation: full``, keep the family after it,
and serve bytes both prometheus_client parsers and promtool accept; with the heads proven on
an earlier scrape (warm caches) as well as on first sight.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import OM_FIXTURES, TEXT_FIXTURES
from helpers.promtool import promtool_check_metrics
from metricbridge.exposition import layout_walk, line_match, raw_rules
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.openmetrics_fit import Misfit, openmetrics_misfit
from metricbridge.exposition.raw_rules import CHECKED_TYPES, BlockSplit, Layout, values_agree
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.semantics import screen_raw
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import (
    AnyFamily,
    Family,
    FamilyMeta,
    Format,
    MetricType,
    RawFamily,
    Verify,
)

HISTOGRAM = b"""\
h_bucket{a="1",le="0.5"} 1
h_bucket{a="1",le="+Inf"} 2
h_count{a="1"} 2
h_sum{a="1"} 3
h_bucket{a="2",le="0.5"} 0
h_bucket{a="2",le="+Inf"} 1
h_count{a="2"} 1
h_sum{a="2"} 1
"""
SUMMARY = b"""\
s{a="1",quantile="0.5"} 1
s{a="1",quantile="0.9"} 2
s_count{a="1"} 4
s_sum{a="1"} 6
"""

# name: (type, the block's old bytes, their replacement, the reason validation: full gives)
CASES = {
    "interleaved_series": (
        "histogram",
        b'h_sum{a="1"} 3\nh_bucket{a="2",le="0.5"} 0\n',
        b'h_bucket{a="2",le="0.5"} 0\nh_sum{a="1"} 3\n',
        "interleaved_series",
    ),
    "le_missing": ("histogram", b'{a="1",le="0.5"}', b'{a="1"}', "le_label"),
    "le_not_a_number": ("histogram", b'le="0.5"} 1', b'le="x"} 1', "le_label"),
    "le_nan": ("histogram", b'le="0.5"} 1', b'le="NaN"} 1', "le_label"),
    "le_spelled_inf": ("histogram", b'le="+Inf"} 2', b'le="Inf"} 2', "le_label"),
    "buckets_out_of_order": (
        "histogram",
        b'le="0.5"} 1\n',
        b'le="0.5"} 1\nh_bucket{a="1",le="0.25"} 1\n',
        "bucket_order",
    ),
    "bucket_repeated_le": (  # spelled another way: the heads differ, the bounds do not
        "histogram",
        b'le="0.5"} 1\n',
        b'le="0.5"} 1\nh_bucket{a="1",le="0.50"} 1\n',
        "bucket_order",
    ),
    "missing_inf_bucket": (
        "histogram",
        b'h_bucket{a="2",le="+Inf"} 1\n',
        b'h_bucket{a="2",le="9"} 1\n',
        "missing_inf_bucket",
    ),
    "count_without_sum": ("histogram", b'h_sum{a="2"} 1\n', b"", "sum_without_count"),
    "sum_without_count": ("histogram", b'h_count{a="2"} 1\n', b"", "sum_without_count"),
    "count_mismatch": ("histogram", b'h_count{a="1"} 2', b'h_count{a="1"} 5', "count_mismatch"),
    "not_cumulative": ("histogram", b'le="0.5"} 1', b'le="0.5"} 3', "not_cumulative"),
    "bucket_not_integer": ("histogram", b'le="0.5"} 1', b'le="0.5"} 1.5', "non_integer_count"),
    "count_not_integer": (
        "histogram",
        b'le="+Inf"} 2\nh_count{a="1"} 2',
        b'le="+Inf"} 2.5e0\nh_count{a="1"} 2.5e0',
        "non_integer_count",
    ),
    "sum_with_negative_buckets": (
        "histogram",
        b'le="0.5"} 1',
        b'le="-0.5"} 1',
        "sum_with_negative_buckets",
    ),
    "quantile_above_one": ("summary", b'quantile="0.9"', b'quantile="1.5"', "quantile_label"),
    "quantile_below_zero": ("summary", b'quantile="0.5"', b'quantile="-0.5"', "quantile_label"),
    "quantile_nan": ("summary", b'quantile="0.9"', b'quantile="NaN"', "quantile_label"),
    # Go's ParseFloat, as expfmt reads a bound: Python's float would take both
    "quantile_with_a_blank": ("summary", b'quantile="0.5"', b'quantile=" 0.5"', "quantile_label"),
    "le_with_an_underscore": ("histogram", b'le="0.5"} 1', b'le="0_5"} 1', "le_label"),
    "quantile_missing": ("summary", b'{a="1",quantile="0.5"}', b'{a="1"}', "quantile_label"),
    "summary_count_not_integer": (
        "summary",
        b's_count{a="1"} 4',
        b's_count{a="1"} 4.5',
        "non_integer_count",
    ),
}


# The cases whose breach the text format carries and Prometheus ingests: the family is kept,
# parsed, for a text answer (exposition.openmetrics_fit), by either validation.
CARRIED = {
    "le_spelled_inf": Misfit.LE_LABEL,
    "bucket_not_integer": Misfit.COUNT_VALUE,
    "count_not_integer": Misfit.COUNT_VALUE,
    "summary_count_not_integer": Misfit.COUNT_VALUE,
    "sum_with_negative_buckets": Misfit.SUM_VALUE,
    "quantile_above_one": Misfit.QUANTILE_LABEL,
    "quantile_below_zero": Misfit.QUANTILE_LABEL,
    "quantile_nan": Misfit.QUANTILE_LABEL,
    "buckets_out_of_order": Misfit.HISTOGRAM_SHAPE,
    "bucket_repeated_le": Misfit.HISTOGRAM_SHAPE,
    "missing_inf_bucket": Misfit.HISTOGRAM_SHAPE,
    "count_without_sum": Misfit.HISTOGRAM_SHAPE,
    "sum_without_count": Misfit.HISTOGRAM_SHAPE,
    "count_mismatch": Misfit.HISTOGRAM_SHAPE,
    "not_cumulative": Misfit.HISTOGRAM_SHAPE,
}


def _payload(kind: str, block: bytes, fmt: Format) -> bytes:
    name = b"h" if kind == "histogram" else b"s"
    head = b"# HELP " + name + b" help\n# TYPE " + name + b" " + kind.encode() + b"\n"
    tail = b'# HELP z help\n# TYPE z gauge\nz{a="1"} 1\n'
    return head + block + tail + (b"# EOF\n" if fmt is Format.OPENMETRICS else b"")


def _served_valid(families: list[AnyFamily], fmt: Format) -> None:
    """Valid in each format the service would answer in: text always, OpenMetrics if it fits."""
    if openmetrics_misfit(families) is None:
        list(parse_om(write_exposition(families, Format.OPENMETRICS).decode()))
    text = write_exposition(families, Format.TEXT)
    list(parse_text(text.decode()))
    promtool_check_metrics(text)
    del fmt


@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("kind", ["histogram", "summary"])
def test_the_valid_block_is_served_unparsed(kind: str, fmt: Format) -> None:
    """The premise of every case below: the fast path takes this block raw."""
    block = HISTOGRAM if kind == "histogram" else SUMMARY
    for caches in (None, CodecCaches()):
        for _ in range(2):
            exposition = read_exposition(_payload(kind, block, fmt), fmt, caches=caches)
            assert exposition.problems == []
            assert isinstance(exposition.families[0], RawFamily)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize(("kind", "old", "new", "reason"), CASES.values(), ids=list(CASES))
def test_a_broken_rule_is_judged_as_full_validation_judges_it(  # noqa: PLR0913, PLR0917 - the table's columns
    kind: str, old: bytes, new: bytes, reason: str, fmt: Format, warm: bool
) -> None:
    """Refused with the same problem, or, where the text format carries it, kept as parsed."""
    valid = HISTOGRAM if kind == "histogram" else SUMMARY
    assert old in valid
    payload = _payload(kind, valid.replace(old, new, 1), fmt)
    caches = CodecCaches()
    if warm:  # the valid block's heads proven and laid out on an earlier scrape
        read_exposition(_payload(kind, valid, fmt), fmt, caches=caches)
    default = read_exposition(payload, fmt, caches=caches)
    full = read_exposition(payload, fmt, Verify.FULL)
    found = [(problem.reason, str(problem)) for problem in default.problems]
    assert found == [(p.reason, str(p)) for p in full.problems]
    names = [family.name for family in default.families]
    if reason == "interleaved_series":
        assert found == []  # Prometheus reads it in either format: the series are regrouped
        assert names == ["h", "z"]
    elif reason in {CASES[name][3] for name in CARRIED} and _carried(kind, old, new):
        assert found == []
        assert names == [kind[0], "z"]
        assert not isinstance(default.families[0], RawFamily)  # its values are looked at
        assert openmetrics_misfit(default.families) is CARRIED[_carried(kind, old, new)]
    else:
        assert [p.reason for p in default.problems] == [reason]
        assert names == ["z"]
    _served_valid(default.families, fmt)


def _carried(kind: str, old: bytes, new: bytes) -> str:
    """The name of the carried case with these columns, or ''."""
    for name in CARRIED:
        if CASES[name][:3] == (kind, old, new):
            return name
    return ""


# Series appended after the heads laid out on an earlier scrape: only the tail is laid out, and
# it must not repeat an earlier series (a summary's tail can: its series need no quantile line).
APPENDED = {
    "new_series": (
        "histogram",
        b'h_bucket{a="3",le="+Inf"} 4\nh_count{a="3"} 4\nh_sum{a="3"} 1\n',
        None,
    ),
    "new_series_broken": ("histogram", b'h_bucket{a="3",le="1"} 4\n', Misfit.HISTOGRAM_SHAPE),
    "last_series_continued": ("histogram", b'h_bucket{a="2",le="9"} 1\n', Misfit.HISTOGRAM_SHAPE),
    "summary_new_series": ("summary", b's{a="2",quantile="1"} 3\ns_count{a="2"} 1\n', None),
}


@pytest.mark.parametrize(("kind", "tail", "misfit"), APPENDED.values(), ids=list(APPENDED))
def test_series_appended_to_a_laid_out_block(kind: str, tail: bytes, misfit: Misfit | None) -> None:
    """Only the tail is laid out; a tail that breaks a point's shape is kept, for a text answer."""
    fmt = Format.OPENMETRICS
    caches = CodecCaches()
    valid = HISTOGRAM if kind == "histogram" else SUMMARY
    read_exposition(_payload(kind, valid, fmt), fmt, caches=caches)
    payload = _payload(kind, valid + tail, fmt)
    default = read_exposition(payload, fmt, caches=caches)
    full = read_exposition(payload, fmt, Verify.FULL)
    found = [(problem.reason, str(problem)) for problem in default.problems]
    assert found == [(p.reason, str(p)) for p in full.problems]
    assert default.problems == []
    assert openmetrics_misfit(default.families) is misfit
    # A block with no misfit is served as its bytes; one with a misfit is parsed, for text.
    assert isinstance(default.families[0], RawFamily) is (misfit is None)
    _served_valid(default.families, fmt)


def _split(family: RawFamily) -> tuple[list[bytes], list[bytes]]:
    parts = bytes(family.body).replace(b"\n", b" \n").split(b" ")
    return parts[0:-1:2], parts[1::2]


@pytest.mark.parametrize("path", TEXT_FIXTURES + OM_FIXTURES, ids=lambda path: path.name)
def test_the_reader_hands_over_each_raw_block_split_as_its_body_splits(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heads and values the reader proved are handed to the screen, not split again: each
    one is its own family's body split, and every raw histogram and summary of a warm read has
    one."""
    handed: list[tuple[list[AnyFamily], dict[int, BlockSplit]]] = []

    def spy(families: list[AnyFamily], fmt: Format, **kwargs: Any) -> Any:
        handed.append((list(families), dict(kwargs.get("splits") or {})))
        return screen_raw(families, fmt, **kwargs)

    monkeypatch.setattr(layout_walk, "screen_raw", spy)
    fmt = Format.OPENMETRICS if path.name.endswith(".om.txt") else Format.TEXT
    caches = CodecCaches()
    for _ in range(2):  # the second read takes every header from the cache: the fast path
        read_exposition(path.read_bytes(), fmt, caches=caches)
    families, splits = handed[-1]
    checked = [f for f in families if isinstance(f, RawFamily) and f.meta.type in CHECKED_TYPES]
    assert {id(f) for f in checked} == set(splits)
    for family in checked:
        split = splits[id(family)]
        assert split.family is family
        assert (split.heads, split.values) == _split(family)


def test_a_split_made_for_another_family_is_not_used() -> None:
    """A split is taken only for the family it was made for: a valid block's split handed for a
    broken one would serve the broken one's bytes as if they fit OpenMetrics."""
    broken = HISTOGRAM.replace(b'h_count{a="1"} 2', b'h_count{a="1"} 7', 1)
    meta = FamilyMeta("h", MetricType.HISTOGRAM, "help")
    target = RawFamily(meta, memoryview(broken), Format.TEXT, 3, broken.count(b"\n"))
    other = RawFamily(meta, memoryview(HISTOGRAM), Format.TEXT, 3, HISTOGRAM.count(b"\n"))
    # The premise: kept, parsed, with the misfit that makes its answer text.
    assert openmetrics_misfit(screen_raw([target], Format.TEXT)[0]) is Misfit.HISTOGRAM_SHAPE
    heads, values = _split(other)
    misplaced = {id(target): BlockSplit(other, heads, values)}
    kept, problems = screen_raw([target], Format.TEXT, splits=misplaced)
    assert problems == []
    assert [type(family) for family in kept] == [Family]
    assert openmetrics_misfit(kept) is Misfit.HISTOGRAM_SHAPE


def _agree_one_by_one(layout: Layout, values: list[bytes], mtype: MetricType) -> bool:
    """What ``values_agree`` decides, spelled out: each value converted where it is used."""
    number = [float(value) for value in values]
    if not all(number[i].is_integer() for i in layout.whole):
        return False
    if mtype is MetricType.SUMMARY:
        return True
    cumulative = all(
        number[a] <= number[b] for a, b in zip(layout.lower, layout.upper, strict=True)
    )
    return cumulative and all(
        number[a] == number[b] for a, b in zip(layout.counts, layout.infs, strict=True)
    )


_SPELLINGS = st.sampled_from(
    [b"0", b"0.0", b"1", b"1.0", b"2", b"2.5", b"3.0", b"1e+06", b"1.5e+06", b"0.25", b"+Inf"]
)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    size=st.integers(min_value=1, max_value=30),
    mtype=st.sampled_from(CHECKED_TYPES),
)
def test_values_agree_decides_as_each_value_checked_one_by_one(
    data: st.DataObject,
    size: int,
    mtype: MetricType,
    compiled: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Converting each distinct spelling once (or in C) decides as converting every value would."""
    if compiled and line_match.values_agree is None:
        pytest.skip("the C line pass is not in use")
    if not compiled:
        monkeypatch.setattr(raw_rules, "compiled_agree", None)
    values = data.draw(st.lists(_SPELLINGS, min_size=size, max_size=size))
    index = st.integers(min_value=0, max_value=size - 1)
    pairs = data.draw(st.lists(st.tuples(index, index), max_size=size))
    ties = data.draw(st.lists(st.tuples(index, index), max_size=3))
    layout = Layout(
        [b""] * size,
        True,  # noqa: FBT003 - the field: "sound"
        data.draw(st.lists(index, max_size=size)),
        [a for a, _ in pairs],
        [b for _, b in pairs],
        [a for a, _ in ties],
        [b for _, b in ties],
    )
    assert values_agree(layout, values, mtype) == _agree_one_by_one(layout, values, mtype)


def _read_signed(
    payload: bytes, fmt: Format, monkeypatch: pytest.MonkeyPatch, *, force: bool
) -> tuple[list[AnyFamily], list[str], bool]:
    """A warm read's families, problems and the ``signed`` the reader gave the screen; with
    ``force``, the screen searches every body whatever the reader said."""
    said: list[bool] = []

    def spy(families: list[AnyFamily], fmt: Format, **kwargs: Any) -> Any:
        said.append(kwargs["signed"])
        return screen_raw(
            families, fmt, **{**kwargs, "signed": True if force else kwargs["signed"]}
        )

    monkeypatch.setattr(layout_walk, "screen_raw", spy)
    caches = CodecCaches()
    read_exposition(payload, fmt, caches=caches)
    exposition = read_exposition(payload, fmt, caches=caches)
    return exposition.families, [str(p) for p in exposition.problems], said[-1]


SIGNED_IN_A_COUNTER = (
    b"# HELP g help\n# TYPE g gauge\n"
    b'g{a="1"} NaN\n'
    b"# HELP c_total help\n# TYPE c_total counter\n"
    b'c_total{a="1"} 2\nc_total{a="2"} -3\n'
)


@pytest.mark.parametrize(
    ("payload", "fmt", "signed"),
    [
        *((path.read_bytes(), Format.TEXT, False) for path in TEXT_FIXTURES),
        (SIGNED_IN_A_COUNTER, Format.TEXT, True),
        (SIGNED_IN_A_COUNTER.replace(b"-3", b"NaN"), Format.TEXT, True),
        (SIGNED_IN_A_COUNTER.replace(b"-3", b"+Inf"), Format.TEXT, True),
        (SIGNED_IN_A_COUNTER.replace(b"-3", b"3"), Format.TEXT, False),
    ],
    ids=[*(path.name for path in TEXT_FIXTURES), "negative", "nan", "inf", "nan_gauge_only"],
)
def test_bodies_are_searched_for_a_signed_value_only_when_the_reader_saw_one(
    payload: bytes, fmt: Format, signed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no proven value starting with a sign, N or I, the screen skips its body search;
    what it serves and refuses is what searching every body gives."""
    families, problems, said = _read_signed(payload, fmt, monkeypatch, force=False)
    assert said is signed
    forced_families, forced_problems, _ = _read_signed(payload, fmt, monkeypatch, force=True)
    assert write_exposition(families, fmt) == write_exposition(forced_families, fmt)
    assert problems == forced_problems
    if payload is SIGNED_IN_A_COUNTER:  # kept whichever way: parsed, for a text answer
        assert problems == []
        counter = next(f for f in families if f.meta.type is MetricType.COUNTER)
        assert isinstance(counter, Family)
        assert openmetrics_misfit(families) is Misfit.COUNTER_VALUE


def test_a_layout_holds_its_own_list_of_the_proven_heads() -> None:
    """A histogram's layout holds a list of its own (no two caches hold one mutable object),
    of the very head objects the proven heads cache holds, not a second copy of each."""
    payload = _payload("histogram", HISTOGRAM, Format.TEXT)
    caches = CodecCaches()
    for _ in range(2):  # the first read proves and lays out the heads; the second reuses them
        read_exposition(payload, Format.TEXT, caches=caches)
    layouts = [layout for layout, _ in caches.raw_layouts._data.values()]
    proven = [heads.heads for heads, _ in caches.proven_heads._data.values()]
    assert len(layouts) == 1
    assert all(layouts[0].heads is not heads for heads in proven)
    shared = [heads for heads in proven if heads == layouts[0].heads]
    assert shared
    assert all(map(operator.is_, layouts[0].heads, shared[0]))
