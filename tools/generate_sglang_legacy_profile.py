#!/usr/bin/env python3
"""Write the ``sglang-legacy`` profile from the release catalogues.

    python tools/generate_sglang_legacy_profile.py           # write the profile
    python tools/generate_sglang_legacy_profile.py --check   # exit 1 if the shipped file differs

The profile serves, beside today's names, the names of SGLang's first metrics code, which its
old example dashboard (``examples/monitoring/grafana.json``) queries. That code never shipped on
PyPI, so no catalogue holds it: what each old family meant is read from its source
(``OLD_CODE``) and written once, in ``LEGACY`` below; everything the catalogues know (which
release first has today's name, its type and labels, the flag that switched it on) is read
from them, so that a note cannot claim a release the catalogues contradict.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
import textwrap
from enum import StrEnum
from pathlib import Path

from metricbridge.engines import (
    available_versions,
    diff_catalogues,
    feature_switch,
    load_catalogue,
)
from metricbridge.engines.model import EngineFamily

OUT = (
    Path(__file__).resolve().parent.parent
    / "src"
    / "metricbridge"
    / "data"
    / "profiles"
    / "sglang-legacy.yaml"
)
REPO = "sgl-project/sglang"
OLD_DASHBOARD = ("examples/monitoring/grafana.json", "f32b084119d9bcb1f76d060ecd9d727b525be217")
OLD_CODE = (
    "python/sglang/srt/metrics/metrics_collector.py",
    "5416fff9b37bd1a50c0691e77f4d21922dbe9c9c",
)
# The earlier revision whose console logger shows the units of the prefill-batch gauges.
OLD_CONSOLE = (
    "python/sglang/srt/metrics/metrics_collector.py",
    "029316b82e8ad792d693c422deac84e2608115c9",
)
# The old code labels every family with the model as `name`; today's collectors say `model_name`.
OLD_LABEL, NEW_LABEL = "name", "model_name"
_RANK_LABELS = ("dp_rank", "moe_ep_rank", "pp_rank", "tp_rank")
_WIDTH = 96


class Kind(StrEnum):
    """How the profile serves an old family."""

    RENAME = "rename"  # today's family under another name: served under the old one, relabelled
    LABEL = "label"  # the same family name; only the model label was renamed
    SERVER_INFO = "server_info"  # a configuration gauge: /server_info holds the value
    ENGINE = "engine"  # no honest source: reported missing
    ENGINE_ITEM = "engine_item"  # the name lives on with another meaning: a report-only row


@dataclasses.dataclass(frozen=True)
class Legacy:
    """One family of the old code, and why the profile serves it as it does."""

    old: str
    old_type: str
    old_help: str  # its HELP text at OLD_CODE
    kind: Kind
    why: str  # the meaning argument, from OLD_CODE and OLD_DASHBOARD
    target: str | None = None  # today's family (RENAME), or the /server_info field


LEGACY = (
    Legacy(
        "sglang:num_requests_running", "gauge", "Number of requests currently running on GPU",
        Kind.RENAME,
        "Both count the requests in the running batch, set on every stats report.",
        "sglang:num_running_reqs",
    ),
    Legacy(
        "sglang:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
        Kind.RENAME,
        "Both count the requests in the scheduler's waiting queue.",
        "sglang:num_queue_reqs",
    ),
    Legacy(
        "sglang:waiting_request_latency_seconds", "histogram",
        "Histogram of request waiting time in seconds",
        Kind.RENAME,
        "One observation per request of its wait before it is added to a batch (the old "
        "dashboard's 'Time requests waiting before added to batch'), in seconds, as today's "
        "queueing-time histogram. Bucket bounds differ; today's is observed on every TP rank "
        "that received the request, so with TP > 1 a sum by (le) counts each request once per "
        "rank (quantiles and the mean are unchanged).",
        "sglang:queue_time_seconds",
    ),
    Legacy(
        "sglang:request_prompt_tokens", "histogram", "Number of prefill tokens processed",
        Kind.RENAME,
        "One observation per request of its prompt length in tokens. Bucket bounds differ.",
        "sglang:prompt_tokens_histogram",
    ),
    Legacy(
        "sglang:request_generation_tokens", "histogram", "Number of generation tokens processed.",
        Kind.RENAME,
        "One observation per request of the tokens generated for it. Bucket bounds differ.",
        "sglang:generation_tokens_histogram",
    ),
    Legacy(
        "sglang:e2e_request_latency_seconds", "histogram",
        "Histogram of End-to-end request latency in seconds",
        Kind.LABEL,
        "The same histogram (the same HELP); today's adds an is_streaming label.",
    ),
    Legacy(
        "sglang:gen_throughput", "gauge", "Gen token throughput (token/s)",
        Kind.LABEL,
        "The same decode throughput gauge, tokens per second.",
    ),
    Legacy(
        "sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens",
        Kind.LABEL,
        "The same constant: the size of the KV cache pool in tokens.",
    ),
    Legacy(
        "sglang:context_len", "gauge", "Context length",
        Kind.LABEL,
        "The same constant: the model's context length.",
    ),
    Legacy(
        "sglang:max_prefill_tokens", "gauge", "Maximum prefill tokens",
        Kind.SERVER_INFO,
        "The old gauge held the server argument --max-prefill-tokens; /server_info reports the "
        "server arguments.",
        "max_prefill_tokens",
    ),
    Legacy(
        "sglang:max_running_requests", "gauge", "Maximum running requests",
        Kind.SERVER_INFO,
        "The old gauge held the engine's resolved running-request limit; /server_info reports "
        "it (the server argument, else the scheduler's resolved value). The whole engine's "
        "limit, as the old gauge had it: the old code knew no DP attention.",
        "max_running_requests",
    ),
    Legacy(
        "sglang:cached_token", "gauge", "Number of cached token",
        Kind.ENGINE,
        "The old gauge held the prefix-cache hit tokens of the last prefill batch (the console "
        "logger's '#cached-token' of a 'Prefill batch' line). No release since has a gauge of "
        "the last batch: sglang:cached_tokens_total and sglang:prefill_effective_tokens_total "
        "are counters, whose increase between two scrapes sums every batch in between.",
    ),
    Legacy(
        "sglang:cache_hit_rate", "gauge", "Cache hit rate",
        Kind.ENGINE_ITEM,
        "The old gauge was a percentage, 0-100 (the console logger printed it with a '%', the "
        "old dashboard titles it 'Cache Hit Rate (%)'); today's sglang:cache_hit_rate is a ratio, "
        "0-1, of the last prefill batch. The percentage cannot be served under the name "
        "today's ratio holds, and serving the ratio to the old query would show values 100 "
        "times too small, so the old query finds no label name on it and is reported.",
    ),
)  # fmt: skip


class CatalogueFacts:
    """What the catalogues say about the families the profile names."""

    def __init__(self) -> None:
        self.versions = available_versions()
        self.catalogues = [load_catalogue(version) for version in self.versions]
        self.first, self.newest = self.versions[0], self.versions[-1]

    def releases_with(self, name: str) -> list[tuple[str, EngineFamily]]:
        """Every catalogued release that defines ``name``, oldest first, with its record."""
        found = []
        for version, catalogue in zip(self.versions, self.catalogues, strict=True):
            family = catalogue.get(name)
            if family is not None:
                found.append((version, family))
        return found

    def first_with(self, name: str) -> tuple[str, EngineFamily]:
        """The first catalogued release that defines ``name``; SystemExit if none does."""
        found = self.releases_with(name)
        if not found:
            raise SystemExit(f"{name}: in no catalogued release")
        return found[0]

    def lineage(self, name: str) -> list[tuple[str, str]]:
        """``name`` and the names it had before, each with its first release, newest first.

        Follows the catalogue diff's renames backwards (``sglang:queue_time_seconds`` in 0.5.3,
        ``sglang:queue_time_s`` in 0.5.2).
        """
        chain = []
        while True:
            first, _ = self.first_with(name)
            chain.append((name, first))
            at = self.versions.index(first)
            if at == 0:
                return chain
            diff = diff_catalogues(self.catalogues[at - 1], self.catalogues[at])
            before = [rename.old for rename in diff.renames if rename.new == name]
            if not before:
                return chain
            name = before[0]

    def in_none(self, name: str) -> None:
        """SystemExit unless no catalogued release defines ``name``."""
        found = self.releases_with(name)
        if found:
            raise SystemExit(f"{name}: catalogued in {found[0][0]}, not an old-only name")

    def switch_note(self, name: str) -> str:
        """Which flag the releases that record ``name`` only behind a switch need, if any."""
        switched = [
            (version, tag)
            for version, family in self.releases_with(name)
            for tag in family.features
            if feature_switch(tag)
        ]
        if not switched:
            return ""
        (first, tag), last = switched[0], switched[-1][0]
        span = first if first == last else f"{first} to {last}"
        return f" SGLang {span} records it only with {feature_switch(tag)}."


def _renamed_clause(facts: CatalogueFacts, target: str) -> str:
    chain = facts.lineage(target)
    first = chain[0][1]
    if first == facts.first:
        return f"Renamed before {facts.first} (the first catalogued release has {target})."
    clause = f"Renamed in {first} (the first catalogued release that has {target}"
    for name, since in chain[1:]:
        clause += f"; {since} has it as {name}"
    earliest = facts.versions.index(chain[-1][1])
    if earliest > 0:
        clause += f"; {facts.first} to {facts.versions[earliest - 1]} have neither name"
    return clause + ")."


def _note(facts: CatalogueFacts, legacy: Legacy) -> str:
    """The note: the catalogues' claim first, in a form tests re-derive, then the meaning."""
    if legacy.kind is Kind.RENAME:
        if legacy.target is None:
            raise SystemExit(f"{legacy.old}: a rename needs today's family as its target")
        facts.in_none(legacy.old)
        _, newest = facts.releases_with(legacy.target)[-1]
        if newest.type != legacy.old_type:
            raise SystemExit(f"{legacy.old}: {legacy.old_type}, but {legacy.target} {newest.type}")
        clause = _renamed_clause(facts, legacy.target)
        return f"{clause} {legacy.why}{facts.switch_note(legacy.target)}"
    if legacy.kind in (Kind.LABEL, Kind.ENGINE_ITEM):
        first, family = facts.first_with(legacy.old)
        if NEW_LABEL not in family.labels or OLD_LABEL in family.labels:
            raise SystemExit(f"{legacy.old}: {first} labels it {family.labels}")
        clause = f"Label {OLD_LABEL} renamed {NEW_LABEL} before {facts.first}"
        if first != facts.first:
            clause += f"; the family is catalogued from {first}"
        return f"{clause}. {legacy.why}"
    facts.in_none(legacy.old)
    return f"Removed before {facts.first}. {legacy.why}"


