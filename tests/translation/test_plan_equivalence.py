"""A scrape plan changes speed, never a result: the planned and the full path agree byte for byte.

Each test feeds one sequence of payloads to two translators, each with caches of its own: one
keeps plans (the default), the other has no room for any (``translation_plans`` budget 0), so
every payload takes the full path. Every translation's bytes in both formats, its statistics,
problems, row statuses, carried state and warm-zero count must be the same. The sequences are
evolving simulator scrapes, the real fixtures one after another, and layouts mutated by
Hypothesis: families dropped, swapped, re-helped, relabelled and given new series, values
changed, rules reloaded in between.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import FIXTURES, TEXT_FIXTURES
from helpers.strength import examples
from metricbridge.config.load import load_config
from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format
from metricbridge.simulator.engine import SimulatedEngine
from metricbridge.translation import run as run_module
from metricbridge.translation import translate as translate_module
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import read_payload
from metricbridge.translation.plan import TranslationPlan
from metricbridge.translation.translate import SynthState, Translation, translate

COMMON = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples(40)
)
RELOAD = b"reload"  # in a payload sequence: the rules are reloaded before the next payload
TP1 = (FIXTURES / "tp1.prom").read_bytes()


def _rules(*, escaped_copies: bool = False) -> CompiledRules:
    """The shipped contract, optionally also serving every family's escaped spelling."""
    rules = compile_rules(load_config())
    if escaped_copies:
        naming = dataclasses.replace(rules.naming, also_serve_escaped=True)
        rules = dataclasses.replace(rules, naming=naming)
    return rules


def _summary(translation: Translation) -> tuple[object, ...]:
    """Everything a translation says, comparable (NaN counters by their repr)."""
    state = translation.state
    return (
        tuple(write_exposition(translation.families, fmt) for fmt in Format),
        translation.stats,
        [str(problem) for problem in translation.problems],
        translation.rows,
        repr(sorted(state.counters.items())),
        state.idle,
        translation.zeroed,
        translation.warm_zero_series,
    )


class _Translator:
    """One caller translating a payload sequence as the bridge does: caches and state kept."""

    def __init__(self, rules: CompiledRules, *, plans: bool) -> None:
        self.rules = rules
        self.caches = CodecCaches()
        self.remembered = TranslationCaches(None if plans else {"translation_plans": 0})
        self.state = SynthState()
        self.now = 0.0

    def reload(self, rules: CompiledRules) -> None:
        """As Bridge.replace_rules: new rules, caches emptied, state forgotten."""
        self.rules, self.state = rules, SynthState()
        self.caches.reset()
        self.remembered.reset()

    def __call__(self, payload: bytes) -> object:
        self.now += 5.0
        try:
            exposition = read_payload(payload, Format.TEXT, self.rules, caches=self.caches)
        except ExpositionError as exc:
            return str(exc)
        translation = translate(
            exposition.families,
            self.rules,
            self.state,
            now=self.now,
            caches=self.caches,
            remembered=self.remembered,
        )
        self.state = translation.state
        return _summary(translation)


def _agree(
    payloads: Iterable[bytes], rules: CompiledRules | None = None, *, escaped: bool = False
) -> _Translator:
    """Both paths give the same for every payload in turn; return the planned translator."""
    rules = rules or _rules(escaped_copies=escaped)
    planned, full = _Translator(rules, plans=True), _Translator(rules, plans=False)
    for step, payload in enumerate(payloads):
        if payload == RELOAD:
            reloaded = _rules(escaped_copies=escaped)
            planned.reload(reloaded)
            full.reload(reloaded)
            continue
        assert planned(payload) == full(payload), f"payload {step} translated differently"
    return planned


def _scrapes(count: int, *, dp: int = 2, tp: int = 2, seed: int = 3) -> Iterator[bytes]:
    """Successive scrapes of one simulated engine: busy, then idle, then busy again."""
    engine = SimulatedEngine(dp_size=dp, tp_size=tp, seed=seed)
    yield engine.render()  # fresh: lazy families absent, warm-zero at work
    for step in range(count - 1):
        engine.advance(5.0, arrivals_per_second=0.0 if step % 4 == 3 else 20.0)
        yield engine.render()


def _escaped(payload: bytes) -> bytes:
    """The payload as an escaping router serves it: sglang_x for sglang:x."""
    return re.sub(rb"(?m)^(# (?:HELP|TYPE) )?sglang:", rb"\1sglang_", payload)


