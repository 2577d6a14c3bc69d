"""One simulated SGLang scheduler group: a DP rank and the TP ranks that run its batches.

Requests queue, get admitted into a prefill batch while KV space and ``max_running_requests``
allow, decode at an inter-token latency that grows with the batch, and finish (or are aborted
by their client). The TP ranks of a group see the same batches, so every scheduler series is
written once per TP rank label set, as ``--enable-metrics-for-all-schedulers`` makes SGLang do.
Counters and log_stats gauges are published once per second of simulated time, like SGLang's
decode log interval; latency histograms are observed per request. Nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from metricbridge.simulator.exposition import Labels, Registry, labels, with_labels

if TYPE_CHECKING:
    import random

    from metricbridge.simulator.tokenizer import Request

CHUNKED_PREFILL_SIZE = 8192
_REPORT_INTERVAL = 1.0
_IDLE_PUBLISH_AFTER = 30.0  # SchedulerMetricsReporter publishes once when idle this long
_CUDA_GRAPH_MAX_BS = 160
_PER_STAGE = "sglang:per_stage_req_latency_seconds"
_PREFILL_TOKENS_PER_SECOND = 24000.0
_BOUNDS = ("1", "2", "3", "5", "7", "10", "20", "50", "100", "200", "+Inf")
# routing_key_*_req_count: plain gauges with (gt, le] labels, le as str(int) (quirk 10).
_ROUTING_BUCKETS = tuple(
    labels(gt=gt, le=le) for gt, le in zip(("0", *_BOUNDS[:-1]), _BOUNDS, strict=True)
)
_STAGE_WEIGHTS = {  # category -> (share of busy time, share of idle time)
    "other": (0.03, 0.015),
    "recv_requests": (0.03, 0.015),
    "process_input_requests": (0.015, 0.0),
    "get_next_batch_to_run": (0.015, 0.0),
    "process_queue": (0.0, 0.0),
    "run_batch": (0.86, 0.0),
    "process_batch_result": (0.035, 0.0),
    "sanity_check_cache": (0.0, 0.0),
    "idle": (0.0, 0.97),
}
# Exported by every server but constant here: hybrid-SWA/SSM pools, speculative decoding, PD
# queues, and the fields 0.5.23 never assigns (CATALOGUE section 0). A word list reads better.
_ZERO_GAUGES = (  # noqa: SIM905
    "num_grammar_queue_reqs swa_token_usage mamba_usage swa_available_tokens swa_evictable_tokens "
    "swa_used_tokens mamba_available_tokens mamba_evictable_tokens mamba_used_tokens "
    "spec_accept_length spec_accept_rate spec_cap_length spec_block_accept_length spec_num_steps "
    "spec_num_draft_tokens num_prefill_inflight_queue_reqs num_decode_transfer_queue_reqs "
    "num_decode_host_receive_queue_reqs num_decode_deferred_kv_release_reqs "
    "pending_prealloc_token_usage prealloc_swa_token_usage is_cuda_graph "
    "num_unique_running_routing_keys"
).split()


class Frontend(Protocol):
    """The tokenizer side, told about per-request events."""

    def first_token(self, req: Request) -> None:
        """Record the first output token of a request."""

    def stream(self, interval: float, tokens: int) -> None:
        """Record streamed tokens that arrived ``interval`` seconds apart."""

    def finish(self, req: Request, when: float) -> None:
        """Record a finished (or aborted) request."""


@dataclass(slots=True)
class _Window:
    """What happened since the last stats report."""

    seconds: float = 0.0
    busy: float = 0.0
    admitted: int = 0
    compute: int = 0
    device_hit: int = 0
    host_hit: int = 0
    decoded: int = 0
    prefill_batches: int = 0
    decode_passes: int = 0
    big_decode_passes: int = 0
    retracted: int = 0
    retracted_input: int = 0
    retracted_output: int = 0


@dataclass(frozen=True, slots=True)
class SchedulerSetup:
    """Static facts of one scheduler group."""

    keys: tuple[Labels, ...]  # scheduler label set of each TP rank
    radix_keys: tuple[Labels, ...]  # radix-cache label set of each TP rank
    pid_keys: tuple[Labels, ...]  # scheduler labels plus the process id (quirk 11)
    capacity: int
    max_running: int
    engine_type: str
    stages: tuple[str, str, str]  # (queue-side stage, forward stage, chunk stage)


class Scheduler:
    """The mutable state of one DP rank; ``step`` advances it by a slice of simulated time."""

    def __init__(self, setup: SchedulerSetup, registry: Registry, rng: random.Random) -> None:
        """Start empty: no request seen, no stats report published yet."""
        self.setup, self.reg, self.rng = setup, registry, rng
        self.queue: deque[Request] = deque()
        self.running: list[Request] = []
        self.used = self.evictable = self.decode_sum_seq_lens = 0
        self.cache_hit_rate, self.new_token_ratio = 0.0, 0.7
        self.reported = False
        self.window = _Window()

    def step(self, now: float, dt: float, frontend: Frontend) -> None:
        """Admit, prefill and decode for ``dt`` seconds from ``now``; report once a second."""
        self._admit(now, frontend)
        self._decode(now, dt, frontend)
        self._evict()
        self.window.seconds += dt
        if self.window.seconds >= _REPORT_INTERVAL - 1e-9:
            self._flush(now + dt)

    def _fits(self, req: Request) -> bool:
        reserve = req.prompt + int(req.output * self.new_token_ratio)
        return (
            len(self.running) < self.setup.max_running
            and self.used + reserve <= self.setup.capacity
        )

    def _admit(self, now: float, frontend: Frontend) -> None:
        hit = computed = 0
        while self.queue and self._fits(self.queue[0]):
            req = self.queue.popleft()
            start = max(req.arrival, now) + self.rng.expovariate(250.0)
            self._prefill(req, start)
            hit, computed = hit + req.prompt - req.uncached, computed + req.uncached
            self.running.append(req)
            self.used += req.prompt + 1
            frontend.first_token(req)
        if hit + computed:
            self.cache_hit_rate = hit / (hit + computed)
            self.new_token_ratio = max(
                0.1, self.new_token_ratio - 0.001 * self.window.decode_passes
            )
            self.window.prefill_batches += math.ceil(max(computed, 1) / CHUNKED_PREFILL_SIZE)

    def _prefill(self, req: Request, start: float) -> None:
        queue_stage, forward_stage, chunk_stage = self.setup.stages
        process = self.rng.uniform(0.0003, 0.002)
        chunks = max(0, math.ceil(req.uncached / CHUNKED_PREFILL_SIZE) - 1)
        chunked = chunks * CHUNKED_PREFILL_SIZE / _PREFILL_TOKENS_PER_SECOND
        forward = 0.012 + (req.uncached / _PREFILL_TOKENS_PER_SECOND) - chunked
        req.first_token = start + process + chunked + forward
        req.generated = 1
        for key in self.setup.keys:
            self.reg.observe("sglang:queue_time_seconds", key, start - req.arrival)
            self.reg.observe(_PER_STAGE, _stage(key, queue_stage), process)
            if chunks:
                self.reg.observe(_PER_STAGE, _stage(key, chunk_stage), chunked)
            self.reg.observe(_PER_STAGE, _stage(key, forward_stage), forward)
        w = self.window
        w.admitted, w.compute = w.admitted + 1, w.compute + req.uncached
        w.device_hit, w.host_hit = w.device_hit + req.cached_device, w.host_hit + req.cached_host
        w.busy += chunked + forward

    def _decode(self, now: float, dt: float, frontend: Frontend) -> None:
        if not self.running:
            return
        self.decode_sum_seq_lens = self.used  # of the batch that runs, finished or not
        interval = (0.011 + 0.00006 * len(self.running)) * self.rng.uniform(0.9, 1.15)
        passes = int(dt / interval)
        self.window.decode_passes += passes
        if len(self.running) > _CUDA_GRAPH_MAX_BS:
            self.window.big_decode_passes += passes
        self.window.busy += passes * interval
        still: list[Request] = []
        streamed = 0
        for req in self.running:
            start = max(req.first_token, now)
            progress = (now + dt - start) / interval if start < now + dt else 0.0
            tokens = self._advance_request(req, progress)
            streamed += tokens if req.streaming else 0
            if req.generated >= req.output:
                self._finish(req, start + tokens * interval, frontend)
            else:
                still.append(req)
        self.running = still
        if streamed:
            frontend.stream(interval, streamed)

    def _advance_request(self, req: Request, progress: float) -> int:
        wanted = progress + req.carry
        tokens = min(int(wanted), req.output - req.generated)
        req.carry = wanted - int(wanted)
        if req.retracts and req.generated < req.output // 2 <= req.generated + tokens:
            w = self.window
            w.retracted, w.retracted_input = w.retracted + 1, w.retracted_input + req.prompt
            w.retracted_output += req.generated
        req.generated += tokens
        self.used += tokens
        self.window.decoded += tokens
        return tokens

    def _finish(self, req: Request, when: float, frontend: Frontend) -> None:
        self.used -= req.prompt + req.generated
        self.evictable += req.uncached + req.generated
        frontend.finish(req, when)

    def _evict(self) -> None:
        excess = min(self.evictable, self.used + self.evictable - int(0.95 * self.setup.capacity))
        if excess <= 0:
            return
        self.evictable -= excess
        for key in self.setup.radix_keys:
            self.reg.inc("sglang:evicted_tokens_total", key, excess)
            self.reg.observe("sglang:eviction_duration_seconds", key, 0.0008 + excess * 2e-8)

    def _flush(self, now: float) -> None:
        w = self.window
        busy = min(1.0, w.busy / w.seconds)
        for tp, key in enumerate(self.setup.keys):
            self._count_tokens(key, w)
            self._count_time(key, w, busy, 1.0 + 0.03 * tp)
        if not self.reported and (w.admitted or now >= _IDLE_PUBLISH_AFTER):
            self.reported = True
        if self.reported:
            self._publish_gauges(w)
        self.window = _Window()

    def _count_tokens(self, key: Labels, w: _Window) -> None:
        inc = self.reg.inc
        for mode, amount in (("prefill_compute", w.compute), ("decode", w.decoded)):
            inc("sglang:realtime_tokens_total", _mode(key, mode), amount)
        inc("sglang:realtime_tokens_total", _mode(key, "prefill_cache"), w.device_hit + w.host_hit)
        for mode, amount in (("input", w.compute), ("device_hit", w.device_hit)):
            inc("sglang:prefill_effective_tokens_total", _mode(key, mode), amount)
        inc("sglang:prefill_effective_tokens_total", _mode(key, "host_hit"), w.host_hit)
        inc("sglang:cuda_graph_passes_total", _mode(key, "prefill_none"), w.prefill_batches)
        small = w.decode_passes - w.big_decode_passes
        inc("sglang:cuda_graph_passes_total", _mode(key, "decode_cuda_graph"), small)
        inc("sglang:cuda_graph_passes_total", _mode(key, "decode_none"), w.big_decode_passes)
        inc("sglang:num_retracted_requests_total", key, w.retracted)
        inc("sglang:num_retracted_input_tokens_total", key, w.retracted_input)
        inc("sglang:num_retracted_output_tokens_total", key, w.retracted_output)

    def _count_time(self, key: Labels, w: _Window, busy: float, cpu_scale: float) -> None:
        inc = self.reg.inc
        for category, (busy_share, idle_share) in _STAGE_WEIGHTS.items():
            seconds = w.seconds * (busy * busy_share + (1.0 - busy) * idle_share)
            inc("sglang:scheduler_stage_seconds_total", _category(key, category), seconds)
        inc("sglang:scheduler_idle_seconds_total", key, w.seconds * (1.0 - busy))
        cpu = w.seconds * (0.01 + 0.25 * busy) * cpu_scale
        inc("sglang:scheduler_process_cpu_seconds_total", key, cpu)

    def _publish_gauges(self, w: _Window) -> None:
        values = self._gauge_values(w)
        for key, pid_key in zip(self.setup.keys, self.setup.pid_keys, strict=True):
            for name, value in values.items():
                self.reg.set(name, key, value)
            for bucket in _ROUTING_BUCKETS:
                self.reg.set("sglang:routing_key_running_req_count", with_labels(key, bucket), 0.0)
                self.reg.set("sglang:routing_key_all_req_count", with_labels(key, bucket), 0.0)
            self.reg.set("sglang:num_retracted_reqs", pid_key, w.retracted)
            self.reg.set("sglang:num_paused_reqs", pid_key, 0.0)

    def _gauge_values(self, w: _Window) -> dict[str, float]:
        cap, kind = self.setup.capacity, self.setup.engine_type
        queued = float(len(self.queue))
        prealloc = sum(req.prompt for req in self.queue) / cap if kind == "decode" else 0.0
        values = {f"sglang:{name}": 0.0 for name in _ZERO_GAUGES}
        values.update(
            {
                "sglang:num_running_reqs": float(len(self.running)),
                "sglang:num_queue_reqs": queued,
                "sglang:gen_throughput": w.decoded / w.seconds,
                "sglang:cache_hit_rate": self.cache_hit_rate,
                "sglang:decode_sum_seq_lens": float(self.decode_sum_seq_lens),
                "sglang:token_usage": round(self.used / cap, 2),
                "sglang:full_token_usage": self.used / cap,
                "sglang:num_used_tokens": float(self.used),
                "sglang:kv_available_tokens": float(cap - self.used - self.evictable),
                "sglang:kv_evictable_tokens": float(self.evictable),
                "sglang:kv_used_tokens": float(self.used),
                "sglang:num_prefill_bootstrap_queue_reqs": queued if kind == "prefill" else 0.0,
                "sglang:num_decode_prealloc_queue_reqs": queued if kind == "decode" else 0.0,
                "sglang:prealloc_full_token_usage": prealloc,
                "sglang:utilization": -1.0 if kind == "prefill" else 0.0,
                "sglang:fwd_occupancy": math.nan,
                "sglang:new_token_ratio": self.new_token_ratio,
            }
        )
        return values


def _stage(key: Labels, stage: str) -> Labels:
    return with_labels(key, (("stage", stage),))


def _mode(key: Labels, mode: str) -> Labels:
    return with_labels(key, (("mode", mode),))


def _category(key: Labels, category: str) -> Labels:
    return with_labels(key, (("category", category), ("forward_overlap", "none")))
