"""The packaged SGLang release catalogues: loading them, their coverage, and diffing releases."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from metricbridge.engines import (
    CatalogueError,
    EngineFamily,
    Lifecycle,
    available_versions,
    diff_catalogues,
    load_catalogue,
    newest_version,
    version_key,
)
from metricbridge.engines.model import Catalogue, catalogue_from_json

# Every final 0.5.x release on PyPI up to the newest catalogued one (pre-releases excluded).
LATEST_MINOR = [
    "0.5.1", "0.5.1.post1", "0.5.1.post2", "0.5.1.post3", "0.5.2", "0.5.3", "0.5.3.post1",
    "0.5.3.post2", "0.5.3.post3", "0.5.4", "0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5",
    "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6", "0.5.6.post1", "0.5.6.post2", "0.5.7",
    "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1",
    "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18",
    "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
]  # fmt: skip


def test_versions_are_in_release_order():
    versions = available_versions()
    assert list(versions) == sorted(versions, key=version_key)
    assert versions[0] == "0.3.5.post1"
    assert versions.index("0.5.9") < versions.index("0.5.10") < versions.index("0.5.10.post1")
    assert newest_version() == "0.5.23"


def test_every_release_of_the_latest_minor_and_one_per_older_minor():
    versions = available_versions()
    assert [v for v in versions if v.startswith("0.5.")] == LATEST_MINOR
    assert {v.rsplit(".", 1)[0] for v in versions if not v.startswith("0.5.")} >= {"0.3", "0.4"}


@pytest.mark.parametrize("version", available_versions())
def test_every_catalogue_loads(version):
    catalogue = load_catalogue(version)
    assert catalogue.version == version
    assert catalogue.engine == "sglang"
    assert len(catalogue.archive_sha256) == 64
    assert catalogue.families
    assert [f.name for f in catalogue.families] == sorted(catalogue.names)
    for family in catalogue.families:
        assert family.name.startswith("sglang:")
        assert family.type in {"counter", "gauge", "histogram", "summary", "info"}
        assert family.lifecycle.kind in {"startup", "lazy"}
        assert family.process != "unknown", family.name
        assert family.source_file.startswith("sglang/")
        assert family.source_line > 0
        assert (family.buckets is not None or family.buckets_note) or family.type != "histogram"


def test_a_family_record():
    family = load_catalogue("0.5.23").get("sglang:num_running_reqs")
    assert isinstance(family, EngineFamily)
    assert family.type == "gauge"
    assert family.help == "The number of running requests."
    assert family.labels == ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
    assert [o.name for o in family.optional_labels] == ["priority", "dp_rank"]
    assert family.dynamic_labels == ("get_observability().extra_metric_labels",)
    assert family.process == "scheduler"
    assert family.lifecycle == Lifecycle("lazy", "first call of log_stats()")
    assert family.defined_in == "SchedulerMetricsCollector.__init__"
    assert family.multiprocess_mode == "mostrecent"
    assert family.sample_names == ("sglang:num_running_reqs",)


def test_counters_histograms_and_features():
    catalogue = load_catalogue("0.5.23")
    prompt = catalogue.get("sglang:prompt_tokens")
    assert prompt is not None
    assert prompt.sample_names == ("sglang:prompt_tokens_total",)
    assert prompt.all_label_names[-1] == "is_streaming"
    ttft = catalogue.get("sglang:time_to_first_token_seconds")
    assert ttft is not None
    assert ttft.unit == "seconds"
    assert ttft.buckets is not None
    assert ttft.buckets[:3] == (0.1, 0.2, 0.4)
    hicache = catalogue.get("sglang:hicache_host_used_tokens")
    assert hicache is not None
    assert "hicache" in hicache.features
    dead = catalogue.get("sglang:func_latency_seconds")
    assert dead is not None
    assert dead.lifecycle.dead


@pytest.mark.parametrize(
    ("name", "feature"),
    [
        ("sglang:kv_transfer_latency_ms", "pd-disaggregation"),
        ("sglang:kv_transfer_speed_gb_s", "pd-disaggregation"),
        ("sglang:kv_transfer_total_mb", "pd-disaggregation"),
        ("sglang:kv_transfer_bootstrap_ms", "pd-disaggregation"),
        ("sglang:kv_transfer_alloc_ms", "pd-disaggregation"),
        ("sglang:load_back_tokens", "hicache"),
        ("sglang:load_back_bytes", "hicache"),
        ("sglang:load_back_duration_seconds", "hicache"),
    ],
)
def test_families_recorded_only_by_a_feature_s_code_carry_its_switch(name, feature):
    """0.5.23 records them from PD (disaggregation/) or HiCache (check_hicache_events) code only."""
    family = load_catalogue("0.5.23").get(name)
    assert family is not None
    assert feature in family.features
    assert family.lifecycle.kind == "lazy"


@pytest.mark.parametrize(
    "name",
    [
        "sglang:max_total_num_tokens",
        "sglang:context_len",
        "sglang:page_size",
        "sglang:startup_time_seconds",
        "sglang:startup_cuda_graph_time_seconds",
    ],
)
def test_families_set_once_at_start_up_are_startup_families(name):
    """Set by emit_constants() / emit_startup_time(), called only while the server starts."""
    family = load_catalogue("0.5.23").get(name)
    assert family is not None
    assert family.lifecycle.kind == "startup"
    assert "at start-up (from " in family.lifecycle.event


def test_a_start_up_family_behind_a_condition_stays_lazy():
    """max_total_num_tokens_swa is set at start-up only for hybrid-SWA models."""
    family = load_catalogue("0.5.23").get("sglang:max_total_num_tokens_swa")
    assert family is not None
    assert family.lifecycle.kind == "lazy"


@pytest.mark.parametrize("name", ["sglang:num_retracted_reqs", "sglang:num_paused_reqs"])
def test_the_gauges_of_multiprocess_mode_all_have_a_pid_label(name):
    """prometheus_client's multiprocess mode ``all`` serves one series per process, by pid."""
    family = load_catalogue("0.5.23").get(name)
    assert family is not None
    assert family.multiprocess_mode == "all"
    assert family.all_label_names[-1] == "pid"
    running = load_catalogue("0.5.23").get("sglang:num_running_reqs")
    assert running is not None
    assert "pid" not in running.all_label_names


