"""One spelling of family names, whatever the scraper asked for or the upstream wrote.

SGLang's names reach Prometheus as ``sglang:x`` or ``sglang_x`` depending on negotiation
(prometheus_client's OpenMetrics encoder writes ``sglang_x`` under escaping=underscores,
client_python#1177) and on who escaped them on the way (a router, an older bridge). The bridge
serves the contract spelling; on request it also serves the other spelling, for dashboards of
the other era, as separate families (so never a duplicate series).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from metricbridge.config.synthesis import NamingConfig
from metricbridge.model.family import AnyFamily, FamilyMeta, Format
from metricbridge.model.family_names import allowed_suffixes
from metricbridge.translation.ops import rename


def restore_escaped(
    families: Sequence[AnyFamily], naming: NamingConfig
) -> tuple[list[AnyFamily], int]:
    """Rename upstream families written with the escaped prefix; keep a name both spellings have."""
    escaped, prefix = naming.escaped_prefix, naming.prefix
    if (
        not naming.restore_escaped
        or escaped == prefix
        or not any(family.name.startswith(escaped) for family in families)
    ):
        return list(families), 0
    names = {family.name for family in families}
    # Sample names too: `sglang_h_sum` must not become `sglang:h_sum` beside histogram `sglang:h`.
    taken = names | {name for family in families for name in _sample_names(family)}
    out: list[AnyFamily] = []
    restored = 0
    for family in families:
        name = family.name
        if name.startswith(escaped):
            target = prefix + name[len(escaped) :]
            wanted = replace(family.meta, name=target)
            if not taken & {target, *_sample_names_of(wanted)}:
                out.append(rename(family, wanted))
                restored += 1
                continue
        out.append(family)
    return out, restored


def escaped_copies(families: Sequence[AnyFamily], naming: NamingConfig) -> list[AnyFamily]:
    """The escaped-spelling copies to serve beside the contract spelling (opt-in)."""
    if not naming.also_serve_escaped or naming.escaped_prefix == naming.prefix:
        return []
    names = {family.name for family in families}
    copies: list[AnyFamily] = []
    for family in families:
        if family.name.startswith(naming.prefix):
            other = naming.escaped_prefix + family.name[len(naming.prefix) :]
            if other not in names:
                copies.append(
                    rename(
                        family,
                        FamilyMeta(other, family.meta.type, family.meta.help, family.meta.unit),
                    )
                )
    return copies


def _sample_names_of(meta: FamilyMeta) -> set[str]:
    """Every name the family occupies: its sample names and (a counter's) OpenMetrics name.

    The text format's reading, not family_names.served_names: a counter declared without
    ``_total`` (an OpenMetrics payload read as text) claims only its own name here, so escaped
    ``x_total``/``x_created`` families beside it are still restored, as they are when the same
    payload comes as OpenMetrics; claiming them made the two formats translate one payload
    differently (test_fuzz_contract found it).
    """
    base, _, suffixes = allowed_suffixes(meta.name, meta.type, Format.TEXT)
    return {base} | {base + suffix for suffix in suffixes}


def _sample_names(family: AnyFamily) -> set[str]:
    return _sample_names_of(family.meta)
