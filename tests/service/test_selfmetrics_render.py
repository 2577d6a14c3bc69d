"""The settled self-metrics are generated once per generation and format, gzip or not."""

from __future__ import annotations

import gzip

import pytest

from metricbridge.model.family import Format
from metricbridge.service import selfmetrics
from metricbridge.service.selfmetrics import SelfMetrics


@pytest.mark.parametrize("fmt", list(Format))
def test_a_gzip_response_reuses_the_plain_render(
    fmt: Format, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain then gzip, as every gzip response asks: one generation, the same bytes inside."""
    calls: list[Format] = []
    generate = selfmetrics._generate

    def counted(registry, fmt, caches):  # type: ignore[no-untyped-def]
        calls.append(fmt)
        return generate(registry, fmt, caches)

    monkeypatch.setattr(selfmetrics, "_generate", counted)
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
