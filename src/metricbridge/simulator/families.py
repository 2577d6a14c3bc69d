"""The family table of the simulated SGLang 0.5.23 upstream: names, types, HELP texts, buckets.

Everything here is copied from the real expositions in ``tests/fixtures/sglang-0.5.23/``:
``tp1.prom`` gives the order and the HELP texts, ``hicache.prom`` the radix-cache eviction
families, ``epd-encoder.prom`` the encoder server's families, and ``metric-definitions.json``
the bucket bounds. SGLang's own family order follows the multiprocess ``*.db`` directory listing
and is not stable (CATALOGUE.md section 5, quirk 6); this table keeps tp1.prom's order. Counter
names carry ``_total`` as the text format shows them; histogram bounds exclude ``+Inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """Metric types the simulator emits, spelled as in ``# TYPE`` lines."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """One metric family as SGLang registers it: exposition name, type, HELP and bounds."""

    name: str
    kind: Kind
    help: str
    buckets: tuple[float, ...] = ()


def _c(name: str, help_text: str) -> FamilySpec:
    return FamilySpec(name, Kind.COUNTER, help_text)


def _g(name: str, help_text: str) -> FamilySpec:
    return FamilySpec(name, Kind.GAUGE, help_text)


def _h(name: str, buckets: tuple[float, ...], help_text: str) -> FamilySpec:
    return FamilySpec(name, Kind.HISTOGRAM, help_text, buckets)


# fmt: off
_IMBALANCE_RATIO = (
    1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)
_SYNC_WAIT = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)
_PER_STAGE = (
    0.001, 0.0016200000000000001, 0.0026244000000000007, 0.004251528, 0.006887475360000002,
    0.011157710083200004, 0.018075490334784006, 0.029282294342350097, 0.047437316834607154,
    0.07684845327206359, 0.12449449430074302, 0.20168108076720373, 0.3267233508428701,
    0.5292918283654495, 0.8574527619520282, 1.389073474362286, 2.2502990284669036,
    3.6454844261163837, 5.905684770308542, 9.567209327899839, 15.49887911119774,
    25.10818416014034, 40.67525833942735, 65.89391850987231, 106.74814798599316,
    172.93199973730896, 280.1498395744405, 453.84274011059364, 735.2252389791618,
    1191.064887146242,
)
_QUEUE_TIME = (
    0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0,
    900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0, 3000.0,
)
_EVICTION = (
    0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.02, 0.03, 0.04, 0.05,
    0.1, 0.2, 0.5, 1.0,
)
_TTFT = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
)
_E2E = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0, 600.0, 1200.0, 1800.0, 2400.0,
)
_TOKEN_LATENCY = (
    0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
    0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0,
)
_TOKEN_COUNT = (
    100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0,
    8000.0, 9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0,
    30000.0, 35000.0, 40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0, 600000.0,
    800000.0, 1000000.0, 1100000.0,
)
_ENC_QUEUE_WAIT = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0,
)
_ENC_PREPROCESS = (
    0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
)
_ENC_MM_ITEMS_PER_REQUEST = (
    1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0, 64.0,
)
_ENC_MODEL_FORWARD = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
)
_ENC_TRANSFER = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
)
_ENC_REQUEST_E2E_LATENCY = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0,
)
_ENC_MM_ITEMS_PER_BATCH = (
    1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 32.0,
    64.0, 128.0,
)

