"""The settled self-metrics are generated once per generation and format, gzip or not."""

from __future__ import annotations

import gzip
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, Histogram

from helpers.strength import examples
from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format
from metricbridge.service import selfmetrics
from metricbridge.service.metric_collectors import TextHistogram
from metricbridge.service.selfmetrics import SelfMetrics
from metricbridge.service.settled_metrics import (
    MirroredRegistry,
    TrackedCounter,
    TrackedGauge,
    WithoutCreated,
)


@pytest.mark.parametrize("fmt", list(Format))
def test_a_gzip_response_reuses_the_plain_render(
    fmt: Format, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain then gzip, as every gzip response asks: one generation, the same bytes inside."""
    calls: list[Format] = []
    render = MirroredRegistry.render

    def counted(registry, fmt, caches, written):  # type: ignore[no-untyped-def]
        calls.append(fmt)
        return render(registry, fmt, caches, written)

    monkeypatch.setattr(MirroredRegistry, "render", counted)
    metrics = SelfMetrics()
    metrics.upstream_failures.labels("u", "timeout").inc()
    metrics.changed()
    plain = metrics.render_settled(fmt)
    member = metrics.render_settled(fmt, gzip_level=1)
    assert calls == [fmt]
    assert gzip.decompress(member) == plain
    metrics.changed()  # a new generation renders afresh, once again
    metrics.render_settled(fmt, gzip_level=1)
    metrics.render_settled(fmt)
    assert calls == [fmt, fmt]


@pytest.mark.parametrize("fmt", list(Format))
def test_families_kept_from_the_last_render_are_the_ones_that_did_not_change(fmt: Format) -> None:
    """Each render equals one from scratch, as values move, appear and stay put."""
    metrics = SelfMetrics()
    renders = []
    for step in range(4):
        if step:
            metrics.upstream_failures.labels("u", "timeout").inc()
        if step == 2:
            metrics.upstream_failures.labels("u", "http").inc(0.5)
        metrics.changed()
        rendered = metrics.render_settled(fmt)
        fresh = selfmetrics.generate_families(metrics._settled, fmt, CodecCaches())
        assert rendered.removesuffix(b"# EOF\n") == fresh
        renders.append(rendered)
    assert len(set(renders)) == 4  # every step changed a value, and the render shows it


def _samples(families: list) -> list[tuple[str, tuple[tuple[str, str], ...], float | str]]:  # type: ignore[type-arg]
    """Each sample's name, sorted labels and value (NaN as "NaN", so that two compare equal)."""
    return [
        (
            sample.name,
            tuple(sorted(sample.labels.items())),
            "NaN" if math.isnan(sample.value) else sample.value,
        )
        for family in families
        for sample in family.samples
    ]


def test_a_tracked_family_is_collected_again_only_once_it_changed() -> None:
    """The same objects while nothing moved; afresh after a change, a new series, an inc."""
    gauge = TrackedGauge("g", "A gauge.", ["a"], registry=None)
    counter = TrackedCounter("c", "A counter.", ["a"], registry=None)
    gauges, counters = WithoutCreated(gauge), WithoutCreated(counter)
    gauge.labels("1").set(5)
    first = list(gauges.collect())
    gauge.labels("1").set(5)  # the value it holds: no change
    assert next(iter(gauges.collect())) is first[0]
    gauge.labels("1").set(6)
    moved = list(gauges.collect())
    assert moved[0] is not first[0]
    assert _samples(moved) == [("g", (("a", "1"),), 6.0)]
    gauge.labels("2")  # a new series, at 0
    assert _samples(list(gauges.collect()))[-1] == ("g", (("a", "2"),), 0.0)
    counter.labels("1").inc()
    before = list(counters.collect())
    counter.labels("1").inc(0)
    assert next(iter(counters.collect())) is before[0]
    counter.labels("1").inc(2)
    assert ("c_total", (("a", "1"),), 3.0) in _samples(list(counters.collect()))
    gauge.remove("2")  # a series gone is a change too
    assert [labels for _, labels, _ in _samples(list(gauges.collect()))] == [(("a", "1"),)]
    gauge.labels("2").set(1)  # and back again
    assert ("g", (("a", "2"),), 1.0) in _samples(list(gauges.collect()))
    gauge.remove("2")
    gauge.labels(a="2")  # made again, named this time: a change all the same
    assert ("g", (("a", "2"),), 0.0) in _samples(list(gauges.collect()))
    gauge.remove("2")  # removed by position, after it was made by name
    assert ("g", (("a", "2"),), 0.0) not in _samples(list(gauges.collect()))
    gauge.labels(a="2")  # and made by name again
    assert ("g", (("a", "2"),), 0.0) in _samples(list(gauges.collect()))
    gauge.clear()
    assert _samples(list(gauges.collect())) == []
    with pytest.raises(TypeError, match="set_function"):
        gauge.labels("1").set_function(lambda: 1.0)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["set", "inc", "dec", "labels", "remove"]),
        st.sampled_from("xyz"),
        st.sampled_from([0.0, 1.0, 2.5, -1.0]),
    ),
    max_size=30,
)


