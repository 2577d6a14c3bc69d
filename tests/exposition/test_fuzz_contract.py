"""Fuzzing the codec and the *default contract*, beside ``test_properties.py``.

``test_properties.py`` fuzzes the reader and writer with generated families and generated rule
sets. This module feeds what the service really sees: the real SGLang fixtures (mutated), the
simulator at random shapes, and sequences of fetches carrying rate state, all translated by the
shipped contract (relabel, select, scale, derive, warm-zero rules).

Properties (examples per run in brackets, 890 in all; ``METRICBRIDGE_FUZZ_SCALE=N`` multiplies
them and switches to random exploration, for longer offline runs):

1. a mutated real fixture, read in either format with ``validation: structure``, raises nothing
   but ExpositionError, and every comment line written is a valid header                 [250]
1b. with ``validation: full``, what is accepted is written as output our own full read accepts
   without problems and prometheus_client's parsers read                                  [250]
2. accepted input round-trips: writing, reading and writing again gives the same bytes  [250]
3. a sequence of fetches (growth, restarts, mutations, type changes, fetches lost) keeps
   derived rates finite, never negative, and exact whenever counters scale together     [100]
4. the simulator at random shapes translates to output both oracles accept, with no
   repeated series                                                                          [40]

Runs are derandomized by default (the same cases every run, so CI is deterministic). Known
bugs it found have regression tests below; nothing is filtered around them any more.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections import Counter
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import OM_FIXTURES, TEXT_FIXTURES
from helpers.strategies import mutate
from helpers.strength import examples
from helpers.tp1_payloads import TP1_HIT_RATE, retyped, scaled
from metricbridge.config.load import load_config, parse_config
from metricbridge.errors import ExpositionError
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.openmetrics_fit import Misfit, openmetrics_misfit
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import AnyFamily, Format, Sample, Verify
from metricbridge.simulator.engine import SimulatedEngine
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import Outcome, run_pipeline
from metricbridge.translation.pipeline import render as write
from metricbridge.translation.translate import SynthState, translate

pytestmark = [
    pytest.mark.slow,
    # On a failure Hypothesis imports libcst, which warns through mypy_extensions.
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
]

SCALE = int(os.environ.get("METRICBRIDGE_FUZZ_SCALE", "1"))
FUZZ = settings(
    deadline=None,
    derandomize=SCALE == 1,
    database=None if SCALE == 1 else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FIXTURES = {path.name: (path.read_bytes(), Format.TEXT) for path in TEXT_FIXTURES} | {
    path.name: (path.read_bytes(), Format.OPENMETRICS) for path in OM_FIXTURES
}
HIT_RATE = "sglang:device_cache_hit_rate"
EMPTY = "version: 1\n"


@cache
def contract(verify: Verify) -> CompiledRules:
    """The shipped default contract with the reader's validation mode forced."""
    return dataclasses.replace(compile_rules(load_config()), validation=verify)


@cache
def approximations() -> CompiledRules:
    """The shipped contract with ``--profile approximations``: the rates between fetches."""
    return compile_rules(load_config(profiles=("approximations",)))


@cache
def empty_rules(verify: Verify) -> CompiledRules:
    """No rules at all: the identity translation."""
    return dataclasses.replace(compile_rules(parse_config(EMPTY, "<fuzz>")), validation=verify)


def oracle(payload: bytes, fmt: Format) -> list:
    """prometheus_client's parser for the format, run to completion."""
    parse = parse_text if fmt is Format.TEXT else parse_om
    return list(parse(payload.decode()))


# --- 1. mutated real fixtures through the contract ----------------------------------------

FIXTURE_NAMES = sorted(FIXTURES)


@dataclasses.dataclass(frozen=True)
class Mutated:
    """A mutated payload; its repr shows only the lines that changed, not megabytes."""

    name: str
    fmt: Format
    payload: bytes
    original: bytes

    def __repr__(self) -> str:
        before, after = self.original.split(b"\n"), self.payload.split(b"\n")
        diff = [f"  -{a!r}\n  +{b!r}" for a, b in zip(before, after, strict=False) if a != b][:3]
        cut = f" (cut to {len(after)} of {len(before)} lines)" if len(after) < len(before) else ""
        return f"Mutated({self.name!r} read as {self.fmt}{cut}:\n" + "\n".join(diff) + ")"

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:  # noqa: ARG002
        """Hypothesis prints dataclasses field by field; print the short form instead."""
        printer.text(repr(self))  # type: ignore[attr-defined]


