"""Every case of the Prometheus-oracle test, text first (see ``helpers.oracle_case``)."""

from __future__ import annotations

from helpers.oracle_case import OPENMETRICS, TEXT, OracleCase
from helpers.oracle_om_cases import OM_INVALID, OM_SUITE, OM_VALID
from helpers.oracle_text_cases import TEXT_EXPFMT, TEXT_INVALID, TEXT_VALID

__all__ = ["CASES", "OPENMETRICS", "TEXT", "OracleCase"]

CASES = [*TEXT_VALID, *TEXT_EXPFMT, *TEXT_INVALID, *OM_VALID, *OM_SUITE, *OM_INVALID]
