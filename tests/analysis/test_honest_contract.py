"""Issue 27's "Done when", measured: successive real tp1 fetches with --profile approximations.

The fetches are the tp1 server's own, in order (tp1-cold, tp1, tp1-idle: the same processes,
the same prometheus_client files), with the tp1 /server_info answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.paths import FIXTURES, TESTS
from metricbridge.analysis.served import Payload, Served, serve_fetches
from metricbridge.cli.main import main
from metricbridge.config.load import load_config
from metricbridge.engines.loader import load_catalogue
from metricbridge.model.family import Family
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import detect_format
from metricbridge.translation.translate import RowState

SERVER_INFO = TESTS / "fixtures" / "server_info" / "sglang-0.5.23-tp1.json"
DOCS = TESTS.parent / "docs" / "contract.md"
SERVED = {RowState.NATIVE, RowState.TRANSLATED, RowState.SYNTHESIZED, RowState.APPROXIMATED}
RATIOS = (  # rows whose values are shares, 0 to 1
    "sglang:device_cache_hit_rate",
    "sglang:host_cache_hit_rate",
    "sglang:idle_batch_ratio",
    "sglang:dp_balance",
    "sglang:encoder_cache_req_hit_rate",
    "sglang:encoder_cache_byte_hit_rate",
)


def _payload(name: str, edits: tuple[tuple[bytes, bytes], ...] = ()) -> Payload:
    body = (FIXTURES / f"{name}.prom").read_bytes()
    for old, new in edits:
        assert old in body
        body = body.replace(old, new)
    return Payload(name, body, detect_format(body))


def _serve(*fetches: Payload, profiles: tuple[str, ...] = ("approximations",)) -> Served:
    rules = compile_rules(load_config(None, profiles))
    info = json.loads(SERVER_INFO.read_text())
    return serve_fetches([[f] for f in fetches], rules, info)


def _decisions() -> dict[str, str]:
    """Each row's decision as docs/contract.md's table lists it."""
    rows = re.findall(r"^\| `(sglang:[^`]+)` \| (\w[\w-]*) \|", DOCS.read_text(), re.MULTILINE)
    return dict(rows)


def test_successive_tp1_fetches_serve_24_rows_and_label_every_difference() -> None:
    """24 rows on the second fetch; a translated row is one docs/contract.md calls exact."""
    cold = _serve(_payload("tp1-cold"))
    second = _serve(_payload("tp1-cold"), _payload("tp1"))
    served = {n for n, s in second.translation.rows.items() if s.state in SERVED}
    assert len({n for n, s in cold.translation.rows.items() if s.state in SERVED}) < 24
    assert len(served) >= 24
    decisions = _decisions()
    config = load_config(None)
    assert set(decisions) == {rule.name for rule in config.families}  # every row decided
    assert len(decisions) == len(config.families)
    for name, status in second.translation.rows.items():
        if status.state is RowState.TRANSLATED:
            assert decisions[name] == "translated", name
        if status.state is RowState.APPROXIMATED:
            assert decisions[name] == "approximate", name


def test_no_counter_without_an_engine_source_is_served() -> None:
    """Every warm-zero row is a family the running release (0.5.23) defines."""
    catalogue = load_catalogue("0.5.23")
    result = _serve(_payload("tp1-cold"), _payload("tp1"), _payload("tp1-idle"))
    synthesized = [n for n, s in result.translation.rows.items() if s.state is RowState.SYNTHESIZED]
    assert synthesized
    for name in synthesized:
        assert catalogue.find(name) is not None, name
    served = {f.name for f in result.translation.families}
    assert "sglang:num_mm_requests_total" not in served


def test_the_storage_label_follows_the_payload() -> None:
    """hicache runs the file backend: its L3 hits read storage_file."""
    result = _serve(_payload("hicache"), profiles=())
    family = next(f for f in result.translation.families if f.name == "sglang:cached_tokens_total")
    assert isinstance(family, Family)
    sources = {dict(s.labels)["cache_source"] for s in family.samples}
    assert sources == {"device", "host", "storage_file"}


def test_no_ratio_leaves_its_range_after_a_partial_reset() -> None:
    """The device-hit counter resets (its process restarted), the prompt counter does not."""
    device = b'sglang:cached_tokens_total{cache_source="device",engine_type="unified",'
    model = b'model_name="meta-llama/Llama-3.1-8B-Instruct"} '
    reset = _payload("tp1-idle", ((device + model + b"2627.0", device + model + b"400.0"),))
    fetches = (_payload("tp1-cold"), _payload("tp1"), reset, _payload("tp1-idle"))
    for end in range(2, len(fetches) + 1):
        result = _serve(*fetches[:end])
        for family in result.translation.families:
            if family.name in RATIOS:
                assert isinstance(family, Family)
                assert all(0 <= s.value <= 1 for s in family.samples), family.name
    after_reset = _serve(*fetches[:3]).translation.rows["sglang:device_cache_hit_rate"]
    assert (after_reset.state, "reset" in after_reset.reason) == (RowState.MISSING, True)


def test_a_lazy_numerator_serves_its_ratio_on_the_first_interval() -> None:
    """tp1-cold has no cached_tokens_total: created since, it counts from 0 at the next fetch."""
    status = _serve(_payload("tp1-cold"), _payload("tp1")).translation.rows
    assert status["sglang:device_cache_hit_rate"].state is RowState.APPROXIMATED


def test_offline_contract_with_two_snapshots_serves_the_rate_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`contract --snapshot A --then B` computes rate rows, as the bridge does between fetches."""
    argv = [
        "contract", "--snapshot", str(FIXTURES / "tp1-cold.prom"),
        "--then", str(FIXTURES / "tp1.prom"), "--server-info", str(SERVER_INFO),
        "--profile", "approximations", "--format", "json",
    ]  # fmt: skip
    assert main(argv) == 0
    rows = {r["family"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    for name in ("sglang:device_cache_hit_rate", "sglang:run_batch_time", "sglang:num_retractions"):
        assert rows[name]["state"] == "approximated", name
    assert main(argv[:3] + argv[5:]) == 0  # one snapshot: the rates wait for a second fetch
    rows = {r["family"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["sglang:device_cache_hit_rate"]["state"] == "missing"


def test_engines_lists_the_catalogues(capsys: pytest.CaptureFixture[str]) -> None:
    """`metricbridge engines` names every catalogued release, text and JSON."""
    shipped = sorted(p.stem.removeprefix("sglang-") for p in _catalogue_dir().glob("*.json"))
    assert main(["engines", "--format", "json"]) == 0
    releases = json.loads(capsys.readouterr().out)
    assert sorted(r["version"] for r in releases) == shipped
    newest = next(r for r in releases if r["version"] == "0.5.23")
    assert newest["families"] == len(load_catalogue("0.5.23").families)
    assert main(["engines"]) == 0
    assert "sglang 0.5.23" in capsys.readouterr().out


def _catalogue_dir() -> Path:
    return TESTS.parent / "src" / "metricbridge" / "data" / "engines"
