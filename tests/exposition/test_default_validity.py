"""The default validation (``structure``) serves only valid bytes, whatever a family no rule reads holds.

The fast path serves most families as the upstream's own bytes; what it proves about them is
the invariant in ``exposition.reader``. Each fault below is one bad line in a family no rule
reads (``vendor:foo``), alone or in the middle of a large valid family, read cold and read
after the valid version was proven and cached. The bad family is dropped with a located
problem (a repeated series: the repeat only), the rest is served, and every byte served is
read by prometheus_client's two parsers and by promtool.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.fault_upstream import FaultUpstream, respond
from helpers.paths import TEXT_FIXTURES
from helpers.promtool import promtool_check_metrics
from helpers.service import bridge_app
from helpers.strength import examples
from metricbridge.config.load import load_config
from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.openmetrics_fit import openmetrics_misfit
from metricbridge.model.family import Format, Verify
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import Outcome, render, run_pipeline

HEAD = b"# HELP vendor:foo A gauge no rule reads.\n# TYPE vendor:foo gauge\n"
TAIL = b'# HELP vendor:bar Another.\n# TYPE vendor:bar gauge\nvendor:bar{b="x"} 1.0\n'
BIG = 2000  # lines of the large valid family the bad line sits in the middle of

# (bad line, what happens to the family, the problem's message)
FAULTS = [
    pytest.param(b'vendor:foo{a="bad"} abc', "dropped", "invalid value 'abc'", id="non_numeric"),
    pytest.param(b'vendor:foo{a="bad"} 1e999999', "dropped", "invalid value", id="overflow"),
    pytest.param(b'vendor:foo{a="bad"} -1e999999', "dropped", "invalid value", id="neg_overflow"),
    pytest.param(
        b'vendor:foo{a="bad"} 1.7976931348623159e308', "dropped", "invalid value", id="just_over"
    ),
    pytest.param(b'vendor:foo{a="bad"} 0x1p3', "dropped", "invalid value", id="hex_float"),
    pytest.param(b'vendor:foo{a="bad"} 0x10', "dropped", "invalid value", id="hex_int"),
    pytest.param(b'vendor:foo{a="bad"} 1_000', "dropped", "invalid value", id="underscore"),
    pytest.param(b'vendor:foo{a="bad"} +nan', "dropped", "invalid value", id="signed_nan"),
    pytest.param(b'vendor:foo{a="bad"} \xd9\xa1', "dropped", "invalid value", id="arabic_digit"),
    pytest.param(b'vendor:foo{a="bad"} 1e', "dropped", "invalid value", id="bare_exponent"),
    pytest.param(b'vendor:foo{a="bad"} ', "dropped", "missing value", id="no_value"),
    pytest.param(b'vendor:foo{a="bad",a="2"} 1', "dropped", "appears twice", id="repeated_label"),
    pytest.param(b"vendor:foo{a=bad} 1", "dropped", "double-quoted", id="unquoted_value"),
    pytest.param(b'vendor:foo{1a="bad"} 1', "dropped", "label name", id="label_name_digit"),
    pytest.param(b'vendor:foo{a="bad"b} 1', "dropped", "expected '='", id="missing_equals"),
    pytest.param(b'vendor:foo{a="0"} 1.0', "repeat", "repeats the one", id="duplicate_same"),
    pytest.param(b'vendor:foo{a="0"} 7.0', "repeat", "repeats the one", id="duplicate_other"),
    pytest.param(b'vendor:foo{a="bad"} infinity', "rewritten", "+Inf", id="infinity"),
    pytest.param(b'vendor:foo{a="bad"}  nan', "rewritten", "NaN", id="two_spaces_nan"),
    pytest.param(b'vendor:foo{a="bad"} 5\t', "rewritten", "5", id="trailing_tab"),
]


def _payload(bad: bytes, *, big: bool) -> tuple[bytes, int]:
    """The exposition with ``bad`` among valid lines of vendor:foo; and the bad line's number."""
    count = BIG if big else 2
    lines = [b'vendor:foo{a="%d"} %d.0' % (i, i) for i in range(count)]
    lines.insert(count // 2, bad)
    body = b"".join(line + b"\n" for line in lines)
    return HEAD + body + TAIL, 3 + count // 2


@pytest.fixture(scope="module")
def rules() -> CompiledRules:
    """The shipped contract, with the service's default validation."""
    compiled = compile_rules(load_config())
    assert compiled.validation is Verify.STRUCTURE
    return compiled


def _served(outcome: Outcome, caches: CodecCaches) -> dict[Format, bytes]:
    """Each body the service would answer with: OpenMetrics only where it can carry it all."""
    formats = [Format.TEXT]
    if openmetrics_misfit(outcome.translation.families) is None:
        formats.append(Format.OPENMETRICS)
    return {fmt: render(outcome, fmt, caches=caches) for fmt in formats}


def check_valid(served: dict[Format, bytes], *, promtool: bool = True) -> dict[str, Any]:
    """Every served body is read by both of prometheus_client's parsers (and by promtool)."""
    families = {f.name: f for f in parse_text(served[Format.TEXT].decode())}
    if Format.OPENMETRICS in served:
        om = {f.name: f for f in parse_om(served[Format.OPENMETRICS].decode())}
        assert families.keys() == om.keys()
    if promtool:
        promtool_check_metrics(served[Format.TEXT])
    return families


def check_lines_valid(served: dict[Format, bytes]) -> None:
    """Both bodies parse, the OpenMetrics one with its types' rules held."""
    list(parse_text(served[Format.TEXT].decode()))
    if Format.OPENMETRICS in served:
        list(parse_om(served[Format.OPENMETRICS].decode()))


@pytest.mark.parametrize("big", [False, True], ids=["small", "large"])
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "after_valid"])
@pytest.mark.parametrize(("bad", "outcome", "message"), FAULTS)
def test_a_bad_line_in_an_unread_family_is_never_served(  # noqa: PLR0913, PLR0917 - the table's columns
    rules: CompiledRules, bad: bytes, outcome: str, message: str, big: bool, warm: bool
) -> None:
    """The family is dropped (or its repeat, or its value rewritten), reported at its line."""
    payload, line = _payload(bad, big=big)
    caches = CodecCaches()
    if warm:  # the same family, valid, proven first: its cached proof must not vouch now
        valid, _ = _payload(b'vendor:foo{a="bad"} 2.5', big=big)
        assert not run_pipeline(valid, Format.TEXT, rules, caches=caches).problems
    result = run_pipeline(payload, Format.TEXT, rules, caches=caches)
    families = check_valid(_served(result, caches))
    full_rules = dataclasses.replace(rules, validation=Verify.FULL)
    full = run_pipeline(payload, Format.TEXT, full_rules)
    assert _served(result, caches) == _served(full, CodecCaches())
    assert "vendor:bar" in families
    if outcome == "rewritten":
        assert not result.problems
        samples = {s.labels["a"]: s.value for s in families["vendor:foo"].samples}
        assert repr(samples["bad"]).lower().lstrip("+") in message.lower()
        assert (
            b'vendor:foo{a="bad"} ' + message.encode() + b"\n"
            in _served(result, caches)[Format.TEXT]
        )
        return
    (problem,) = result.problems
    assert problem.family == "vendor:foo"
    assert problem.line == line
    assert message in problem.message
    if outcome == "dropped":
        assert "vendor:foo" not in families
    else:  # the repeat is left out, the first of the two kept
        samples = families["vendor:foo"].samples
        assert [s.labels["a"] for s in samples].count("0") == 1
        assert len(samples) == (BIG if big else 2)


