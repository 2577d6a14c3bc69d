"""Hypothesis property tests of the read -> translate -> write pipeline (STYLE.md section 6).

Inputs come from ``strategies.py``, rendered by its own small renderer (never metricbridge's
writer); prometheus_client's text and OpenMetrics parsers are the oracles.

Properties, one test each, with the examples each runs:

- 0 the strategies' renderer writes what the oracles read back as generated: 100
- 1 empty rules are the identity on the samples: 150
- 2 output always re-parses, both output formats, inputs of either format: 150
- 3 no duplicate series, aliases onto families upstream already serves included: 150
- 4 renames and aliases never lose a sample: 150
- 5 scale(k) then scale(1/k) restores counter, gauge, histogram and summary values: 150
- 6 validation ``structure`` (fast path) and ``full`` write identical bytes: 150
- 7 the reader raises only ExpositionError on arbitrary bytes (300) and on mutated valid
  expositions (300); what a full parse accepts without problems re-parses after writing (200)

In total 1,800 generated examples per run, plus the explicit reproducers at the end; the
module takes 20-30 seconds on the development machine.

Bugs found are pinned as ``xfail(strict=True)`` reproducers at the end of this module. The
properties step around each one with a named strategy flag (``input_flags`` and the comments
next to each flag name the reproducer), so they keep guarding everything else while the bug is
open. Remove the flag together with the ``xfail`` when fixing one.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.strategies import (
    SCALABLE_KINDS,
    Fam,
    Rule,
    SampleKey,
    config_text,
    expected_samples,
    expositions,
    factors,
    junk,
    mutate,
    render,
    rule_sets,
    value_key,
)
from helpers.strength import examples
from metricbridge.config.load import parse_config
from metricbridge.errors import ExpositionError
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format, MetricType, Verify, sample_base
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import Outcome, run_pipeline
from metricbridge.translation.pipeline import render as mb_render

EMPTY = "version: 1\n"
FORMATS = st.sampled_from(list(Format))
COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# On a failure Hypothesis imports libcst (to suggest an @example patch), which warns through
# mypy_extensions; under the project's filterwarnings=error that hides the real failure.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


# --- helpers ------------------------------------------------------------------------------


def compiled(config: str, verify: Verify = Verify.STRUCTURE) -> CompiledRules:
    """Rules from YAML text, with the reader's validation mode forced."""
    rules = compile_rules(parse_config(config, "<hypothesis>"))
    return dataclasses.replace(rules, validation=verify)


def run(payload: bytes, in_fmt: Format, rules: CompiledRules) -> Outcome:
    """The pipeline, asserting that a valid input raised no problem."""
    outcome = run_pipeline(payload, in_fmt, rules)
    assert not outcome.problems, outcome.problems
    return outcome


def oracle(payload: bytes, fmt: Format) -> list:
    """prometheus_client's parser for the format, run to completion."""
    parse = parse_text if fmt is Format.TEXT else parse_om
    return list(parse(payload.decode()))


def oracle_samples(payload: bytes, fmt: Format) -> Counter[SampleKey]:
    """The (name, sorted labels, value) multiset prometheus_client reads from a payload."""
    return Counter(
        (s.name, tuple(sorted(s.labels.items())), value_key(s.value))
        for family in oracle(payload, fmt)
        for s in family.samples
    )


def oracle_metadata(payload: bytes, fmt: Format) -> dict[str, tuple[str, str, str]]:
    """Type, HELP and unit of each family with samples, as prometheus_client reads them."""
    return {f.name: (f.type, f.documentation, f.unit) for f in oracle(payload, fmt) if f.samples}


def sample_lines(payload: bytes) -> int:
    """Sample lines in a payload (everything but comments and blank lines)."""
    return sum(1 for line in payload.split(b"\n") if line and not line.startswith(b"#"))


def assert_no_duplicate_series(payload: bytes, fmt: Format) -> None:
    """Every series appears once; the OpenMetrics parser silently drops adjacent repeats, so
    the parsed sample count must also equal the number of sample lines."""
    series = [
        (s.name, tuple(sorted(s.labels.items())))
        for family in oracle(payload, fmt)
        for s in family.samples
    ]
    assert len(series) == sample_lines(payload), "the parser dropped repeated lines"
    repeated = [key for key, n in Counter(series).items() if n > 1]
    assert not repeated, repeated


