"""The settled self-metrics are generated once per generation and format, gzip or not."""

from __future__ import annotations

import gzip

import pytest

from metricbridge.exposition.caches import CodecCaches
from metricbridge.model.family import Format
from metricbridge.service import selfmetrics
from metricbridge.service.selfmetrics import SelfMetrics


@pytest.mark.parametrize("fmt", list(Format))
def test_a_gzip_response_reuses_the_plain_render(
    fmt: Format, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain then gzip, as every gzip response asks: one generation, the same bytes inside."""
    calls: list[Format] = []
    generate = selfmetrics.generate_families

    def counted(registry, fmt, caches, written=None):  # type: ignore[no-untyped-def]
        calls.append(fmt)
        return generate(registry, fmt, caches, written)

    monkeypatch.setattr(selfmetrics, "generate_families", counted)
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
