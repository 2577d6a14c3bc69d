"""The relabel cache: the same results as running the steps, bounded in bytes, emptied on reset."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from helpers.strength import examples
from metricbridge.config.schema import RelabelAction, RelabelConfig
from metricbridge.model.family import Family, FamilyMeta, Labels, MetricType, Sample
from metricbridge.translation.compiler import _compile_step
from metricbridge.translation.ops import relabel
from metricbridge.translation.relabel_cache import MISS, RelabelCache

# Few names and values, so that label sets repeat, rewrites collide and steps match.
NAMES = ("a", "b", "cache_source", "le")
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
    sources = tuple(draw(st.lists(st.sampled_from(NAMES[:3]), max_size=2)))
    return RelabelConfig(0, action, sources, ";", regex, target, replacement)


@st.composite
def label_sets(draw: st.DrawFn) -> Labels:
    """Labels as the reader makes them: unique names, any order."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    return tuple((name, draw(st.sampled_from(VALUES))) for name in names)


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


def test_repeated_label_sets_are_hits_and_new_steps_miss() -> None:
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
    assert (cache.lru.hits, cache.lru.misses) == (0, 6)
    again, _, _ = relabel(family, compiled, cache)
    assert again == first
    assert (cache.lru.hits, cache.lru.misses) == (6, 6)
    recompiled = (_compile_step(step),)  # equal, not the same: a reload
    assert cache.get(family.samples[0].labels, recompiled) is MISS


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
    assert cache.get(family.samples[0].labels, compiled) is MISS
