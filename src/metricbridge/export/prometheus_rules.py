"""``metricbridge rules``: a rules file as Prometheus recording rules or metric_relabel_configs.

For fleets that translate centrally (Prometheus, Thanos or Mimir rulers) instead of in a sidecar
per pod. The output is YAML behind a comment header that lists, per kind, what the bridge does
and this output cannot, and why. Pure: ``export_rules`` returns text.
"""

from __future__ import annotations

import re
import textwrap
from collections import defaultdict
from enum import StrEnum

import promql_parser
import yaml

from metricbridge import __version__
from metricbridge.config.schema import Config
from metricbridge.export.common import Export, Note, NoteKind
from metricbridge.export.recording import DEFAULT_WINDOW, recording_rules
from metricbridge.export.relabel import relabel_configs

__all__ = ["DEFAULT_WINDOW", "RuleFormat", "check_matchers", "check_window", "export_rules"]


class RuleFormat(StrEnum):
    """What ``metricbridge rules`` writes."""

    PROMETHEUS_RULES = "prometheus-rules"
    RELABEL = "relabel"


_WHY: dict[NoteKind, str] = {
    NoteKind.WARM_ZERO: (
        "warm-zero: the bridge serves 0 for each expected series before the engine's first "
        "event. Prometheus computes only from samples that exist, and which label sets to "
        "expect is known only next to the engine (inherited from a family present at start-up)."
    ),
    NoteKind.IDLE: (
        "idle zeroing: the bridge zeroes these gauges while the engine is idle and refreshes "
        "them on a heartbeat. That needs idle detection next to the engine."
    ),
    NoteKind.HISTOGRAM_SCALE: (
        "scale of a histogram: the bucket bounds are values of the `le` label, and PromQL "
        "cannot compute on label values, so _bucket cannot be rescaled. Served by the sidecar "
        "only; centrally, query the community family and convert units in the panel."
    ),
    NoteKind.KEEP_SOURCE: (
        "keep_source: false: a recording rule adds the contract family but cannot remove the "
        "community one it reads; drop that where it leaves (remote_write write_relabel_configs)."
    ),
    NoteKind.RELABEL_STEP: "relabel steps with no equivalent here (the rule is left out):",
    NoteKind.SERVER_INFO: (
        "derivations from the engine's /server_info JSON (max_running_requests and the like): "
        "Prometheus scrapes series, not that endpoint. Served by the sidecar only."
    ),
    NoteKind.APPROXIMATE: (
        "approximations: the bridge divides counter deltas between two fetches; a rule divides "
        "rates over a window, which smooths bursts."
    ),
    NoteKind.NAMING: (
        "spelling: the bridge can serve escaped `sglang_` copies beside the contract names; "
        "relabelling cannot add series and recording them all would double the series count."
    ),
    NoteKind.ORIGINAL_LABELS: (
        "rules whose source the relabel part rewrites or drops at scrape time: the bridge "
        "derives them from the community original, these rules see the result."
    ),
}
_OTHER_FORMAT = (
    "drops, in-place relabels and pure renames: a recording rule cannot overwrite or remove "
    "its own input series. They are in `metricbridge rules --format relabel`."
)
_ADDS_SERIES = (
    "aliases, scales and selects that keep their source, and relabels into a new name: "
    "relabelling rewrites series, it cannot add or compute one. They are in "
    "`metricbridge rules --format prometheus-rules`."
)
_CAVEATS: dict[RuleFormat, tuple[str, ...]] = {
    RuleFormat.PROMETHEUS_RULES: (
        (
            "Recorded series are written at each rule evaluation, not at scrape time: use rate() "
            "windows of at least 4 x max(scrape_interval, evaluation_interval)."
        ),
        (
            "When an engine serves a contract family itself, the bridge skips its own translation "
            "of it; a recording rule cannot, and would write duplicate series: delete that rule."
        ),
        (
            "_created series are not copied. Regexes are copied verbatim: the bridge matches them "
            "with Python's re, Prometheus with RE2 (no lookarounds, no backreferences), and "
            "promtool does not compile label_replace regexes."
        ),
    ),
    RuleFormat.RELABEL: (
        (
            "Put these under the scrape config of raw SGLang targets "
            "(scrape_configs[].metric_relabel_configs), not of pods that run the sidecar."
        ),
        (
            "Regexes are copied verbatim: the bridge matches them with Python's re, Prometheus "
            "with RE2 (no lookarounds, no backreferences); `promtool check config` compiles them."
        ),
    ),
}


_MATCHER = r'[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"'
_CLASSIC_MATCHERS = re.compile(rf"\s*{_MATCHER}(?:\s*,\s*{_MATCHER})*\s*,?\s*")
_DURATION = re.compile(r"(?:[0-9]+(?:ms|[smhdwy]))+")


