"""Bytes in, bytes out: read, merge upstreams, translate, write.

The one sequence every caller runs: the service (``service.bridge``) once per upstream fetch,
``metricbridge translate`` on a file, and ``check``, ``contract`` and ``diff`` on snapshots
(``analysis.served``), so each answers for exactly what a scrape of the bridge returns. Callers
differ only in what they do with what was dropped: the service counts and logs it, the offline
commands print it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metricbridge.errors import ExpositionError, LineError
from metricbridge.exposition.caches import ONE_PAYLOAD_BUDGETS, CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.scrape_memory import ScrapeMemory
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import AnyFamily, Format
from metricbridge.translation.caches import ONE_PAYLOAD_BUDGETS as ONE_PAYLOAD_TRANSLATION
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.translate import SynthState, Translation, sample_count, translate

# The bridge's own self-metrics own this prefix: an upstream family with it (another bridge
# scraped as an upstream) would clash with them.
RESERVED_PREFIX = "metricbridge_"
# The families of the bridge's own process (prometheus_client's process, platform and GC
# collectors), counters under both their names: an upstream that serves its own would make two
# families of one name. The bridge's are kept, as they describe the process Prometheus scrapes.
_RUNTIME_COUNTERS = (
    "process_cpu_seconds",
    "python_gc_objects_collected",
    "python_gc_objects_uncollectable",
    "python_gc_collections",
)
RESERVED_NAMES = frozenset(
    {
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
        "process_max_fds",
        "python_info",
        *_RUNTIME_COUNTERS,
        *(name + "_total" for name in _RUNTIME_COUNTERS),
    }
)


def detect_format(payload: bytes) -> Format:
    """OpenMetrics if the last line that is not blank is exactly ``# EOF``, else the text format.

    Only the last: elsewhere, ``# EOF`` is as likely a text-format comment, and reading a text
    file as OpenMetrics would change it (timestamps are seconds there, counters must end in
    ``_total``). ``stray_eof_line`` finds the ambiguous case so that callers can say so.
    """
    end = _content_end(payload)
    start = payload.rfind(b"\n", 0, end) + 1
    return Format.OPENMETRICS if payload[start:end] == b"# EOF" else Format.TEXT


def stray_eof_line(payload: bytes) -> int | None:
    """The line number of a ``# EOF`` line that more lines follow, if there is one."""
    end = _content_end(payload)
    if payload.startswith(b"# EOF\n") and end > len(b"# EOF"):
        return 1
    at = payload.find(b"\n# EOF\n", 0, end)
    return None if at < 0 else payload.count(b"\n", 0, at) + 2


def _content_end(payload: bytes) -> int:
    """Where the payload ends but for trailing newlines (no copy: payloads reach 10 MB)."""
    end = len(payload)
    while end and payload[end - 1] == 0x0A:
        end -= 1
    return end


def read_payload(  # noqa: PLR0913 - the body, how to read it, and what remembers it
    payload: bytes,
    fmt: Format,
    rules: CompiledRules,
    *,
    empty_ok: bool = True,
    caches: CodecCaches | None = None,
    memory: ScrapeMemory | None = None,
) -> Exposition:
    """Read one upstream body; raise ``ExpositionError`` only if none of it is usable.

    With ``empty_ok`` an empty body is no families, not an error: a server with no metric
    families yet (a cold EPD encoder) answers 200 with none. A file of 0 bytes is an error
    (almost always a truncated copy). ``caches``: the caller's, see ``exposition.caches``;
    ``memory``: the upstream's, see ``exposition.scrape_memory``.
    """
    if not payload and empty_ok:
        return Exposition([], [], fmt)
    try:
        return read_exposition(payload, fmt, rules.validation, caches=caches, memory=memory)
    except LineError as exc:
        # A bad escape in a header line escapes the reader (xfail in test_properties.py).
        raise ExpositionError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class MergeDrop:
    """A family one upstream sent that the merge left out, and why."""

    source: str
    family: str
    reason: str  # "reserved_name" or "duplicate_family", as samples_dropped_total counts it
    samples: int
    kept_from: str = ""  # for a duplicate: the source whose family was kept

    def __str__(self) -> str:
        if self.reason == "reserved_name":
            return f"{self.source}: {self.family}: the bridge's own name; dropped"
        return f"{self.source}: {self.family} duplicates {self.kept_from}'s; dropped"


