"""Property: whatever the reader accepts is written back valid in both wire formats.

Inputs are generated expositions (``helpers.strategies`` for the four text types and untyped,
plus OpenMetrics' own here: info, stateset, gauge histograms, exemplars, repeated points), then
mutated: semantically (a value made negative, NaN, infinite or fractional, two lines swapped, a
line dropped, an ``le`` or ``quantile`` respelled, an exemplar or a timestamp added) and, for
``validation: full``, byte by byte (``helpers.strategies.mutate``). Whatever survives the read
(families with problems are dropped, the rest kept, as the service serves them) is written in
both formats; prometheus_client's OpenMetrics parser must accept the OpenMetrics output, and
prometheus_client's text parser and ``promtool check metrics`` the text output.

The default validation (``structure``) is held to the same property over the same mutations:
the families it serves unparsed are held to their types' rules too.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.promtool import promtool_check_metrics
from helpers.strategies import expositions, mutate, render
from helpers.strength import examples
from metricbridge.config.load import parse_config
from metricbridge.errors import ExpositionError
from metricbridge.exposition.openmetrics_fit import openmetrics_misfit
from metricbridge.model.family import Format, Verify
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import render as mb_render
from metricbridge.translation.pipeline import run_pipeline

COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = st.sampled_from(list(Format))

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

_RULES = {
    verify: dataclasses.replace(
        compile_rules(parse_config("version: 1\n", "<test>")), validation=verify
    )
    for verify in Verify
}


# --- OpenMetrics-only families -------------------------------------------------------------

_VALUE_INTS = st.integers(0, 1000)


@st.composite
def _om_family(draw: st.DrawFn, index: int) -> str:
    """One family only OpenMetrics can say, valid, named ``zz_om<index>...``."""
    name = f"zz_om{index}"
    kind = draw(st.sampled_from(["info", "stateset", "gaugehistogram", "exemplars", "points"]))
    if kind == "info":
        rows = draw(
            st.lists(st.sampled_from(["1.0", "2.3.4", "x y"]), min_size=1, max_size=3, unique=True)
        )
        lines = [f'{name}_info{{version="{v}"}} 1' for v in rows]
        return f"# TYPE {name} info\n" + "".join(line + "\n" for line in lines)
    if kind == "stateset":
        states = draw(st.lists(st.sampled_from(["a", "bb", "ccc"]), min_size=1, unique=True))
        on = draw(st.sampled_from(states))
        lines = [f'{name}{{{name}="{s}"}} {int(s == on)}' for s in states]
        return f"# TYPE {name} stateset\n" + "".join(line + "\n" for line in lines)
    if kind == "gaugehistogram":
        counts = sorted(draw(st.lists(_VALUE_INTS, min_size=1, max_size=3)))
        bounds = [*["0.1", "1.0", "10.0"][: len(counts) - 1], "+Inf"]
        lines = [f'{name}_bucket{{le="{b}"}} {c}' for b, c in zip(bounds, counts, strict=True)]
        lines += [f"{name}_gcount {counts[-1]}", f"{name}_gsum {draw(st.floats(0, 50)):.3f}"]
        return f"# TYPE {name} gaugehistogram\n" + "".join(line + "\n" for line in lines)
    if kind == "exemplars":
        total = draw(_VALUE_INTS)
        stamp = draw(st.sampled_from(["", " 1520879607.789"]))
        trace = draw(st.sampled_from(["", 'trace_id="KOO5S4vxi0o"', 'a="' + "x" * 120 + '"']))
        return (
            f"# TYPE {name} counter\n{name}_total {total} # {{{trace}}} 0.5{stamp}\n"
            f"# TYPE {name}_h histogram\n"
            f'{name}_h_bucket{{le="1.0"}} {total} # {{{trace}}} 0.67\n'
            f'{name}_h_bucket{{le="+Inf"}} {total}\n{name}_h_count {total}\n{name}_h_sum 3.5\n'
        )
    stamps = sorted(draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=3, unique=True)))
    lines = [f"{name} {draw(_VALUE_INTS)} {s / 1000}" for s in stamps]
    return f"# TYPE {name} gauge\n" + "".join(line + "\n" for line in lines)


@st.composite
def _payloads(draw: st.DrawFn, fmt: Format) -> bytes:
    """A valid exposition: generated families, plus OpenMetrics-only ones in OpenMetrics."""
    fams = draw(expositions(min_size=1, lax=False))
    payload = render(fams, fmt)
    if fmt is Format.OPENMETRICS:
        extra = "".join(draw(_om_family(i)) for i in range(draw(st.integers(0, 3))))
        payload = payload[: -len(b"# EOF\n")] + extra.encode() + b"# EOF\n"
    return payload


# --- semantic mutations --------------------------------------------------------------------

_VALUE_OPS = ("negative", "nan", "inf")
_ALL_OPS = (*_VALUE_OPS, "fraction", "swap", "drop", "le", "quantile", "exemplar", "timestamp")


def _value_span(line: str) -> tuple[int, int]:
    """Where a sample line's value is: after the label set, else after the name."""
    close = line.rfind("} ")
    start = close + 2 if close >= 0 else line.find(" ") + 1
    end = line.find(" ", start)
    return start, len(line) if end < 0 else end


