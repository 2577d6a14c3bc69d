"""Relabel regexes are RE2, as in Prometheus: linear time, POSIX classes, no look-arounds."""

from __future__ import annotations

import time

import pytest

from metricbridge.config.load import parse_config
from metricbridge.errors import ConfigError, RegexError
from metricbridge.model.family import Format
from metricbridge.model.regex import compile_regex
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import render, run_pipeline

RULES = """
version: 1
families:
  sglang:x_total:
    disposition: relabel
    type: counter
    relabel:
      - source_labels: [v]
        regex: "{regex}"
        target_label: matched
        replacement: "yes"
"""


def _translate(regex: str, value: str) -> str:
    rules = compile_rules(parse_config(RULES.replace("{regex}", regex), "rules.yaml"))
    payload = f'# TYPE sglang:x_total counter\nsglang:x_total{{v="{value}"}} 1\n'.encode()
    return render(run_pipeline(payload, Format.TEXT, rules), Format.TEXT).decode()


def test_a_catastrophic_pattern_for_backtracking_is_matched_in_linear_time() -> None:
    """(a+)+$ against thirty a's and a b: seconds to hours with Python's re, microseconds here."""
    started = time.perf_counter()
    out = _translate("(a+)+$", "a" * 30 + "b")
    assert time.perf_counter() - started < 10.0  # a backtracking engine takes hours
    assert 'matched="yes"' not in out
    assert 'matched="yes"' in _translate("(a+)+$", "a" * 30)


def test_posix_classes_match_as_in_prometheus() -> None:
    """[[:digit:]]+ matches "123" (Python's re reads it as a set of ':', 'd', 'g', 'i', 't')."""
    assert 'matched="yes"' in _translate("[[:digit:]]+", "123")
    assert 'matched="yes"' not in _translate("[[:digit:]]+", "digit")


@pytest.mark.parametrize(
    "regex", ["(?=a)a", "(a)\\\\1", "a(?!b)"], ids=["lookahead", "backref", "negative"]
)
def test_syntax_re2_refuses_is_refused_at_load_with_re2s_reason(regex: str) -> None:
    """What Go's regexp (RE2) cannot compile, Prometheus would refuse: so does config check."""
    with pytest.raises(ConfigError) as caught:
        parse_config(RULES.replace("{regex}", regex), "rules.yaml")
    assert "as RE2:" in str(caught.value)


def test_compile_regex_says_why_and_writes_nothing_to_stderr(capfd) -> None:
    """RE2 logs syntax errors through absl by default; the bridge reports them itself."""
    with pytest.raises(RegexError, match="missing \\)"):
        compile_regex("(")
    assert capfd.readouterr().err == ""
