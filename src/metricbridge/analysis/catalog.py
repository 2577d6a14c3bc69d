"""The served catalog: every family, sample name, label and label value the bridge serves.

``metricbridge check`` and ``metricbridge diff`` ask questions a query would ask Prometheus
("is there a series named X with label Y matching Z?"), so the catalog indexes the translated
families by the sample names a PromQL selector uses. Pure: families in, catalog out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from metricbridge.errors import ExpositionError
from metricbridge.exposition.family_parse import parse_family
from metricbridge.model.family import AnyFamily, Labels, MetricType, sample_base

__all__ = ["Catalog", "ServedFamily", "build_catalog"]


@dataclass(frozen=True, slots=True)
class ServedFamily:
    """One served family: its type and, per sample name, the distinct label sets served."""

    name: str
    type: MetricType
    series: Mapping[str, tuple[Labels, ...]]

    @property
    def base(self) -> str:
        """The prefix every sample name of the family starts with (counters drop ``_total``)."""
        return sample_base(self.name, self.type)

    @property
    def label_names(self) -> frozenset[str]:
        """Every label name on any series of the family."""
        return frozenset(
            name for sets in self.series.values() for labels in sets for name, _ in labels
        )

    def label_values(self, label: str) -> frozenset[str]:
        """Every value ``label`` takes on the family's series."""
        return frozenset(
            value
            for sets in self.series.values()
            for labels in sets
            for name, value in labels
            if name == label
        )


@dataclass(frozen=True, slots=True)
class Catalog:
    """Served families by name, and the indexes a selector is resolved through.

    ``by_sample`` maps each served sample name to its family; ``by_base`` maps a family's
    sample base (``x`` for the counter ``x_total``) to it, for suffix errors; ``problems``
    lists families that could not be parsed (they are left out).
    """

    families: Mapping[str, ServedFamily]
    by_sample: Mapping[str, str]
    by_base: Mapping[str, str]
    problems: tuple[ExpositionError, ...] = ()

    def family_of(self, sample_name: str) -> ServedFamily | None:
        """The family serving samples named ``sample_name``, if any."""
        name = self.by_sample.get(sample_name)
        return None if name is None else self.families[name]

    @property
    def sample_names(self) -> tuple[str, ...]:
        """Every served sample name, sorted."""
        return tuple(sorted(self.by_sample))


def build_catalog(families: Iterable[AnyFamily]) -> Catalog:
    """Index translated families; a family named twice keeps its first occurrence."""
    served: dict[str, ServedFamily] = {}
    by_sample: dict[str, str] = {}
    by_base: dict[str, str] = {}
    problems: list[ExpositionError] = []
    for family in families:
        if family.name in served:
            continue
        try:
            parsed = parse_family(family)
        except ExpositionError as exc:
            problems.append(exc)
            continue
        series: dict[str, dict[Labels, None]] = {}
        for sample in parsed.samples:
            series.setdefault(sample.name, {})[tuple(sorted(sample.labels))] = None
        entry = ServedFamily(
            family.name, family.meta.type, {name: tuple(sets) for name, sets in series.items()}
        )
        served[family.name] = entry
        by_base.setdefault(entry.base, family.name)
        for sample_name in entry.series:
            by_sample.setdefault(sample_name, family.name)
    return Catalog(served, by_sample, by_base, tuple(problems))