def test_the_same_label_set_in_another_order_is_a_repeat(rules: CompiledRules) -> None:
    """Two lines naming one series with their labels ordered differently: the second goes."""
    payload = HEAD + b'vendor:foo{a="1",b="2"} 1\nvendor:foo{b="2",a="1"} 2\n' + TAIL
    caches = CodecCaches()
    result = run_pipeline(payload, Format.TEXT, rules, caches=caches)
    (problem,) = result.problems
    assert (problem.family, problem.line) == ("vendor:foo", 4)
    families = check_valid(_served(result, caches))
    assert len(families["vendor:foo"].samples) == 1


def test_values_change_but_stay_proven_from_the_cache(rules: CompiledRules) -> None:
    """The next scrape's new values are proven in bulk; a bad one among them is still caught."""
    caches = CodecCaches()
    first, _ = _payload(b'vendor:foo{a="bad"} 2.5', big=True)
    assert not run_pipeline(first, Format.TEXT, rules, caches=caches).problems
    hits = caches.proven_heads.hits
    moved = re.sub(rb"\} ([0-9]+)\.0\n", rb"} -\1.5e+07\n", first)
    assert moved != first
    result = run_pipeline(moved, Format.TEXT, rules, caches=caches)
    assert not result.problems
    assert caches.proven_heads.hits > hits
    assert _served(result, caches)[Format.TEXT] == moved
    spoiled = moved.replace(b"} -7.5e+07\n", b"} -7.5e+999\n", 1)
    assert spoiled != moved
    result = run_pipeline(spoiled, Format.TEXT, rules, caches=caches)
    assert [p.family for p in result.problems] == ["vendor:foo"]
    check_valid(_served(result, caches))


