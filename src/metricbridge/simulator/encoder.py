"""A deterministic model of SGLang 0.5.23's EPD encoder server (``--encoder-only``).

Its own ``/metrics`` holds only the encoder families of ``epd-encoder.prom`` (CATALOGUE.md
section 9): no http_*, tokenizer or scheduler families, every family created lazily, so a
fresh encoder renders an empty body. Requests carry images or videos drawn from a small pool
of files, so the per-rank embedding cache (an LRU bounded in MiB) sees hits and evictions.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from metricbridge.simulator.exposition import Labels, Registry, labels, with_labels
from metricbridge.simulator.families import ENCODER_FAMILIES

DEFAULT_ENCODER_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
_STEP_SECONDS = 0.25
_CACHE_LIMIT_MB = 64.0
_BYTES_PER_TOKEN = 3584 * 2  # hidden size x bf16: 1296 image tokens -> 8.859375 MiB
_TOKENS = {"image": 1296, "video": 4680}
_POOL = {"image": 40, "video": 12}  # distinct files a modality's requests draw from
_PREFIX = "sglang:encoder_"


@dataclass(slots=True)
class _Rank:
    """One encoder DP worker and its embedding cache (file id -> (modality, tokens))."""

    key: Labels
    cache: OrderedDict[str, tuple[str, int]] = field(default_factory=OrderedDict)
    size_mb: float = 0.0


class SimulatedEncoder:
    """A simulated EPD encoder server: same ``advance``/``render`` API as SimulatedEngine."""

    def __init__(
        self, *, dp_size: int = 2, model_name: str = DEFAULT_ENCODER_MODEL, seed: int = 0
    ) -> None:
        """Start a fresh encoder server with ``dp_size`` workers and no request yet."""
        if dp_size < 1:
            raise ValueError("dp_size must be positive")
        self.dp_size, self.model_name = dp_size, model_name
        self.now = 0.0
        self.scrapes = 0
        self.registry = Registry(ENCODER_FAMILIES)
        self._rng = random.Random(seed)  # noqa: S311 - simulated traffic, not cryptography
        self._ranks = [_Rank(labels(dp_rank=dp, model_name=model_name)) for dp in range(dp_size)]
        self._next_rank = 0

    def advance(self, seconds: float, *, arrivals_per_second: float) -> None:
        """Move simulated time forward; requests arrive as a Poisson process at the given rate."""
        if seconds < 0 or arrivals_per_second < 0:
            raise ValueError("seconds and arrivals_per_second must not be negative")
        remaining = seconds
        while remaining > 1e-9:
            dt = min(_STEP_SECONDS, remaining)
            self._step(dt, arrivals_per_second)
            self.now += dt
            remaining -= dt

    def render(self) -> bytes:
        """Serve one scrape of the encoder's own ``/metrics``."""
        self.scrapes += 1
        return self.registry.render()

    def _step(self, dt: float, rate: float) -> None:
        arrivals = _poisson(self._rng, rate * dt)
        batches: list[dict[str, int]] = [{} for _ in self._ranks]
        for _ in range(arrivals):
            index = self._next_rank
            self._next_rank = (index + 1) % self.dp_size
            modality, items = self._serve(self._ranks[index])
            batches[index][modality] = batches[index].get(modality, 0) + items
        for rank, batch in zip(self._ranks, batches, strict=True):
            for modality, items in batch.items():
                self._observe(rank, modality, "mm_items_per_batch", items)
            if self.dp_size > 1 and (batch or arrivals):
                pending = float(self._rng.random() < 0.2)
                self.registry.set(f"{_PREFIX}dp_pending_requests", rank.key, pending)

    def _serve(self, rank: _Rank) -> tuple[str, int]:
        rng, reg = self._rng, self.registry
        modality = "image" if rng.random() < 0.75 else "video"
        items = 2 if modality == "image" and rng.random() < 0.2 else 1
        key = _with(rank.key, "modality", modality)
        reg.inc(f"{_PREFIX}requests_received_total", key)
        queue_wait = rng.uniform(0.004, 0.04)
        preprocess = rng.uniform(0.03, 0.08) * (1.5 if modality == "video" else 1.0)
        self._observe(rank, modality, "queue_wait_seconds", queue_wait)
        self._observe(rank, modality, "preprocess_seconds", preprocess)
        self._observe(rank, modality, "mm_items_per_request", items)
        misses = sum(self._lookup(rank, modality) for _ in range(items))
        forward = rng.uniform(0.06, 0.12) * misses
        if misses:
            self._observe(rank, modality, "model_forward_seconds", forward)
        status = "error" if rng.random() < 0.03 else "success"
        reg.inc(f"{_PREFIX}requests_total", _with(key, "status", status))
        transfer = rng.uniform(0.004, 0.01) if status == "success" else 0.0
        if status == "success":
            backend = _with(rank.key, "backend", "zmq_to_scheduler")
            reg.observe(f"{_PREFIX}transfer_seconds", backend, transfer)
        e2e = queue_wait + preprocess + forward + transfer
        self._observe(rank, modality, "request_e2e_latency_seconds", e2e)
        return modality, items

    def _lookup(self, rank: _Rank, modality: str) -> int:
        """Look one item up in the cache; insert it on a miss. Return 1 on a miss."""
        file_id = f"{modality}-{self._rng.randrange(_POOL[modality])}"
        tokens, key, reg = _TOKENS[modality], _with(rank.key, "modality", modality), self.registry
        reg.inc(f"{_PREFIX}cache_total_files_total", key)
        reg.inc(f"{_PREFIX}cache_total_tokens_total", key, tokens)
        if file_id in rank.cache:
            rank.cache.move_to_end(file_id)
            reg.inc(f"{_PREFIX}cache_hit_files_total", key)
            reg.inc(f"{_PREFIX}cache_hit_tokens_total", key, tokens)
            return 0
        rank.cache[file_id] = (modality, tokens)
        rank.size_mb += tokens * _BYTES_PER_TOKEN / 1048576
        while rank.size_mb > _CACHE_LIMIT_MB:
            _, (old_modality, old_tokens) = rank.cache.popitem(last=False)
            rank.size_mb -= old_tokens * _BYTES_PER_TOKEN / 1048576
            reg.inc(f"{_PREFIX}cache_evictions_total", _with(rank.key, "modality", old_modality))
        reg.set(f"{_PREFIX}cache_size_mb", rank.key, rank.size_mb)
        reg.set(f"{_PREFIX}cache_entries", rank.key, float(len(rank.cache)))
        return 1

    def _observe(self, rank: _Rank, modality: str, family: str, value: float) -> None:
        self.registry.observe(f"{_PREFIX}{family}", _with(rank.key, "modality", modality), value)


def _poisson(rng: random.Random, mean: float) -> int:
    """Draw a Poisson count by summing exponential gaps (fine for the small means used here)."""
    if mean <= 0:
        return 0
    count, elapsed = 0, rng.expovariate(1.0)
    while elapsed < mean:
        count += 1
        elapsed += rng.expovariate(1.0)
    return count


def _with(key: Labels, name: str, value: str) -> Labels:
    return with_labels(key, ((name, value),))
