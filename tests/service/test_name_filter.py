"""``name[]`` selection over read families, as prometheus_client's RestrictedRegistry selects.

Cut from the fetch's families, never parsed again, and shared by requests for the same names.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import AnyFamily, Family, Format, RawFamily
from metricbridge.service import name_filter
from metricbridge.service.name_filter import FilteredRenders, select_samples

HISTOGRAM = (
    b"# TYPE h histogram\n"
    b'h_bucket{le="0.1",x="1"} 1\nh_bucket{le="+Inf",x="1"} 2\n'
    b'h_count{x="1"} 2\nh_sum{x="1"} 0.3\n'
    b'h_bucket{le="0.1",x="2"} 0\nh_bucket{le="+Inf",x="2"} 1\n'
    b'h_count{x="2"} 1\nh_sum{x="2"} 0.5\n'
)
COUNTER = b'# TYPE c_total counter\nc_total{a="1"} 1\nc_total{a="2"} 2\n'


def _raw(payload: bytes, fmt: Format = Format.TEXT) -> RawFamily:
    (family,) = read_exposition(payload, fmt).families
    assert isinstance(family, RawFamily)  # the path that cuts lines itself
    return family


def _names(selected: list[AnyFamily]) -> list[str]:
    return [f"{s.name}{dict(s.labels)}" for f in selected for s in parse_family(f).samples]


def test_a_name_selects_its_samples_and_nothing_else() -> None:
    """`h_count` is the counts; `h` is no sample name, so it selects nothing."""
    assert _names(select_samples([_raw(HISTOGRAM)], {"h_count"})) == [
        "h_count{'x': '1'}",
        "h_count{'x': '2'}",
    ]
    assert select_samples([_raw(HISTOGRAM)], {"h"}) == []


def test_a_name_that_is_a_line_prefix_selects_nothing_more() -> None:
    """A name[] value holding a label set is not a sample name: it must not pick a bucket."""
    names = {"h_count", 'h_bucket{le="0.1",x="1"}'}
    assert _names(select_samples([_raw(HISTOGRAM)], names)) == [
        "h_count{'x': '1'}",
        "h_count{'x': '2'}",
    ]


def test_parsed_families_are_filtered_the_same_way() -> None:
    """A family a rule rewrote (parsed samples) follows the same rule as a raw one."""
    family = parse_family(_raw(HISTOGRAM))
    selected = select_samples([family], {"h_count", 'h_bucket{le="0.1"'})
    assert _names(selected) == ["h_count{'x': '1'}", "h_count{'x': '2'}"]


@pytest.mark.parametrize(
    ("payload", "names"),
    [
        (HISTOGRAM, {"h_count"}),
        (HISTOGRAM, {"h_bucket", "h_sum"}),
        (HISTOGRAM, {"h_bucket", "h_sum", "h_count"}),
        (COUNTER, {"c_total"}),
        (COUNTER, {"c"}),
    ],
)
@pytest.mark.parametrize("fmt", list(Format))
def test_a_cut_raw_family_writes_what_its_parsed_samples_write(
    payload: bytes, names: set[str], fmt: Format
) -> None:
    """The bytes served for a raw family are those its selected samples, parsed, would make."""
    raw = _raw(payload)
    parsed = parse_family(raw)
    expected = [
        Family(parsed.meta, samples)
        for samples in [tuple(s for s in parsed.samples if s.name in names)]
        if samples
    ]
    assert write_exposition(select_samples([raw], names), fmt) == write_exposition(expected, fmt)


def test_a_raw_family_whose_every_name_is_asked_for_is_served_whole_unparsed() -> None:
    """Every sample name asked for: the family itself, its body the payload's view; no parse.

    Some of them: a raw family of the lines named, cut from its bytes (not parsed samples).
    """
    raw = _raw(HISTOGRAM)
    (whole,) = select_samples([raw], {"h_bucket", "h_sum", "h_count", "other"})
    assert whole is raw
    (cut,) = select_samples([raw], {"h_sum"})
    assert isinstance(cut, RawFamily)
    assert bytes(cut.body) == b'h_sum{x="1"} 0.3\nh_sum{x="2"} 0.5\n'
    assert cut.sample_count == 2


def test_requests_for_the_same_names_share_one_filtering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight concurrent requests for one set of names: one filtering, one render for all."""
    calls: list[frozenset[str]] = []
    real = name_filter.render_selected

    def counted(*args: Any) -> name_filter.Rendered:
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(name_filter, "render_selected", counted)
    renders = FilteredRenders()
    families = [_raw(HISTOGRAM)]

    async def scrape_all() -> list[name_filter.Rendered]:
        names = frozenset({"h_count"})
        return await asyncio.gather(
            *(renders.get(families, names, Format.TEXT, None) for _ in range(8))
        )

    results = asyncio.run(scrape_all())
    assert len(calls) == 1
    assert renders.made == 1
    assert all(result is results[0] for result in results)
    assert b"".join(results[0]) == b'# TYPE h histogram\nh_count{x="1"} 2\nh_count{x="2"} 1\n'


def test_a_fetch_keeps_few_filtered_renders() -> None:
    """Many distinct name sets: older finished renders are let go, the newest kept."""
    renders = FilteredRenders()
    families = [_raw(HISTOGRAM)]

    async def ask_many() -> None:
        for i in range(3 * name_filter.KEPT_RENDERS):
            await renders.get(families, frozenset({"h_count", f"other{i}"}), Format.TEXT, None)

    asyncio.run(ask_many())
    assert len(renders.renders) <= name_filter.KEPT_RENDERS
    assert renders.made == 3 * name_filter.KEPT_RENDERS