def test_unknown_release_names_the_catalogued_ones():
    with pytest.raises(LookupError, match=r"0\.0\.1 is not catalogued.*0\.5\.23"):
        load_catalogue("0.0.1")


def test_a_catalogue_of_another_schema_is_refused():
    path = resources.files("metricbridge").joinpath("data", "engines", "sglang-0.5.23.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(CatalogueError, match="schema_version"):
        catalogue_from_json({**raw, "schema_version": 99})
    broken = {**raw, "families": [{"name": "sglang:x", "type": "gauge"}]}
    with pytest.raises(CatalogueError, match="sglang:x"):
        catalogue_from_json(broken)


def _family(name: str, kind: str = "gauge", labels: tuple[str, ...] = ("a",), help_text: str = "h"):
    return EngineFamily(name, kind, labels, help_text, None, "scheduler", Lifecycle("lazy", "e"))


def _catalogue(version: str, *families: EngineFamily) -> Catalogue:
    return Catalogue("sglang", version, tuple(sorted(families, key=lambda f: f.name)))


def test_diff_finds_every_kind_of_change():
    old = _catalogue(
        "1",
        _family("sglang:num_requests_running"),
        _family("sglang:kept", help_text="old"),
        _family("sglang:retyped"),
        _family("sglang:relabelled", labels=("a", "b")),
        _family("sglang:gone", kind="counter"),
    )
    new = _catalogue(
        "2",
        _family("sglang:num_running_reqs"),
        _family("sglang:kept", help_text="new"),
        _family("sglang:retyped", kind="counter"),
        _family("sglang:relabelled", labels=("a", "c")),
        _family("sglang:fresh", kind="histogram"),
    )
    diff = diff_catalogues(old, new)
    assert [(r.old, r.new) for r in diff.renames] == [
        ("sglang:num_requests_running", "sglang:num_running_reqs")
    ]
    assert [f.name for f in diff.added] == ["sglang:fresh"]
    assert [f.name for f in diff.removed] == ["sglang:gone"]
    assert [(r.name, r.old, r.new) for r in diff.retyped] == [
        ("sglang:retyped", "gauge", "counter")
    ]
    assert [(c.name, c.added, c.removed) for c in diff.labels_changed] == [
        ("sglang:relabelled", ("c",), ("b",))
    ]
    assert [(h.name, h.old, h.new) for h in diff.help_changed] == [("sglang:kept", "old", "new")]
    assert not diff.empty
    assert diff_catalogues(new, new).empty


def test_no_rename_across_types_or_label_sets():
    old = _catalogue("1", _family("sglang:queue_time_seconds", kind="histogram"))
    new = _catalogue("2", _family("sglang:queue_time_second", kind="gauge"))
    diff = diff_catalogues(old, new)
    assert not diff.renames
    assert len(diff.added) == len(diff.removed) == 1


@pytest.mark.parametrize(
    ("old", "new", "old_name", "new_name"),
    [
        ("0.5.2", "0.5.3", "sglang:queue_time_s", "sglang:queue_time_seconds"),
        (
            "0.5.1.post1",
            "0.5.1.post2",
            "sglang:num_prefill_infight_queue_reqs",
            "sglang:num_prefill_inflight_queue_reqs",
        ),
    ],
)
def test_a_real_rename_between_two_releases(old, new, old_name, new_name):
    diff = diff_catalogues(load_catalogue(old), load_catalogue(new))
    assert (old_name, new_name) in [(r.old, r.new) for r in diff.renames]
    assert old_name not in [f.name for f in diff.removed]
    assert new_name not in [f.name for f in diff.added]


def test_consecutive_patch_releases_diff_small():
    diff = diff_catalogues(load_catalogue("0.5.15"), load_catalogue("0.5.15.post1"))
    assert not diff.removed
    assert not diff.retyped
