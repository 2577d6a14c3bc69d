"""Relabelling by projection and its cache: the same results as running the steps on every series,
the steps run once per projection, the cache bounded in bytes and emptied on reset."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from helpers.strength import examples
from metricbridge.config.schema import RelabelAction, RelabelConfig
from metricbridge.config.templates import expand
from metricbridge.model.family import (
    SHAPE_LABELS,
    Family,
    FamilyMeta,
    Labels,
    MetricType,
    Sample,
    series_key,
)
from metricbridge.model.names import LABEL_NAME
from metricbridge.translation import relabel as relabel_module
from metricbridge.translation.compiled import CompiledRelabel
from metricbridge.translation.compiler import _compile_step
from metricbridge.translation.relabel import joined, relabel, without_hidden_labels
from metricbridge.translation.relabel_cache import MISS, RelabelCache
from metricbridge.translation.relabel_join import relabel_joined

# Few names and values, so that label sets repeat, rewrites collide and steps match.
NAMES = ("a", "b", "cache_source", "le")
HIDDEN = "__sb"  # a label a rule's join adds (as __storage_backend), which steps may read
VALUES = ("", "x", "storage", "device", "x;y", "1")
REGEXES = ("(.*)", "storage", "(x)(;y)?", "[[:alpha:]]+", "(?P<v>d.*)", "b|cache_.*", "")
TEMPLATES = ("$1", "${1}_z", "fixed", "", "$$1", "${v}", "$0")


@st.composite
def steps(draw: st.DrawFn) -> RelabelConfig:
    """A relabel step of any action, with a template that refers only to groups it has."""
    action = draw(st.sampled_from(list(RelabelAction)))
    regex = draw(st.sampled_from(REGEXES))
    groups = regex.count("(")
    usable = [t for t in TEMPLATES if ("v" not in t or "?P<v>" in regex)]
    usable = [t for t in usable if not any(f"${n}" in t or f"${{{n}" in t for n in "12")]
    usable += ["$1", "${1}_z"] if groups else []
    replacement = draw(st.sampled_from(usable))
    if action is RelabelAction.REPLACE:
        target = draw(st.sampled_from(["a", "new", "$1" if groups else "b", replacement or "c"]))
    else:
        target = None
    sources = tuple(draw(st.lists(st.sampled_from((*NAMES[:3], HIDDEN)), max_size=2)))
    return RelabelConfig(0, action, sources, ";", regex, target, replacement)


@st.composite
def label_sets(draw: st.DrawFn) -> Labels:
    """Labels as the reader makes them: unique names, any order."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    return tuple((name, draw(st.sampled_from(VALUES))) for name in names)


def _reference_step(labels: dict[str, str], step: CompiledRelabel) -> bool:
    """One step on one series, as Prometheus' relabel.Process reads it: the plain definition."""
    action = step.action
    if action in (RelabelAction.LABELDROP, RelabelAction.LABELKEEP, RelabelAction.LABELMAP):
        for key in [k for k in labels if k not in SHAPE_LABELS]:
            hit = step.regex.fullmatch(key)
            if (action is RelabelAction.LABELDROP and hit) or (
                action is RelabelAction.LABELKEEP and not hit
            ):
                del labels[key]
            elif action is RelabelAction.LABELMAP and hit:
                labels[expand(step.replacement, hit)] = labels[key]
        return True
    hit = step.regex.fullmatch(step.separator.join(labels.get(n, "") for n in step.source_labels))
    if action is RelabelAction.KEEP:
        return hit is not None
    if action is RelabelAction.DROP:
        return hit is None
    if hit is not None and step.target_label is not None:
        target = expand(step.target_label, hit)
        if LABEL_NAME.fullmatch(target) and target not in SHAPE_LABELS and target[:2] != "__":
            value = expand(step.replacement, hit)
            if value:
                labels[target] = value
            else:
                labels.pop(target, None)
    return True


def _reference(family: Family, steps: tuple[CompiledRelabel, ...]) -> tuple[Family, int, int]:
    """The steps run on every series in turn, then duplicates resolved as ``relabel`` says."""
    kept = []
    dropped = 0
    for sample in family.samples:
        labels = dict(sample.labels)
        if not all(_reference_step(labels, step) for step in steps):
            dropped += 1
            continue
        rewritten = labels != dict(sample.labels)
        new = tuple(sorted(labels.items())) if rewritten else sample.labels
        kept.append((sample, new, rewritten))
    owner: dict[Labels, Labels] = {}
    for wanted in (False, True):
        for sample, new, rewritten in kept:
            if rewritten is wanted:
                owner.setdefault(series_key(new), series_key(sample.labels))
    out, seen, duplicates = [], set(), 0
    for sample, new, rewritten in kept:
        key = (sample.name, tuple(sorted(new)))
        if owner[series_key(new)] != series_key(sample.labels) or key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(
            Sample(sample.name, new, sample.value, sample.raw_value) if rewritten else sample
        )
    return Family(family.meta, tuple(out)), dropped, duplicates


def _family(labels: list[Labels]) -> Family:
    samples = tuple(Sample("f", ls, float(i), str(i), None, None) for i, ls in enumerate(labels))
    return Family(FamilyMeta("f", MetricType.GAUGE, None, None), samples)


@settings(max_examples=examples(300), deadline=None)
@given(
    configs=st.lists(steps(), min_size=1, max_size=3),
    payloads=st.lists(st.lists(label_sets(), max_size=8), min_size=1, max_size=4),
)
def test_cached_relabel_gives_what_running_the_steps_gives(
    configs: list[RelabelConfig], payloads: list[list[Labels]]
) -> None:
    """Payload after payload through one cache: families, drops and duplicates as uncached."""
    compiled = tuple(_compile_step(config) for config in configs)
    cache = RelabelCache()
    for labels in payloads:
        family = _family(labels)
        assert relabel(family, compiled, cache) == relabel(family, compiled)


