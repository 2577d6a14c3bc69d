"""A command's one payload: the caches that serve only a later payload hold nothing, same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.paths import FIXTURES
from metricbridge.config.load import load_config
from metricbridge.exposition.caches import ONE_PAYLOAD_BUDGETS, CodecCaches
from metricbridge.model.family import Format
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import detect_format, render, run_pipeline

RULES = compile_rules(load_config())


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.name)
def test_one_payload_caches_translate_alike_and_keep_nothing_for_later(fixture: Path) -> None:
    payload = fixture.read_bytes()
    fmt = detect_format(payload)
    one = CodecCaches(ONE_PAYLOAD_BUDGETS)
    alone = run_pipeline(payload, fmt, RULES, caches=one)
    warm = CodecCaches()
    run_pipeline(payload, fmt, RULES, caches=warm)
    again = run_pipeline(payload, fmt, RULES, caches=warm)  # proven heads, layouts, plan reused
    for out in Format:
        assert render(alone, out) == render(again, out)
        assert render(run_pipeline(payload, fmt, RULES), out) == render(alone, out)
    for name in ONE_PAYLOAD_BUDGETS:
        cache = getattr(one, name)
        assert (cache.entries, cache.bytes) == (0, 0), name
        assert getattr(warm, name).entries > 0, name  # what the budgets of 0 leave out
