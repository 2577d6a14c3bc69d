"""``metricbridge rules``: recording rules and relabel configs, checked by promtool and the bridge.

The recording rules are run by ``promtool test rules`` over the series of
``tests/export/every_rule_kind.prom`` and must produce exactly what the bridge serves for the
same exposition (a differential test, with the bridge as the oracle).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from helpers.paths import TESTS
from helpers.promtool import promtool_path
from metricbridge.analysis.promql import analyze
from metricbridge.cli.main import main
from metricbridge.config.load import load_config, parse_config
from metricbridge.config.schema import Config, Disposition
from metricbridge.export.common import Target, go_template, route
from metricbridge.export.prometheus_rules import RuleFormat, export_rules
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Format, Verify
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import run_pipeline

EXPORT = TESTS / "export"
EVERY_KIND = EXPORT / "every_rule_kind.yaml"


def _configs() -> list[pytest.ParameterSet]:
    return [
        pytest.param(None, id="default-contract"),
        pytest.param(EVERY_KIND, id="every-rule-kind"),
    ]


def _promtool(*args: str, cwd: Path) -> str:
    """Run promtool; fail with its output unless it exits 0."""
    result = subprocess.run(  # noqa: S603 - fixed binary, our own files
        [promtool_path(), *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def _body(text: str) -> dict[str, object]:
    return yaml.safe_load(text)


def _records(config: Config, **kwargs: str) -> dict[str, str]:
    groups = _body(export_rules(config, RuleFormat.PROMETHEUS_RULES, **kwargs))["groups"]
    return {rule["record"]: rule["expr"] for group in groups for rule in group["rules"]}


def _header(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))


def _section(header: str, title: str) -> list[str]:
    """The family lines listed under the header section that starts with ``title``."""
    lines = header.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# - {title}"))
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("#     "):
            out.append(line.removeprefix("#     "))
        elif not line.startswith("#   "):
            break
    return out


@pytest.mark.parametrize("path", _configs())
def test_recording_rules_pass_promtool_check_rules(path: Path | None, tmp_path: Path) -> None:
    """The prometheus-rules output is a valid rule file by promtool's own checks."""
    rules = tmp_path / "rules.yml"
    rules.write_text(export_rules(load_config(path), RuleFormat.PROMETHEUS_RULES))
    assert "SUCCESS" in _promtool("check", "rules", str(rules), cwd=tmp_path)


@pytest.mark.parametrize("path", _configs())
def test_relabel_configs_pass_promtool_check_config(path: Path | None, tmp_path: Path) -> None:
    """The relabel output, under a minimal scrape config, passes ``promtool check config``."""
    relabel = _body(export_rules(load_config(path), RuleFormat.RELABEL))
    job = {"job_name": "sglang", "static_configs": [{"targets": ["127.0.0.1:30000"]}], **relabel}
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}, sort_keys=False))
    assert "SUCCESS" in _promtool("check", "config", str(config), cwd=tmp_path)


def _series(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    pairs = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{pairs}}}"


def _samples(families: Sequence[AnyFamily]) -> dict[str, list[dict[str, object]]]:
    """Samples as promtool ``exp_samples`` entries, by series name."""
    out: dict[str, list[dict[str, object]]] = {}
    for family in families:
        for sample in parse_family(family).samples:
            entry = {"labels": _series(sample.name, sample.labels), "value": sample.value}
            out.setdefault(sample.name, []).append(entry)
    return out


def test_recording_rules_compute_what_the_bridge_serves(tmp_path: Path) -> None:
    """Under ``promtool test rules``, every recorded series equals the bridge's translation."""
    config = load_config(EVERY_KIND)
    payload = (EXPORT / "every_rule_kind.prom").read_bytes()
    upstream = _samples(read_exposition(payload, Format.TEXT, Verify.STRUCTURE).families)
    outcome = run_pipeline(payload, Format.TEXT, compile_rules(config))
    assert not outcome.problems
    served = _samples(outcome.translation.families)
    rules = _records(config)
    # Ratios of deltas need two fetches in the bridge: test_ratio_of_deltas_divides_rates.
    deltas = {r.name for r in config.families if r.derive and r.derive.op == "ratio_of_deltas"}
    checked = sorted(set(rules) - deltas)
    assert len(checked) >= 15
    (tmp_path / "rules.yml").write_text(export_rules(config, RuleFormat.PROMETHEUS_RULES))
    inputs = [
        {"series": s["labels"], "values": f"{s['value']!r} {s['value']!r}"}
        for samples in upstream.values()
        for s in samples
    ]
    tests = [
        {"expr": name, "eval_time": "1m", "exp_samples": served.get(name, [])} for name in checked
    ]
    unit = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": tests}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(unit, sort_keys=False))
    assert "SUCCESS" in _promtool("test", "rules", "test.yml", cwd=tmp_path)


