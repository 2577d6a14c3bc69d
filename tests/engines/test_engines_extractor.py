"""The static extractor (tools/sglang_catalogue) on small hand-written SGLang-like sources."""

from __future__ import annotations

import importlib
import io
import json
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from metricbridge.engines.model import catalogue_from_json

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
build = importlib.import_module("sglang_catalogue.catalogue").build
releases = importlib.import_module("sglang_catalogue.releases")
Release = importlib.import_module("sglang_catalogue.sources").Release
dumps = importlib.import_module("sglang_catalogue.writer").dumps
policy, version_key = releases.policy, releases.version_key
cli = importlib.import_module("extract_sglang_catalogue")

COLLECTOR = """
from prometheus_client import Counter as _PromCounter

PREFIX = "sglang:"
KINDS = ("a", "b")


def exponential_buckets(start, width, length):
    return [start * width**i for i in range(length)]


class ToyMetricsCollector:
    def __init__(self, labels, server_args, bucket_latency=None):
        from prometheus_client import Gauge, Histogram

        Counter = _PromCounter
        self.labels = labels
        self.requests_total = Counter(
            name=f"{PREFIX}requests_total",
            documentation="Requests " "served.",
            labelnames=list(labels.keys()) + ["code"],
        )
        self.up = Gauge("sglang:up", "Always there.", multiprocess_mode="livesum")
        self.preseeded = Counter(
            name="sglang:preseeded_total",
            documentation="Pre-created children.",
            labelnames=[*labels.keys(), "mode"],
        )
        for mode in ("x", "y"):
            self.preseeded.labels(**labels, mode=mode)
        if bucket_latency is None:
            bucket_latency = [0.1, 1, 10]
        self.latency = Histogram(
            name="sglang:latency_seconds",
            documentation="Latency.",
            labelnames=labels.keys(),
            buckets=bucket_latency,
        )
        self.stage = Histogram(
            name="sglang:stage_seconds",
            documentation="Stages.",
            labelnames=labels.keys(),
            buckets=exponential_buckets(start=0.001, width=2, length=3),
        )
        self.default_buckets = Histogram("sglang:plain", "Default buckets.")
        if server_args.enable_hierarchical_cache:
            self.host_tokens = Gauge(
                name="sglang:hicache_host_tokens",
                documentation="Host pool tokens.",
                labelnames=labels.keys(),
            )
        for kind in KINDS:
            Counter(f"sglang:{kind}_events_total", "Per kind.")

    def on_request(self, code):
        if code:
            self.requests_total.labels(**self.labels, code=code).inc()

    def observe(self, seconds):
        self.latency.labels(**self.labels).observe(seconds)
        self.stage.labels(**self.labels).observe(seconds)


def never_called():
    from prometheus_client import Gauge

    Gauge("sglang:orphan", "Defined in a function nobody calls.", labelnames=["x"])
"""

SCHEDULER = """
from sglang.srt.observability.toy import ToyMetricsCollector


class Scheduler:
    def init_metrics(self, server_args):
        labels = {"model_name": server_args.served_model_name, "tp_rank": 0}
        if server_args.enable_dp_attention:
            labels["dp_rank"] = self.dp_rank
        if server_args.extra_metric_labels:
            labels.update(server_args.extra_metric_labels)
        self.collector = ToyMetricsCollector(labels=labels, server_args=server_args)
        self.collector.on_request(200)
"""

WRAPPER = """
class GaugeHistogram:
    def __init__(self, name, documentation, labelnames, bucket_bounds, multiprocess_mode="mostrecent"):
        from prometheus_client import Gauge

        self._gauge = Gauge(
            name=name,
            documentation=documentation,
            labelnames=list(labelnames) + ["gt", "le"],
            multiprocess_mode=multiprocess_mode,
        )

    def set_raw(self, labels, values):
        self._gauge.labels(**labels, gt="0", le="1").set(values[0])


class Other:
    def __init__(self):
        self.keys_hist = GaugeHistogram(
            name="sglang:keys", documentation="Keys.", labelnames=["model_name"], bucket_bounds=[1]
        )
        self.counter = collections.Counter(["not", "a", "metric"])
"""

TEST_FILE = 'from prometheus_client import Gauge\nG = Gauge("sglang:in_a_test", "Not served.")\n'


def _catalogue(sources: dict[str, str]) -> dict[str, object]:
    texts = {path: textwrap.dedent(text) for path, text in sources.items()}
    return build(Release("0.0.1", texts, "toy.whl", "0" * 64))


@pytest.fixture(scope="module")
def toy() -> dict[str, dict[str, object]]:
    catalogue = _catalogue(
        {
            "sglang/srt/observability/toy.py": COLLECTOR,
            "sglang/srt/managers/scheduler.py": SCHEDULER,
            "sglang/srt/utils/gauge_histogram.py": WRAPPER,
            "sglang/test/test_toy.py": TEST_FILE,
        }
    )
    families = catalogue["families"]
    assert isinstance(families, list)
    return {f["name"]: f for f in families} | {"<label_sets>": catalogue["label_sets"]}


