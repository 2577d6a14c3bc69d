"""What a release catalogue holds: the metric families one engine release defines.

Plain frozen dataclasses, built from the packaged JSON by :func:`catalogue_from_json`; the JSON
layout is described in docs/engines.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from metricbridge.errors import CatalogueError

SCHEMA_VERSION = 1
LifecycleKind = Literal["startup", "lazy"]
_SAMPLE_SUFFIXES: Mapping[str, tuple[str, ...]] = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
    "info": ("_info",),
}


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """When a family first appears on ``/metrics``.

    ``startup``: from registration (unlabelled, or its labelled children are created up
    front). ``lazy``: only after ``event`` (prometheus_client exports a labelled family only
    once a child exists). ``dead`` marks a family nothing in that release can create.
    """

    kind: LifecycleKind
    event: str
    dead: bool = False


@dataclass(frozen=True, slots=True)
class OptionalLabel:
    """A label the engine adds only under a condition (``when`` is the source's condition)."""

    name: str
    when: str


@dataclass(frozen=True, slots=True)
class EngineFamily:
    """One metric family of one engine release, as its source defines it.

    ``labels`` are the label names it always has (its collector's shared ones, then its own);
    ``optional_labels`` are added under a condition; ``dynamic_labels`` are user-configured
    ones the source only knows at run time (source text, e.g. ``--extra-metric-labels``).
    """

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    unit: str | None
    process: str
    lifecycle: Lifecycle
    features: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None
    optional_labels: tuple[OptionalLabel, ...] = ()
    dynamic_labels: tuple[str, ...] = ()
    label_set: str | None = None
    declared_labels: tuple[str, ...] = ()
    guards: tuple[str, ...] = ()
    multiprocess_mode: str | None = None
    buckets_note: str | None = None
    unresolved: tuple[str, ...] = ()
    source_file: str = ""
    source_line: int = 0
    defined_in: str = ""

    @property
    def all_label_names(self) -> tuple[str, ...]:
        """Every label name the source can put on it, in declaration order.

        prometheus_client's order: the shared ones, the conditional ones, then its own.
        """
        return self.declared_labels or self.labels

    @property
    def sample_names(self) -> tuple[str, ...]:
        """Sample names in the text format (a counter's ``_total``, a histogram's parts)."""
        suffixes = _SAMPLE_SUFFIXES.get(self.type, ("",))
        return tuple(self.name + suffix for suffix in suffixes)


@dataclass(frozen=True, slots=True)
class Catalogue:
    """All families of one engine release, sorted by name."""

    engine: str
    version: str
    families: tuple[EngineFamily, ...]
    archive: str = ""
    archive_sha256: str = ""

    def get(self, name: str) -> EngineFamily | None:
        """The family called ``name`` (counters without ``_total``), if the release has it."""
        for family in self.families:
            if family.name == name:
                return family
        return None

    @property
    def names(self) -> frozenset[str]:
        """The family names of the release."""
        return frozenset(f.name for f in self.families)

    def find(self, name: str) -> EngineFamily | None:
        """The family called ``name`` or with a sample called ``name`` (``x_total``, ``x_bucket``).

        What a PromQL selector names is a sample; this is the family it reads, if any.
        """
        family = self.get(name)
        if family is not None:
            return family
        return next((f for f in self.families if name in f.sample_names), None)


def _strings(value: Any, where: str) -> tuple[str, ...]:  # noqa: ANN401 - JSON input
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogueError(f"{where}: expected a list of strings")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class _Shared:
    labels: tuple[str, ...] = ()
    optional: tuple[OptionalLabel, ...] = ()
    dynamic: tuple[str, ...] = ()


def _shared(raw: Mapping[str, Any], name: str) -> _Shared:
    where = f"label set {name!r}"
    try:
        optional = tuple(OptionalLabel(str(o["name"]), str(o["when"])) for o in raw["optional"])
        return _Shared(_strings(raw["labels"], where), optional, _strings(raw["dynamic"], where))
    except (KeyError, TypeError) as error:
        raise CatalogueError(f"{where}: {error!r}") from error


def _lifecycle(raw: Mapping[str, Any], where: str) -> Lifecycle:
    kind = raw.get("lifecycle")
    if kind not in ("startup", "lazy"):
        raise CatalogueError(f"{where}: lifecycle {kind!r} is not startup or lazy")
    return Lifecycle(kind, str(raw.get("event", "")), bool(raw.get("dead", False)))


def _source(raw: Mapping[str, Any]) -> tuple[str, int]:
    path, _, line = str(raw.get("source", "")).rpartition(":")
    return (path, int(line)) if line.isdigit() else (str(raw.get("source", "")), 0)


def family_from_json(raw: Mapping[str, Any], label_sets: Mapping[str, _Shared]) -> EngineFamily:
    """One family record (see docs/engines.md), with its shared label set resolved."""
    where = f"family {raw.get('name')!r}"
    try:
        set_name = raw.get("label_set")
        shared = label_sets.get(set_name or "", _Shared())
        own = _strings(raw["labels"], where)
        buckets = raw.get("buckets")
        path, line = _source(raw)
        optional = tuple(o for o in shared.optional if o.name not in shared.labels + own)
        return EngineFamily(
            name=str(raw["name"]),
            type=str(raw["type"]),
            labels=shared.labels + own,
            help=str(raw["help"]),
            unit=raw.get("unit"),
            process=str(raw["process"]),
            lifecycle=_lifecycle(raw, where),
            features=_strings(raw.get("features", []), where),
            buckets=None if buckets is None else tuple(float(b) for b in buckets),
            optional_labels=optional,
            dynamic_labels=shared.dynamic,
            label_set=set_name,
            declared_labels=tuple(
                dict.fromkeys((*shared.labels, *(o.name for o in optional), *own))
            ),
            guards=_strings(raw.get("guards", []), where),
            multiprocess_mode=raw.get("multiprocess_mode"),
            buckets_note=raw.get("buckets_note"),
            unresolved=_strings(raw.get("unresolved", []), where),
            source_file=path,
            source_line=line,
            defined_in=str(raw.get("scope") or f"{set_name}.__init__"),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CatalogueError(f"{where}: {error!r}") from error


def catalogue_from_json(raw: Mapping[str, Any]) -> Catalogue:
    """A whole catalogue from its parsed JSON document."""
    if raw.get("schema_version") != SCHEMA_VERSION:
        version = raw.get("schema_version")
        raise CatalogueError(f"schema_version {version!r} is not {SCHEMA_VERSION}")
    label_sets = {name: _shared(v, name) for name, v in raw.get("label_sets", {}).items()}
    families = tuple(family_from_json(f, label_sets) for f in raw.get("families", []))
    archive = raw.get("archive", {})
    return Catalogue(
        engine=str(raw["engine"]),
        version=str(raw["version"]),
        families=tuple(sorted(families, key=lambda f: f.name)),
        archive=str(archive.get("file", "")),
        archive_sha256=str(archive.get("sha256", "")),
    )