@settings(deadline=None, max_examples=examples(300, 60))
@given(ops=OPS)
def test_a_tracked_gauge_collects_what_prometheus_clients_own_does(ops: list) -> None:  # type: ignore[type-arg]
    """Whatever is done to it, collected after each step: the samples of an untracked twin."""
    tracked = TrackedGauge("g", "A gauge.", ["a"], registry=None)
    twin = Gauge("g", "A gauge.", ["a"], registry=None)
    wrapped = WithoutCreated(tracked)
    seen: dict[int, set[tuple[str, ...]]] = {id(tracked): set(), id(twin): set()}
    for op, label, value in ops:
        for gauge in (tracked, twin):
            if op == "remove":
                if (label,) in seen[id(gauge)]:
                    gauge.remove(label)
                    seen[id(gauge)].discard((label,))
                continue
            child = gauge.labels(label)
            seen[id(gauge)].add((label,))
            if op != "labels":
                getattr(child, op)(value)
        assert _samples(list(wrapped.collect())) == _samples(list(twin.collect()))


@pytest.mark.parametrize("fmt", list(Format))
def test_the_cache_figures_written_straight_are_what_their_collection_writes(fmt: Format) -> None:
    """``CacheMetrics.render_text`` against generate_families over the same figures, as they move."""
    metrics = SelfMetrics()
    caches = [ByteLRU("alpha", 1 << 20), ByteLRU("beta_cache", 4096)]
    metrics.track_caches(caches)
    for step in range(3):
        caches[0].put(("k", step), "v" * step, 10 * step)
        caches[1].get("missing")
        metrics.changed()
        straight = metrics.cache_metrics.render_text(fmt, CodecCaches())
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics.cache_metrics)
        assert straight.encode() == selfmetrics.generate_families(registry, fmt, CodecCaches())
        assert 'metricbridge_cache_hits_total{cache="alpha"}' in straight
        rendered = metrics.render_settled(fmt)
        fresh = selfmetrics.generate_families(metrics._settled, fmt, CodecCaches())
        assert rendered.removesuffix(b"# EOF\n") == fresh


BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OBSERVED = st.lists(
    st.tuples(
        st.sampled_from(["ok", "failed"]),
        st.one_of(st.sampled_from([0.0, 0.001, 10.0, 11.0, math.nan]), st.floats(0, 20)),
    ),
    max_size=20,
)


@settings(deadline=None, max_examples=examples(300, 60))
@given(observed=OBSERVED, fmt=st.sampled_from(list(Format)))
def test_a_text_histogram_writes_what_prometheus_clients_histogram_does(
    observed: list[tuple[str, float]], fmt: Format
) -> None:
    """Against prometheus_client's own Histogram fed alike: the samples and the written text."""
    ours = TextHistogram("h_seconds", "A histogram.", ["upstream", "outcome"], buckets=BUCKETS)
    theirs = Histogram(
        "h_seconds", "A histogram.", ["upstream", "outcome"], buckets=BUCKETS, registry=None
    )
    bare = TextHistogram("b_seconds", "Unlabelled.", buckets=BUCKETS)
    bare_twin = Histogram("b_seconds", "Unlabelled.", buckets=BUCKETS, registry=None)
    for outcome, value in observed:
        ours.labels("u", outcome).observe(value)
        theirs.labels("u", outcome).observe(value)
        bare.observe(value)
        bare_twin.observe(value)
    for mine, twin in ((ours, theirs), (bare, bare_twin)):
        assert _samples(list(WithoutCreated(mine).collect())) == _samples(
            list(WithoutCreated(twin).collect())
        )
        registry = CollectorRegistry(auto_describe=False)
        registry.register(WithoutCreated(twin))
        written = selfmetrics.generate_families(registry, fmt, CodecCaches())
        assert mine.render_text(fmt, CodecCaches()).encode() == written


def test_the_cache_figures_follow_the_caches_tracked() -> None:
    """Other caches with the same figures: their names are served, not the text kept for others."""
    metrics = SelfMetrics()
    metrics.track_caches([ByteLRU("first", 4096)])
    assert 'cache="first"' in metrics.render_settled(Format.TEXT).decode()
    metrics.track_caches([ByteLRU("second", 4096)])
    text = metrics.render_settled(Format.TEXT).decode()
    assert 'cache="second"' in text
    assert 'cache="first"' not in text