def test_fstring_names_resolve_and_counters_lose_total(toy):
    family = toy["sglang:requests"]
    assert family["type"] == "counter"
    assert family["help"] == "Requests served."
    assert family["source"] == "sglang/srt/observability/toy.py:18"


def test_names_known_only_at_run_time_are_templates(toy):
    family = toy["sglang:{kind}_events"]
    assert family["unresolved"] == ["kind"]


def test_label_set_comes_from_the_construction_site(toy):
    sets = toy["<label_sets>"]
    assert sets["ToyMetricsCollector"] == {
        "labels": ["model_name", "tp_rank"],
        "optional": [{"name": "dp_rank", "when": "server_args.enable_dp_attention"}],
        "dynamic": ["server_args.extra_metric_labels"],
    }
    assert toy["sglang:requests"]["label_set"] == "ToyMetricsCollector"
    assert toy["sglang:requests"]["labels"] == ["code"]


def test_labelled_counter_is_lazy_until_its_first_child(toy):
    family = toy["sglang:requests"]
    assert family["lifecycle"] == "lazy"
    assert family["event"] == "first call of on_request() (when code)"


def test_unlabelled_and_preseeded_families_exist_from_startup(toy):
    assert toy["sglang:up"]["lifecycle"] == "startup"
    assert toy["sglang:up"]["multiprocess_mode"] == "livesum"
    assert toy["sglang:preseeded"]["lifecycle"] == "startup"
    assert toy["sglang:preseeded"]["event"].startswith("children pre-created")


def test_a_function_nobody_calls_defines_a_dead_family(toy):
    family = toy["sglang:orphan"]
    assert family["dead"] is True
    assert "never_called()" in family["event"]


def test_feature_guard_is_recorded(toy):
    family = toy["sglang:hicache_host_tokens"]
    assert family["features"] == ["hicache"]
    assert family["guards"] == ["server_args.enable_hierarchical_cache"]
    assert "features" not in toy["sglang:latency_seconds"]


def test_bucket_lists(toy):
    assert toy["sglang:latency_seconds"]["buckets"] == [0.1, 1.0, 10.0]
    assert "default of" in toy["sglang:latency_seconds"]["buckets_note"]
    assert toy["sglang:stage_seconds"]["buckets"] == [0.001, 0.002, 0.004]
    assert toy["sglang:plain"]["buckets_note"] == "prometheus_client default buckets"
    assert toy["sglang:stage_seconds"]["unit"] == "seconds"


def test_wrapper_classes_define_families_with_their_own_labels(toy):
    family = toy["sglang:keys"]
    assert family["type"] == "gauge"
    assert family["labels"] == ["model_name", "gt", "le"]
    assert family["multiprocess_mode"] == "mostrecent"


def test_test_code_and_collections_counter_are_not_metrics(toy):
    assert "sglang:in_a_test" not in toy
    assert all("not" not in name for name in toy)


CHAIN_COLLECTOR = """
from prometheus_client import Gauge, Histogram


class ChainMetricsCollector:
    def __init__(self, labels):
        self.labels = labels
        self.transfer = Histogram("sglang:transfer_ms", "Transfer.", labelnames=labels.keys())
        self.loaded = Histogram("sglang:loaded_seconds", "Loaded.", labelnames=labels.keys())
        self.capacity = Gauge(
            "sglang:capacity", "Capacity.", labelnames=labels.keys(), multiprocess_mode="mostrecent"
        )
        self.retracted = Gauge("sglang:retracted", "Retracted.", labelnames=labels.keys())
        self.queued = Gauge(
            "sglang:queued", "Queued.", labelnames=labels.keys(), multiprocess_mode="mostrecent"
        )

    def observe_transfer(self, ms):
        self.transfer.labels(**self.labels).observe(ms)

    def observe_loaded(self, seconds):
        self.loaded.labels(**self.labels).observe(seconds)

    def emit_constants(self, capacity):
        self.capacity.labels(**self.labels).set(capacity)

    def log_stats(self, retracted, queued):
        self.retracted.labels(**self.labels).set(retracted)
        self.queued.labels(**self.labels).set(queued)
"""

# A helper of no feature between the collector and the PD code that calls it.
CHAIN_TIME_STATS = """
class ReqTimeStats:
    def observe_transfer_metrics(self, collector):
        collector.observe_transfer(1.0)
"""

CHAIN_PD_PREFILL = """
class PrefillMixin:
    def process_inflight_queue(self, req):
        req.time_stats.observe_transfer_metrics(self.collector)
"""

# A module of no feature, whose caller's name says HiCache.
CHAIN_CACHE = """
class RadixCache:
    def loading_check(self):
        self.metrics_collector.observe_loaded(0.1)

    def check_hicache_events(self):
        self.loading_check()
"""

CHAIN_SCHEDULER = """
from sglang.srt.observability.chain import ChainMetricsCollector


class Scheduler:
    def __init__(self, model):
        self.collector = ChainMetricsCollector(labels={"model_name": model})
        self.emit_metrics_constants()

    def emit_metrics_constants(self):
        self.collector.emit_constants(100)

    def event_loop(self):
        while True:
            self.collector.log_stats(0, 0)
"""


