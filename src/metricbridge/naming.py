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

from metricbridge.config_synth import NamingConfig
from metricbridge.family_names import served_names
from metricbridge.model import AnyFamily, FamilyMeta
from metricbridge.ops import rename


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
    taken = names.union(*(served_names(f.meta.name, f.meta.type) for f in families))
    out: list[AnyFamily] = []
    restored = 0
    for family in families:
        name = family.name
        if name.startswith(escaped):
            target = prefix + name[len(escaped) :]
            wanted = replace(family.meta, name=target)
            if not taken & served_names(target, wanted.type):
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
