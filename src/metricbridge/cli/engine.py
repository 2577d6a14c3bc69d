"""Which engine release ``check`` and ``contract`` explain with, and ``diff`` of two releases.

``--engine VERSION`` names a catalogued SGLang release. Without it, the release the engine's
/server_info reports (its ``version`` field: fetched with ``--upstream``, or a saved answer
given with ``--server-info``) when it reports one, else the newest catalogued release. A
VERSION that is not catalogued is a usage error naming the nearest catalogued ones.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from metricbridge.analysis.check import DEFAULT_ASSUMED_LABELS
from metricbridge.analysis.dashboards import LoadResult
from metricbridge.analysis.engine_diff import diff_engines
from metricbridge.config.schema import FamilyRule
from metricbridge.engines import (
    available_versions,
    load_catalogue,
    nearest_versions,
    newest_version,
    release_at_or_before,
)
from metricbridge.render.engine_diff import render_engine_diff

__all__ = ["add_engine_option", "chosen_release", "engine_version_error", "run_engine_diff"]

EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """``--engine VERSION``: the SGLang release whose catalogue explains what a payload lacks."""
    parser.add_argument(
        "--engine", metavar="VERSION",
        help="the SGLang release the engine runs, to tell a family it creates later or only "
        "behind a feature switch (a note) from one it removed (a failure); default: the "
        "version its /server_info reports, else the newest catalogued release",
    )  # fmt: skip


def engine_version_error(option: str, version: str) -> str | None:
    """The one-line error for an uncatalogued ``version`` given to ``option``; None if it is."""
    versions = available_versions()
    if version in versions:
        return None
    nearest = nearest_versions(version, versions)
    known = (
        f"nearest catalogued: {', '.join(nearest)}"
        if nearest
        else f"catalogued: {versions[0]} to {versions[-1]}"
    )
    return f"error: {option} {version}: not a catalogued SGLang release ({known})"


def chosen_release(option: str | None, server_info: Mapping[str, object] | None) -> str:
    """``--engine``'s release (already checked), else /server_info's, else the newest.

    A reported version that is not catalogued is explained with the newest catalogued release
    not after it, with a warning.
    """
    if option is not None:
        return option
    reported = server_info.get("version") if server_info is not None else None
    if not isinstance(reported, str) or not reported.strip():
        return newest_version()
    versions = available_versions()
    if reported in versions:
        return reported
    fallback = release_at_or_before(reported, versions) or newest_version()
    print(
        f"warning: /server_info reports SGLang {reported}, which is not catalogued; "
        f"explaining with {fallback} (--engine VERSION chooses another)",
        file=sys.stderr,
    )
    return fallback


def run_engine_diff(
    args: argparse.Namespace,
    rules: Sequence[FamilyRule],
    loads: Sequence[tuple[str, LoadResult]],
    unusable: int,
) -> int:
    """Print the diff of two releases; exit 1 when a query of a given file breaks."""
    old = load_catalogue(args.engine_from)
    new = load_catalogue(args.engine_to)
    assumed = [n.strip() for v in args.assume_label for n in v.split(",") if n.strip()]
    diff = diff_engines(old, new, loads, rules, [*DEFAULT_ASSUMED_LABELS, *assumed])
    sys.stdout.write(render_engine_diff(diff, args.format))
    if unusable:
        print(f"error: {unusable} file(s) could not be read", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_MISSING if diff.breaking else EXIT_OK