def reread(output: bytes, fmt: Format) -> None:
    """metricbridge's own full parse reads its output without problems."""
    if not output and fmt is Format.TEXT:
        return  # test_empty_text_output_is_refused_by_the_reader
    assert not read_exposition(output, fmt, Verify.FULL).problems


def only(samples: Counter[SampleKey], names: set[str]) -> Counter[SampleKey]:
    """The samples whose name is in ``names``."""
    return Counter({key: n for key, n in samples.items() if key[0] in names})


def input_flags(in_fmt: Format, *out_fmts: Format) -> dict[str, bool]:
    """Strategy flags that once stepped around open bugs; every one is fixed, so all are on."""
    del in_fmt, out_fmts
    return {"created": True, "trailing_comma": True}


def draw_input(
    data: st.DataObject, in_fmt: Format, *out_fmts: Format, **flags: object
) -> list[Fam]:
    """Families for an input format that is read and written as ``out_fmts`` (``input_flags``)."""
    fams = data.draw(expositions(**{**input_flags(in_fmt, *out_fmts), **flags}))
    # A 0-byte text exposition is refused on purpose ("empty exposition", a truncated body).
    assume(render(fams, in_fmt))
    return fams


@st.composite
def cases(draw: st.DrawFn, **flags: object) -> tuple[list[Fam], Format, Format]:
    """Non-empty families with an input and an output format (see ``input_flags``)."""
    in_fmt, out_fmt = draw(FORMATS), draw(FORMATS)
    fams = draw_input(draw(st.data()), in_fmt, out_fmt, **flags)
    return fams, in_fmt, out_fmt


# --- 0. the strategies themselves ---------------------------------------------------------


@settings(COMMON, max_examples=examples(100))
@given(fams=expositions(), fmt=FORMATS)
def test_strategies_render_what_they_generated(fams, fmt):
    """The independent renderer writes expositions the oracle reads as exactly the samples drawn."""
    payload = render(fams, fmt)
    assert oracle_samples(payload, fmt) == expected_samples(fams)


# --- 1. identity --------------------------------------------------------------------------


@settings(COMMON, max_examples=examples(150))
@given(case=cases())
def test_empty_rules_are_the_identity_on_samples(case):
    """With a rules file of just ``version: 1``, the output holds the input's samples (and metadata)."""
    fams, in_fmt, out_fmt = case
    payload = render(fams, in_fmt)
    output = mb_render(run(payload, in_fmt, compiled(EMPTY)), out_fmt)
    assert oracle_samples(output, out_fmt) == oracle_samples(payload, in_fmt)
    if in_fmt is out_fmt:  # metadata too (across formats the oracles normalise it differently)
        assert oracle_metadata(output, out_fmt) == oracle_metadata(payload, in_fmt)


# --- 2. output re-parses ------------------------------------------------------------------


@settings(COMMON, max_examples=examples(150))
@given(case=cases(), data=st.data())
def test_output_always_reparses(case, data):
    """Whatever the rules, prometheus_client's parser for the output format accepts the output."""
    fams, in_fmt, out_fmt = case
    rules = data.draw(rule_sets(fams))
    outcome = run(render(fams, in_fmt), in_fmt, compiled(config_text(rules)))
    output = mb_render(outcome, out_fmt)
    oracle(output, out_fmt)
    reread(output, out_fmt)


# --- 3. no duplicate series ---------------------------------------------------------------


@settings(COMMON, max_examples=examples(150))
@given(case=cases(), data=st.data())
def test_no_duplicate_series_and_native_family_wins(case, data):
    """No series is written twice, and an alias onto a name upstream serves leaves it untouched."""
    fams, in_fmt, out_fmt = case
    rules = data.draw(rule_sets(fams, ops=("alias", "alias", "alias", "select", "relabel")))
    payload = render(fams, in_fmt)
    output = mb_render(run(payload, in_fmt, compiled(config_text(rules))), out_fmt)
    assert_no_duplicate_series(output, out_fmt)
    by_name = {fam.name: fam for fam in fams}
    for rule in rules:
        if rule.target_exists:
            names = by_name[rule.name].sample_names()
            before = only(oracle_samples(payload, in_fmt), names)
            assert only(oracle_samples(output, out_fmt), names) == before, rule