def test_ratio_of_deltas_divides_rates(tmp_path: Path) -> None:
    """A ratio of counter deltas is a ratio of rates per group; a flat denominator has no value."""
    (tmp_path / "rules.yml").write_text(
        export_rules(load_config(EVERY_KIND), RuleFormat.PROMETHEUS_RULES)
    )
    unit = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'up:hits_total{tier="device",zone="z1"}', "values": "0+3x10"},
                    {"series": 'up:hits_total{tier="host",zone="z1"}', "values": "0+9x10"},
                    {"series": 'up:requests_total{zone="z1"}', "values": "0+12x10"},
                    {"series": 'up:requests_total{zone="z2"}', "values": "0+6x10"},
                    {"series": 'up:requests_total{zone="z3"}', "values": "5x10"},
                ],
                "promql_expr_test": [
                    {
                        "expr": "test:hit_ratio",
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": 'test:hit_ratio{zone="z1"}', "value": 0.25},
                            {"labels": 'test:hit_ratio{zone="z2"}', "value": 0},
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(unit, sort_keys=False))
    assert "SUCCESS" in _promtool("test", "rules", "test.yml", cwd=tmp_path)


@pytest.mark.parametrize("path", _configs())
def test_every_translating_rule_is_exported_or_listed(path: Path | None) -> None:
    """Each rule that changes what is served is in one output, or named in the headers."""
    config = load_config(path)
    records = _records(config)
    rules_text = export_rules(config, RuleFormat.PROMETHEUS_RULES)
    relabel_text = export_rules(config, RuleFormat.RELABEL)
    relabel_body = yaml.safe_dump(_body(relabel_text))
    for rule, target in ((r, route(config)[r.name]) for r in config.families):
        recorded = any(name.startswith(rule.name.removesuffix("_total")) for name in records)
        listed = f"#     {rule.name}:" in rules_text and f"#     {rule.name}:" in relabel_text
        if target is Target.RECORDING:
            assert recorded or listed, rule.name
        elif target is Target.RELABEL:
            base = re.escape(rule.name.removesuffix("_total"))
            assert re.search(base, relabel_body) or listed, rule.name
        elif target is Target.SIDECAR_ONLY:
            assert listed, rule.name
            assert not recorded, rule.name
        else:
            passed_through = (
                Disposition.NATIVE,
                Disposition.ENGINE,
                Disposition.STRUCTURAL,
                Disposition.APPROXIMATE,  # served (and recorded) only with its profile
            )
            assert rule.disposition in passed_through, rule.name


def test_header_names_what_cannot_be_done_centrally() -> None:
    """The default contract's headers list its warm-zero rows, histogram scale and relabel."""
    config = load_config()
    header = _header(export_rules(config, RuleFormat.PROMETHEUS_RULES))
    warm = [r.name for r in config.families if r.warm_zero is not None]
    assert len(warm) >= 5
    assert _section(header, "warm-zero") == warm
    assert _section(header, "scale of a histogram") == [
        "sglang:kvcache_transfer_time: from sglang:kv_transfer_latency_ms"
    ]
    assert _section(header, "drops, in-place relabels") == [
        "sglang:cached_tokens_total: in-place relabel"
    ]
    assert [line.split(":")[1] for line in _section(header, "derivations from")] == [
        "decode_bs_util",
        "num_max_batchs",
    ]
    assert _section(header, "idle zeroing")
    relabel_header = _header(export_rules(config, RuleFormat.RELABEL))
    assert _section(relabel_header, "warm-zero") == warm
    assert "sglang:request_waiting_time: alias of sglang:queue_time_seconds" in _section(
        relabel_header, "aliases, scales and selects"
    )


def test_steps_without_an_equivalent_are_listed() -> None:
    """labelmap cannot be scoped to one family; keep after a replace is no selector matcher."""
    config = load_config(EVERY_KIND)
    relabel = _section(_header(export_rules(config, RuleFormat.RELABEL)), "relabel steps")
    assert relabel == [
        (
            "up:label_mapped: relabel[0]: labelmap acts on every series of the scrape and cannot "
            "be limited to one family"
        )
    ]
    rules = _section(_header(export_rules(config, RuleFormat.PROMETHEUS_RULES)), "relabel steps")
    assert rules == ["test:late_keep: relabel[1]: keep after a replace"]
    rules_header = _header(export_rules(config, RuleFormat.PROMETHEUS_RULES))
    assert _section(rules_header, "keep_source: false") == [
        "test:phase_a: up:phases stays",
        "test:phase_b: up:phases stays",
    ]
    assert _section(rules_header, "rules whose source") == [
        "test:copy_of_rewritten_total: reads up:rewritten_total after its scrape-time relabel"
    ]


def test_in_place_relabel_is_scoped_to_its_family() -> None:
    """The escaped spelling is restored first. The cache_source rewrite reads another family's
    storage_backend (a join), which a scrape-time step cannot see: listed, not exported."""
    text = export_rules(load_config(), RuleFormat.RELABEL)
    steps = _body(text)["metric_relabel_configs"]
    assert steps == [
        {
            "source_labels": ["__name__"],
            "regex": "sglang_(.+)",
            "target_label": "__name__",
            "replacement": "sglang:${1}",
        },
    ]
    assert "sglang:cached_tokens_total" in text
    assert "read labels of another family" in text


def test_anchors_of_a_relabel_regex_are_carried_over_or_refused(tmp_path: Path) -> None:
    """Placed after the family's name, a leading ^ or trailing $ would never match in Prometheus:
    they are dropped (no-ops in a whole-value match); an anchor inside is listed, not exported."""
    path = tmp_path / "anchors.yaml"
    path.write_text(
        """
version: 1
families:
  up:anchored:
    disposition: relabel
    type: gauge
    relabel:
      - {source_labels: [e], regex: "^e1$", target_label: e, replacement: E}
  up:inside:
    disposition: relabel
    type: gauge
    relabel:
      - {source_labels: [e], regex: "a^b", target_label: e, replacement: E}
"""
    )
    export = export_rules(load_config(path), RuleFormat.RELABEL)
    steps = _body(export)["metric_relabel_configs"]
    assert [step["regex"] for step in steps][-1:] == ["up:anchored;(?:e1)"]
    message = "regex 'a^b': an anchor (^) inside it cannot be placed after the family's name"
    assert _section(_header(export), "relabel steps") == [
        f"up:inside: {message} in one Prometheus regex"
    ]


def test_select_drops_the_selecting_label_and_scale_divides() -> None:
    """Selects aggregate the matched label away; a 1/N factor divides, as the bridge does."""
    records = _records(load_config())
    assert records["sglang:engine_startup_time"] == (
        'max without (phase) (sglang:startup_time_seconds{phase="tokenizer_e2e"})'
    )
    scaled = "sglang:encoder_cache_size_mb * 1048576"
    assert records["sglang:encoder_cache_used_bytes"] == scaled
    every = _records(load_config(EVERY_KIND))
    assert every["test:scaled_counter_seconds_total"] == "up:busy_ms_total / 1000"
    assert [n for n in records if n.startswith("sglang:request_waiting_time")] == [
        "sglang:request_waiting_time_bucket",
        "sglang:request_waiting_time_sum",
        "sglang:request_waiting_time_count",
    ]


def test_match_reaches_every_selector() -> None:
    """``--match`` lands in every selector, so sidecar pods are not translated twice."""
    records = _records(load_config(), matchers='job="sglang-raw"')
    for record, expr in records.items():
        selectors = analyze(expr).selectors
        assert selectors, record
        for selector in selectors:
            assert 'job="sglang-raw"' in [str(m) for m in selector.matchers], (record, expr)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param("$1x", "${1}x", id="digit-then-letter-stays-group-1"),
        pytest.param("${name}-$2", "${name}-${2}", id="named-and-numbered"),
        pytest.param("cost$$", "cost$$", id="escaped-dollar-kept"),
        pytest.param("plain", "plain", id="no-reference"),
    ],
)
def test_go_template_braces_references(template: str, expected: str) -> None:
    """Group references are braced so Go's Expand reads them as the bridge does."""
    assert go_template(template) == expected