def test_evolving_scrapes_translate_alike() -> None:
    """A simulated engine's scrapes, lazy series appearing, give the same with a plan."""
    planned = _agree(_scrapes(10))
    assert planned.remembered.plans.hits >= 5  # the plan was really used


def test_evolving_scrapes_with_escaped_copies_and_clashes_translate_alike() -> None:
    """With escaped copies served (and the clashes they bring), the plan's ending agrees."""
    _agree(_scrapes(6), escaped=True)


def test_escaped_upstream_names_translate_alike() -> None:
    """Names restored from the escaped spelling, interleaved with plain payloads."""
    scrapes = list(_scrapes(6))
    _agree([_escaped(p) if i % 3 else p for i, p in enumerate(scrapes)])
    _agree([_escaped(p) for p in scrapes])


def test_fixtures_one_after_another_translate_alike() -> None:
    """Every real fixture, twice round, so each layout is met again after the others."""
    fixtures = [path.read_bytes() for path in TEXT_FIXTURES]
    _agree([*fixtures, *reversed(fixtures), *fixtures])


def test_reload_between_scrapes_translates_alike() -> None:
    """Rules reloaded between scrapes of one layout: the plan is dropped and rebuilt."""
    scrapes = list(_scrapes(6))
    _agree([*scrapes[:3], RELOAD, *scrapes[3:], RELOAD, scrapes[0]])


def test_plans_for_other_rules_are_not_used() -> None:
    """One caches, two rules objects taking turns: each translation is its rules' own."""
    plain, escaped = _rules(), _rules(escaped_copies=True)
    shared, remembered = CodecCaches(), TranslationCaches()
    for payload in _scrapes(4):
        for rules in (plain, escaped, plain):
            own = CodecCaches()
            expected = read_payload(payload, Format.TEXT, rules, caches=own)
            got = read_payload(payload, Format.TEXT, rules, caches=shared)
            full = translate(expected.families, rules, caches=own)
            planned = translate(got.families, rules, caches=shared, remembered=remembered)
            assert _summary(planned) == _summary(full)


def test_a_steady_layout_reuses_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a layout is planned, the clash check and row table are not recomputed."""
    calls: list[int] = []
    original = run_module.find_clashes

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "find_clashes", counting)
    payload = TP1
    planned = _Translator(_rules(), plans=True)
    for _ in range(4):
        planned(payload)
    assert len(calls) == 1
    assert planned.remembered.plans.entries == 1
    full = _Translator(_rules(), plans=False)
    for _ in range(4):
        full(payload)
    assert len(calls) == 5  # without room for plans, every payload takes the full path


def test_plans_are_bounded_in_bytes_and_dropped_on_reset() -> None:
    """The plan cache holds plans within its budget, is served and reset with the others."""
    caches = _agree(_scrapes(4)).remembered
    plans = caches.plans
    assert plans in list(caches)  # reset on reload and served as metricbridge_cache_*
    assert plans.entries >= 1  # lazy families appear in the first scrapes: a layout each
    assert 0 < plans.bytes <= plans.budget
    held = [value for value, _ in plans._data.values()]
    assert all(isinstance(plan, TranslationPlan) for plan in held)
    assert plans.bytes >= sum(plan.size() for plan in held if isinstance(plan, TranslationPlan))
    caches.reset()
    assert (plans.entries, plans.bytes) == (0, 0)


def test_a_plan_bigger_than_the_budget_is_not_held() -> None:
    """With a budget smaller than one plan, nothing is held and results are unchanged."""
    rules = _rules()
    tight = _Translator(rules, plans=True)
    tight.remembered = TranslationCaches({"translation_plans": 1000})
    full = _Translator(rules, plans=False)
    for payload in _scrapes(3):
        assert tight(payload) == full(payload)
    assert tight.remembered.plans.entries == 0


# Hypothesis: a layout mutated step by step. Each step edits the family blocks of the current
# payload; both translators see every intermediate payload.


def _blocks(payload: bytes) -> list[bytes]:
    """The payload's family blocks, each from its HELP line to the next family's."""
    starts = [m.start() for m in re.finditer(rb"(?m)^# HELP ", payload)]
    return [payload[a:b] for a, b in zip(starts, [*starts[1:], len(payload)], strict=True)]


_VALUE = re.compile(rb"(?m)^([^#\n][^\n]*) (\S+)$")
_FIRST_LABEL_VALUE = re.compile(rb'(?m)^([^#\n][^{\n]*\{[^=\n]+=")([^"\n]*)"')


def _mutate(blocks: list[bytes], step: tuple[str, int, int]) -> list[bytes]:
    """One edit of the layout or the values; blocks are never emptied."""
    kind, first, second = step
    blocks = list(blocks)
    i, j = first % len(blocks), second % len(blocks)
    rng = random.Random(first * 7919 + second)  # noqa: S311 - test data, not secrets
    if kind == "values":
        blocks = [
            _VALUE.sub(lambda m: m[1] + b" " + str(rng.randint(0, 9)).encode(), b) for b in blocks
        ]
    elif kind == "drop" and len(blocks) > 1:
        del blocks[i]
    elif kind == "swap":
        blocks[i], blocks[j] = blocks[j], blocks[i]
    elif kind == "help":
        blocks[i] = re.sub(rb"^(# HELP \S+ )[^\n]*", rb"\1changed help %d" % j, blocks[i])
    elif kind == "relabel":
        blocks[i] = _FIRST_LABEL_VALUE.sub(rb'\1\2-%d"' % j, blocks[i])
    elif kind == "add_series":
        samples = b"".join(line for line in blocks[i].splitlines(keepends=True) if line[:1] != b"#")
        blocks[i] += _FIRST_LABEL_VALUE.sub(rb'\1new-%d"' % j, samples)
    elif kind == "retype":
        blocks[i] = re.sub(rb"(?m)^(# TYPE \S+ )\S+", rb"\1untyped", blocks[i])
    return blocks


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["values", "values", "drop", "swap", "help", "relabel", "add_series", "retype", "same"]
        ),
        st.integers(0, 200),
        st.integers(0, 200),
    ),
    min_size=1,
    max_size=8,
)


def _mutated_sequence(base: bytes, steps: Sequence[tuple[str, int, int]]) -> Iterator[bytes]:
    blocks = _blocks(base)
    yield base
    for step in steps:
        if step[0] == "same" and step[1] % 5 == 0:
            yield RELOAD
            continue
        blocks = _mutate(blocks, step)
        yield b"".join(blocks)


@COMMON
@given(steps=_STEPS)
def test_mutated_layouts_translate_alike(steps: list[tuple[str, int, int]]) -> None:
    """A fixture's layout edited step by step (and rules reloaded) gives the same both ways."""
    _agree(_mutated_sequence(TP1, steps))