def mutated(name: str, payload: bytes, fmt: Format) -> st.SearchStrategy[Mutated]:
    """``payload`` mutated one to three times (``strategies.mutate``), with a short repr."""
    return mutate(payload).map(lambda bad: Mutated(name, fmt, bad, payload))


@st.composite
def mutated_fixtures(draw: st.DrawFn) -> Mutated:
    """A real fixture, mutated, and the format it is read as (mostly its own)."""
    name = draw(st.sampled_from(FIXTURE_NAMES))
    payload, fmt = FIXTURES[name]
    if draw(st.integers(0, 9)) == 0:
        fmt = Format.TEXT if fmt is Format.OPENMETRICS else Format.OPENMETRICS
    return draw(mutated(name, payload, fmt))


def accepted(payload: bytes, fmt: Format, rules: CompiledRules) -> Outcome | None:
    """The pipeline's outcome, or None if it refused the payload with ExpositionError."""
    try:
        return run_pipeline(payload, fmt, rules)
    except ExpositionError:
        return None


VALID_COMMENT = re.compile(
    rb"# (?:HELP [a-zA-Z_:][a-zA-Z0-9_:]*(?: .*)?"
    rb"|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (?:counter|gauge|histogram|summary|untyped|unknown|info"
    rb"|stateset|gaugehistogram)"
    rb"|UNIT [a-zA-Z_:][a-zA-Z0-9_:]* [a-zA-Z0-9_:]*|EOF)"
)


@settings(FUZZ, max_examples=examples(250 * SCALE))
@given(case=mutated_fixtures())
def test_mutated_fixtures_never_crash_and_headers_stay_valid(case):
    """Structure mode (the default): only ExpositionError escapes, and every comment line written
    is a valid header. Sample lines inside a vouched-for block are trusted by design (the
    reader's docstring), so their validity is property 1b's, in full mode."""
    payload, fmt = case.payload, case.fmt
    outcome = accepted(payload, fmt, contract(Verify.STRUCTURE))
    if outcome is None:
        return
    for out_fmt in Format:
        for line in write(outcome, out_fmt).split(b"\n"):
            if line.startswith(b"#"):
                assert VALID_COMMENT.fullmatch(line), line


@settings(FUZZ, max_examples=examples(250 * SCALE, 25))
@given(case=mutated_fixtures())
def test_full_validation_writes_valid_output_from_any_input(case):
    """``validation: full``: anything accepted is written as output our full read accepts without
    problems and prometheus_client's text parser reads; OpenMetrics output is read by its
    OpenMetrics parser whenever that parser accepted the input."""
    payload, fmt = case.payload, case.fmt
    outcome = accepted(payload, fmt, contract(Verify.FULL))
    if outcome is None:
        return
    for out_fmt in Format:
        output = write(outcome, out_fmt)
        if output:  # test_properties.py::test_empty_text_output_is_refused_by_the_reader_on_purpose
            assert not read_exposition(output, out_fmt, Verify.FULL).problems
    if oracle_refuses_reserved_labels(payload):
        return
    oracle(write(outcome, Format.TEXT), Format.TEXT)
    # The oracle skips its histogram checks on escaped sample names (client_python#1177), which
    # the bridge restores; judge the input as restored.
    restored = payload.replace(b"\nsglang_", b"\nsglang:")
    if fmt is Format.OPENMETRICS and oracle_accepts(restored, fmt):
        oracle(write(outcome, Format.OPENMETRICS), Format.OPENMETRICS)


_RESERVED_LABEL = re.compile(rb'[{,]\s*__[a-zA-Z0-9_]*\s*="')


def oracle_refuses_reserved_labels(payload: bytes) -> bool:
    """prometheus_client's parsers refuse label names starting with ``__`` (reserved in
    Prometheus' data model), which promtool accepts; the bridge copies them, not a bug."""
    return _RESERVED_LABEL.search(payload) is not None


def oracle_accepts(payload: bytes, fmt: Format) -> bool:
    """Whether prometheus_client's parser for the format reads the payload."""
    try:
        oracle(payload, fmt)
    except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError):
        return False
    return True


# --- 2. round trip ------------------------------------------------------------------------


@settings(FUZZ, max_examples=examples(250 * SCALE))
@given(case=mutated_fixtures(), verify=st.sampled_from(list(Verify)), out=st.sampled_from(Format))
def test_accepted_input_round_trips(case, verify, out):
    """Write what was accepted, read it back, write again: the same bytes (a fixed point)."""
    payload, fmt = case.payload, case.fmt
    outcome = accepted(payload, fmt, empty_rules(verify))
    if outcome is None:
        return
    first = write(outcome, out)
    assume(first)  # test_properties.py::test_empty_text_output_is_refused_by_the_reader_on_purpose
    again = run_pipeline(first, out, empty_rules(verify))
    assert not again.problems, again.problems
    assert write(again, out) == first


