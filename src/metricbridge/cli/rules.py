"""``metricbridge rules``: export a rules file as Prometheus recording rules or relabel configs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from metricbridge.cli.offline import add_config_option
from metricbridge.cli.problems import print_config_error
from metricbridge.config.load import load_config
from metricbridge.errors import ConfigError
from metricbridge.export.prometheus_rules import (
    DEFAULT_WINDOW,
    RuleFormat,
    check_matchers,
    check_window,
    export_rules,
)

EXIT_OK, EXIT_USAGE = 0, 2


def add_rules_command(commands: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    """Register ``rules``."""
    parser = commands.add_parser(
        "rules",
        help="export the rules as Prometheus recording rules or metric_relabel_configs",
        description="Translate centrally instead of per pod: write the rules file as a Prometheus "
        "rule file (prometheus-rules) or as metric_relabel_configs (relabel). The two are "
        "complementary; each file's header lists what it cannot reproduce and why.",
    )
    add_config_option(parser)
    parser.add_argument(
        "--format",
        required=True,
        choices=[f.value for f in RuleFormat],
        help="prometheus-rules: a rule file for Prometheus, Thanos or Mimir rulers; "
        "relabel: metric_relabel_configs for the raw SGLang scrape jobs",
    )
    parser.add_argument(
        "--match",
        default="",
        metavar="MATCHERS",
        help="label matchers added to every input selector of the recording rules, e.g. "
        "'job=\"sglang\"', so pods that already run the sidecar are not translated twice",
    )
    parser.add_argument(
        "--rate-window",
        default=DEFAULT_WINDOW,
        metavar="DURATION",
        help="rate() range for derivations the bridge computes from deltas between two fetches "
        f"(default {DEFAULT_WINDOW}; prometheus-rules only)",
    )
    parser.set_defaults(handler=run_rules)


def _options(args: argparse.Namespace, fmt: RuleFormat) -> tuple[str, str]:
    """The checked --match and --rate-window values; raises ValueError."""
    if fmt is not RuleFormat.PROMETHEUS_RULES and (
        args.match or args.rate_window != DEFAULT_WINDOW
    ):
        raise ValueError("--match and --rate-window apply to --format prometheus-rules only")
    return check_matchers(args.match), check_window(args.rate_window)


def run_rules(args: argparse.Namespace) -> int:
    """Print the export to stdout; exit 2 on an unusable rules file or matchers."""
    fmt = RuleFormat(args.format)
    try:
        matchers, window = _options(args, fmt)
        config = load_config(args.config, args.profiles)
    except ConfigError as exc:
        print_config_error(exc)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"metricbridge rules: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(export_rules(config, fmt, matchers, window))
    return EXIT_OK