@settings(max_examples=examples(300), deadline=None)
@given(
    configs=st.lists(steps(), min_size=1, max_size=3),
    labels=st.lists(label_sets(), max_size=12),
)
def test_relabel_by_projection_gives_what_every_series_through_the_steps_gives(
    configs: list[RelabelConfig], labels: list[Labels]
) -> None:
    """Steps run once per projection: families, drops and duplicates as run series by series."""
    compiled = tuple(_compile_step(config) for config in configs)
    family = _family(labels)
    assert relabel(family, compiled) == _reference(family, compiled)


@settings(max_examples=examples(300), deadline=None)
@given(
    configs=st.lists(steps(), min_size=1, max_size=3),
    labels=st.lists(label_sets(), max_size=12),
    pairs=st.lists(
        st.tuples(st.sampled_from((HIDDEN, "__other", "plain")), st.sampled_from(VALUES)),
        unique_by=lambda pair: pair[0],
        max_size=2,
    ),
    own_hidden=st.booleans(),
)
def test_relabel_joined_gives_what_joining_relabelling_and_hiding_give(
    configs: list[RelabelConfig],
    labels: list[Labels],
    pairs: list[tuple[str, str]],
    *,
    own_hidden: bool,
) -> None:
    """The one pass of a join rule: the same family, drops and duplicates as its three steps."""
    compiled = tuple(_compile_step(config) for config in configs)
    if own_hidden:  # a series with a __ label of its own: the three steps as defined
        labels = [*labels, ((HIDDEN, "x"),)]
    family = _family(labels)
    joined_pairs = tuple(sorted(pairs))
    result, dropped, duplicates = relabel(joined(family, joined_pairs), compiled)
    expected = (without_hidden_labels(result), dropped, duplicates)
    assert relabel_joined(family, compiled, joined_pairs) == expected
    cache = RelabelCache()
    for _ in range(2):
        assert relabel_joined(family, compiled, joined_pairs, cache) == expected


def test_steps_run_once_per_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand series told apart by a label no step reads: the steps run twice, not 1000x."""
    step = RelabelConfig(
        0, RelabelAction.REPLACE, ("cache_source",), ";", "storage", "cache_source", "storage_L3"
    )
    compiled = (_compile_step(step),)
    family = _family(
        [
            (("cache_source", v), ("tp_rank", str(r)))
            for v in ("storage", "device")
            for r in range(500)
        ]
    )
    runs: list[Labels] = []
    real = relabel_module.patch_for

    def counted(labels: Labels, steps: tuple[CompiledRelabel, ...]) -> object:
        runs.append(labels)
        return real(labels, steps)

    monkeypatch.setattr(relabel_module, "patch_for", counted)
    out, dropped, duplicates = relabel(family, compiled)
    assert len(runs) == 2
    assert (len(out.samples), dropped, duplicates) == (1000, 0, 0)
    untouched = [s for s in out.samples if dict(s.labels)["cache_source"] == "device"]
    assert all(s is o for s, o in zip(untouched, family.samples[500:], strict=True))


def test_repeated_projections_are_hits_and_new_steps_miss() -> None:
    """The second payload is all hits; other steps (recompiled rules) never see those results."""
    step = RelabelConfig(
        0, RelabelAction.REPLACE, ("cache_source",), ";", "storage", "cache_source", "storage_L3"
    )
    compiled = (_compile_step(step),)
    family = _family(
        [(("cache_source", v), ("r", str(r))) for v in ("storage", "device") for r in range(3)]
    )
    cache = RelabelCache()
    first, _, _ = relabel(family, compiled, cache)
    # One outcome per projection (the cache_source value), not per series.
    assert (cache.lru.hits, cache.lru.misses) == (0, 2)
    again, _, _ = relabel(family, compiled, cache)
    assert again == first
    assert (cache.lru.hits, cache.lru.misses) == (2, 2)
    recompiled = (_compile_step(step),)  # equal, not the same: a reload
    assert cache.get(("storage",), recompiled) is MISS


def test_cache_stays_within_its_byte_budget() -> None:
    """Thousands of distinct label sets: the cache evicts to stay under its budget."""
    step = RelabelConfig(0, RelabelAction.REPLACE, ("v",), ";", "(.*)", "w", "${1}_copy")
    compiled = (_compile_step(step),)
    cache = RelabelCache(budget=64 << 10)
    for scrape in range(20):
        family = _family([(("v", f"{scrape}-{i}" * 8),) for i in range(200)])
        relabel(family, compiled, cache)
        assert cache.lru.bytes <= cache.lru.budget
    assert cache.lru.evictions > 0
    assert 0 < cache.lru.entries < 4000


def test_reset_forgets_every_result() -> None:
    """After a reset (the bridge's, on reload) nothing is held and the next run misses."""
    step = RelabelConfig(0, RelabelAction.DROP, ("v",), ";", "x")
    compiled = (_compile_step(step),)
    family = _family([(("v", "x"),), (("v", "y"),)])
    cache = RelabelCache()
    kept, dropped, _ = relabel(family, compiled, cache)
    assert (len(kept.samples), dropped) == (1, 1)
    cache.reset()
    assert (cache.lru.entries, cache.lru.bytes) == (0, 0)
    assert cache.get(("x",), compiled) is MISS
