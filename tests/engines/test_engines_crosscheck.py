"""The statically extracted 0.5.23 catalogue against what SGLang 0.5.23 really does.

Three references, all in the repository's copy of the 0.5.23 fixtures: metric-definitions.json
(the metric objects 0.5.23's own collectors register when instantiated), CATALOGUE.md (when each
family appears) and the real /metrics expositions (*.prom). Every difference that remains is
listed here with its reason; docs/engines.md explains them for users.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from metricbridge.engines import EngineFamily, load_catalogue

TESTS = Path(__file__).resolve().parents[1]

# Families the source defines that the fixture's instantiation did not create.
ONLY_IN_CATALOGUE = {
    # multimodal_gen's diffusion server: another server, not the LLM server of the fixtures.
    **dict.fromkeys(
        [
            "sglang:diffusion_generation_batch_size",
            "sglang:diffusion_lora_active_adapters",
            "sglang:diffusion_lora_active_modules",
            "sglang:diffusion_lora_loaded_adapters",
            "sglang:diffusion_lora_module_active",
            "sglang:diffusion_num_queue_reqs",
            "sglang:diffusion_num_running_reqs",
            "sglang:diffusion_queue_time_seconds",
            "sglang:diffusion_request_latency_seconds",
            "sglang:diffusion_requests",
            "sglang:diffusion_stage_host_latency_seconds",
        ],
        "diffusion server",
    ),
    # Summary registered only when moe_ep_rank == 0 and expert balancedness is exported (EPLB).
    "sglang:eplb_balancedness": "guarded by exports_expert_balancedness_to_prometheus()",
}
# Bucket lists computed from run-time values: the fixture shows one instance of each.
BUCKETS_AT_RUN_TIME = {
    "sglang:eplb_gpu_physical_count": "range(ep_size): 0..7 with the fixture's ep_size=8",
    "sglang:prefill_delayer_wait_forward_passes": "cut at the server's max delay passes",
}
# Labels the fixture got from flags: --extra-metric-labels '{"cluster": "c1"}' and
# --tokenizer-metrics-allowed-custom-labels customer. The catalogue has them as dynamic labels.
USER_LABELS = {"cluster", "customer"}
# CATALOGUE.md's "when" column -> the catalogue's lifecycle (dead counts as its own kind).
WHEN = {
    "init": "startup",
    "preseed": "startup",
    "startup": "startup",
    "log_stats": "lazy",
    "lazy": "lazy",
    "never": "dead",
}
# Set once at start-up, but only under a condition of the model: lazy in the catalogue, so that
# an output without it is no failure.
CONDITIONAL_STARTUP = {"sglang:max_total_num_tokens_swa": "only for hybrid-SWA models"}
# CATALOGUE.md's "enabled by" column -> the feature the catalogue must tag the family with.
ENABLED_BY = {
    "--disaggregation-mode": "pd-disaggregation",
    "PD (both sides)": "pd-disaggregation",
    "--enable-hierarchical-cache": "hicache",
    "--enable-lora": "lora",
    "--enable-streaming-session": "streaming-session",
    "--encoder-only": "epd",
}
# Families CATALOGUE.md says HiCache enables that the catalogue leaves untagged: 0.5.23 records
# them from the radix cache's writing_check(), which its _evict() calls on every server; the
# HiCache condition is inside the call chain, which the extractor does not read.
UNTAGGED = dict.fromkeys(
    [
        "sglang:hicache_backup_duration_seconds",
        "sglang:hicache_backup_bytes",
        "sglang:hicache_backup_tokens",
        "sglang:hicache_dropped_tokens",
    ],
    "recorded from code every server runs, under a condition inside it",
)
# What else carries a feature: the storage tier's tag names --enable-hierarchical-cache too.
IMPLIES = {"hicache-storage": {"hicache"}}
FEATURE_HINTS = {
    "--enable-lora": "lora",
    "--enable-hierarchical-cache": "hicache",
    "--enable-streaming-session": "streaming-session",
}


def _fixture_dir() -> Path:
    found = sorted(p.parent for p in TESTS.rglob("sglang-0.5.23/metric-definitions.json"))
    assert found, "the repository's copy of the sglang-0.5.23 fixtures is missing"
    return found[0]


@pytest.fixture(scope="module")
def fixture_dir() -> Path:
    return _fixture_dir()


@pytest.fixture(scope="module")
def definitions(fixture_dir) -> dict[str, dict]:
    raw = json.loads((fixture_dir / "metric-definitions.json").read_text(encoding="utf-8"))
    return {m["name"]: m for m in raw["metrics"]}


@pytest.fixture(scope="module")
def catalogue() -> dict[str, EngineFamily]:
    return {f.name: f for f in load_catalogue("0.5.23").families}


def test_same_families(catalogue, definitions):
    assert set(definitions) - set(catalogue) == set()
    assert set(catalogue) - set(definitions) == set(ONLY_IN_CATALOGUE)


def test_same_types_and_help(catalogue, definitions):
    for name, real in definitions.items():
        assert catalogue[name].type == real["type"], name
        assert catalogue[name].help == real["help"], name


def test_same_label_names_in_declaration_order(catalogue, definitions):
    for name, real in definitions.items():
        family = catalogue[name]
        expected = [label for label in real["labelnames"] if label not in USER_LABELS]
        if real["type"] == "gauge" and real.get("multiprocess_mode", "all") in {"all", "liveall"}:
            expected.append("pid")  # prometheus_client's multiprocess mode appends it
        assert list(family.all_label_names) == expected, name
        if "cluster" in real["labelnames"]:
            assert family.dynamic_labels, name


def test_same_buckets(catalogue, definitions):
    for name, real in definitions.items():
        family = catalogue[name]
        if "buckets" not in real:
            assert family.type != "histogram" or family.buckets is not None, name
            continue
        if name in BUCKETS_AT_RUN_TIME:
            assert family.buckets is None
            assert family.buckets_note
            assert family.buckets_note.startswith("set at run time")
            continue
        assert family.buckets is not None, name
        assert [*family.buckets, math.inf] == [float(b) for b in real["buckets"]], name


def test_same_multiprocess_modes(catalogue, definitions):
    for name, real in definitions.items():
        if real["type"] == "gauge":
            assert catalogue[name].multiprocess_mode == real.get("multiprocess_mode", "all"), name


def test_same_defining_class_or_module(catalogue, definitions):
    for name, real in definitions.items():
        family = catalogue[name]
        where = real["source"].split(" (")[0].split()[-1].removesuffix(".py")
        assert where in f"{family.source_file}:{family.defined_in}", name
        for flag, feature in FEATURE_HINTS.items():
            if flag in real["source"]:
                assert feature in family.features, name


def _catalogue_rows(fixture_dir: Path) -> dict[str, list[str]]:
    rows = {}
    for line in (fixture_dir / "CATALOGUE.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `sglang:"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            name = cells[0].strip("`")
            family = name.removesuffix("_total") if cells[1] == "counter" else name
            rows[family] = cells
    return rows


def test_same_lifecycles_as_catalogue_md(catalogue, fixture_dir):
    rows = _catalogue_rows(fixture_dir)
    assert len(rows) > 150
    for name, cells in rows.items():
        family = catalogue[name]
        kind = "dead" if family.lifecycle.dead else family.lifecycle.kind
        expected = "lazy" if name in CONDITIONAL_STARTUP else WHEN[cells[5]]
        assert expected == kind, (name, cells[5], family.lifecycle)


def test_features_as_catalogue_md_enables_them(catalogue, fixture_dir):
    """Each family CATALOGUE.md says a switch enables carries that switch's feature."""
    checked = 0
    for name, cells in _catalogue_rows(fixture_dir).items():
        tags = set(catalogue[name].features)
        tags |= {implied for tag in tags for implied in IMPLIES.get(tag, ())}
        for switch, feature in ENABLED_BY.items():
            if cells[6].startswith(switch) and name not in UNTAGGED:
                assert feature in tags, (name, cells[6])
                checked += 1
    assert checked > 40
    assert all(not catalogue[name].features for name in UNTAGGED)  # or the list is stale


