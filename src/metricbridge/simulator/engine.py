"""A deterministic model of an SGLang 0.5.23 server whose ``render()`` looks like its /metrics.

The engine owns the start-up gauges, request arrivals and the wiring of the two process roles
(``simulator_tokenizer`` for the HTTP/tokenizer process, ``simulator_scheduler`` for each DP
rank). With ``dp_size > 1`` it is a DP-attention server like ``dp8.prom``: scheduler ``tp_rank``
and ``moe_ep_rank`` are the global rank ``dp * tp_size + t``, every scheduler series carries
``dp_rank``, requests go round-robin over the DP ranks, and each rank may run
``max_running_requests // dp_size`` requests, as SGLang divides the limit under DP attention.
``engine_type="prefill"``/``"decode"`` only relabel stages and switch the PD-specific gauges;
KV-transfer histograms and bootstrap failures are not modelled. One ``random.Random(seed)``
drives everything, so equal seeds and equal call sequences give equal bytes.
"""

from __future__ import annotations

import math
import random

from metricbridge.simulator.exposition import Labels, Registry, labels, with_labels
from metricbridge.simulator.families import ENGINE_FAMILIES
from metricbridge.simulator.scheduler import Scheduler, SchedulerSetup
from metricbridge.simulator.tokenizer import Request, Tokenizer

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ENGINE_TYPES = ("unified", "prefill", "decode")
_STEP_SECONDS = 0.25
_KV_TOKENS_PER_GPU = 421367
_CONTEXT_LEN = 131072
_HIT_FRACTIONS = (0.0, 0.0, 0.0, 0.1, 0.25, 0.5, 0.8)
_STAGES = {
    "unified": ("request_process", "prefill_forward", "chunked_prefill"),
    "prefill": ("prefill_bootstrap", "prefill_forward", "chunked_prefill"),
    "decode": ("decode_prepare", "decode_transferred", "decode_waiting"),
}
_STARTUP_PHASES = (
    ("load_weight", 9.812),
    ("kv_cache_allocation", 1.332),
    ("scheduler_e2e", 44.171),
    ("tokenizer_e2e", 48.371),
)
_GRAPH_PHASES = (
    "prefill",
    "decode",
    "target_verify",
    "draft_prefill",
    "draft_decode",
    "draft_extend",
)
_PRESEEDED = (
    (
        "sglang:prefill_effective_tokens_total",
        "mode",
        ("input", "device_hit", "host_hit", "storage_hit"),
    ),
    ("sglang:dp_attention_tokens_total", "kind", ("scheduled", "imbalance")),
    ("sglang:dp_attention_steps_total", "rank_state", ("active", "idle")),
    ("sglang:dp_attention_pairs_total", "kind", ("scheduled", "imbalance")),
)


