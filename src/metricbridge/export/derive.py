"""PromQL for ``derive`` rows, where a rule evaluation can compute what the bridge computes.

Ratios of counter deltas become ratios of ``rate()`` over a window (the bridge uses the deltas
since its previous fetch); shares of zero series and ratios of families are exact. Anything
that reads the engine's ``/server_info`` JSON cannot be computed from scraped series.
"""

from __future__ import annotations

from metricbridge.config.synthesis import Derive, DeriveOp, Operand
from metricbridge.errors import NeedsServerInfoError
from metricbridge.export.common import promql_number, promql_string


def derive_expr(derive: Derive, extra: str, window: str) -> str:
    """One PromQL expression computing the derived gauge; raises ``NeedsServerInfoError``."""
    numerator = derive.numerator
    if numerator is None or numerator.family is None:
        raise NeedsServerInfoError(f"{derive.op} of /server_info field {_field(numerator)}")
    if derive.op is DeriveOp.RATIO_OF_DELTAS:
        return _ratio_of_rates(derive, numerator, extra, window)
    if derive.op is DeriveOp.SHARE_ZERO:
        return _share_zero(derive, numerator, extra)
    if derive.op is DeriveOp.RATIO:
        return _ratio(derive, numerator, extra)
    raise NeedsServerInfoError(f"{derive.op} reads /server_info")


def _field(operand: Operand | None) -> str:
    return operand.server_info if operand is not None and operand.server_info else "?"


def _selector(operand: Operand, extra: str) -> str:
    matchers = [f"{k}={promql_string(v)}" for k, v in operand.match.items()]
    matchers += [f"{k}!={promql_string(v)}" for k, vs in operand.exclude.items() for v in vs]
    matchers += [extra] if extra else []
    name = f"{operand.family}_{operand.sample}" if operand.sample else str(operand.family)
    return f"{name}{{{','.join(matchers)}}}" if matchers else name


# The bridge derives per pod, and Prometheus then adds the target labels; centrally the same
# grouping must keep the target apart (other target labels, e.g. namespace, are aggregated away).
TARGET_LABELS = ("job", "instance")


def _group(derive: Derive) -> str:
    return ", ".join((*derive.by, *TARGET_LABELS))


def _by(derive: Derive) -> str:
    return f"sum by ({_group(derive)})"


def _ratio_of_rates(derive: Derive, numerator: Operand, extra: str, window: str) -> str:
    denominator = derive.denominator
    if denominator is None or denominator.family is None:
        raise NeedsServerInfoError(f"ratio_of_deltas over /server_info field {_field(denominator)}")
    agg = _by(derive)
    num = f"{agg} (rate({_selector(numerator, extra)}[{window}]))"
    den = f"{agg} (rate({_selector(denominator, extra)}[{window}]))"
    # A group the numerator lacks counts as 0, as the bridge does; a flat denominator has no
    # value (the bridge leaves the series out rather than serve a made-up 0).
    ratio = f"({num} or 0 * {den}) / ({den} > 0)"
    return ratio if derive.factor is None else f"{ratio} * {promql_number(derive.factor)}"


def _share_zero(derive: Derive, numerator: Operand, extra: str) -> str:
    count = f"count by ({_group(derive)})"
    series = _selector(numerator, extra)
    return f"({count} ({series} == 0) or 0 * {count} ({series})) / {count} ({series})"


def _ratio(derive: Derive, numerator: Operand, extra: str) -> str:
    denominator = derive.denominator
    if denominator is None or denominator.family is None:
        raise NeedsServerInfoError(f"ratio over /server_info field {_field(denominator)}")
    num = _selector(numerator, extra)
    if numerator.match:
        num = f"max without ({', '.join(numerator.match)}) ({num})"
    den = f"sum by ({', '.join(TARGET_LABELS)}) ({_selector(denominator, extra)})"
    if derive.minimum is not None:
        den = f"clamp_min({den}, {promql_number(derive.minimum)})"
    on = ", ".join(TARGET_LABELS)
    return f"{num} / on({on}) group_left() ({den} > 0)"