# --- 4. renames and aliases keep every sample ---------------------------------------------


def _renamed(fam: Fam, rule: Rule) -> Counter[SampleKey]:
    new_base = sample_base(rule.name, MetricType(rule.type))
    return Counter(
        (new_base + line.suffix, tuple(sorted(line.labels)), value_key(line.value))
        for line in fam.lines
    )


@settings(COMMON, max_examples=examples(150))
@given(data=st.data())
def test_renames_and_aliases_never_lose_a_sample(data):
    """Each source sample appears under the new name (and, if kept, the old) unchanged."""
    in_fmt, out_fmt = data.draw(FORMATS), data.draw(FORMATS)
    fams = draw_input(data, in_fmt, out_fmt)
    rules = data.draw(rule_sets(fams, ops=("alias",), existing_targets=False, type_mismatch=False))
    payload = render(fams, in_fmt)
    output = mb_render(run(payload, in_fmt, compiled(config_text(rules))), out_fmt)
    expected = expected_samples(fams)
    for rule in rules:
        assert rule.source_fam is not None
        expected += _renamed(rule.source_fam, rule)
        if not rule.keep_source:
            expected -= expected_samples([rule.source_fam])
    assert oracle_samples(output, out_fmt) == expected


# --- 5. scale round trip ------------------------------------------------------------------


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-9)


def _by_series(samples: Counter[SampleKey]) -> dict[tuple[str, tuple], list[tuple[float, float]]]:
    """Group by name and labels without ``le``; each series as sorted (le, value) pairs."""
    out: dict[tuple[str, tuple], list[tuple[float, float]]] = {}
    for (name, labels, value), n in samples.items():
        le = dict(labels).get("le")
        rest = tuple(pair for pair in labels if pair[0] != "le")
        key = float(le) if le is not None else 0.0
        value_f = math.nan if value == "NaN" else float(value)
        out.setdefault((name, rest), []).extend([(key, value_f)] * n)
    return {k: sorted(v) for k, v in out.items()}


@settings(COMMON, max_examples=examples(150))
@given(data=st.data())
def test_scale_then_inverse_scale_is_identity(data):
    """Scaling a family by k, then its output by 1/k, restores its values and ``le`` bounds."""
    in_fmt, mid_fmt, out_fmt = data.draw(FORMATS), data.draw(FORMATS), data.draw(FORMATS)
    # A text stage read into a later OpenMetrics stage counts as text -> OpenMetrics.
    flags = input_flags(in_fmt, mid_fmt, out_fmt)
    if mid_fmt is Format.TEXT and out_fmt is Format.OPENMETRICS:
        flags = input_flags(mid_fmt, out_fmt)
    fams = data.draw(expositions(kinds=SCALABLE_KINDS, min_size=1, bounded=True, **flags))
    assume(render(fams, in_fmt))
    with_samples = [fam for fam in fams if fam.lines and fam.kind in SCALABLE_KINDS]
    assume(with_samples)
    source = data.draw(st.sampled_from(with_samples))
    factor = data.draw(factors(source.kind))
    target_base = "scaled_" + source.base.replace(":", "_")
    assume(target_base not in {fam.base for fam in fams})
    target = target_base + "_total" if source.kind == "counter" else target_base
    forward = Rule(target, "scale", source.kind, source.name, keep_source=False, factor=factor)
    back = Rule(source.name, "scale", source.kind, target, keep_source=False, factor=1 / factor)

    payload = render(fams, in_fmt)
    middle = mb_render(run(payload, in_fmt, compiled(config_text([forward]))), mid_fmt)
    final = mb_render(run(middle, mid_fmt, compiled(config_text([back]))), out_fmt)

    names = source.sample_names()
    before, after = oracle_samples(payload, in_fmt), oracle_samples(final, out_fmt)
    others = {key[0] for key in before + after} - names
    assert only(after, others) == only(before, others), "families the rules do not name changed"
    want, got = _by_series(only(before, names)), _by_series(only(after, names))
    assert want.keys() == got.keys()
    for key, pairs in want.items():
        assert len(pairs) == len(got[key]), key
        for (le_a, v_a), (le_b, v_b) in zip(pairs, got[key], strict=True):
            assert _close(le_a, le_b), (key, le_a, le_b)
            assert _close(v_a, v_b), (key, v_a, v_b, factor)