class SimulatedEngine:
    """A simulated SGLang server: ``advance`` moves simulated time, ``render`` is a scrape."""

    def __init__(  # noqa: PLR0913 - the knobs of an SGLang launch, all keyword-only
        self,
        *,
        dp_size: int = 1,
        tp_size: int = 1,
        model_name: str = DEFAULT_MODEL,
        engine_type: str = "unified",
        max_running_requests: int = 256,
        seed: int = 0,
    ) -> None:
        """Start a fresh server: start-up gauges and pre-seeded series only, no request yet."""
        if dp_size < 1 or tp_size < 1 or max_running_requests < 1:
            raise ValueError("dp_size, tp_size and max_running_requests must be positive")
        if engine_type not in ENGINE_TYPES:
            raise ValueError(f"engine_type must be one of {ENGINE_TYPES}, got {engine_type!r}")
        self.dp_size, self.tp_size, self.model_name = dp_size, tp_size, model_name
        self.engine_type, self.max_running_requests = engine_type, max_running_requests
        self.now = 0.0
        self.scrapes = 0
        self.registry = Registry(ENGINE_FAMILIES)
        self._rng = random.Random(seed)  # noqa: S311 - simulated traffic, not cryptography
        tokenizer_key = labels(engine_type=engine_type, model_name=model_name)
        self._tokenizer = Tokenizer(self.registry, tokenizer_key, engine_type)
        self._schedulers = [
            Scheduler(self._setup(dp), self.registry, self._rng) for dp in range(dp_size)
        ]
        self._rate = 0.0
        self._next_arrival = math.inf
        self._next_dp = 0
        self._seed_startup()

    def advance(self, seconds: float, *, arrivals_per_second: float) -> None:
        """Move simulated time forward; requests arrive as a Poisson process at the given rate."""
        if seconds < 0 or arrivals_per_second < 0:
            raise ValueError("seconds and arrivals_per_second must not be negative")
        remaining = seconds
        while remaining > 1e-9:
            dt = min(_STEP_SECONDS, remaining)
            self._arrive(dt, arrivals_per_second)
            for scheduler in self._schedulers:
                scheduler.step(self.now, dt, self._tokenizer)
            self._tokenizer.spend_cpu(dt, dp_controller=self.dp_size > 1)
            self.now += dt
            remaining -= dt

    def render(self) -> bytes:
        """Serve one scrape: like SGLang's middleware, the scrape counts itself (quirk 16)."""
        self.scrapes += 1
        return self._tokenizer.scrape()

    def note_http_request(self, endpoint: str, method: str = "GET", status: int = 200) -> None:
        """Count an HTTP request the simulator's server answered (e.g. ``/health``)."""
        self._tokenizer.http(endpoint, method, status)

    def server_info(self) -> dict[str, object]:
        """Return the resolved server arguments SGLang's ``/server_info`` reports."""
        world = self.dp_size * self.tp_size
        return {
            "model_path": self.model_name,
            "served_model_name": self.model_name,
            "tp_size": world,
            "dp_size": self.dp_size,
            "pp_size": 1,
            "ep_size": world if self.dp_size > 1 else 1,
            "enable_dp_attention": self.dp_size > 1,
            "max_running_requests": self.max_running_requests,
            "max_total_num_tokens": self._schedulers[0].setup.capacity,
            "chunked_prefill_size": 8192,
            "context_length": _CONTEXT_LEN,
            "page_size": 1,
            "disaggregation_mode": "null" if self.engine_type == "unified" else self.engine_type,
            "enable_metrics": True,
            "enable_metrics_for_all_schedulers": True,
            "version": "0.5.23",
        }

    def _setup(self, dp: int) -> SchedulerSetup:
        keys, radix = [], []
        for t in range(self.tp_size):
            rank = dp * self.tp_size + t
            pairs: dict[str, object] = {
                "engine_type": self.engine_type,
                "model_name": self.model_name,
                "moe_ep_rank": rank if self.dp_size > 1 else 0,
                "pp_rank": 0,
                "tp_rank": rank,
            }
            if self.dp_size > 1:
                pairs["dp_rank"] = dp
            keys.append(labels(**pairs))
            radix.append(
                labels(cache_type="UnifiedRadixCache", dp_rank=dp, pp_rank=0, tp_rank=rank)
            )
        pids = tuple(with_labels(key, (("pid", str(23488 + 7 * i)),)) for i, key in enumerate(keys))
        return SchedulerSetup(
            keys=tuple(keys),
            radix_keys=tuple(radix),
            pid_keys=pids,
            capacity=_KV_TOKENS_PER_GPU * self.tp_size,
            max_running=max(1, self.max_running_requests // self.dp_size),
            engine_type=self.engine_type,
            stages=_STAGES[self.engine_type],
        )

    def _seed_startup(self) -> None:
        reg, tok = self.registry, self._tokenizer.key
        for phase, seconds in _STARTUP_PHASES:
            reg.set("sglang:startup_time_seconds", _with(tok, "phase", phase), seconds)
        for phase in _GRAPH_PHASES:
            value = 7.38 if phase == "decode" else 0.0
            reg.set("sglang:startup_cuda_graph_time_seconds", _with(tok, "phase", phase), value)
        for scheduler in self._schedulers:
            for key in scheduler.setup.keys:
                self._seed_scheduler(key, scheduler.setup.capacity)
        self._tokenizer.seed_processes(dp_controller=self.dp_size > 1)

    def _seed_scheduler(self, key: Labels, capacity: int) -> None:
        reg = self.registry
        reg.ensure("sglang:dp_attention_token_imbalance_ratio", key)
        reg.ensure("sglang:dp_attention_sync_wait_seconds", key)
        static = {
            "sglang:max_total_num_tokens": capacity,
            "sglang:weight_memory_usage_gb": round(14.99 / self.tp_size, 2),
            "sglang:kv_cache_memory_usage_gb": 51.43,
            "sglang:page_size": 1.0,
            "sglang:num_pages": capacity,
            "sglang:context_len": _CONTEXT_LEN,
            "sglang:startup_available_gpu_memory_gb": 78.6,
        }
        for name, value in static.items():
            reg.set(name, key, value)
        for phase in _GRAPH_PHASES:
            value = 0.41 if phase == "decode" else 0.0
            reg.set("sglang:graph_memory_usage_gb", _with(key, "phase", phase), value)
        for name, label, label_values in _PRESEEDED:
            for label_value in label_values:
                reg.ensure(name, _with(key, label, label_value))
        reg.set("sglang:scheduler_idle_seconds_total", key, 7.050339902999999)
        reg.set("sglang:scheduler_process_cpu_seconds_total", key, 0.08190418499999999)
        for category in _STAGE_CATEGORIES:
            category_key = with_labels(key, (("category", category), ("forward_overlap", "none")))
            reg.ensure("sglang:scheduler_stage_seconds_total", category_key)

    def _arrive(self, dt: float, rate: float) -> None:
        if rate != self._rate:
            self._rate = rate
            self._next_arrival = self.now + self._rng.expovariate(rate) if rate > 0 else math.inf
        while self._next_arrival < self.now + dt:
            req = self._new_request(self._next_arrival)
            self._schedulers[self._next_dp].queue.append(req)
            self._next_dp = (self._next_dp + 1) % self.dp_size
            self._tokenizer.arrive(req)
            self._next_arrival += self._rng.expovariate(rate)

    def _new_request(self, arrival: float) -> Request:
        rng = self._rng
        long_document = rng.random() < 0.1
        prompt = rng.randint(9000, 24000) if long_document else int(rng.lognormvariate(6.6, 0.8))
        prompt = max(16, prompt)
        output = max(2, min(2048, int(rng.lognormvariate(4.8, 0.7))))
        if self.engine_type == "prefill":
            output = 1  # the prefill side hands the request over after its first token
        aborted = rng.random() < 0.02
        if aborted:
            output = rng.randint(1, output)  # the client disconnects after this many tokens
        cached = int(prompt * rng.choice(_HIT_FRACTIONS))
        host = cached // 3 if rng.random() < 0.05 else 0
        return Request(
            arrival=arrival,
            prompt=prompt,
            output=output,
            cached_device=cached - host,
            cached_host=host,
            streaming=rng.random() < 0.4,
            aborted=aborted,
            structured=rng.random() < 0.05,
            retracts=rng.random() < 0.01,
            endpoint="/v1/chat/completions" if rng.random() < 0.3 else "/generate",
        )


_STAGE_CATEGORIES = (
    "other",
    "recv_requests",
    "process_input_requests",
    "get_next_batch_to_run",
    "process_queue",
    "run_batch",
    "process_batch_result",
    "sanity_check_cache",
    "idle",
)


def _with(key: Labels, name: str, value: str) -> Labels:
    return with_labels(key, ((name, value),))
