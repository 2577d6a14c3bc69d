"""A short rules file cannot expand into millions of rows, series or YAML values."""

from __future__ import annotations

import time

import pytest

from metricbridge.config.load import parse_config
from metricbridge.errors import ConfigError

FIELDS = "abcdefgh"
# 204 bytes in the original report: 8 template fields, each the same 10 values through one
# YAML alias, make 10^8 rows.
TEMPLATE_BOMB = (
    "version: 1\nx: &v [a, b, c, d, e, f, g, h, i, j]\nfamilies:\n"
    "  sglang:" + "".join(f"{{{f}}}" for f in FIELDS) + ":\n"
    "    disposition: engine\n    template: {" + ", ".join(f"{f}: *v" for f in FIELDS) + "}\n"
)
WARM_BOMB = """version: 1
families:
  sglang:x_total:
    disposition: native
    type: counter
    warm_zero:
      values: {a: &ten ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"],
               b: *ten, c: *ten, d: *ten, e: *ten}
"""
LAUGHS = "version: 1\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)
)


def _issues(text: str) -> str:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "rules.yaml")
    # Refused before expanding, not after: expanded, the laughs are 10^9 nodes (minutes, GiBs).
    assert time.perf_counter() - started < 10.0
    return str(caught.value)


def test_a_template_of_a_hundred_million_rows_is_refused_naming_the_rule() -> None:
    """The row count is computed before expanding, and the issue names the rule and count."""
    message = _issues(TEMPLATE_BOMB)
    assert "families.sglang:{a}{b}{c}{d}{e}{f}{g}{h}.template" in message
    assert "100,000,000 rows (at most 1,000)" in message


def test_warm_zero_values_of_a_hundred_thousand_series_are_refused_at_load() -> None:
    """Passing config check and then exhausting memory on the first scrape is what this stops."""
    message = _issues(WARM_BOMB)
    assert "families.sglang:x_total.warm_zero.values" in message
    assert "100,000 label combinations" in message


def test_nested_yaml_aliases_are_refused_before_they_are_read() -> None:
    """A few hundred bytes of aliases expanding to 10^9 values: one issue, at once."""
    message = _issues(LAUGHS)
    assert "expands to more than 1,000,000 values through its aliases" in message


def test_the_shipped_contract_is_far_inside_every_bound() -> None:
    """Nothing real comes near: the default rules load as before."""
    from metricbridge.config.load import load_config  # noqa: PLC0415

    assert load_config(None).families