@st.composite
def _semantic_mutation(draw: st.DrawFn, payload: bytes, ops: tuple[str, ...]) -> bytes:
    lines = payload.decode().split("\n")
    samples = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    if not samples:
        return payload
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.sampled_from(samples))
        line = lines[at]
        op = draw(st.sampled_from(ops))
        start, end = _value_span(line)
        replacement = {"negative": "-3", "nan": "NaN", "inf": "+Inf", "fraction": "0.5"}.get(op)
        if replacement is not None:
            lines[at] = line[:start] + replacement + line[end:]
        elif op == "swap" and at + 1 in samples:
            lines[at], lines[at + 1] = lines[at + 1], line
        elif op == "drop":
            lines[at] = ""
        elif op == "le":
            lines[at] = line.replace(
                'le="+Inf"', draw(st.sampled_from(['le="+INF"', 'le="inf"', 'x="1"']))
            )
        elif op == "quantile":
            lines[at] = line.replace(
                'quantile="', draw(st.sampled_from(['quantile="1', 'quantile="-', 'q="']))
            )
        elif op == "exemplar":
            lines[at] = line + ' # {t="x"} 1'
        elif op == "timestamp":
            lines.insert(at + 1, line + " 5")
    return "\n".join(line for line in lines if line or line is lines[-1]).encode()


# --- the property --------------------------------------------------------------------------


def _served_is_valid(payload: bytes, fmt: Format, verify: Verify) -> None:
    """Read, translate with no rules, write both formats; the oracles must accept both."""
    try:
        outcome = run_pipeline(payload, fmt, _RULES[verify])
    except ExpositionError:
        return  # nothing usable: nothing served but the bridge's own metrics
    text = mb_render(outcome, Format.TEXT)
    # A snapshot OpenMetrics cannot carry is answered in text whatever was asked.
    if openmetrics_misfit(outcome.translation.families) is None:
        om = mb_render(outcome, Format.OPENMETRICS).decode()
        try:
            list(parse_om(om))
        except Exception as exc:  # noqa: BLE001 - the oracle's verdict, whatever it raises
            pytest.fail(f"prometheus_client refuses the OpenMetrics output: {exc!r}\n{om}")
    list(parse_text(text.decode()))
    promtool_check_metrics(text)


@settings(COMMON, max_examples=examples(200))
@given(data=st.data())
def test_accepted_input_is_served_valid_in_both_formats_with_full_validation(data):
    _served_is_valid(*_drawn_input(data), Verify.FULL)


@settings(COMMON, max_examples=examples(100))
@given(data=st.data())
def test_accepted_input_is_served_valid_in_both_formats_by_default(data):
    _served_is_valid(*_drawn_input(data), Verify.STRUCTURE)


def _drawn_input(data: st.DataObject) -> tuple[bytes, Format]:
    """A generated exposition, perhaps broken by a semantic and then a byte mutation."""
    fmt = data.draw(FORMATS)
    payload = data.draw(_payloads(fmt))
    if data.draw(st.booleans()):
        payload = data.draw(_semantic_mutation(payload, _ALL_OPS))
    if data.draw(st.booleans()):
        payload = data.draw(mutate(payload))
    return payload, fmt
