"""What the bridge would serve for given upstream payloads: read, merge, translate, index.

Runs the service's own pipeline (``translation.pipeline``: read each payload, merge first-wins,
translate once), so ``check``, ``contract`` and ``diff`` answer for exactly what a scrape of the
bridge returns, then indexes the result. Pure: payload bytes in, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metricbridge.analysis.catalog import Catalog, build_catalog
from metricbridge.errors import ExpositionError, InputError
from metricbridge.exposition.reader import Exposition
from metricbridge.model.family import Format
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.pipeline import read_payload, translate_upstreams
from metricbridge.translation.translate import SynthState, Translation

__all__ = ["Payload", "Served", "serve_fetches", "serve_payloads"]


@dataclass(frozen=True, slots=True)
class Payload:
    """One upstream exposition: ``source`` names it (a file path or an upstream URL)."""

    source: str
    body: bytes
    format: Format


@dataclass(frozen=True, slots=True)
class Served:
    """The translation of the merged payloads, its catalog, and what was dropped on the way.

    ``upstream`` names every family the payloads had before translation (an engine release
    explains only a family the engine did not send).
    """

    translation: Translation
    catalog: Catalog
    warnings: tuple[str, ...]
    upstream: frozenset[str] = frozenset()


def serve_fetches(
    fetches: Sequence[Sequence[Payload]],
    rules: CompiledRules,
    server_info: Mapping[str, object] | None = None,
    interval: float = 15.0,
) -> Served:
    """What the bridge serves at the last of successive fetches of the same upstreams.

    Each fetch is translated with the state the one before left (counter values, which
    counters were read, idleness), ``interval`` seconds apart, as the service does; so rows
    derived between two fetches have values. The warnings are every fetch's.
    """
    state: SynthState | None = None
    served: Served | None = None
    warnings: list[str] = []
    for number, payloads in enumerate(fetches):
        served = serve_payloads(payloads, rules, server_info, state=state, now=number * interval)
        warnings.extend(served.warnings)
        state = served.translation.state
    if served is None:
        raise ValueError("serve_fetches needs one fetch at least")
    return Served(served.translation, served.catalog, tuple(warnings), served.upstream)


def serve_payloads(
    payloads: Sequence[Payload],
    rules: CompiledRules,
    server_info: Mapping[str, object] | None = None,
    *,
    state: SynthState | None = None,
    now: float = 0.0,
) -> Served:
    """Read each payload, merge first-wins, translate once and index the result.

    ``server_info`` is the engine's /server_info answer, which derived rows may read (the
    service polls it); ``state`` what the previous fetch left, ``now`` its time.
    A payload with no body counts as no families (a cold EPD encoder
    answers 200 with none). Raises ``InputError`` naming a payload nothing of which is usable.
    """
    parts: list[tuple[str, Exposition]] = []
    warnings: list[str] = []
    for payload in payloads:
        try:
            exposition = read_payload(payload.body, payload.format, rules)
        except ExpositionError as exc:
            raise InputError(payload.source, exc.message, line=exc.line) from exc
        warnings.extend(f"{payload.source}: dropped a family: {p}" for p in exposition.problems)
        parts.append((payload.source, exposition))
    outcome = translate_upstreams(parts, rules, state, now=now, server_info=server_info)
    translation = outcome.translation
    warnings.extend(str(drop) for drop in outcome.merge_drops)
    warnings.extend(f"translation dropped a family: {p}" for p in translation.problems)
    catalog = build_catalog(translation.families)
    warnings.extend(f"served family cannot be parsed: {p}" for p in catalog.problems)
    upstream = frozenset(family.name for _, exposition in parts for family in exposition.families)
    return Served(translation, catalog, tuple(warnings), upstream)