# --- 6. fast path == full parse -----------------------------------------------------------


@settings(COMMON, max_examples=examples(150))
@given(data=st.data())
def test_fast_path_and_full_parse_write_identical_bytes(data):
    """Validation ``structure`` and ``full`` translate a valid input to the same bytes."""
    in_fmt, out_fmt = data.draw(FORMATS), data.draw(FORMATS)
    # Non-canonical spellings off: test_fast_path_keeps_spellings_a_full_parse_rewrites.
    flags = {"lax": False, "trailing_comma": False, "empty_braces": False}
    fams = draw_input(data, in_fmt, out_fmt, **flags)
    config = config_text(data.draw(rule_sets(fams)))
    payload = render(fams, in_fmt)
    fast = mb_render(run(payload, in_fmt, compiled(config, Verify.STRUCTURE)), out_fmt)
    full = mb_render(run(payload, in_fmt, compiled(config, Verify.FULL)), out_fmt)
    assert fast == full


# --- 7. robustness of the reader ----------------------------------------------------------


def _read_everything(payload: bytes, rules_text: str) -> None:
    """Run reader, translation and writer in every mode; only ExpositionError may escape."""
    for fmt in Format:
        for verify in Verify:
            rules = compiled(rules_text, verify)
            try:
                outcome = run_pipeline(payload, fmt, rules)
            except ExpositionError:
                continue
            for out_fmt in Format:
                mb_render(outcome, out_fmt)


@settings(COMMON, max_examples=examples(300))
@given(payload=junk())
def test_reader_raises_only_exposition_error_on_arbitrary_bytes(payload):
    """Arbitrary bytes either read (with problems listed) or raise ExpositionError, nothing else."""
    _read_everything(payload, EMPTY)


@settings(COMMON, max_examples=examples(300))
@given(data=st.data())
def test_reader_raises_only_exposition_error_on_mutated_expositions(data):
    """Truncated, flipped, shortened, padded or line-duplicated input never crashes the pipeline."""
    fams = data.draw(expositions(min_size=1))
    fmt = data.draw(FORMATS)
    payload = data.draw(mutate(render(fams, fmt)))
    rules = data.draw(rule_sets(fams))
    _read_everything(payload, config_text(rules))


@settings(COMMON, max_examples=examples(200))
@given(data=st.data())
def test_payload_accepted_without_problems_reparses_after_writing(data):
    """If a full parse reads a (possibly mutated) payload without problems, so does re-reading the
    output in either format, and prometheus_client accepts the output if it accepted the input."""
    fmt = data.draw(FORMATS)
    fams = data.draw(expositions(min_size=1, **input_flags(fmt, *Format)))
    payload = render(fams, fmt)
    if data.draw(st.booleans()):
        payload = data.draw(mutate(payload))
    try:
        outcome = run_pipeline(payload, fmt, compiled(EMPTY, Verify.FULL))
    except ExpositionError:
        return
    assume(not outcome.problems)
    for out_fmt in Format:
        reread(mb_render(outcome, out_fmt), out_fmt)
    try:
        oracle(payload, fmt)
    except (ValueError, KeyError, IndexError, TypeError):
        return  # the oracle refuses the input itself; nothing to compare
    oracle(mb_render(outcome, fmt), fmt)


# --- reproducers: bugs the properties found ------------------------------------------------
#
# Fixed ones stay as regression tests. Open ones are xfail(strict=True); the properties step
# around them with the strategy flags named in ``input_flags`` and next to each flag.


def test_a_counter_creation_time_of_another_series_survives_a_round_trip() -> None:
    """The property's find: OpenMetrics allows a counter series with only ``_created``; written
    as text and read back, it must come through without a problem (histograms may not)."""
    payload = (
        b'# TYPE a counter\na_total{a="x",c="y"} 0.0\na_created{a="x",b="y"} 1000000000.0\n# EOF\n'
    )
    outcome = run_pipeline(payload, Format.OPENMETRICS, compiled(EMPTY, Verify.FULL))
    assert not outcome.problems
    for out_fmt in Format:
        reread(mb_render(outcome, out_fmt), out_fmt)