def _folded(key: str, text: str, indent: int) -> list[str]:
    pad = " " * indent
    body = textwrap.wrap(text, _WIDTH - indent - 2, break_on_hyphens=False)
    return [f"{pad}{key}: >-", *(f"{pad}  {line}" for line in body)]


def _comment(facts: CatalogueFacts, legacy: Legacy) -> list[str]:
    """Two comment lines: the old family at OLD_CODE, and what serves it today since when."""
    old = f"  # old {legacy.old_type} at {OLD_CODE[1][:8]}, HELP {legacy.old_help!r}"
    if legacy.kind is Kind.RENAME:
        target = legacy.target or ""
        today = f"from {target}, catalogued from {facts.first_with(target)[0]}"
    elif legacy.kind in (Kind.LABEL, Kind.ENGINE_ITEM):
        today = f"same name, catalogued from {facts.first_with(legacy.old)[0]}, label model_name"
    elif legacy.kind is Kind.SERVER_INFO:
        today = f"from /server_info's {legacy.target}: no family since before {facts.first}"
    else:
        today = f"no source: no family since before {facts.first}"
    return [old, f"  # today: {today}"]


def _relabel_step(indent: int) -> list[str]:
    pad = " " * indent
    return [
        f"{pad}relabel:",
        f"{pad}  - {{source_labels: [{NEW_LABEL}], target_label: {OLD_LABEL}}}",
    ]


