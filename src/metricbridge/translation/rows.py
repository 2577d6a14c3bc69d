"""A contract row's state in one translation, and the state of a row translation said nothing of.

``translate`` re-exports RowState and RowStatus, where callers import them from. The decision
table is here so that ``compile_rules`` can answer it once per row and answer, ahead of any
payload: a row's status then depends only on whether the engine sent its name and whether it
is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from metricbridge.config.schema import Disposition


class RowState(StrEnum):
    """How a contract row fared in one translation."""

    NATIVE = "native"  # served under the contract name by the engine itself
    TRANSLATED = "translated"  # served, computed from a community family
    SYNTHESIZED = "synthesized"  # served as warm-zero: 0 until the engine has the series
    APPROXIMATED = "approximated"  # served, computed, but not the contract's definition
    MISSING = "missing"  # not served; see the reason
    STRUCTURAL = "structural"  # absent by contract


@dataclass(frozen=True, slots=True)
class RowStatus:
    """A contract row's state with a human reason.

    ``pending``: missing only for want of a previous fetch (a rate between two), which the
    next fetch serves; contract_index tells such rows from broken ones by it, not the reason.
    ``engine``: missing until the engine itself is instrumented (an engine row, or an
    approximation no profile switched on); contract_index classes such rows by it.
    """

    state: RowState
    reason: str
    pending: bool = False
    engine: bool = False


# An approximate row while no profile switches approximations on: an engine row then.
APPROXIMATION_SWITCH = "an approximation is served with --profile approximations"
APPROXIMATION_OFF = f"needs instrumentation inside the engine; {APPROXIMATION_SWITCH}"


def row_status(  # noqa: PLR0911, PLR0913 - a decision table
    name: str,
    disposition: Disposition,
    input_name: str,
    *,
    present: bool,
    served: bool,
    active: bool = True,
    kind: Disposition | None = None,
) -> RowStatus:
    """A row's state when translation left no reason of its own for it.

    ``present``: the engine sent a family of the row's name; ``served``: the bridge serves one.
    ``active``: the rule runs (an approximation only when a profile switches it on); ``kind``:
    what it runs on its source (an approximation's alias, scale or select).
    """
    kind = kind or disposition
    if disposition is Disposition.STRUCTURAL:
        return RowStatus(RowState.STRUCTURAL, "never emitted, by contract")
    if disposition is Disposition.DROP:
        return RowStatus(RowState.STRUCTURAL, "dropped by rule")
    rewritten = disposition is Disposition.RELABEL and input_name == name
    if present and served and not rewritten:
        return RowStatus(RowState.NATIVE, "served by the engine under the contract name")
    if served and disposition is Disposition.APPROXIMATE:
        return RowStatus(RowState.APPROXIMATED, f"approximated: {kind} of {input_name}")
    if served:
        return RowStatus(RowState.TRANSLATED, f"{disposition} of {input_name}")
    if disposition is Disposition.ENGINE:
        return RowStatus(RowState.MISSING, "needs instrumentation inside the engine", engine=True)
    if disposition is Disposition.APPROXIMATE and not active:
        return RowStatus(RowState.MISSING, APPROXIMATION_OFF, engine=True)
    if disposition is Disposition.NATIVE:
        return RowStatus(RowState.MISSING, "the engine has not emitted it (yet)")
    return RowStatus(RowState.MISSING, f"source {input_name} is absent upstream")