def _expositions(
    fixture_dir: Path,
) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], set]]:
    """``{family: (type, help)}`` and ``{(sample, file): label names}`` of the .prom files."""
    meta: dict[str, list[str]] = defaultdict(lambda: ["", ""])
    series: dict[tuple[str, str], set] = defaultdict(set)
    for path in sorted(fixture_dir.glob("*.prom")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith(("# TYPE ", "# HELP ")):
                _, kind, name, *rest = line.split(" ", 3)
                meta[name][kind == "HELP"] = rest[0] if rest else ""
            elif line and not line.startswith("#"):
                match = re.match(r"([^{\s]+)(?:\{(.*)\})?\s", line)
                assert match, line
                series[match[1], path.name] |= set(re.findall(r'(\w+)="', match[2] or ""))
    return {name: (kind, text) for name, (kind, text) in meta.items()}, series


def _family_of(sample: str, meta: dict[str, tuple[str, str]]) -> tuple[str, str]:
    for suffix in ("", "_bucket", "_sum", "_count"):
        exposed = sample.removesuffix(suffix) if suffix else sample
        if exposed in meta:
            kind = meta[exposed][0]
            return (exposed.removesuffix("_total") if kind == "counter" else exposed), exposed
    raise AssertionError(sample)


def test_real_expositions_agree(catalogue, fixture_dir):
    meta, series = _expositions(fixture_dir)
    assert len(series) > 500
    for (sample, path), labels in series.items():
        name, exposed = _family_of(sample, meta)
        family = catalogue[name]
        assert (family.type, family.help) == meta[exposed], name
        assert not family.lifecycle.dead, name
        allowed = set(family.all_label_names) | {"le", "quantile"}
        assert labels <= allowed, (name, path, labels - allowed)


def test_startup_families_are_on_a_fresh_server(catalogue, fixture_dir):
    meta, series = _expositions(fixture_dir)
    cold = {_family_of(sample, meta)[0] for sample, path in series if path == "tp1-cold.prom"}
    for family in catalogue.values():
        if family.lifecycle.kind == "startup" and family.process in {"scheduler", "http_server"}:
            assert family.name in cold or family.features, family.name