def _family(facts: CatalogueFacts, legacy: Legacy) -> list[str]:
    head = _comment(facts, legacy)
    lines = [f"  {legacy.old}:"]
    if legacy.kind is Kind.RENAME:
        lines += ["    disposition: relabel", f"    type: {legacy.old_type}"]
        lines += [f"    source: {legacy.target}"]
        lines += _folded("note", _note(facts, legacy), 4) + _relabel_step(4)
    elif legacy.kind is Kind.LABEL:
        lines += ["    disposition: relabel", f"    type: {legacy.old_type}"]
        lines += _folded("note", _note(facts, legacy), 4) + _relabel_step(4)
    elif legacy.kind is Kind.SERVER_INFO:
        lines += ["    disposition: derive", f"    type: {legacy.old_type}"]
        lines += [f"    help: {legacy.old_help} (from /server_info's {legacy.target})."]
        lines += _folded("note", _note(facts, legacy), 4)
        lines += [
            "    derive:",
            "      op: server_info",
            f"      numerator: {{server_info: {legacy.target}}}",
            # context_len is set at start-up and carries the model label the profile adds.
            "      labels_from: sglang:context_len",
            f"      drop_labels: [{', '.join(_RANK_LABELS)}]",
        ]
    else:
        lines += ["    disposition: engine", f"    type: {legacy.old_type}"]
        lines += _folded("note", _note(facts, legacy), 4)
    return [*head, *lines]