# --- 3. rate state across a sequence of fetches -------------------------------------------

RETYPED = retyped(scaled(1.0), {"sglang:prompt_tokens_total": ("counter", "gauge")})
_FACTORS = st.sampled_from([0.001, 0.5, 1.0, 1.01, 2.0, 10.0, 1e6])  # kept exact in floats
EVENTS = st.one_of(
    st.tuples(st.just("scale"), _FACTORS),  # growth, or a restart when smaller
    st.tuples(st.just("down"), st.none()),  # a failed fetch: the bridge keeps counter memory
    st.tuples(st.just("retype"), st.none()),  # a derive operand changes type for one fetch
    st.tuples(st.just("mutate"), st.none()),
)


@settings(FUZZ, max_examples=examples(100 * SCALE, 8))
@given(events=st.lists(EVENTS, min_size=2, max_size=8), data=st.data())
def test_rates_across_fetches_stay_finite_and_exact(events, data):
    """Derived rates stay finite and non-negative through any sequence of fetches, equal the
    payload's true ratio whenever every counter grew by the same factor since the last fetch,
    and are not served across a restart (every counter lower), which restarts the interval."""
    rules = approximations()
    state = SynthState()
    memory: float | None = None  # the factor the counter memory holds; None: disturbed
    for kind, factor in events:
        if kind == "down":
            state = SynthState(state.counters)  # what Bridge._collect keeps when all fail
            continue
        if kind == "scale":
            payload = scaled(factor)
        elif kind == "retype":
            payload = RETYPED
        else:
            payload = data.draw(mutated("tp1.prom", scaled(memory or 1.0), Format.TEXT)).payload
        try:
            exposition = read_exposition(payload, Format.TEXT, rules.validation)
        except ExpositionError:
            continue  # a failed fetch: the bridge keeps its memory, as here
        result = translate(exposition.families, rules, state)
        state = result.state
        rates = [s.value for f in result.families if f.name == HIT_RATE for s in _samples(f)]
        for rate in rates:
            assert math.isfinite(rate), (events, rates)
            assert rate >= 0.0, (events, rates)
        if kind == "scale" and memory is not None:
            # Growth: the true ratio; no move, or a restart: no value.
            expected = [pytest.approx(TP1_HIT_RATE, rel=1e-6)] if factor > memory else []
            assert rates == expected, (events, rates)
        memory = factor if kind == "scale" else None
        if kind != "mutate":  # structure mode trusts a mutated sample line (property 1)
            for out_fmt in Format:
                oracle(write(Outcome(result, (), 0), out_fmt), out_fmt)


def _samples(family: AnyFamily) -> tuple[Sample, ...]:
    return parse_family(family).samples


# --- 4. the simulator at random shapes ----------------------------------------------------


ENGINES = st.builds(
    lambda dp, tp, engine_type, seed: SimulatedEngine(
        dp_size=dp, tp_size=tp, engine_type=engine_type, seed=seed
    ),
    st.integers(1, 4),
    st.integers(1, 2),
    st.sampled_from(["unified", "prefill", "decode"]),
    st.integers(0, 2**16),
)


@settings(FUZZ, max_examples=examples(40 * SCALE))
@given(
    engine=ENGINES,
    seconds=st.sampled_from([0.0, 0.5, 5.0, 30.0]),
    rate=st.sampled_from([0.0, 1.0, 20.0, 200.0]),
    out=st.sampled_from(Format),
)
def test_simulated_engines_translate_to_valid_unique_output(engine, seconds, rate, out):
    """Any engine shape and traffic, two fetches: the contract's output parses with the oracle
    for its format and repeats no series."""
    engine.advance(seconds, arrivals_per_second=rate)
    first = run_pipeline(engine.render(), Format.TEXT, contract(Verify.STRUCTURE))
    engine.advance(1.0, arrivals_per_second=rate)
    exposition = read_exposition(engine.render(), Format.TEXT)
    result = translate(exposition.families, contract(Verify.STRUCTURE), first.translation.state)
    output = write(Outcome(result, (), 0), out)
    families = oracle(output, out)
    series = Counter(
        (s.name, tuple(sorted(s.labels.items()))) for family in families for s in family.samples
    )
    lines = sum(1 for line in output.split(b"\n") if line and not line.startswith(b"#"))
    assert sum(series.values()) == lines, "the parser dropped repeated lines"
    assert not [key for key, n in series.items() if n > 1]