@COMMON
@given(steps=_STEPS)
def test_mutated_simulator_layouts_translate_alike(steps: list[tuple[str, int, int]]) -> None:
    """The same on a simulated engine's payload, with escaped copies served (clashes)."""
    base = SimulatedEngine(dp_size=2, tp_size=1, seed=5)
    base.advance(30.0, arrivals_per_second=10.0)
    _agree(_mutated_sequence(base.render(), steps), escaped=True)


def test_derive_tables_stay_bounded_when_labels_change_every_scrape() -> None:
    """A label value new in every payload cannot grow the plan's derive tables without end."""
    rules = _rules()
    planned, full = _Translator(rules, plans=True), _Translator(rules, plans=False)
    first: dict[object, int] = {}
    steps = 100  # more than the 66 entries a one-series operand's table may hold
    for step in range(steps):
        payload = _FIRST_LABEL_VALUE.sub(rb'\1\2-%d"' % step, TP1)
        assert planned(payload) == full(payload)
        (plan,) = (v for v, _ in planned.remembered.plans._data.values())
        assert isinstance(plan, TranslationPlan)
        tables = {**plan.derive.rests, **plan.derive.groups}
        if step == 0:
            first = {key: len(table) for key, table in tables.items()}
            filled = min(n for n in first.values() if n)  # rates group from the second fetch
            assert steps * filled > 3 * filled + 64
        for key, table in tables.items():
            assert len(table) <= 3 * first.get(key, 0) + 64


def test_a_repeated_layout_leaves_its_plan_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan is re-sized only when an answer changes: never for a payload seen before.

    An engine with many series per counter: a grouping table shared by several counters
    outgrew its bound on every payload and was re-filled (and the plan re-sized) each time.
    """
    stored: list[int] = []
    original = translate_module.store_plan

    def counting(plan: TranslationPlan, caches: CodecCaches) -> None:
        stored.append(1)
        original(plan, caches)

    monkeypatch.setattr(translate_module, "store_plan", counting)
    engine = SimulatedEngine(dp_size=100, tp_size=1, seed=2)
    engine.advance(30.0, arrivals_per_second=40.0)
    payload = engine.render()
    planned = _Translator(_rules(), plans=True)
    planned(payload)
    planned(payload)  # rates have a previous fetch now: their groupings are filled in
    stored.clear()
    for _ in range(3):
        planned(payload)
    assert stored == []
