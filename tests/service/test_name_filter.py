"""``name[]`` selection over read families, as prometheus_client's RestrictedRegistry selects."""

from __future__ import annotations

from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format, RawFamily
from metricbridge.service.name_filter import select_samples

HISTOGRAM = (
    b"# TYPE h histogram\n"
    b'h_bucket{le="0.1",x="1"} 1\nh_bucket{le="+Inf",x="1"} 2\n'
    b'h_count{x="1"} 2\nh_sum{x="1"} 0.3\n'
)


def _selected(payload: bytes, names: set[str], fmt: Format = Format.TEXT) -> list[str]:
    (family,) = read_exposition(payload, fmt).families
    assert isinstance(family, RawFamily)  # the path that reads lines itself
    selected, problems = select_samples([family], names)
    assert not problems
    return [f"{s.name}{dict(s.labels)}" for f in selected for s in f.samples]


def test_a_name_selects_its_samples_and_nothing_else() -> None:
    """`h_count` is the counts; `h` is no sample name, so it selects nothing."""
    assert _selected(HISTOGRAM, {"h_count"}) == ["h_count{'x': '1'}"]
    assert _selected(HISTOGRAM, {"h"}) == []


def test_a_name_that_is_a_line_prefix_selects_nothing_more() -> None:
    """A name[] value holding a label set is not a sample name: it must not pick a bucket."""
    names = {"h_count", 'h_bucket{le="0.1",x="1"}'}
    assert _selected(HISTOGRAM, names) == ["h_count{'x': '1'}"]


def test_parsed_families_are_filtered_the_same_way() -> None:
    """A family a rule rewrote (parsed samples) follows the same rule as a raw one."""
    family = parse_family(read_exposition(HISTOGRAM, Format.TEXT).families[0])
    selected, problems = select_samples([family], {"h_count", 'h_bucket{le="0.1"'})
    assert not problems
    assert [f"{s.name}{dict(s.labels)}" for f in selected for s in f.samples] == [
        "h_count{'x': '1'}"
    ]
