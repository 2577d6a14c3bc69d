"""The simulated tokenizer/HTTP process: request-level families and the HTTP middleware's.

It mirrors SGLang's TokenizerMetricsCollector (series keyed by ``engine_type, model_name``, plus
``is_streaming`` or ``cache_source`` where SGLang adds them), the HTTP request middleware
(``http_requests_total`` counted before the handler runs, so a scrape counts itself;
``http_responses_total`` after the body was sent) and the process CPU monitor.
"""

from __future__ import annotations

from dataclasses import dataclass

from metricbridge.simulator.exposition import Labels, Registry, labels, with_labels

_TOKENIZER_OVERHEAD = 0.002  # detokenize + HTTP round trip on top of the scheduler's timings


@dataclass(slots=True)
class Request:
    """One client request as the scheduler and the tokenizer see it."""

    arrival: float
    prompt: int
    output: int  # tokens generated before finishing, or before the client aborts
    cached_device: int
    cached_host: int
    streaming: bool
    aborted: bool
    structured: bool
    retracts: bool
    endpoint: str
    generated: int = 0
    first_token: float = 0.0
    carry: float = 0.0

    @property
    def uncached(self) -> int:
        """Return the prompt tokens the prefill has to compute."""
        return self.prompt - self.cached_device - self.cached_host


class Tokenizer:
    """Receives request events from the schedulers and scrapes from the HTTP server."""

    def __init__(self, registry: Registry, key: Labels, engine_type: str) -> None:
        """Write into ``registry`` under the tokenizer label set ``key``."""
        self.reg, self.key = registry, key
        # A PD prefill server never produces the decode-side latencies (CATALOGUE section 3.2).
        self.decode_latencies = engine_type != "prefill"

    def seed_processes(self, *, dp_controller: bool) -> None:
        """Create the series that exist before the first request."""
        self.reg.set("sglang:process_cpu_seconds_total", _component("detokenizer"), 0.0)
        self.reg.set("sglang:process_cpu_seconds_total", _component("tokenizer"), 0.01)
        if dp_controller:
            self.reg.set(
                "sglang:process_cpu_seconds_total", _component("data_parallel_controller"), 0.0
            )
        self.reg.set("sglang:routing_keys_active", (), 0.0)

    def spend_cpu(self, seconds: float, *, dp_controller: bool) -> None:
        """Account background CPU time of the non-scheduler processes."""
        self.reg.inc("sglang:process_cpu_seconds_total", _component("tokenizer"), 0.004 * seconds)
        self.reg.inc("sglang:process_cpu_seconds_total", _component("detokenizer"), 0.002 * seconds)
        if dp_controller:
            self.reg.inc(
                "sglang:process_cpu_seconds_total",
                _component("data_parallel_controller"),
                0.003 * seconds,
            )

    def arrive(self, req: Request) -> None:
        """Count an incoming request in the HTTP middleware's families."""
        key = labels(endpoint=req.endpoint, method="POST")
        self.reg.inc("sglang:http_requests_total", key)
        self.reg.inc("sglang:http_requests_active", key)

    def first_token(self, req: Request) -> None:
        """Observe time to first token."""
        if self.decode_latencies:
            ttft = req.first_token - req.arrival + _TOKENIZER_OVERHEAD
            self.reg.observe("sglang:time_to_first_token_seconds", self._streaming(req), ttft)

    def stream(self, interval: float, tokens: int) -> None:
        """Observe inter-token latency in bulk, as SGLang does per output chunk."""
        if self.decode_latencies:
            self.reg.observe("sglang:inter_token_latency_seconds", self.key, interval, tokens)

    def finish(self, req: Request, when: float) -> None:
        """Record a finished request: counters, token histograms, latencies, HTTP response."""
        reg, key, streaming = self.reg, self.key, self._streaming(req)
        reg.inc("sglang:num_requests_total", streaming)
        reg.inc("sglang:prompt_tokens_total", streaming, req.prompt)
        reg.inc("sglang:generation_tokens_total", streaming, req.generated)
        for source, tokens in (("device", req.cached_device), ("host", req.cached_host)):
            reg.inc("sglang:cached_tokens_total", _with(key, "cache_source", source), tokens)
        reg.observe("sglang:prompt_tokens_histogram", key, req.prompt)
        reg.observe("sglang:uncached_prompt_tokens_histogram", key, req.uncached)
        reg.observe("sglang:generation_tokens_histogram", key, req.generated)
        reg.observe("sglang:e2e_request_latency_seconds", streaming, when - req.arrival)
        if self.decode_latencies and not req.aborted and req.generated > 1:
            tpot = (when - req.first_token) / (req.generated - 1)
            reg.observe("sglang:request_time_per_output_token_seconds", streaming, tpot)
        if req.structured:
            reg.inc("sglang:num_so_requests_total", key)
        if req.aborted:
            reg.inc("sglang:num_aborted_requests_total", key)
        reg.inc("sglang:process_cpu_seconds_total", _component("tokenizer"), 0.0015)
        http = labels(endpoint=req.endpoint, method="POST")
        reg.inc("sglang:http_requests_active", http, -1.0)
        reg.inc("sglang:http_responses_total", with_labels(http, (("status_code", "200"),)))

    def http(self, endpoint: str, method: str, status: int) -> None:
        """Count a short request/response pair the server answered itself."""
        key = labels(endpoint=endpoint, method=method)
        self.reg.inc("sglang:http_requests_total", key)
        self.reg.inc("sglang:http_requests_active", key)
        self.reg.inc("sglang:http_requests_active", key, -1.0)
        self.reg.inc(
            "sglang:http_responses_total", with_labels(key, (("status_code", str(status)),))
        )

    def scrape(self) -> bytes:
        """Render the registry the way a GET /metrics through SGLang's middleware sees it."""
        key = labels(endpoint="/metrics", method="GET")
        self.reg.inc("sglang:http_requests_total", key)
        self.reg.inc("sglang:http_requests_active", key)
        self.reg.inc("sglang:process_cpu_seconds_total", _component("tokenizer"), 0.0005)
        body = self.reg.render()
        self.reg.inc("sglang:http_requests_active", key, -1.0)
        self.reg.inc("sglang:http_responses_total", with_labels(key, (("status_code", "200"),)))
        return body

    def _streaming(self, req: Request) -> Labels:
        return _with(self.key, "is_streaming", "true" if req.streaming else "false")


def _component(name: str) -> Labels:
    return (("component", name),)


def _with(key: Labels, name: str, value: str) -> Labels:
    return with_labels(key, ((name, value),))
