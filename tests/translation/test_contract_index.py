"""The contract's view of a missing row: decided by row states, never by a reason's words."""

from __future__ import annotations

from helpers.check import served
from metricbridge.config.load import load_config
from metricbridge.translation.contract_index import ContractIndex, MissingClass
from metricbridge.translation.translate import RowState, RowStatus

RATE = "sglang:device_cache_hit_rate"


def test_a_rate_on_its_first_fetch_is_pending() -> None:
    translation = served("hicache", profiles=["approximations"]).translation
    status = translation.rows[RATE]
    assert (status.state, status.pending) == (RowState.MISSING, True)
    index = ContractIndex(load_config(None, ["approximations"]).families, translation.rows)
    assert index.classify(RATE).cls is MissingClass.PENDING


def test_pending_is_the_status_flag_not_the_reason_text() -> None:
    """The same words without the flag are a row this payload cannot serve."""
    pending = served("hicache").translation.rows[RATE]
    families = load_config(None).families
    lookalike = RowStatus(RowState.MISSING, pending.reason)
    assert ContractIndex(families, {RATE: lookalike}).classify(RATE).cls is MissingClass.UPSTREAM
    reworded = RowStatus(RowState.MISSING, "waiting for a second fetch", pending=True)
    assert ContractIndex(families, {RATE: reworded}).classify(RATE).cls is MissingClass.PENDING


def test_missing_rows_by_class_add_up_to_the_missing_rows() -> None:
    config = load_config(None, ["approximations"])
    translation = served("hicache", profiles=["approximations"]).translation
    classes = ContractIndex(config.families, translation.rows).missing_classes()
    missing = [
        rule
        for rule in config.families
        if rule.name not in translation.rows
        or translation.rows[rule.name].state is RowState.MISSING
    ]
    assert sum(classes.values()) == len(missing)
    # Engine rows, and the approximations no profile switched on (engine rows then).
    rows = translation.rows
    engine = sum(
        1
        for rule in missing
        if rule.disposition == "engine" or (rows.get(rule.name) and rows[rule.name].engine)
    )
    assert classes[MissingClass.ENGINE] == engine > 0
    assert classes[MissingClass.PENDING] == sum(
        1 for status in translation.rows.values() if status.pending
    )
    assert classes[MissingClass.PENDING] > 0


def test_with_no_upstream_data_every_row_is_missing_by_its_disposition() -> None:
    config = load_config(None)
    classes = ContractIndex(config.families, {}).missing_classes()
    assert sum(classes.values()) == len(config.families)
    assert MissingClass.PENDING not in classes