def test_cli_prints_rules_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """``metricbridge rules`` writes the file to stdout."""
    assert main(["rules", "--format", "relabel"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Generated by `metricbridge rules --format relabel`")
    assert "metric_relabel_configs:" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--format", "relabel", "--match", 'job="x"'],
            "--match and --rate-window apply to --format prometheus-rules only",
            id="match-with-relabel",
        ),
        pytest.param(
            ["--format", "prometheus-rules", "--match", 'job="x"} or up{'],
            "expected label matchers only",
            id="matchers-that-escape-the-selector",
        ),
        pytest.param(
            ["--format", "prometheus-rules", "--rate-window", "five"],
            "cannot use rate window 'five'",
            id="bad-window",
        ),
        pytest.param(
            ["--format", "prometheus-rules", "--rate-window", "10"],
            "cannot use rate window '10': expected a duration such as 5m",
            id="window-without-a-unit",  # Prometheus 3 reads seconds; promtool 2 refuses it
        ),
        pytest.param(
            ["--format", "prometheus-rules", "--match", '"job"="x"'],
            "expected plain matchers",
            id="quoted-label-name",
        ),
        pytest.param(
            ["--format", "prometheus-rules", "--match", 'job="x" or job="y"'],
            "expected plain matchers",
            id="or-of-matchers",
        ),
        pytest.param(
            ["--format", "prometheus-rules", "-c", str(TESTS / "nope.yaml")],
            "cannot read",
            id="missing-config",
        ),
    ],
)
def test_cli_refuses_bad_input_with_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unusable flags or rules files exit 2 with the reason on stderr."""
    assert main(["rules", *args]) == 2
    assert message in capsys.readouterr().err


def test_approximations_are_recorded_only_with_their_profile() -> None:
    """Ratios of rate()s, as ratio_of_deltas derives are; `!=` for an excluded label value."""
    from metricbridge.config.load import load_config  # noqa: PLC0415
    from metricbridge.export.prometheus_rules import RuleFormat, export_rules  # noqa: PLC0415

    plain = export_rules(load_config(), RuleFormat.PROMETHEUS_RULES, "", "5m")
    assert "record: sglang:run_batch_time" not in plain
    text = export_rules(
        load_config(profiles=["approximations"]), RuleFormat.PROMETHEUS_RULES, "", "5m"
    )
    assert "record: sglang:run_batch_time" in text
    assert 'sglang:scheduler_stage_seconds_total{category!="idle",category!="run_batch"}' in text
    assert "rate(sglang:dp_attention_sync_wait_seconds_sum[5m])" in text
    assert "* 1000000" in text


def test_a_step_without_source_labels_is_decided_as_re2_reads_its_regex() -> None:
    """Decided at export against "": [[:digit:]]* matches it in RE2 (the bridge, Prometheus),
    not in Python's re, which reads a set of ':digt' and a literal ']'. So the label is set."""
    from metricbridge.export.relabel import relabel_configs  # noqa: PLC0415

    config = parse_config(
        """
version: 1
families:
  sglang:num_requests_total:
    disposition: relabel
    type: counter
    relabel:
      - source_labels: []
        regex: "[[:digit:]]*"
        target_label: origin
        replacement: bridge
""",
        "rules.yaml",
    )
    steps = relabel_configs(config).document["metric_relabel_configs"]
    assert any(
        step.get("target_label") == "origin" and step.get("replacement") == "bridge"  # type: ignore[union-attr]
        for step in steps  # type: ignore[union-attr]
    )
