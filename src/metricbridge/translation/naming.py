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

# Which families get which name: (position in the list, the meta it is served under).
Renames = tuple[tuple[int, FamilyMeta], ...]


def restore_escaped(
    families: Sequence[AnyFamily], naming: NamingConfig
) -> tuple[list[AnyFamily], int]:
    """Rename upstream families written with the escaped prefix; keep a name both spellings have."""
    return apply_renames(families, escaped_renames([f.meta for f in families], naming))


def escaped_renames(metas: Sequence[FamilyMeta], naming: NamingConfig) -> Renames:
    """What ``restore_escaped`` renames: a function of the names and types alone (a plan's)."""
    escaped, prefix = naming.escaped_prefix, naming.prefix
    if (
        not naming.restore_escaped
        or escaped == prefix
        or not any(meta.name.startswith(escaped) for meta in metas)
    ):
        return ()
    # Sample names too: `sglang_h_sum` must not become `sglang:h_sum` beside histogram `sglang:h`.
    taken = {meta.name for meta in metas} | {n for meta in metas for n in _sample_names_of(meta)}
    out = []
    for position, meta in enumerate(metas):
        name = meta.name
        if name.startswith(escaped):
            target = prefix + name[len(escaped) :]
            wanted = replace(meta, name=target)
            if not taken & {target, *_sample_names_of(wanted)}:
                out.append((position, wanted))
    return tuple(out)


def apply_renames(families: Sequence[AnyFamily], renames: Renames) -> tuple[list[AnyFamily], int]:
    """The families with those at the given positions renamed, and how many were."""
    out = list(families)
    for position, meta in renames:
        out[position] = rename(out[position], meta)
    return out, len(renames)


def escaped_copies(families: Sequence[AnyFamily], naming: NamingConfig) -> list[AnyFamily]:
    """The escaped-spelling copies to serve beside the contract spelling (opt-in)."""
    return copies_of(families, escaped_targets([f.meta for f in families], naming))


def escaped_targets(metas: Sequence[FamilyMeta], naming: NamingConfig) -> Renames:
    """Which families ``escaped_copies`` copies, and under what: names and types alone."""
    if not naming.also_serve_escaped or naming.escaped_prefix == naming.prefix:
        return ()
    names = {meta.name for meta in metas}
    targets = []
    for position, meta in enumerate(metas):
        if meta.name.startswith(naming.prefix):
            other = naming.escaped_prefix + meta.name[len(naming.prefix) :]
            if other not in names:
                targets.append((position, FamilyMeta(other, meta.type, meta.help, meta.unit)))
    return tuple(targets)


def copies_of(families: Sequence[AnyFamily], targets: Renames) -> list[AnyFamily]:
    """A renamed copy of each family ``targets`` names."""
    return [rename(families[position], meta) for position, meta in targets]


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
