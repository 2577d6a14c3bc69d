"""Typed construction of config objects: refused values, defaults, read-only mappings."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import pytest

from metricbridge.config.load import load_config, parse_config
from metricbridge.config.schema import RelabelAction
from metricbridge.config.synthesis import DeriveOp
from metricbridge.errors import ConfigError


def _issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "t")
    return [f"{issue.line}: {issue.path}: {issue.message}" for issue in caught.value.issues]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            """version: 1
families:
  x_total:
    disposition: relabel
    type: counter
    relabel:
      - action: bogus
        source_labels: [a]
""",
            [
                (
                    "7: families.x_total.relabel[0].action: unknown value 'bogus' "
                    "(expected replace|keep|drop|labelmap|labeldrop|labelkeep)"
                )
            ],
            id="refused_relabel_step_is_an_issue_not_a_crash",
        ),
        pytest.param(
            """version: 1
families:
  sglang:r:
    disposition: derive
    type: gauge
    derive:
      op: ratio_of_deltas
      numerator: {family: sglang:a_total}
      denominator: {server_info: max_running_requests}
""",
            [
                (
                    "9: families.sglang:r.derive.denominator: "
                    "op ratio_of_deltas reads a family here, not a /server_info field"
                )
            ],
            id="rate_of_a_server_info_field_is_refused",
        ),
        pytest.param(
            """version: 1
families:
  sglang:s:
    disposition: derive
    type: gauge
    derive:
      op: server_info
      numerator: {family: sglang:a}
""",
            [
                (
                    "8: families.sglang:s.derive.numerator: "
                    "op server_info reads a /server_info field here, not a family"
                )
            ],
            id="server_info_op_of_a_family_is_refused",
        ),
        pytest.param(
            """version: 1
families:
  sglang:z:
    disposition: derive
    type: gauge
    derive:
      op: share_zero
      numerator: {server_info: max_running_requests}
""",
            [
                (
                    "8: families.sglang:z.derive.numerator: "
                    "op share_zero reads a family here, not a /server_info field"
                )
            ],
            id="share_zero_of_a_server_info_field_is_refused",
        ),
        pytest.param(
            """version: 1
families:
  x_total:
    type: 3
    disposition: native
    note: [a]
""",
            [
                "4: families.x_total.type: expected a string, got int '3'",
                "6: families.x_total.note: expected a string, got a list",
            ],
            id="issues_keep_file_order_whatever_the_field_order",
        ),
        pytest.param(
            """version: 1
idle: {heartbeat_seconds: 0, enabled: 1}
""",
            [
                "2: idle.heartbeat_seconds: must be positive",
                "2: idle.enabled: expected true or false, got int '1'",
            ],
            id="idle_issues_in_file_order",
        ),
    ],
)
def test_refused_values_are_reported(text: str, expected: list[str]) -> None:
    """Each refused value is one issue, in file order; none of them crashes the loader."""
    assert _issues(text) == expected


def test_defaults_come_from_the_dataclasses() -> None:
    """A rule that sets nothing optional reads as the dataclass defaults."""
    config = parse_config(
        """version: 1
families:
  x_total:
    disposition: relabel
    type: counter
    relabel:
      - target_label: b
""",
        "t",
    )
    (rule,) = config.families
    (step,) = rule.relabel
    assert (step.action, step.source_labels, step.separator) == (RelabelAction.REPLACE, (), ";")
    assert (step.regex, step.replacement, step.line) == ("(.*)", "$1", 7)
    assert rule.keep_source is True
    assert rule.factor is None
    assert config.idle.after_seconds == 10.0
    assert config.naming.prefix == "sglang:"


def test_config_mappings_are_read_only() -> None:
    """Frozen config objects hold read-only mappings (MappingProxyType), never a dict."""
    config = load_config()
    mappings: list[Mapping[str, object]] = []
    for rule in config.families:
        mappings.append(rule.match)
        if rule.warm_zero is not None:
            mappings += [rule.warm_zero.defaults, rule.warm_zero.values, rule.warm_zero.set]
        if rule.derive is not None:
            for operand in (rule.derive.numerator, rule.derive.denominator):
                if operand is not None:
                    mappings.append(operand.match)
    assert mappings
    assert all(isinstance(m, MappingProxyType) for m in mappings)
    rule = next(r for r in config.families if r.match)
    with pytest.raises(TypeError):
        rule.match["x"] = "y"  # type: ignore[index]
    assert {r.derive.op for r in config.families if r.derive} == set(DeriveOp)