def check_matchers(matchers: str) -> str:
    """Check label matchers to add (``job="sglang"``); return them stripped or raise ValueError."""
    text = matchers.strip()
    if not text:
        return ""
    try:
        parsed = promql_parser.parse(f"x{{{text}}}")
    except ValueError as exc:
        raise ValueError(f"cannot use matchers {matchers!r}: {exc}") from None
    if not isinstance(parsed, promql_parser.VectorSelector) or parsed.name != "x":
        raise ValueError(f"cannot use matchers {matchers!r}: expected label matchers only")
    if not _CLASSIC_MATCHERS.fullmatch(text):
        # promql_parser reads Prometheus 3's quoted label names and `or` groups; promtool
        # and Prometheus 2 refuse the rule files then, so only plain matchers go in.
        raise ValueError(
            f"cannot use matchers {matchers!r}: expected plain matchers such as "
            'job="sglang",env=~"prod.*" (no quoted label names, no "or")'
        )
    return text


def check_window(window: str) -> str:
    """Validate a PromQL range (``5m``); return it or raise ValueError."""
    try:
        parsed = promql_parser.parse(f"x[{window}]")
    except ValueError as exc:
        raise ValueError(f"cannot use rate window {window!r}: {exc}") from None
    if isinstance(parsed, promql_parser.MatrixSelector) and _DURATION.fullmatch(window):
        return window
    # A bare number ([10]) parses as seconds in Prometheus 3 only; 0 is no window at all.
    raise ValueError(f"cannot use rate window {window!r}: expected a duration such as 5m")


def export_rules(
    config: Config, fmt: RuleFormat, matchers: str = "", window: str = DEFAULT_WINDOW
) -> str:
    """The whole output file for ``fmt``: the header, then the YAML document."""
    if fmt is RuleFormat.PROMETHEUS_RULES:
        export = recording_rules(config, check_matchers(matchers), check_window(window))
    else:
        export = relabel_configs(config)
    body = yaml.safe_dump(
        export.document, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True
    )
    return _header(config, fmt, export, matchers.strip()) + body


def _header(config: Config, fmt: RuleFormat, export: Export, matchers: str) -> str:
    lines = [
        f"Generated by `metricbridge rules --format {fmt}` (metricbridge {__version__})",
        f"from {config.source}. Regenerate after editing the rules file; do not edit by hand.",
        "",
        _summary(fmt, export),
    ]
    if matchers:
        lines.append(f"Every input selector carries {{{matchers}}}.")
    lines += ["", "What this file does not reproduce, and why:"]
    by_kind: dict[NoteKind, list[Note]] = defaultdict(list)
    for note in export.notes:
        by_kind[note.kind].append(note)
    for kind in _kinds(fmt):
        lines += _section(_why(kind), by_kind.get(kind, []))
    lines += ["", "Caveats:"]
    for caveat in _CAVEATS[fmt]:
        lines += textwrap.wrap(f"- {caveat}", width=96, subsequent_indent="  ")
    return "".join(f"# {line}\n".replace("# \n", "#\n") for line in lines)


def _summary(fmt: RuleFormat, export: Export) -> str:
    if fmt is RuleFormat.PROMETHEUS_RULES:
        groups = export.document["groups"]
        assert isinstance(groups, list)  # noqa: S101 - built by recording_rules
        count = sum(len(group["rules"]) for group in groups)
        return f"{_count(count, 'recording rule')}. Use together with `--format relabel`."
    configs = export.document["metric_relabel_configs"]
    assert isinstance(configs, list)  # noqa: S101 - built by relabel_configs
    return f"{_count(len(configs), 'relabel step')}. Use together with `--format prometheus-rules`."


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _kinds(fmt: RuleFormat) -> list[NoteKind]:
    other = NoteKind.OTHER_FORMAT if fmt is RuleFormat.PROMETHEUS_RULES else NoteKind.ADDS_SERIES
    kinds = [other, NoteKind.HISTOGRAM_SCALE, NoteKind.SERVER_INFO]
    if fmt is RuleFormat.PROMETHEUS_RULES:
        kinds += [NoteKind.APPROXIMATE, NoteKind.KEEP_SOURCE, NoteKind.ORIGINAL_LABELS]
    return [*kinds, NoteKind.WARM_ZERO, NoteKind.IDLE, NoteKind.NAMING, NoteKind.RELABEL_STEP]


def _why(kind: NoteKind) -> str:
    if kind is NoteKind.OTHER_FORMAT:
        return _OTHER_FORMAT
    if kind is NoteKind.ADDS_SERIES:
        return _ADDS_SERIES
    return _WHY[kind]


def _section(text: str, notes: list[Note]) -> list[str]:
    out = ["", *textwrap.wrap(f"- {text}", width=96, subsequent_indent="  ")]
    if not notes:
        return [*out, "    (none in this rules file)"]
    return out + [f"    {n.family}" + (f": {n.detail}" if n.detail else "") for n in notes]
