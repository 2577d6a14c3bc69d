"""What the bridge would serve for given upstream payloads: read, merge, translate, index.

The service merges its upstreams before one translation (``bridge.Bridge._merge``): a family
named by two upstreams keeps the first, and upstream ``metricbridge_*`` families are dropped
because the bridge's own self-metrics own that prefix. The offline commands do the same here,
so ``check``, ``contract`` and ``diff`` answer for exactly what a scrape of the bridge returns.
Pure: payload bytes in, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metricbridge.analysis.catalog import Catalog, build_catalog
from metricbridge.analysis.dashboards import InputError
from metricbridge.errors import ExpositionError
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.sample_line import LineError
from metricbridge.model.family import AnyFamily, Format
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.translate import Translation, translate

__all__ = ["Payload", "Served", "serve_payloads"]

_RESERVED_PREFIX = "metricbridge_"


@dataclass(frozen=True, slots=True)
class Payload:
    """One upstream exposition: ``source`` names it (a file path or an upstream URL)."""

    source: str
    body: bytes
    format: Format


@dataclass(frozen=True, slots=True)
class Served:
    """The translation of the merged payloads, its catalog, and what was dropped on the way."""

    translation: Translation
    catalog: Catalog
    warnings: tuple[str, ...]


def serve_payloads(
    payloads: Sequence[Payload],
    rules: CompiledRules,
    server_info: Mapping[str, object] | None = None,
) -> Served:
    """Read each payload, merge first-wins, translate once and index the result.

    ``server_info`` is the engine's /server_info answer, which derived rows may read (the
    service polls it). A payload with no body counts as no families (a cold EPD encoder
    answers 200 with none). Raises ``InputError`` naming a payload nothing of which is usable.
    """
    merged: list[AnyFamily] = []
    owner: dict[str, str] = {}
    warnings: list[str] = []
    for payload in payloads:
        if not payload.body:
            continue
        try:
            exposition = read_exposition(payload.body, payload.format, rules.validation)
        except ExpositionError as exc:
            raise InputError(payload.source, exc.message, line=exc.line) from exc
        except LineError as exc:
            # A bad escape in a header line escapes the reader (xfail in test_properties.py).
            raise InputError(payload.source, str(exc)) from exc
        warnings.extend(f"{payload.source}: dropped a family: {p}" for p in exposition.problems)
        for family in exposition.families:
            if family.name.startswith(_RESERVED_PREFIX):
                warnings.append(f"{payload.source}: {family.name}: reserved prefix; dropped")
            elif family.name in owner:
                first = owner[family.name]
                warnings.append(f"{payload.source}: {family.name} duplicates {first}'s; dropped")
            else:
                owner[family.name] = payload.source
                merged.append(family)
    translation = translate(merged, rules, server_info=server_info)
    warnings.extend(f"translation dropped a family: {p}" for p in translation.problems)
    catalog = build_catalog(translation.families)
    warnings.extend(f"served family cannot be parsed: {p}" for p in catalog.problems)
    return Served(translation, catalog, tuple(warnings))