def merge_upstreams(
    parts: Sequence[tuple[str, Sequence[AnyFamily]]],
) -> tuple[list[AnyFamily], list[MergeDrop]]:
    """Concatenate each ``(source, families)`` in order; a name sent twice keeps the first."""
    owner: dict[str, str] = {}
    merged: list[AnyFamily] = []
    dropped: list[MergeDrop] = []
    for source, families in parts:
        for family in families:
            if family.name.startswith(RESERVED_PREFIX) or family.name in RESERVED_NAMES:
                dropped.append(
                    MergeDrop(source, family.name, "reserved_name", sample_count(family))
                )
            elif family.name in owner:
                dropped.append(
                    MergeDrop(
                        source,
                        family.name,
                        "duplicate_family",
                        sample_count(family),
                        owner[family.name],
                    )
                )
            else:
                owner[family.name] = source
                merged.append(family)
    return merged, dropped


@dataclass(frozen=True, slots=True)
class Outcome:
    """Translated upstreams and everything learned on the way."""

    translation: Translation
    problems: tuple[ExpositionError, ...]  # reader and rule problems; those families were dropped
    renamed_samples: int
    merge_drops: tuple[MergeDrop, ...] = ()


def translate_upstreams(  # noqa: PLR0913 - as translate, plus the upstreams' sources
    parts: Sequence[tuple[str, Exposition]],
    rules: CompiledRules,
    state: SynthState | None = None,
    *,
    now: float = 0.0,
    server_info: Mapping[str, object] | None = None,
    caches: CodecCaches | None = None,
    remembered: TranslationCaches | None = None,
) -> Outcome:
    """Merge the read upstreams (``(source, exposition)``, first wins) and translate them once."""
    merged, drops = merge_upstreams([(source, exp.families) for source, exp in parts])
    translation = translate(
        merged,
        rules,
        state,
        now=now,
        server_info=server_info,
        caches=caches,
        remembered=remembered,
    )
    problems = (*(p for _, exp in parts for p in exp.problems), *translation.problems)
    renamed = sum(exp.renamed_samples for _, exp in parts)
    return Outcome(translation, problems, renamed, tuple(drops))


def run_pipeline(  # noqa: PLR0913 - the body, how to read it, and what remembers it
    payload: bytes,
    fmt: Format,
    rules: CompiledRules,
    *,
    caches: CodecCaches | None = None,
    server_info: Mapping[str, object] | None = None,
    memory: ScrapeMemory | None = None,
    remembered: TranslationCaches | None = None,
) -> Outcome:
    """Read and translate one payload; raise ``ExpositionError`` only if none of it is usable.

    Without ``caches`` (the codec's) or ``remembered`` (translation's), the call makes caches of
    its own, for this payload (a command's one input), without those that serve only a later
    payload; a caller of many payloads passes its own, and for payloads of one upstream its
    ``memory``. ``server_info``: the engine's /server_info answer, for the rows derived from it.
    """
    if caches is None:
        caches = CodecCaches(ONE_PAYLOAD_BUDGETS)
    if remembered is None:
        remembered = TranslationCaches(ONE_PAYLOAD_TRANSLATION)
    exposition = read_payload(payload, fmt, rules, empty_ok=False, caches=caches, memory=memory)
    parts = [("", exposition)]
    return translate_upstreams(
        parts, rules, server_info=server_info, caches=caches, remembered=remembered
    )


def render(outcome: Outcome, fmt: Format, *, caches: CodecCaches | None = None) -> bytes:
    """The translated families in the requested wire format."""
    return write_exposition(outcome.translation.families, fmt, caches=caches)
