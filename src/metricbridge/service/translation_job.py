"""What the bridge's worker does with one wave of fetches: read each body, translate them once.

Pure: it takes the rules, the translation state, the caches and ``now`` as arguments and
returns what it made, for the bridge to account for on the event loop (metrics and logs are
not thread-safe enough to share, and the order of log lines should be the loop's).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metricbridge.errors import ExpositionError, UpstreamError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.openmetrics_fit import Misfit, before_1970, openmetrics_misfit
from metricbridge.exposition.reader import Exposition
from metricbridge.exposition.scrape_memory import ScrapeMemory
from metricbridge.model.family import Body, Format
from metricbridge.service.gzip_framing import OpenGzip
from metricbridge.service.scrape import Fetched
from metricbridge.service.snapshot import Attempt, render_part
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.pipeline import Outcome, read_payload, translate_upstreams
from metricbridge.translation.translate import SynthState, sample_count


@dataclass(frozen=True, slots=True)
class Read:
    """What the worker made of one upstream's fetch: its exposition, or why there is none."""

    exposition: Exposition | None
    failure: UpstreamError | ExpositionError | None
    size: int = 0
    largest: int | None = None  # samples of the largest family a rule reads; None: not read
    over_limit: tuple[tuple[str, int], ...] = ()  # families dropped by the limit, and samples


@dataclass(frozen=True, slots=True)
class Work:
    """A fetch wave read and translated in the worker, for the event loop to account for."""

    reads: tuple[Read, ...]
    outcome: Outcome | None = None  # None when no upstream could be read
    seconds: float = 0.0  # reading and translating; rendering is not included
    # The engine part for the format and encoding asked for, rendered in the same job.
    part: tuple[Body, ...] | OpenGzip | None = None
    # Why OpenMetrics cannot carry the translation (then every answer is text), or None.
    misfit: Misfit | None = None


def failed(attempt: Attempt) -> bool:
    """Whether the fetch itself failed: then there is nothing to read."""
    return isinstance(attempt.outcome, UpstreamError)


def translate_wave(  # noqa: PLR0913, PLR0917 - what one translation takes, handed over whole
    attempts: Sequence[Attempt],
    rules: CompiledRules,
    state: SynthState,
    now: float,
    server_info: dict[str, object] | None,
    caches: CodecCaches,
    sample_limit: int,
    render: tuple[Format, bool, int] | None = None,
    *,
    remembered: TranslationCaches | None = None,
    memories: Mapping[str, ScrapeMemory] | None = None,
) -> Work:
    """Read every fetched body and translate what could be read: the worker's job, pure.

    ``render`` (format, gzipped, gzip level): the response the fetch's starter waits for,
    rendered in the same job, so its translation and rendering are one hand-over, not two.
    ``memories``: each upstream's scrape memory, by its label (``exposition.scrape_memory``).
    """
    started = time.perf_counter()
    memories = memories or {}
    reads = tuple(
        read_one(attempt.outcome, rules, caches, sample_limit, memories.get(attempt.upstream.label))
        for attempt in attempts
    )
    parts = [
        (attempt.upstream.label, read.exposition)
        for attempt, read in zip(attempts, reads, strict=True)
        if read.exposition is not None
    ]
    outcome = None
    if parts:
        outcome = translate_upstreams(
            parts,
            rules,
            state,
            now=now,
            server_info=server_info,
            caches=caches,
            remembered=remembered,
        )
    misfit = openmetrics_misfit(outcome.translation.families) if outcome is not None else None
    if outcome is not None and misfit is not None:
        outcome = _fit_for_text(outcome)
    seconds = time.perf_counter() - started
    part = None
    if outcome is not None and render is not None:
        fmt, compressed, level = render
        fmt = Format.TEXT if misfit is not None else fmt  # as Snapshot.served_format
        families = outcome.translation.families
        part = render_part(families, fmt, compressed=compressed, level=level, caches=caches)
    return Work(reads, outcome, seconds, part, misfit)


def _fit_for_text(outcome: Outcome) -> Outcome:
    """The outcome without what no answer can carry once it must be text.

    A family stamped before 1970 beside one that OpenMetrics cannot carry: neither format
    carries both, so it is dropped, counted (``samples_dropped_total{reason="timestamp"}``) and
    logged, and the rest is served.
    """
    translation = outcome.translation
    gone = before_1970(translation.families)
    if not gone:
        return outcome
    ids = {id(family) for family in gone}
    stats = dataclasses.replace(translation.stats, dropped=translation.stats.dropped.copy())
    stats.dropped["timestamp"] += sum(len(family.samples) for family in gone)
    problems = tuple(
        ExpositionError(
            "a timestamp before 1970, which the text format cannot carry, in an answer that "
            "must be text (OpenMetrics cannot carry another family)",
            family=family.name,
            reason="timestamps",
        )
        for family in gone
    )
    kept = tuple(family for family in translation.families if id(family) not in ids)
    translation = dataclasses.replace(
        translation, families=kept, stats=stats, problems=translation.problems + problems
    )
    return dataclasses.replace(outcome, translation=translation)


def read_one(
    outcome: Fetched | UpstreamError,
    rules: CompiledRules,
    caches: CodecCaches,
    sample_limit: int,
    memory: ScrapeMemory | None = None,
) -> Read:
    """One fetched body read, or what the fetch or the reading came to.

    A family a rule reads with more than ``sample_limit`` samples (0: no limit) is dropped
    before translation: translating it costs time in proportion to its samples (a relabelled
    family of 100,000 series took 5 s), where a family no rule reads is copied through as it
    came, at the cost of its bytes. The whole family, not the samples past the limit: which of
    them came last says nothing of which matter.
    """
    if isinstance(outcome, UpstreamError):
        return Read(None, outcome)
    size = len(outcome.body)
    try:
        exposition = read_payload(outcome.body, outcome.format, rules, caches=caches, memory=memory)
    except ExpositionError as exc:
        return Read(None, exc, size)
    largest, kept, over = 0, [], []
    for family in exposition.families:
        if family.name in rules.by_input:
            samples = sample_count(family)
            largest = max(largest, samples)
            if sample_limit and samples > sample_limit:
                over.append((family.name, samples))
                continue
        kept.append(family)
    if over:
        exposition = dataclasses.replace(exposition, families=kept)
    return Read(exposition, None, size, largest, tuple(over))
