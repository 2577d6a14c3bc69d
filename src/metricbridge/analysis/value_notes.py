"""What an engine release says about a label value a payload lacks: one a feature switch adds.

``sglang:cached_tokens_total{cache_source="host"}`` is served only by an engine with HiCache, as
``sglang:hicache_host_used_tokens`` is; a dashboard that reads it against an engine without
HiCache is no more broken than one reading the HiCache gauges, so both are feature notes (not
failing). Which values need which switch is ``metricbridge.engines.label_values``. Pure.
"""

from __future__ import annotations

from metricbridge.analysis.engine_notes import EngineClass, EngineNote, EngineView
from metricbridge.engines import feature_switch, value_feature

__all__ = ["explain_value"]


def explain_value(view: EngineView, name: str, label: str, value: str) -> EngineNote | None:
    """The note for ``name{label="value"}`` matching no served series; None if nothing explains it.

    ``name`` is the sample a query selects (the contract row or the community family); the
    release must define it with ``label``.
    """
    family = view.catalogue.find(name)
    if family is None or label not in family.all_label_names:
        return None
    tag = value_feature(family.name, label, value)
    if tag is None:
        return None
    switch = feature_switch(tag)
    engine = "SGLang" if view.engine == "sglang" else view.engine
    detail = (
        f'{label}="{value}" of {family.name} needs {switch} in {engine} {view.release}, then '
        "appears on its first non-zero count"
    )
    return EngineNote(
        EngineClass.FEATURE, view.engine, view.release, family.name, detail, switches=(switch,)
    )