def _item(facts: CatalogueFacts, legacy: Legacy) -> list[str]:
    lines = [*_comment(facts, legacy), f"  {legacy.old}{{{OLD_LABEL}}}:", "    disposition: engine"]
    return lines + _folded("note", _note(facts, legacy), 4)


def _header(facts: CatalogueFacts) -> list[str]:
    def source(what: tuple[str, str]) -> str:
        return f"{REPO}\n#   {what[0]} at commit {what[1]}"

    intro = (
        "Serve, beside today's names, the names of SGLang's first metrics code, which its old "
        "example Grafana dashboard queries (label name for the model, sglang:num_requests_running "
        f"...). That code never shipped on PyPI: the old names predate {facts.first}, the first "
        "catalogued release. Each rule says which catalogued release first has today's name (or "
        f"that the rename came before {facts.first}); tests re-derive it from the catalogues. "
        "Old families with no honest source are engine rows. Values only /server_info knows "
        "(max_prefill_tokens, max_running_requests) need it: the service polls it, the offline "
        "commands take --server-info FILE."
    )
    text = [
        "# Generated by tools/generate_sglang_legacy_profile.py from the release catalogues and",
        "# the table of old families in it; edit the table and regenerate, not this file.",
        "#",
        *(f"# {line}" for line in textwrap.wrap(intro, _WIDTH - 2)),
        "#",
        f"# The old dashboard: {source(OLD_DASHBOARD)}.",
        f"# The old families (names, types, HELP): {source(OLD_CODE)}.",
        f"# The old console logger (units of the prefill-batch gauges): {source(OLD_CONSOLE)}.",
        f"# Today's families: the release catalogues, {facts.newest} the newest.",
        "version: 1",
        (
            f"description: serve SGLang's names from before {facts.first} (label name, "
            "sglang:num_requests_running, ...) beside today's, for its old example dashboard"
        ),
    ]
    return "\n".join(text).splitlines()


def render() -> str:
    """The profile's text."""
    facts = CatalogueFacts()
    lines = [*_header(facts), "families:"]
    for legacy in LEGACY:
        if legacy.kind is not Kind.ENGINE_ITEM:
            lines += _family(facts, legacy)
    items = [legacy for legacy in LEGACY if legacy.kind is Kind.ENGINE_ITEM]
    if items:
        lines.append("items:")
        for legacy in items:
            lines += _item(facts, legacy)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the profile, or with ``--check`` compare it with the shipped file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        shipped = OUT.read_text("utf-8") if OUT.exists() else ""
        if shipped == text:
            return 0
        diff = difflib.unified_diff(shipped.splitlines(), text.splitlines(), lineterm="")
        sys.stdout.write("\n".join(diff) + "\n")
        return 1
    OUT.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
