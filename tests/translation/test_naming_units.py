"""translation.naming, unit by unit: restore_escaped and escaped_copies on SGLang 0.5.23 families.

tests/translation/test_naming.py checks the same promises end to end (pipeline, service); here
each function is called on its own, with the naming section compiled as the service does.
"""

from __future__ import annotations

import re

import pytest

from helpers.paths import FIXTURES
from metricbridge.config.load import parse_config
from metricbridge.config.synthesis import NamingConfig
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Format, MetricType
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.naming import escaped_copies, restore_escaped

TP1 = (FIXTURES / "tp1.prom").read_bytes()
ESCAPED_TP1 = re.sub(rb"(?m)^(# (?:HELP|TYPE) )?sglang:", rb"\1sglang_", TP1)
DEFAULT = compile_rules(parse_config("version: 1\n", "t")).naming


def _read(payload: bytes) -> list[AnyFamily]:
    return read_exposition(payload, Format.TEXT).families


def _naming(section: str) -> NamingConfig:
    return compile_rules(parse_config(f"version: 1\nnaming: {section}\n", "t")).naming


def test_restore_escaped_tp1_gives_the_contract_spelling() -> None:
    """Every escaped family of tp1 comes back as the engine wrote it, samples and all."""
    restored, count = restore_escaped(_read(ESCAPED_TP1), DEFAULT)
    original = _read(TP1)
    assert count == len(original)
    assert [f.name for f in restored] == [f.name for f in original]
    assert [f.meta for f in restored] == [f.meta for f in original]
    for mine, theirs in zip(restored, original, strict=True):
        assert _lines(mine) == _lines(theirs)  # not Sample ==: NaN values differ from themselves


def _lines(family: AnyFamily) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    return [(s.name, s.labels, s.raw_value) for s in parse_family(family).samples]


@pytest.mark.parametrize(
    ("payload", "names", "count"),
    [
        pytest.param(
            b"# TYPE sglang:x gauge\nsglang:x 1\n# TYPE sglang_x gauge\nsglang_x 2\n",
            ["sglang:x", "sglang_x"],
            0,
            id="restore_keeps_a_name_both_spellings_have",
        ),
        pytest.param(
            b'# TYPE sglang:h histogram\nsglang:h_bucket{le="+Inf"} 1\nsglang:h_sum 1\n'
            b"sglang:h_count 1\n# TYPE sglang_h_sum gauge\nsglang_h_sum 3\n",
            ["sglang:h", "sglang_h_sum"],
            0,
            id="restore_keeps_a_gauge_that_would_be_a_histogram_sample",
        ),
        pytest.param(
            b"# TYPE sglang_num_requests_total counter\nsglang_num_requests_total 3\n"
            b"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n",
            ["sglang:num_requests_total", "sglang:num_running_reqs"],
            1,
            id="restore_counter_keeps_total",
        ),
        pytest.param(
            b"# TYPE sglang_queue_time_seconds histogram\n"
            b'sglang_queue_time_seconds_bucket{le="+Inf"} 2\n'
            b"sglang_queue_time_seconds_sum 0.5\nsglang_queue_time_seconds_count 2\n",
            ["sglang:queue_time_seconds"],
            1,
            id="restore_histogram_samples_follow",
        ),
        pytest.param(
            b"# TYPE vllm_x gauge\nvllm_x 1\n",
            ["vllm_x"],
            0,
            id="restore_leaves_other_prefixes",
        ),
    ],
)
def test_restore_escaped(payload: bytes, names: list[str], count: int) -> None:
    """Escaped names come back unless that would take a name already served."""
    restored, restored_count = restore_escaped(_read(payload), DEFAULT)
    assert [f.name for f in restored] == names
    assert restored_count == count
    for family in restored:
        prefix = family.name.removesuffix("_total")
        assert all(s.name.startswith(prefix) for s in parse_family(family).samples)


@pytest.mark.parametrize(
    "section",
    [
        pytest.param("{restore_escaped: false}", id="restore_off"),
        pytest.param("{prefix: 'sglang_'}", id="restore_prefix_without_a_colon_has_one_spelling"),
    ],
)
def test_restore_escaped_does_nothing(section: str) -> None:
    """Off, or a prefix whose escaped spelling is itself: the families pass as they came."""
    families = _read(ESCAPED_TP1)
    restored, count = restore_escaped(families, _naming(section))
    assert (restored, count) == (families, 0)


def test_escaped_copies_are_opt_in() -> None:
    """By default no copy; with also_serve_escaped every sglang:x gets a sglang_x copy."""
    families = _read(TP1)
    assert escaped_copies(families, DEFAULT) == []
    copies = escaped_copies(families, _naming("{also_serve_escaped: true}"))
    assert [f.name for f in copies] == [f.name.replace("sglang:", "sglang_", 1) for f in families]
    for copy, family in zip(copies, families, strict=True):
        assert copy.meta.type is family.meta.type
        assert copy.meta.help == family.meta.help
        samples, originals = parse_family(copy).samples, parse_family(family).samples
        assert [s.labels for s in samples] == [s.labels for s in originals]
        assert all(s.name.startswith("sglang_") for s in samples)


def test_escaped_copy_never_duplicates_an_upstream_family() -> None:
    """An escaped name the upstream already serves is not copied onto."""
    families = _read(b"# TYPE sglang:x gauge\nsglang:x 1\n# TYPE sglang_x gauge\nsglang_x 2\n")
    families += _read(b"# TYPE sglang:y_total counter\nsglang:y_total 1\n")
    copies = escaped_copies(families, _naming("{also_serve_escaped: true}"))
    assert [(f.name, f.meta.type) for f in copies] == [("sglang_y_total", MetricType.COUNTER)]
