"""Rules files: every bad config gets its exact messages; the shipped contract covers every row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import TESTS
from metricbridge.cli import main
from metricbridge.config import Disposition, load_config, parse_config
from metricbridge.errors import ConfigError

INVALID = TESTS / "config_invalid"
REPO = TESTS.parent

# Each bad config and the complete list of messages it must produce (line and path included).
EXPECTED: dict[str, list[str]] = {
    "alias_without_source": [
        "3: families.sglang:request_waiting_time: missing required field 'source' while disposition is alias",
    ],
    "bad_regex": [
        (
            "7: families.sglang:cached_tokens_total.relabel[0].regex: cannot compile 'storage([': "
            "unterminated character set at position 8"
        ),
    ],
    "counter_without_total": [
        "3: families.sglang:num_aborted_requests: a counter's name must end in _total (the name its samples carry)",
    ],
    "duplicate_key": ["7: families.sglang:per_prompt_len: duplicate key (first defined at line 3)"],
    "empty": ["the file is empty"],
    "invalid_yaml": ["5: invalid YAML: expected ',' or ']', but got '<stream end>'"],
    "kept_and_renamed": [
        (
            "3: families.sglang:engine_startup_time.keep_source: keeps sglang:startup_time_seconds, which "
            "families.sglang:startup_seconds (line 8) renames away (keep_source: false)"
        ),
    ],
    "many_issues": [
        "1: version: unsupported version 2 (this release reads 1)",
        "7: families.sglang:a_total.relabel[0]: missing required field 'target_label' while action is replace",
        "7: families.sglang:a_total.relabel[0]: cannot relabel 'le': it shapes the histogram or summary",
        "9: families.sglang:b: missing required field 'match' while disposition is select",
        "13: families.sglang:d: a counter's name must end in _total (the name its samples carry)",
        "13: families.sglang:d.idle: idle zeroing applies to gauges, not to a counter",
    ],
    "missing_version": [
        "1: version: missing required field 'version' (this release reads version 1)"
    ],
    "scale_histogram_negative": [
        (
            "3: families.sglang:kvcache_transfer_time.factor: a negative factor would break a histogram's "
            "monotonic values and bucket order"
        ),
    ],
    "scale_on_info": ["3: families.sglang:build.factor: a scale cannot apply to type info"],
    "template_missing_group": [
        (
            "7: families.sglang:cached_tokens_total.relabel[0].replacement: '${1}_$2' refers to group $2, "
            "but the regex has 1 group(s)"
        ),
    ],
    "two_rules_same_family": [
        "6: families.sglang:mm_embed_batch_size: produced by 2 rules (lines 3, 6)"
    ],
    "unknown_key": [
        (
            "6: families.sglang:request_waiting_time.sorce: unknown key (did you mean 'source'? known keys: "
            "branches, derive, disposition, factor, help, idle, keep_source, match, note, relabel, source, template, "
            "type, unit, warm_zero)"
        ),
        "3: families.sglang:request_waiting_time: missing required field 'source' while disposition is alias",
    ],
    "warm_zero_on_gauge": [
        (
            "3: families.sglang:num_running_reqs.warm_zero: warm-zero is for counters and histograms; a gauge "
            "has no 'not yet happened' state"
        ),
    ],
    "wrong_types": [
        "6: families.sglang:x_total.source: expected a string, got int '42'",
        "7: families.sglang:x_total.keep_source: expected true or false, got str 'no'",
    ],
}


def test_every_invalid_config_has_expectations() -> None:
    """The table and the directory list the same cases, so no bad config goes unchecked."""
    assert sorted(p.stem for p in INVALID.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_invalid_config_reports_every_issue(case: str) -> None:
    """Loading a bad config raises ConfigError with exactly the expected located messages."""
    path = INVALID / f"{case}.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    got = [str(issue).removeprefix(f"{path}:").lstrip() for issue in caught.value.issues]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("case", ["bad_regex", "many_issues"])
def test_config_check_command_exits_2_and_prints_issues(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``metricbridge config check`` prints each issue on stderr and exits 2."""
    assert main(["config", "check", str(INVALID / f"{case}.yaml")]) == 2
    err = capsys.readouterr().err
    for message in EXPECTED[case]:
        assert message in err
    assert f"{len(EXPECTED[case])} issue(s) found" in err


def test_config_check_accepts_the_shipped_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped contract validates, with and without an explicit path."""
    assert main(["config", "check"]) == 0
    assert main(["config", "check", str(REPO / "config" / "aliases.yaml")]) == 0
    assert "OK" in capsys.readouterr().out


def test_unreadable_config_is_a_config_error(tmp_path: Path) -> None:
    """A missing file is reported as a config issue, not a traceback."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_packaged_contract_is_config_aliases_yaml() -> None:
    """The copy inside the package is the repository's config/aliases.yaml."""
    packaged = REPO / "src" / "metricbridge" / "data" / "aliases.yaml"
    assert packaged.read_bytes() == (REPO / "config" / "aliases.yaml").read_bytes()


def _contract_rows() -> list[str]:
    """Family names in the metric table of shared/contract.md (copied into tests/fixtures)."""
    text = (TESTS / "fixtures" / "contract.md").read_text()
    table = text.split("## Metric families", 1)[1].split("## Rows that are not", 1)[0]
    return re.findall(r"^\| ([a-z_{}]+) \|", table, flags=re.MULTILINE)


def test_shipped_contract_covers_every_contract_row() -> None:
    """Every metric row of the contract has a rule, templated stage rows expanded."""
    names = {rule.name for rule in load_config().families}
    rows = _contract_rows()
    assert len(rows) > 50
    for row in rows:
        if "{stage}" in row:
            assert any(
                re.fullmatch("sglang:[a-z_]+" + re.escape(row.split("}", 1)[1]), n) for n in names
            ), row
        else:
            assert f"sglang:{row}" in names, row


def test_shipped_contract_disposition_facts() -> None:
    """Spot checks of dispositions that the fixtures (not the first proposal) decided."""
    rules = {rule.name: rule for rule in load_config().families}
    assert rules["sglang:encoder_num_failed_requests_total"].disposition is Disposition.SELECT
    assert rules["sglang:prealloc_token_usage"].source == "sglang:prealloc_full_token_usage"
    assert rules["sglang:engine_startup_time"].match == {"phase": "tokenizer_e2e"}
    assert rules["sglang:num_running_reqs_offline_batch"].disposition is Disposition.STRUCTURAL
    assert all(rule.keep_source for rule in rules.values())  # the shipped contract aliases


def test_relabel_template_conversion_matches_prometheus_syntax() -> None:
    """``$1``, ``${1}`` and ``${name}`` all expand; ``$$`` is a literal dollar."""
    config = parse_config(
        """
version: 1
families:
  x_total:
    disposition: relabel
    type: counter
    relabel:
      - source_labels: [a]
        regex: "(?P<first>.)(.)"
        target_label: b
        replacement: "${first}-$2-${1}$$"
""",
        "inline",
    )
    from metricbridge.model import Family, FamilyMeta, MetricType, Sample  # noqa: PLC0415
    from metricbridge.ops import relabel  # noqa: PLC0415
    from metricbridge.rules import compile_rules  # noqa: PLC0415

    compiled = compile_rules(config).by_input["x_total"][0]
    family = Family(
        FamilyMeta("x_total", MetricType.COUNTER), (Sample("x_total", (("a", "xy"),), 1.0, "1.0"),)
    )
    out, _, _ = relabel(family, compiled.relabel)
    assert dict(out.samples[0].labels)["b"] == "x-y-x$"