@pytest.fixture(scope="module")
def chain() -> dict[str, dict[str, object]]:
    catalogue = _catalogue(
        {
            "sglang/srt/observability/chain.py": CHAIN_COLLECTOR,
            "sglang/srt/observability/req_time_stats.py": CHAIN_TIME_STATS,
            "sglang/srt/disaggregation/prefill.py": CHAIN_PD_PREFILL,
            "sglang/srt/mem_cache/radix_cache.py": CHAIN_CACHE,
            "sglang/srt/managers/scheduler.py": CHAIN_SCHEDULER,
        }
    )
    families = catalogue["families"]
    assert isinstance(families, list)
    return {f["name"]: f for f in families}


def test_features_come_from_the_callers_up_the_chain(chain):
    """A PD module two calls up, or a caller named after HiCache, tags the family it records."""
    assert chain["sglang:transfer_ms"]["features"] == ["pd-disaggregation"]
    assert chain["sglang:loaded_seconds"]["features"] == ["hicache"]
    assert "features" not in chain["sglang:queued"]


def test_a_family_set_only_from_start_up_code_is_a_startup_family(chain):
    """Labelled, but its child is made by a call chain that begins in ``__init__``."""
    family = chain["sglang:capacity"]
    assert family["lifecycle"] == "startup"
    assert family["event"] == (
        "first call of emit_constants(), at start-up (from Scheduler.__init__())"
    )
    assert chain["sglang:queued"]["lifecycle"] == "lazy"


def test_a_gauge_of_multiprocess_mode_all_has_a_pid_label(chain, toy):
    """prometheus_client's default mode keeps each process's value under ``pid``."""
    assert chain["sglang:retracted"]["multiprocess_mode"] == "all"
    assert chain["sglang:retracted"]["labels"] == ["pid"]
    assert chain["sglang:queued"]["labels"] == []
    assert toy["sglang:up"]["labels"] == []  # livesum: summed over processes, no pid


def test_policy_takes_every_release_of_the_newest_minor():
    versions = ["0.3.4", "0.3.5", "0.3.5.post1", "0.3.5.post2", "0.3.6", "0.3.6.post1"]
    versions += ["0.3.6.post2", "0.4.0", "0.4.0.post1", "0.4.1", "0.4.1.post1", "0.4.1.post2"]
    versions += ["0.5.0rc1", "0.5.1", "0.5.1.post1", "0.5.2"]
    chosen = policy(versions, first="0.3.5.post1")
    assert chosen == [
        "0.3.5.post1",
        "0.3.5.post2",
        "0.3.6",
        "0.3.6.post2",
        "0.4.0",
        "0.4.0.post1",
        "0.4.1",
        "0.4.1.post2",
        "0.5.1",
        "0.5.1.post1",
        "0.5.2",
    ]
    assert version_key("0.5.10") > version_key("0.5.9.post2")


def test_writer_is_stable_sorted_json():
    value = {"b": [1, 2], "a": {"y": None, "x": [{"k": "v"}]}}
    text = dumps(value)
    assert json.loads(text) == value
    assert text.index('"a"') < text.index('"b"')
    assert "[1, 2]" in text
    assert dumps(json.loads(text)) == text


def _archives(tmp_path: Path) -> tuple[Path, Path]:
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("sglang/srt/observability/toy.py", textwrap.dedent(COLLECTOR))
        archive.writestr("sglang/srt/managers/scheduler.py", textwrap.dedent(SCHEDULER))
        archive.writestr("sglang-9.9.9.dist-info/METADATA", "Name: sglang\n")
    sdist = tmp_path / "sglang-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for path, text in [
            ("observability/toy.py", COLLECTOR),
            ("managers/scheduler.py", SCHEDULER),
        ]:
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(f"sglang-9.9.9/sglang/srt/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return wheel, sdist


def test_command_line_writes_a_loadable_catalogue(tmp_path):
    wheel, sdist = _archives(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["--from-dir", str(wheel), "9.9.9", "--out-dir", str(out)]) == 0
    from_wheel = json.loads((out / "sglang-9.9.9.json").read_text(encoding="utf-8"))
    catalogue = catalogue_from_json(from_wheel)
    assert catalogue.version == "9.9.9"
    assert catalogue.archive == wheel.name
    family = catalogue.get("sglang:requests")
    assert family is not None
    assert family.labels == ("model_name", "tp_rank", "code")
    assert [o.name for o in family.optional_labels] == ["dp_rank"]
    assert cli.main(["--from-dir", str(sdist), "9.9.9", "--out-dir", str(out)]) == 0
    from_sdist = json.loads((out / "sglang-9.9.9.json").read_text(encoding="utf-8"))
    assert from_sdist["families"] == from_wheel["families"]


def test_command_line_refuses_another_release_s_archive(tmp_path, capsys):
    wheel, _ = _archives(tmp_path)
    assert cli.main(["--from-dir", str(wheel), "9.9.8", "--out-dir", str(tmp_path)]) == 1
    assert "no sglang 9.9.8 wheel or sdist" in capsys.readouterr().err
