"""The contract report: every contract row, its disposition, and how it was last served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from metricbridge.config.schema import Config
from metricbridge.translation.translate import RowState, RowStatus, Translation

_NO_DATA = RowStatus(RowState.MISSING, "no upstream data (every upstream fetch failed)")


def contract_report(
    config: Config, translation: Translation | Mapping[str, RowStatus] | None
) -> dict[str, Any]:
    """A JSON-ready report; the service's /contract and ``metricbridge contract`` share it.

    ``translation``: what was served, or only its row states (the service keeps those of the
    fetch /metrics last served).
    """
    states = translation.rows if isinstance(translation, Translation) else translation
    rows = []
    totals: Counter[str] = Counter()
    for rule in config.families:
        status = states.get(rule.name, _NO_DATA) if states else _NO_DATA
        totals[status.state.value] += 1
        rows.append(
            {
                "family": rule.name,
                "disposition": rule.disposition.value,
                "type": rule.type.value,
                "source": rule.source,
                "state": status.state.value,
                "reason": status.reason,
                "warm_zero": rule.warm_zero is not None,
                "branches": list(rule.branches),
                "note": rule.note,
                "formula": rule.derive.formula() if rule.derive is not None else None,
            }
        )
    items = [
        {"item": item.name, "disposition": item.disposition, "note": item.note}
        for item in config.items
    ]
    return {
        "config": config.source,
        "profiles": list(config.profiles),
        "rows": rows,
        "items": items,
        "totals": {state.value: totals.get(state.value, 0) for state in RowState},
    }