def _translate(payload: bytes, in_fmt: Format, out_fmt: Format, config: str = EMPTY) -> bytes:
    return mb_render(run_pipeline(payload, in_fmt, compiled(config)), out_fmt)


def _text_counter_with_created(*label_values: str) -> bytes:
    """What prometheus_client's text format writes for a counter (created series on by default)."""
    series = [f'{{a="{v}"}}' for v in label_values] or [""]
    return (
        b"# TYPE foo_total counter\n"
        + b"".join(f"foo_total{s} 1.0\n".encode() for s in series)
        + b"# TYPE foo_created gauge\n"
        + b"".join(f"foo_created{s} 1.7e+09\n".encode() for s in series)
    )


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_text_counter_with_created(), id="one-series"),
        pytest.param(_text_counter_with_created("1", "2"), id="two-series"),
    ],
)
def test_text_created_family_reparses_as_openmetrics(payload):
    """prometheus_client's own text output (counter + `_created` gauge) re-parses as OpenMetrics."""
    output = _translate(payload, Format.TEXT, Format.OPENMETRICS)
    assert oracle_samples(output, Format.OPENMETRICS) == oracle_samples(payload, Format.TEXT)


def test_text_created_series_follow_a_renamed_family():
    """A renamed text counter's `_created` series follow it to the new name (was left behind)."""
    config = config_text([Rule("bar_total", "alias", "counter", "foo_total", keep_source=False)])
    output = _translate(_text_counter_with_created(), Format.TEXT, Format.TEXT, config)
    assert {key[0] for key in oracle_samples(output, Format.TEXT)} == {"bar_total", "bar_created"}


@pytest.mark.parametrize(
    ("fmt", "payload"),
    [
        pytest.param(Format.TEXT, b'# TYPE a:b gauge\na:b{x="1"} 1\na_b{x="1"} 2\n', id="text"),
        pytest.param(
            Format.OPENMETRICS,
            b'# TYPE a:b gauge\na:b{x="1"} 1\na_b{x="1"} 2\n# EOF\n',
            id="openmetrics",
        ),
    ],
)
def test_headerless_family_named_like_escaped_sibling_stays_separate(fmt, payload):
    """A header-less `a_b` after `a:b` is its own family (was merged into a:b, doubling a series)."""
    output = _translate(payload, fmt, fmt)
    assert oracle_samples(output, fmt) == oracle_samples(payload, fmt)
    assert_no_duplicate_series(output, fmt)


def test_openmetrics_family_without_metadata_after_typed_family_is_served():
    """OpenMetrics allows a family with no descriptors; both families are served (were dropped)."""
    payload = b"# TYPE a gauge\na 1\nb 2\n# EOF\n"
    oracle(payload, Format.OPENMETRICS)  # valid: prometheus_client reads gauge a and unknown b
    outcome = run(payload, Format.OPENMETRICS, compiled(EMPTY))
    assert [family.name for family in outcome.translation.families] == ["a", "b"]


@pytest.mark.parametrize(
    "label_value",
    [
        pytest.param("not a name", id="invalid-label-name"),
        pytest.param("le", id="reserved-le"),
        pytest.param("quantile", id="reserved-quantile"),
        pytest.param("__name__", id="reserved-__name__"),
    ],
)
def test_relabel_template_target_label_is_validated(label_value):
    """A `target_label: $1` that expands to an unusable name leaves the series unchanged."""
    payload = (
        "# TYPE h histogram\n"
        f'h_bucket{{k="{label_value}",le="1"}} 1\n'
        f'h_bucket{{k="{label_value}",le="+Inf"}} 1\n'
        f'h_count{{k="{label_value}"}} 1\n'
        f'h_sum{{k="{label_value}"}} 1\n'
    ).encode()
    step = {"source_labels": ["k"], "target_label": "$1", "replacement": "9"}
    config = config_text([Rule("h", "relabel", "histogram", relabel=(step,))])
    output = _translate(payload, Format.TEXT, Format.TEXT, config)
    assert oracle_samples(output, Format.TEXT) == oracle_samples(payload, Format.TEXT)


