"""Golden translations: input exposition + rules -> exact expected bytes, both output formats.

``pytest --update-golden`` rewrites the expected files from the current code; review the diff.
Every case runs twice: with the reader's verified fast path and with every line parsed
(``validation: full``); the two must agree byte for byte.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers.paths import FIXTURES, TESTS
from metricbridge.config.load import load_config
from metricbridge.model.family import Format, Verify
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import detect_format, render, run_pipeline

GOLDEN = TESTS / "golden"
CASES = sorted(path for path in GOLDEN.iterdir() if path.is_dir() and path.name != "fixtures")
FIXTURE_INPUTS = sorted([*FIXTURES.glob("*.prom"), *FIXTURES.glob("*.om.txt")])
OUTPUTS = {Format.TEXT: "out.prom", Format.OPENMETRICS: "out.om.txt"}


def _rules(config: Path | None, verify: Verify) -> CompiledRules:
    return dataclasses.replace(compile_rules(load_config(config)), validation=verify)


def _translate(payload: bytes, rules: CompiledRules, fmt: Format) -> bytes:
    outcome = run_pipeline(payload, detect_format(payload), rules)
    assert not outcome.problems, outcome.problems
    return render(outcome, fmt)


def _check(expected_path: Path, actual: bytes, update: bool) -> None:
    if update:
        expected_path.write_bytes(actual)
    assert expected_path.exists(), f"{expected_path} missing; run pytest --update-golden"
    assert actual.decode() == expected_path.read_text()


def _input(case: Path) -> Path:
    (path,) = [p for p in case.iterdir() if p.name.startswith("in.")]
    return path


@pytest.mark.parametrize("verify", list(Verify))
@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_case(case: Path, fmt: Format, verify: Verify, update_golden: bool) -> None:
    """A handwritten case translates to exactly its expected output."""
    rules = _rules(case / "aliases.yaml", verify)
    actual = _translate(_input(case).read_bytes(), rules, fmt)
    _check(case / OUTPUTS[fmt], actual, update_golden and verify is Verify.STRUCTURE)


@pytest.mark.parametrize("verify", list(Verify))
@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("fixture", FIXTURE_INPUTS, ids=[f.name for f in FIXTURE_INPUTS])
def test_real_fixture_through_default_contract(
    fixture: Path, fmt: Format, verify: Verify, update_golden: bool
) -> None:
    """Each real SGLang scrape translates with the shipped contract to its recorded output."""
    actual = _translate(fixture.read_bytes(), _rules(None, verify), fmt)
    expected = GOLDEN / "fixtures" / f"{fixture.name}.{OUTPUTS[fmt]}"
    _check(expected, actual, update_golden and verify is Verify.STRUCTURE)


@pytest.mark.parametrize("fixture", FIXTURE_INPUTS, ids=[f.name for f in FIXTURE_INPUTS])
def test_empty_rules_round_trip_real_fixtures(fixture: Path, tmp_path: Path) -> None:
    """With no rules, a text fixture comes back byte for byte (OpenMetrics: names restored)."""
    config = tmp_path / "empty.yaml"
    config.write_text("version: 1\n")
    payload = fixture.read_bytes()
    fmt = detect_format(payload)
    actual = _translate(payload, _rules(config, Verify.STRUCTURE), fmt)
    if fixture.name.endswith(".prom") or "prom3-accept" in fixture.name:
        assert actual == payload
    else:
        # prometheus_client >= 0.23 writes sglang_ sample names under sglang: TYPE lines
        # (client_python#1177); the reader restores the family's spelling, nothing else changes.
        assert actual == payload.replace(b"\nsglang_", b"\nsglang:")