ENGINE_FAMILIES: tuple[FamilySpec, ...] = (
    _g("sglang:startup_time_seconds", "Engine startup duration by phase in seconds."),
    _g("sglang:startup_cuda_graph_time_seconds",
       "CUDA graph capture duration by phase in seconds."),
    _h("sglang:dp_attention_token_imbalance_ratio", _IMBALANCE_RATIO,
       "Per MLP-sync step, max tokens over mean tokens across the DP ranks (1.0 = balanced, "
       "num_dp_ranks = one busy rank). Reported once per engine, by the scheduler of DP rank 0."),
    _h("sglang:dp_attention_sync_wait_seconds", _SYNC_WAIT,
       "Wall time of this DP rank's scheduler MLP-sync all-gather per step. On the gloo path "
       "(the default with overlap scheduling) this is waiting for the slowest rank; on the "
       "device-group paths it also includes the gather's stream sync."),
    _h("sglang:per_stage_req_latency_seconds", _PER_STAGE,
       "The latency of each stage of requests."),
    _h("sglang:queue_time_seconds", _QUEUE_TIME, "Histogram of queueing time in seconds."),
    _h("sglang:eviction_duration_seconds", _EVICTION,
       "End-to-end time of a device eviction pass in seconds; under --hicache-write-policy "
       "write_back this includes the blocking D->H backup (see "
       "sglang:hicache_backup_duration_seconds for the copy alone)."),
    _g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    _g("sglang:weight_memory_usage_gb", "Memory used by model weights in GB."),
    _g("sglang:kv_cache_memory_usage_gb", "Memory used by the KV cache pools in GB."),
    _g("sglang:graph_memory_usage_gb", "Memory used by captured device graphs in GB."),
    _g("sglang:page_size", "KV cache page size in tokens."),
    _g("sglang:num_pages", "Number of KV cache pages."),
    _g("sglang:context_len", "Maximum context length."),
    _g("sglang:startup_available_gpu_memory_gb", "Available GPU memory in GB at startup."),
    _g("sglang:num_running_reqs", "The number of running requests."),
    _g("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
    _g("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue."),
    _g("sglang:gen_throughput", "The generation throughput (token/s)."),
    _g("sglang:cache_hit_rate", "The prefix cache hit rate."),
    _g("sglang:decode_sum_seq_lens", "The sum of all sequence lengths in decode."),
    _g("sglang:token_usage", "The token usage."),
    _g("sglang:full_token_usage", "The token usage for full attention layers."),
    _g("sglang:swa_token_usage", "The token usage for SWA layers."),
    _g("sglang:mamba_usage", "The token usage for Mamba layers."),
    _g("sglang:num_used_tokens", "The number of used tokens."),
    _g("sglang:kv_available_tokens", "Number of free token slots in the KV cache pool."),
    _g("sglang:kv_evictable_tokens",
       "Number of evictable (radix-cached) token slots in the KV cache pool."),
    _g("sglang:kv_used_tokens", "Number of actively used token slots in the KV cache pool."),
    _g("sglang:swa_available_tokens",
       "Number of free token slots in the SWA pool (hybrid-SWA only)."),
    _g("sglang:swa_evictable_tokens",
       "Number of evictable (radix-cached) token slots in the SWA pool."),
    _g("sglang:swa_used_tokens", "Number of actively used token slots in the SWA pool."),
    _g("sglang:mamba_available_tokens",
       "Number of free state slots in the mamba SSM pool (hybrid-SSM only)."),
    _g("sglang:mamba_evictable_tokens",
       "Number of evictable (radix-cached) state slots in the mamba SSM pool."),
    _g("sglang:mamba_used_tokens", "Number of actively used state slots in the mamba SSM pool."),
    _g("sglang:spec_accept_length",
       "Mean acceptance length of speculative decoding (accepted drafts + bonus token per "
       "forward)."),
    _g("sglang:spec_accept_rate",
       "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."),
    _g("sglang:spec_cap_length",
       "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 "
       "when no cap is scheduled)."),
    _g("sglang:spec_block_accept_length",
       "Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; "
       "exact only in DSpark cap-accept mode)."),
    _g("sglang:spec_num_steps", "Currently active speculative_num_steps."),
    _g("sglang:spec_num_draft_tokens",
       "Currently active speculative_num_draft_tokens (decouples from steps under topk>1)."),
    _g("sglang:num_prefill_bootstrap_queue_reqs",
       "The number of requests in the prefill bootstrap queue."),
    _g("sglang:num_prefill_inflight_queue_reqs",
       "The number of requests in the prefill inflight queue."),
    _g("sglang:num_decode_prealloc_queue_reqs",
       "The number of requests in the decode prealloc queue."),
    _g("sglang:num_decode_transfer_queue_reqs",
       "The number of requests in the decode transfer queue."),
    _g("sglang:num_decode_host_receive_queue_reqs",
       "Requests in the decode transfer queue receiving into host memory or waiting for device "
       "admission."),
    _g("sglang:num_decode_deferred_kv_release_reqs",
       "The number of failed decode requests whose KV allocations are held pending transfer "
       "drain acknowledgement or timeout."),
    _g("sglang:pending_prealloc_token_usage",
       "The token usage for pending preallocated tokens (not preallocated yet)."),
    _g("sglang:prealloc_full_token_usage",
       "Share of the full-attention KV pool held by decode requests whose KV transfer is pending"
       " (preallocated, not yet running); same capacity basis as sglang:full_token_usage."),
    _g("sglang:prealloc_swa_token_usage",
       "Share of the SWA KV pool held by decode requests whose KV transfer is pending; same "
       "capacity basis as sglang:swa_token_usage."),
    _g("sglang:utilization", "The utilization."),
    _g("sglang:fwd_occupancy", "Forward pass GPU occupancy percentage."),
    _g("sglang:new_token_ratio", "The new token ratio."),
    _g("sglang:is_cuda_graph", "Whether the batch is using CUDA graph."),
    _g("sglang:num_unique_running_routing_keys", "Number of unique routing keys in running batch."),
    _g("sglang:routing_key_running_req_count",
       "Distribution of routing keys by running request count (gt < count <= le)."),
    _g("sglang:routing_key_all_req_count",
       "Distribution of routing keys by running+waiting request count (gt < count <= le)."),
    _c("sglang:prefill_effective_tokens_total",
       "Effective prefill tokens with retracted-request re-counts excluded, updated on each log "
       "interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate"
       " = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode "
       "in the numerator."),
    _c("sglang:scheduler_idle_seconds_total",
       "Total wall time while the scheduler has no runnable or queued work."),
    _c("sglang:scheduler_process_cpu_seconds_total",
       "Total CPU time consumed by the scheduler process across all threads."),
    _c("sglang:scheduler_stage_seconds_total",
       "Total scheduler-loop wall time exclusively attributed to each stage. forward_overlap "
       "(full, partial, none): full=both endpoints active, partial=one, none=no observed overlap"
       " (including unavailable timing). Not exact overlapped/exposed seconds."),
    _c("sglang:dp_attention_tokens_total",
       "Tokens of MLP-sync steps on this DP rank. kind=scheduled: tokens this rank ran; "
       "kind=imbalance: tokens the busiest rank ran beyond this rank, i.e. capacity lost to DP "
       "imbalance on this rank. On speculative-decode steps the unit is batch rows (requests)."),
    _c("sglang:dp_attention_steps_total",
       "MLP-sync steps on this DP rank. rank_state=idle: this rank had no tokens and only ran to"
       " keep the DP collectives in lockstep."),
    _c("sglang:dp_attention_pairs_total",
       "Causal (query, key) pairs attended by MLP-sync steps on this DP rank, pricing every "
       "layer as full attention: a decode row reads its sequence, a prefill chunk its prefix "
       "plus the pairs within the chunk. kind=scheduled: this rank; kind=imbalance: the busiest "
       "rank's excess over this rank. The context-length counterpart of "
       "sglang:dp_attention_tokens_total; like it, speculative-decode steps count one query per "
       "row. Sliding-window layers execute fewer pairs than counted, so on hybrid-SWA models "
       "long rows are overstated."),
    _c("sglang:cuda_graph_passes_total",
       "Total number of forward passes categorized by CUDA graph."),
    _c("sglang:realtime_tokens_total",
       "Total number of tokens processed (updated on each log interval). mode: prefill_compute, "
       "prefill_cache, decode."),
    _c("sglang:evicted_tokens_total",
       "The number of device KV token slots freed by eviction, regardless of whether the data "
       "was backed up to host (see sglang:hicache_backup_tokens_total) or destroyed (see "
       "sglang:hicache_dropped_tokens_total)."),
    _c("sglang:num_retracted_requests_total", "Total number of retracted requests."),
    _c("sglang:num_retracted_input_tokens_total", "Total number of retracted input tokens."),
    _c("sglang:num_retracted_output_tokens_total", "Total number of retracted output tokens."),
    _g("sglang:num_retracted_reqs", "The number of retracted requests."),
    _g("sglang:num_paused_reqs", "The number of paused requests by async weight sync."),
    _c("sglang:process_cpu_seconds_total",
       "Total CPU time consumed by this process (user + system)"),
    _c("sglang:http_requests_total", "Total number of HTTP requests by endpoint and method"),
    _c("sglang:http_responses_total", "Total number of HTTP responses by endpoint and status code"),
    _c("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
    _c("sglang:generation_tokens_total", "Number of generation tokens processed."),
    _c("sglang:num_requests_total", "Number of requests processed."),
    _c("sglang:cached_tokens_total",
       "Number of cached prompt tokens by source (device/host/storage)."),
    _c("sglang:num_so_requests_total", "Number of structured output requests processed."),
    _c("sglang:num_aborted_requests_total", "Number of requests aborted."),
    _h("sglang:time_to_first_token_seconds", _TTFT, "Histogram of time to first token in seconds."),
    _h("sglang:e2e_request_latency_seconds", _E2E,
       "Histogram of End-to-end request latency in seconds"),
    _h("sglang:request_time_per_output_token_seconds", _TOKEN_LATENCY,
       "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - "
       "1)."),
    _h("sglang:prompt_tokens_histogram", _TOKEN_COUNT, "Histogram of prompt token length."),
    _h("sglang:uncached_prompt_tokens_histogram", _TOKEN_COUNT,
       "Histogram of uncached (compute) prompt token length."),
    _h("sglang:generation_tokens_histogram", _TOKEN_COUNT, "Histogram of generation token length."),
    _h("sglang:inter_token_latency_seconds", _TOKEN_LATENCY,
       "Histogram of inter-token latency in seconds."),
    _g("sglang:routing_keys_active", "Number of unique routing keys with active requests"),
    _g("sglang:http_requests_active", "Number of currently active HTTP requests"),
)

ENCODER_FAMILIES: tuple[FamilySpec, ...] = (
    _h("sglang:encoder_queue_wait_seconds", _ENC_QUEUE_WAIT,
       "Time request spent waiting in scheduler queue."),
    _h("sglang:encoder_preprocess_seconds", _ENC_PREPROCESS,
       "Data loading and preprocessing latency."),
    _h("sglang:encoder_mm_items_per_request", _ENC_MM_ITEMS_PER_REQUEST,
       "Histogram of multimodal items per individual encoder request."),
    _h("sglang:encoder_model_forward_seconds", _ENC_MODEL_FORWARD,
       "GPU model forward pass latency."),
    _h("sglang:encoder_transfer_seconds", _ENC_TRANSFER,
       "Embedding transfer latency to prefill node."),
    _h("sglang:encoder_request_e2e_latency_seconds", _ENC_REQUEST_E2E_LATENCY,
       "Histogram of per-request end-to-end encoder latency in seconds (queue wait + encode)."),
    _h("sglang:encoder_mm_items_per_batch", _ENC_MM_ITEMS_PER_BATCH,
       "Histogram of multimodal items processed per encoder batch."),
    _c("sglang:encoder_requests_received_total",
       "Total requests received by encoder (at receive time), per DP rank."),
    _c("sglang:encoder_cache_total_tokens_total", "Total tokens processed (hit + miss)."),
    _c("sglang:encoder_cache_total_files_total", "Total files processed (hit + miss)."),
    _c("sglang:encoder_requests_total", "Total encoder requests by modality and status."),
    _c("sglang:encoder_cache_evictions_total", "Total cache evictions."),
    _c("sglang:encoder_cache_hit_tokens_total", "Total tokens served from cache (cache hits)."),
    _c("sglang:encoder_cache_hit_files_total", "Total files served from cache."),
    _g("sglang:encoder_cache_size_mb", "Current cache size in MB."),
    _g("sglang:encoder_cache_entries", "Current number of cache entries."),
    _g("sglang:encoder_dp_pending_requests", "Number of pending requests per encoder DP rank."),
)
# fmt: on