# --- bugs found: minimal reproducers ------------------------------------------------------


@pytest.mark.parametrize("out_fmt", list(Format))
def test_restored_escaped_name_never_clashes_with_a_sample_name(out_fmt):
    """An escaped-spelling family is restored only if no served family already has that sample."""
    payload = (
        b"# TYPE sglang:h histogram\n"
        b'sglang:h_bucket{le="+Inf"} 1\nsglang:h_count 1\nsglang:h_sum 1\n'
        b"# TYPE sglang_h_sum gauge\nsglang_h_sum 5\n"
    )
    output = write(run_pipeline(payload, Format.TEXT, empty_rules(Verify.FULL)), out_fmt)
    names = [s.name for family in oracle(output, out_fmt) for s in family.samples]
    if len(names) != len(set(names)):
        raise ValueError(f"repeated series: {names}")


@pytest.mark.parametrize("out_fmt", list(Format))
def test_full_validation_rejects_repeated_label_names(out_fmt):
    """``validation: full`` drops a sample line whose label set repeats a label name."""
    payload = b'# TYPE a gauge\na{x="1",x="2"} 1\n# TYPE b gauge\nb 1\n'
    output = write(run_pipeline(payload, Format.TEXT, empty_rules(Verify.FULL)), out_fmt)
    oracle(output, out_fmt)


def test_nul_in_help_line_is_judged_alike_every_time():
    """Reading the same payload twice gives the same families, and an innocent family survives."""
    payload = b"# TYPE nul_probe_before gauge\nnul_probe_before 1\n# HELP nul_probe x\x00y\n"
    payload += b"# TYPE nul_probe gauge\nnul_probe 1\n"
    first = read_exposition(payload, Format.TEXT, Verify.FULL)
    second = read_exposition(payload, Format.TEXT, Verify.FULL)
    assert [f.name for f in first.families] == [f.name for f in second.families]
    assert "nul_probe_before" in [f.name for f in first.families]


def test_openmetrics_counter_sample_without_total_is_a_problem():
    """OpenMetrics `# TYPE a counter` then `a 1` (not `a_total`): a problem, not a sample."""
    payload = b"# TYPE a_total counter\na_total 1\n# TYPE a counter\na_total 2\n# EOF\n"
    outcome = run_pipeline(payload, Format.OPENMETRICS, empty_rules(Verify.FULL))
    assert outcome.problems
    assert write(outcome, Format.TEXT).count(b"\na_total ") <= 1


def test_free_form_comment_is_not_a_header():
    """A text comment line that only mentions TYPE is a comment: family a is served."""
    payload = b"# TYPE a counter\na 1\n#note: TYPE a gauge\n"
    outcome = run_pipeline(payload, Format.TEXT, empty_rules(Verify.FULL))
    assert not outcome.problems
    assert write(outcome, Format.TEXT) == b"# TYPE a counter\na 1\n"


def test_a_text_counter_beside_a_gauge_of_its_stem_is_served_whole_in_text():
    """client_golang's pair: text carries both, OpenMetrics cannot (one name there), so both
    are kept and the answer is text."""
    payload = b"# TYPE a_total counter\na_total 1\n# TYPE a gauge\na 2\n"
    oracle(payload, Format.TEXT)
    outcome = run_pipeline(payload, Format.TEXT, empty_rules(Verify.FULL))
    assert [f.name for f in outcome.translation.families] == ["a_total", "a"]
    assert openmetrics_misfit(outcome.translation.families) is Misfit.NAME_CLASH
    oracle(write(outcome, Format.TEXT), Format.TEXT)


def test_an_escaped_openmetrics_counter_beside_its_base_writes_valid_openmetrics():
    """A counter and a family named like its base in OpenMetrics: one of them is dropped as a
    clash, or renamed, and the OpenMetrics output parses."""
    payload = b'# TYPE sglang:s counter\nsglang_s_total{a="1"} 1\nsglang_s{a="2"} 2\n# EOF\n'
    oracle(payload, Format.OPENMETRICS)
    outcome = run_pipeline(payload, Format.OPENMETRICS, empty_rules(Verify.FULL))
    assert openmetrics_misfit(outcome.translation.families) is None
    oracle(write(outcome, Format.OPENMETRICS), Format.OPENMETRICS)
