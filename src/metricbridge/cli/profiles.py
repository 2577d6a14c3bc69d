"""``metricbridge profiles``: the shipped profiles, one line each (``--profile NAME``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from metricbridge.config.load import shipped_profiles

__all__ = ["add_profiles_command", "run_profiles"]

EXIT_OK = 0


def add_profiles_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``profiles``."""
    parser = commands.add_parser(
        "profiles",
        help="list the shipped profiles (rules fragments --profile NAME layers over the rules)",
        description="Each shipped profile and what it does. A profile is layered over the "
        "rules file with --profile NAME (serve, translate, check, contract, rules), "
        "METRICBRIDGE_PROFILE for serve, or `profiles: [NAME]` in the rules file.",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.set_defaults(handler=run_profiles)


def run_profiles(args: argparse.Namespace) -> int:
    """Print the profiles: ``NAME  description`` lines, or a JSON list of objects."""
    profiles = shipped_profiles()
    if args.format == "json":
        rows = [{"name": name, "description": text} for name, text in profiles.items()]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    width = max((len(name) for name in profiles), default=0)
    for name, text in profiles.items():
        sys.stdout.write(f"{name:<{width}}  {text}\n")
    return EXIT_OK