async def test_a_dropped_family_is_counted_on_every_fetch_and_logged_once(
    aiohttp_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The service keeps serving its own metrics and the rest; the problem is logged once."""
    upstream = FaultUpstream()
    await upstream.listen()
    try:
        payload, _ = _payload(b'vendor:foo{a="bad"} 1e999999', big=True)
        upstream.fault = respond(payload)
        client = await aiohttp_client(bridge_app(upstream.url))
        caplog.set_level(logging.WARNING)
        counts = []
        for _ in range(2):
            response = await client.get("/metrics", headers={"Accept": "text/plain"})
            assert response.status == 200
            text = await response.text()
            families = {f.name: f for f in parse_text(text)}
            assert "vendor:foo" not in families
            assert "vendor:bar" in families
            (sample,) = families["metricbridge_exposition_problems"].samples
            assert sample.labels == {"reason": "malformed"}
            counts.append(sample.value)
            promtool_check_metrics(text.encode())
        assert counts == [1.0, 2.0]
        logged = [r for r in caplog.records if "vendor:foo" in r.getMessage()]
        assert len(logged) == 1
        assert "line 1003" in logged[0].getMessage()
    finally:
        await upstream.close()


# --- one byte changed anywhere in a real scrape ---------------------------------------------

FIXTURE_BYTES = [path.read_bytes() for path in TEXT_FIXTURES]


@st.composite
def one_byte_edit(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A real SGLang scrape, and the same with one byte replaced, deleted or inserted."""
    original = draw(st.sampled_from(FIXTURE_BYTES))
    payload = bytearray(original)
    at = draw(st.integers(0, len(payload) - 1))
    byte = draw(
        st.sampled_from(list(b'0123456789.eE+-_xpIinfNa "=,{}\t\\#\n\x00\xff'))
        | st.integers(0, 255)
    )
    op = draw(st.sampled_from(["replace", "delete", "insert"]))
    if op == "replace":
        payload[at] = byte
    elif op == "delete":
        del payload[at]
    else:
        payload.insert(at, byte)
    return original, bytes(payload)


def _translate_edited(original: bytes, payload: bytes) -> dict[Format, bytes] | None:
    """The edited scrape as served, after the original was proven and cached; None if refused."""
    rules = compile_rules(load_config())
    caches = CodecCaches()
    run_pipeline(original, Format.TEXT, rules, caches=caches)
    try:
        outcome = run_pipeline(payload, Format.TEXT, rules, caches=caches)
    except ExpositionError:  # nothing in the body is usable: no engine family is served
        return None
    return _served(outcome, caches)


@settings(
    max_examples=examples(100, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(edit=one_byte_edit())
def test_whatever_is_served_from_an_edited_scrape_parses(edit: tuple[bytes, bytes]) -> None:
    """One byte changed anywhere: what the default mode serves, both parsers read."""
    served = _translate_edited(*edit)
    if served is not None:
        check_lines_valid(served)


@pytest.mark.integration
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit=one_byte_edit())
def test_whatever_is_served_from_an_edited_scrape_passes_promtool(
    edit: tuple[bytes, bytes],
) -> None:
    """The same property, on fewer examples, with Prometheus' own parser as well."""
    served = _translate_edited(*edit)
    if served is not None:
        check_lines_valid(served)
        promtool_check_metrics(served[Format.TEXT])
