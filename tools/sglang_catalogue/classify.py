"""Which SGLang process registers a family, which feature switches it depends on, and its unit.

The process comes from the class or module that defines the metric (a curated table: SGLang
names its collectors after the process that owns them); features come from the ``if``
conditions around the definition and from the module (``disaggregation/``...).
"""

from __future__ import annotations

import re

# (pattern on "path:qualname", process). First match wins.
_PROCESSES: tuple[tuple[str, str], ...] = (
    (r"multimodal_gen/", "diffusion_server"),
    (r":SchedulerMetricsCollector|:SchedulerMetricsMixin|managers/scheduler", "scheduler"),
    (r":TokenizerMetricsCollector|managers/tokenizer_manager", "tokenizer_manager"),
    (r":RadixCacheMetricsCollector|mem_cache/", "scheduler"),
    (r":StorageMetricsCollector", "scheduler"),
    (r":ExpertDispatchCollector|eplb/", "scheduler"),
    (r":EncoderMetricsCollector|disaggregation/encoder/|encode_server", "encoder"),
    (r"disaggregation/", "scheduler"),
    (r"http_request_metrics|func_timer|entrypoints/http_server", "http_server"),
    (r"track_response_middleware|prometheus_middleware", "http_server"),
    (r"cpu_monitor", "every_process"),
    (r"startup_func_log_and_timer", "http_server"),
    (r"entrypoints/grpc", "grpc_server"),
    (r"detokenizer", "detokenizer"),
    (r"data_parallel_controller", "data_parallel_controller"),
)

# (pattern on a guard condition or a module path, feature tag)
_FEATURES: tuple[tuple[str, str], ...] = (
    (r"hierarchical_cache|hicache", "hicache"),
    (r"collect_tokens_histogram", "tokens-histogram"),
    (r"(?i)balancedness", "eplb"),
    (r"StorageMetricsCollector|storage_backend", "hicache-storage"),
    (r"disaggregation_mode|disaggregation/(?!encode)|mooncake|enable_pd", "pd-disaggregation"),
    (r"encoder_only|language_only|disaggregation/encoder|EncoderMetricsCollector", "epd"),
    (r"speculative|spec_algorithm", "speculative-decoding"),
    (r"dp_attention|METRICS_DP_ATTENTION", "dp-attention"),
    (r"enable_lora|lora_", "lora"),
    (r"streaming_session", "streaming-session"),
    (r"priority_scheduling", "priority-scheduling"),
    (r"expert_balancedness|eplb|ExpertDispatchCollector|expert_distribution", "eplb"),
    (r"mamba", "hybrid-ssm"),
    (r"DEVICE_TIMER|device_timer", "device-timer"),
    (r"multimodal_gen/", "diffusion"),
    (r"enable_mfu|MFU_METRICS|mfu_metrics", "mfu-metrics"),
)

# (pattern on a module path that records a family's values, feature tag)
_PATH_FEATURES: tuple[tuple[str, str], ...] = (
    (r"disaggregation/(?!encode)", "pd-disaggregation"),
    (r"disaggregation/encoder|encode_server|/encoder_", "epd"),
    (r"speculative/", "speculative-decoding"),
    (r"hicache|hiradix|hi_radix|cache_controller|mem_cache/storage", "hicache"),
    (r"/lora/", "lora"),
    (r"eplb/|expert_distribution", "eplb"),
    (r"multimodal_gen/", "diffusion"),
)

# (pattern on the name of a function that calls the recording code, feature tag)
_FUNCTION_FEATURES: tuple[tuple[str, str], ...] = (
    (r"hicache|hiradix", "hicache"),
    (r"disagg", "pd-disaggregation"),
)

_UNITS: tuple[tuple[str, str], ...] = (
    ("_gb_s", "gigabytes_per_second"),
    ("_seconds", "seconds"),
    ("_ms", "milliseconds"),
    ("_bytes", "bytes"),
    ("_mb", "megabytes"),
    ("_gb", "gigabytes"),
    ("_ratio", "ratio"),
    ("_tokens", "tokens"),
)


def process(path: str, qualname: str) -> str:
    """The process that registers a metric defined at ``path`` in ``qualname``."""
    key = f"{path}:{qualname}"
    for pattern, name in _PROCESSES:
        if re.search(pattern, key):
            return name
    return "unknown"


def features(path: str, qualname: str, guards: tuple[str, ...]) -> tuple[str, ...]:
    """Feature tags the definition's module, class and ``if`` conditions point at."""
    owner = qualname.split(".", maxsplit=1)[0]
    texts = [f"{path}:{owner}", *(g for g in guards if not g.startswith("not ("))]
    found = {tag for text in texts for pattern, tag in _FEATURES if re.search(pattern, text)}
    return tuple(sorted(found))


def reach_features(paths: frozenset[str]) -> tuple[str, ...]:
    """Features every module that records the family's values belongs to."""
    tagged = [{tag for pattern, tag in _PATH_FEATURES if re.search(pattern, p)} for p in paths]
    return tuple(sorted(set.intersection(*tagged))) if tagged else ()


def function_features(name: str) -> tuple[str, ...]:
    """Features a function's name says it belongs to (``check_hicache_events``)."""
    return tuple(sorted({tag for pattern, tag in _FUNCTION_FEATURES if re.search(pattern, name)}))


def unit(name: str, kind: str, declared: str | None) -> str | None:
    """The declared ``unit=``, else the unit the family's name ends with (if any)."""
    if declared:
        return declared
    base = name.removesuffix("_total") if kind == "counter" else name
    for suffix, found in _UNITS:
        if base.endswith(suffix):
            return found
    return None
