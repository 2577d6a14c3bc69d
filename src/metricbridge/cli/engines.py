"""``metricbridge engines``: the catalogued SGLang releases, each with its families and features.

The catalogues are what ``check``, ``contract`` and ``diff`` read to explain a missing family
(``--engine VERSION``); this lists which releases there are.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from metricbridge.engines.summary import release_summaries

__all__ = ["add_engines_command", "run_engines"]

EXIT_OK = 0


def add_engines_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``engines``."""
    parser = commands.add_parser(
        "engines",
        help="list the catalogued SGLang releases (--engine VERSION of check, contract, diff)",
        description="Each SGLang release whose metric families metricbridge has catalogued "
        "from its source, oldest first: how many families it defines, how many of those it "
        "creates lazily (on a first event), and the feature switches some of them need.",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.set_defaults(handler=run_engines)


def run_engines(args: argparse.Namespace) -> int:
    """Print one line per release, or a JSON list of objects."""
    releases = release_summaries()
    if args.format == "json":
        rows = [
            {
                "engine": r.engine,
                "version": r.version,
                "families": r.families,
                "lazy": r.lazy,
                "features": [
                    {"feature": tag, "switch": switch, "families": count}
                    for tag, switch, count in r.features
                ],
            }
            for r in releases
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    width = max((len(r.version) for r in releases), default=0)
    sys.stdout.write(f"{'RELEASE':<{width + 7}}  FAMILIES  LAZY  FEATURES\n")
    for r in releases:
        features = ", ".join(f"{tag} ({count})" for tag, _, count in r.features) or "-"
        name = f"{r.engine} {r.version}"
        sys.stdout.write(f"{name:<{width + 7}}  {r.families:>8}  {r.lazy:>4}  {features}\n")
    return EXIT_OK
