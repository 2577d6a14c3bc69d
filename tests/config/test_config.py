"""Rules files: every bad config gets its exact messages; the shipped contract covers every row."""

from __future__ import annotations

import itertools
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from helpers.paths import TESTS
from helpers.promtool import promtool_path
from metricbridge.cli.main import main
from metricbridge.config.load import load_config, parse_config
from metricbridge.config.schema import Disposition
from metricbridge.errors import ConfigError
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Family, FamilyMeta, Format, MetricType, Sample
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.series import zero_series
from metricbridge.translation.translate import translate

INVALID = TESTS / "config_invalid"
REPO = TESTS.parent

# Each bad config and the complete list of messages it must produce (line and path included).
EXPECTED: dict[str, list[str]] = {
    "chained_derive": [
        (
            "10: families.sglang:util_share_zero.derive.numerator.family: reads sglang:util, the result "
            "of families.sglang:util (line 3); derives are computed side by side from the families "
            "served before any of them, so one never sees another's result (no chaining)"
        ),
        (
            "18: families.sglang:token_usage_ratio.derive.numerator.family: reads sglang:token_usage, "
            "which families.sglang:token_usage (line 16) drops; derives read the families being served, "
            "and sglang:token_usage is not one of them"
        ),
        (
            "30: families.sglang:num_aborted_requests_total.warm_zero.labels_from: reads "
            "sglang:max_total_num_tokens, which families.sglang:tokens (line 25) renames away "
            "(keep_source: false); warm-zero reads the families being served, and "
            "sglang:max_total_num_tokens is not one of them"
        ),
    ],
    "chained_source": [
        (
            "7: families.sglang:c.source: reads sglang:b, which families.sglang:b (line 3) produces by "
            "alias; alias rules read upstream families only, never another rule's output (no chaining), "
            "so this family would never be served: read the upstream family it reads (sglang:a) instead"
        ),
        (
            "18: families.sglang:e.source: reads sglang:d, which families.sglang:d (line 11) produces by "
            "derive; scale rules read upstream families only, never another rule's output (no chaining), "
            "so this family would never be served"
        ),
    ],
    "kept_source_clash": [
        (
            "7: families.sglang:request_waiting_time.keep_source: keeps upstream sglang:queue_time_seconds, "
            "which clashes on the wire with families.sglang:queue_time_seconds_count (line 3): "
            "'sglang:queue_time_seconds_count' is the sample name of the kept histogram and the family "
            "name of that gauge"
        ),
        (
            "15: families.sglang:cached_tokens: clashes on the wire with upstream "
            "sglang:cached_tokens_total, which families.sglang:prefix_cache_tokens_total (line 11) keeps: "
            "'sglang:cached_tokens' is the family name of this gauge and the OpenMetrics family name of "
            "that counter"
        ),
    ],
    "not_utf8": ["4: cannot read: not UTF-8 (bytes e9: invalid continuation byte)"],
    "template_field_without_template": [
        "5: families.sglang:{stage}_queue_wait_seconds: name uses {stage} but the rule has no 'template'"
    ],
    "unprintable_character": [
        "4: invalid YAML: unacceptable character #x0007: special characters are not allowed"
    ],
    "wire_name_clash": [
        (
            "7: families.sglang:x: clashes on the wire with families.sglang:x_total (line 3): 'sglang:x' "
            "is the family name of this gauge and the OpenMetrics family name of that counter"
        ),
        (
            "15: families.sglang:h_count: clashes on the wire with families.sglang:h (line 11): "
            "'sglang:h_count' is the family name of this gauge and the sample name of that histogram"
        ),
    ],
    "alias_without_source": [
        "3: families.sglang:request_waiting_time: missing required field 'source' while disposition is alias",
    ],
    "bad_regex": [
        (
            "7: families.sglang:cached_tokens_total.relabel[0].regex: cannot compile 'storage([' "
            "as RE2: missing ]: ["
        ),
    ],
    "counter_without_total": [
        "3: families.sglang:num_aborted_requests: a counter's name must end in _total (the name its samples carry)",
    ],
    "duplicate_key": ["7: families.sglang:per_prompt_len: duplicate key (first defined at line 3)"],
    "empty": ["1: the file has no YAML document (it is empty, or only comments)"],
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
    "scale_on_info": [
        "3: families.sglang:build.factor: a scale cannot apply to type info",
        # An info `x` writes the sample `x_info`, so it cannot be served beside a family `x_info`.
        (
            "3: families.sglang:build: clashes on the wire with upstream sglang:build_info, which this "
            "rule keeps: 'sglang:build_info' is the sample name of this info and the family name of "
            "that info"
        ),
    ],
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
            "branches, derive, disposition, factor, help, idle, join, keep_source, match, note, relabel, source, template, "
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


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_every_config_issue_carries_file_and_line(case: str) -> None:
    """Whatever is wrong inside a file, each issue says ``file:line``, so an editor can jump to it."""
    path = INVALID / f"{case}.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    for issue in caught.value.issues:
        assert issue.line is not None, str(issue)
        assert str(issue).startswith(f"{path}:{issue.line}: "), str(issue)


def test_a_clash_on_several_names_is_reported_once() -> None:
    """A summary ``a`` and a counter ``a_total`` share ``a`` and ``a_created``: one issue."""
    text = """
version: 1
families:
  sglang:a_total: {disposition: native, type: counter}
  sglang:a: {disposition: native, type: summary}
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "inline")
    assert [str(issue) for issue in caught.value.issues] == [
        (
            "inline:5: families.sglang:a: clashes on the wire with families.sglang:a_total "
            "(line 4): 'sglang:a' is the family name of this summary and the OpenMetrics family "
            "name of that counter (also 'sglang:a_created')"
        )
    ]


_CLASH_TYPES = [
    MetricType.COUNTER,
    MetricType.GAUGE,
    MetricType.HISTOGRAM,
    MetricType.SUMMARY,
    MetricType.INFO,
    MetricType.GAUGEHISTOGRAM,
]
_CLASH_SUFFIXES = ["", "_total", "_count", "_sum", "_bucket", "_created", "_info", "_gcount", "_x"]
# Refused though both formats accept them: the text format writes a gaugehistogram as a
# histogram (claiming a_count, a_sum) and wire_names claims a counter's or info's OpenMetrics
# name in the text format too. Harmless pairs, and too odd to be worth a finer rule.
_CONSERVATIVE = {
    ("sglang:a", "sglang:a_count_total"),
    ("sglang:a", "sglang:a_sum_total"),
    ("sglang:a", "sglang:a_count"),
    ("sglang:a", "sglang:a_sum"),
}


def _samples(name: str, mtype: MetricType) -> tuple[Sample, ...]:
    """Every kind of sample a family of ``mtype`` writes, ``_created`` included."""

    def one(sample_name: str, labels: tuple[tuple[str, str], ...] = ()) -> Sample:
        return Sample(sample_name, labels, 1.0, "1.0")

    base = name.removesuffix("_total") if mtype is MetricType.COUNTER else name
    by_type = {
        MetricType.COUNTER: (one(name), one(base + "_created")),
        MetricType.HISTOGRAM: (*zero_series(name, mtype, ()), one(base + "_created")),
        MetricType.SUMMARY: (one(base + "_sum"), one(base + "_count"), one(base + "_created")),
        MetricType.INFO: (one(base + "_info"),),
        MetricType.GAUGEHISTOGRAM: (
            one(base + "_bucket", (("le", "+Inf"),)),
            one(base + "_gcount"),
            one(base + "_gsum"),
        ),
    }
    return by_type.get(mtype, (one(name),))


def _exposition_rejected(families: list[Family]) -> bool:
    """Whether promtool refuses the text output or prometheus_client the OpenMetrics output."""
    try:
        list(
            text_string_to_metric_families(write_exposition(families, Format.OPENMETRICS).decode())
        )
    except ValueError:
        return True
    result = subprocess.run(  # noqa: S603 - fixed binary, our own input
        [promtool_path(), "check", "metrics"],
        input=write_exposition(families, Format.TEXT),
        capture_output=True,
        timeout=60,
        check=False,
    )
    return b"parsing error" in result.stdout + result.stderr  # exit 3 alone is lint (colons)


def _config_refuses(
    first: str, first_type: MetricType, second: str, second_type: MetricType
) -> bool:
    text = f"""
version: 1
families:
  {first}: {{disposition: native, type: {first_type}}}
  {second}: {{disposition: native, type: {second_type}}}
"""
    try:
        parse_config(text, "inline")
    except ConfigError:
        return True
    return False


def test_wire_name_clashes_are_exactly_what_promtool_and_prometheus_client_refuse() -> None:
    """Two rows of any types and related names: refused at load if and only if the output is.

    The oracles are independent of family_names: promtool reading the text format and
    prometheus_client the OpenMetrics one, each fed what the bridge's writer writes.
    """
    promtool_path()
    cases = []
    for first_type, second_type, suffix in itertools.product(
        _CLASH_TYPES, _CLASH_TYPES, _CLASH_SUFFIXES
    ):
        first = "sglang:a" + ("_total" if first_type is MetricType.COUNTER else "")
        second = "sglang:a" + suffix + ("_total" if second_type is MetricType.COUNTER else "")
        if first != second:
            cases.append((first, first_type, second, second_type))

    def verdicts(case: tuple[str, MetricType, str, MetricType]) -> tuple[bool, bool]:
        first, first_type, second, second_type = case
        families = [
            Family(FamilyMeta(first, first_type), _samples(first, first_type)),
            Family(FamilyMeta(second, second_type), _samples(second, second_type)),
        ]
        return _config_refuses(*case), _exposition_rejected(families)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(cases, pool.map(verdicts, cases), strict=True))
    missed = [case for case, (refused, rejected) in results.items() if rejected and not refused]
    too_strict = {
        (case[0], case[2])
        for case, (refused, rejected) in results.items()
        if refused and not rejected
    }
    assert missed == []
    assert too_strict == _CONSERVATIVE
    assert sum(rejected for _, rejected in results.values()) > 50  # the oracles do refuse


_CHECKS_OFF = "metricbridge.config.load.check_config"


@pytest.mark.parametrize(
    ("case", "upstream", "served", "never_served"),
    [
        (
            "chained_source",
            b"# TYPE sglang:a gauge\nsglang:a 3\n# TYPE sglang:f gauge\nsglang:f 1\n",
            {"sglang:b", "sglang:d", "sglang:g"},
            {"sglang:c", "sglang:e"},
        ),
        (
            "chained_derive",
            (
                b"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0\n"
                b"# TYPE sglang:token_usage gauge\nsglang:token_usage 0.5\n"
                b"# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens 100\n"
            ),
            {"sglang:util", "sglang:tokens"},
            {
                "sglang:util_share_zero",
                "sglang:token_usage_ratio",
                "sglang:num_aborted_requests_total",
            },
        ),
    ],
)
def test_refused_reads_really_serve_nothing(
    case: str,
    upstream: bytes,
    served: set[str],
    never_served: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the checks off, each rule the chaining check refuses is never served, twice over.

    If translation ever learns to chain, this fails, and the check should be relaxed with it.
    """
    monkeypatch.setattr(_CHECKS_OFF, lambda *_: None)
    rules = compile_rules(load_config(INVALID / f"{case}.yaml"))
    families = read_exposition(upstream, Format.TEXT).families
    info = {"max_running_requests": 8, "max_total_num_tokens": 100}
    first = translate(families, rules, now=0.0, server_info=info)
    second = translate(families, rules, first.state, now=30.0, server_info=info)
    for translation in (first, second):
        names = {family.name for family in translation.families}
        assert served <= names
        assert not never_served & names


def test_derives_and_warm_zero_read_other_rules_outputs() -> None:
    """What the docs promise: a derive sees an alias's output, warm-zero a derive's."""
    config = parse_config(
        """
version: 1
families:
  sglang:b: {disposition: alias, type: gauge, source: sglang:a}
  sglang:d:
    disposition: derive
    type: gauge
    derive:
      op: ratio
      numerator: {family: sglang:b}
      denominator: {server_info: max_running_requests}
  sglang:w_total:
    disposition: native
    type: counter
    warm_zero: {labels_from: sglang:d}
""",
        "inline",
    )
    families = read_exposition(b'# TYPE sglang:a gauge\nsglang:a{k="1"} 3\n', Format.TEXT).families
    out = translate(families, compile_rules(config), server_info={"max_running_requests": 6})
    served = {family.name: family for family in out.families}
    derived = served["sglang:d"]
    warm = served["sglang:w_total"]
    assert isinstance(derived, Family)
    assert isinstance(warm, Family)
    assert [(s.labels, s.value) for s in derived.samples] == [((("k", "1"),), 0.5)]
    assert [(s.labels, s.value) for s in warm.samples] == [((("k", "1"),), 0.0)]


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
    from metricbridge.model.family import Family, FamilyMeta, MetricType, Sample  # noqa: PLC0415
    from metricbridge.translation.compiler import compile_rules  # noqa: PLC0415
    from metricbridge.translation.relabel import relabel  # noqa: PLC0415

    compiled = compile_rules(config).by_input["x_total"][0]
    family = Family(
        FamilyMeta("x_total", MetricType.COUNTER), (Sample("x_total", (("a", "xy"),), 1.0, "1.0"),)
    )
    out, _, _ = relabel(family, compiled.relabel)
    assert dict(out.samples[0].labels)["b"] == "x-y-x$"