@pytest.mark.parametrize("verify", list(Verify))
def test_scale_with_non_numeric_le_is_a_problem_not_a_crash(verify):
    """A malformed ``le`` under a scale rule drops the scaled family with a problem (was ValueError)."""
    payload = (
        b'# TYPE h histogram\nh_bucket{le="abc"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n'
    )
    rule = Rule("h2", "scale", "histogram", "h", keep_source=False, factor=2.0)
    outcome = run_pipeline(payload, Format.TEXT, compiled(config_text([rule]), verify))
    assert outcome.problems
    assert "h2" not in {family.name for family in outcome.translation.families}


@pytest.mark.parametrize(
    ("fmt", "payload", "help_text"),
    [
        pytest.param(
            Format.OPENMETRICS,
            b"# HELP a \\q\n# TYPE a gauge\na 1\n# EOF\n",
            "\\q",
            id="om-help",
        ),
        pytest.param(Format.OPENMETRICS, b"# HELP a x\\\n# EOF\n", "x\\", id="om-help-trailing"),
        pytest.param(Format.TEXT, b"# HELP a x\\q\n# TYPE a gauge\na 1\n", "x\\q", id="text-help"),
    ],
)
def test_undefined_escape_in_header_is_kept_as_written(fmt, payload, help_text):
    """``\\q`` in a HELP text is a backslash and a q, as Prometheus reads it (was a LineError)."""
    for _ in range(2):  # the second read goes through the reader's cache of header pairs
        exposition = read_exposition(payload, fmt)
        assert exposition.problems == []
        assert exposition.families[0].meta.help == help_text


@pytest.mark.parametrize(
    ("fmt", "line", "canonical"),
    [
        pytest.param(Format.TEXT, b'g{a="1"} inf', b'g{a="1"} +Inf', id="text-lax-inf"),
        pytest.param(
            Format.OPENMETRICS, b'g{a="1"} nan', b'g{a="1"} NaN', id="openmetrics-lax-nan"
        ),
        pytest.param(Format.TEXT, b"g{} 1", b"g 1", id="empty-braces"),
    ],
)
def test_both_modes_rewrite_spellings_every_parser_accepts(fmt, line, canonical):
    """Lax-but-valid spellings (``inf``, ``nan``, ``{}``) are parsed and written canonically.

    Go's ParseFloat, prometheus_client and promtool all read them, but only the canonical
    spellings are valid OpenMetrics, so the fast path never copies them: both modes agree.
    """
    tail = b"# EOF\n" if fmt is Format.OPENMETRICS else b""
    payload = b"# TYPE g gauge\n" + line + b"\n" + tail
    fast = mb_render(run(payload, fmt, compiled(EMPTY, Verify.STRUCTURE)), fmt)
    full = mb_render(run(payload, fmt, compiled(EMPTY, Verify.FULL)), fmt)
    assert fast == full == b"# TYPE g gauge\n" + canonical + b"\n" + tail
    oracle(fast, fmt)


def test_trailing_comma_takes_the_exact_path_in_both_modes():
    """A text trailing comma is rewritten in both modes, since OpenMetrics does not allow it."""
    payload = b'# TYPE g gauge\ng{a="1",} 1\n'
    fast = mb_render(run(payload, Format.TEXT, compiled(EMPTY, Verify.STRUCTURE)), Format.TEXT)
    full = mb_render(run(payload, Format.TEXT, compiled(EMPTY, Verify.FULL)), Format.TEXT)
    assert fast == full == b'# TYPE g gauge\ng{a="1"} 1\n'


def test_text_trailing_comma_becomes_valid_openmetrics():
    """A valid text line with a trailing comma becomes a valid OpenMetrics line."""
    payload = b'# TYPE g gauge\ng{a="1",} 1\n'
    oracle(payload, Format.TEXT)
    oracle(_translate(payload, Format.TEXT, Format.OPENMETRICS), Format.OPENMETRICS)


def test_empty_text_output_is_refused_by_the_reader_on_purpose():
    """Deliberate: no families write 0 bytes (a valid text exposition), and the reader refuses
    0 bytes as input (issue 2: a 0-byte body is an error, almost always a truncated fetch). The
    service never serves 0 bytes: its self-metrics are always there."""
    output = _translate(b"# EOF\n", Format.OPENMETRICS, Format.TEXT)
    assert output == b""
    with pytest.raises(ExpositionError, match="empty exposition"):
        read_exposition(output, Format.TEXT)
