"""The serve command's flags, their METRICBRIDGE_* variables, and the help that documents them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metricbridge.cli.logs import log_format
from metricbridge.cli.options import (
    PROFILE_HELP,
    ArgumentContainer,
    EnvOption,
    add_env_option,
    boolean,
    choice,
    config_path,
    existing_file,
    non_negative_seconds,
    port_number,
    positive_int,
    positive_seconds,
    profile_names,
    use_environment,
)
from metricbridge.service.scrape import Upstream, parse_upstream

DEFAULT_LISTEN = ":9850"
LOG_LEVELS = ("debug", "info", "warning", "error")
SHUTDOWN_SECONDS = 15

SERVE_EPILOG = f"""\
endpoints:
  GET  /metrics    the translated engine metrics plus metricbridge_* self-metrics; OpenMetrics
                   1.0.0 when the Accept header prefers it, else text 0.0.4; gzip when asked;
                   ?name[]=NAME filters
  GET  /contract   JSON: every contract row and how the latest fetch served it
  GET  /-/healthy  liveness: 200 while the process answers
  GET  /-/ready    readiness: 200 once the rules are loaded and the HTTP client is running; the
                   engine's own health is not required, so a loading engine does not hold the
                   pod's readiness back (metricbridge_upstream_up says whether it answers)
  POST /-/reload   re-read the rules file: 200 once in force; 500 with its issues, the old
                   rules still serving; only with --web.enable-lifecycle (403 without), and
                   at most once a second (429 sooner)
  GET  /           a page listing these
  With basic auth in --web.config.file every path needs it, the probes included, as in
  every exporter built on Prometheus' exporter-toolkit (401 without it).

caching:
  Scrapes arriving while a fetch is in flight share it, and a finished fetch is reused for
  --cache-ttl seconds; nothing older than the latest completed fetch is served. A fetch's time
  limit comes from Prometheus' X-Prometheus-Scrape-Timeout-Seconds, capped by
  --upstream-timeout. A failed fetch still answers 200, with metricbridge_upstream_up 0.

signals:
  SIGHUP           re-read the rules file (always, whatever --web.enable-lifecycle says) and
                   the --web.config.file (also re-read whenever it or a file it names changes)
  SIGTERM, SIGINT  stop listening, let scrapes in flight finish (up to {SHUTDOWN_SECONDS} s), exit 0

environment:
  Each flag above reads the METRICBRIDGE_* variable named in its help when it is not given
  (the flag wins); an empty variable counts as unset. Values are checked as the flag's are
  (booleans: 1/0, true/false, yes/no, on/off, in any case). Only the command that uses a
  variable reads it: these are read by serve alone, METRICBRIDGE_CONFIG also by translate,
  check, contract, diff and rules. SGLANG_IDLE_METRIC_HEARTBEAT=1 turns idle zeroing on.

exit status:
  0 stopped by SIGTERM or SIGINT; 2 cannot start: a bad flag, variable or rules file, or an
  address it cannot listen on ("cannot listen on 0.0.0.0:9850: address already in use")
"""


def _upstream(text: str) -> Upstream:
    try:
        return parse_upstream(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _upstreams(text: str) -> list[Upstream]:
    """METRICBRIDGE_UPSTREAM: the flag's values, comma-separated; empty items are skipped."""
    return [_upstream(item) for item in text.split(",") if item.strip()]


def sample_limit(text: str) -> int:
    """A number of samples, 0 for no limit, as Prometheus' sample_limit reads 0."""
    if text.isascii() and text.isdigit():  # not int(): it reads "1_0", "+8" and " 8 " too
        return int(text)
    raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected a whole number >= 0")


def listen_address(text: str) -> tuple[str, int]:
    """``[HOST]:PORT``, checked as a flag or variable value is."""
    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_service_options(
    parser: argparse.ArgumentParser, container: ArgumentContainer | None = None
) -> None:
    """The ``serve`` flags, each falling back to its METRICBRIDGE_* variable.

    With ``container`` (an argument group of another parser) they are only listed there, for
    ``metricbridge --help``: that parser never parses them, since a command line that does not
    start with a command is handed to ``serve`` whole, and it reads no variable for them.
    """
    options: list[EnvOption] = []

    def add(
        *flags: str,
        variable: str,
        from_env: Callable[[str], object],
        default: object,
        aliases: tuple[str, ...] = (),
        **kwargs: Any,  # noqa: ANN401 - add_argument's own keywords
    ) -> None:
        options.append(
            add_env_option(
                container or parser,
                *flags,
                variable=variable,
                from_env=from_env,
                default=default,
                aliases=aliases,
                **kwargs,
            )
        )

    add(
        "-u",
        "--upstream",
        variable="METRICBRIDGE_UPSTREAM",
        from_env=_upstreams,
        default=[],
        action="append",
        type=_upstream,
        metavar="HOST:PORT|URL",
        help="engine /metrics to scrape (required); ':30000' means 127.0.0.1:30000/metrics, "
        "HOST:PORT means http://HOST:PORT/metrics; repeat for an EPD encoder server "
        "(env METRICBRIDGE_UPSTREAM, comma-separated)",
    )
    add(
        "--web.listen-address",
        "--listen",
        variable="METRICBRIDGE_WEB_LISTEN_ADDRESS",
        aliases=("METRICBRIDGE_LISTEN",),
        from_env=listen_address,
        default=parse_listen(DEFAULT_LISTEN),
        type=listen_address,
        dest="listen",
        metavar="[HOST]:PORT",
        help=f"address to serve on; no host means every interface (default {DEFAULT_LISTEN}; "
        "--listen is its old name; env METRICBRIDGE_WEB_LISTEN_ADDRESS, or the old "
        "METRICBRIDGE_LISTEN)",
    )
    add(
        "--web.config.file",
        variable="METRICBRIDGE_WEB_CONFIG_FILE",
        from_env=existing_file("web config file"),
        default=None,
        type=Path,
        dest="web_config_file",
        metavar="FILE",
        help="TLS and basic-auth settings, in the Prometheus exporter-toolkit's web "
        "configuration format; read at start (a bad file stops it), on SIGHUP and whenever "
        "it or a file it names changes (default: none, plain HTTP without authentication; "
        "env METRICBRIDGE_WEB_CONFIG_FILE)",
    )
    add(
        "-c",
        "--config",
        variable="METRICBRIDGE_CONFIG",
        from_env=config_path,
        default=None,
        type=Path,
        metavar="FILE",
        help="rules file (default: the shipped contract; env METRICBRIDGE_CONFIG)",
    )
    add(
        "--profile",
        variable="METRICBRIDGE_PROFILE",
        from_env=profile_names,
        default=[],
        action="append",
        dest="profiles",
        metavar="NAME",
        help=f"{PROFILE_HELP} (env METRICBRIDGE_PROFILE, comma-separated)",
    )
    add(
        "--log.level",
        "--log-level",
        variable="METRICBRIDGE_LOG_LEVEL",
        from_env=choice(LOG_LEVELS),
        default="info",
        type=choice(LOG_LEVELS),
        dest="log_level",
        metavar="{" + ",".join(LOG_LEVELS) + "}",
        help="log level, any case (default info; --log-level is its old name; "
        "env METRICBRIDGE_LOG_LEVEL)",
    )
    add(
        "--log.format",
        "--log-format",
        variable="METRICBRIDGE_LOG_FORMAT",
        from_env=log_format,
        default="logfmt",
        type=log_format,
        dest="log_format",
        metavar="{logfmt,json}",
        help="log format, any case: logfmt (key=value) or json, one line per record with an "
        "RFC 3339 UTC time (default logfmt; text, its old name, is logfmt; --log-format is the "
        "flag's old name; env METRICBRIDGE_LOG_FORMAT)",
    )
    add(
        "--upstream-timeout",
        variable="METRICBRIDGE_UPSTREAM_TIMEOUT",
        from_env=positive_seconds,
        default=10.0,
        type=positive_seconds,
        metavar="SECONDS",
        help="cap on one upstream fetch, seconds, and the whole wait of a request without "
        "X-Prometheus-Scrape-Timeout-Seconds; with it, Prometheus' timeout less a quarter of it "
        "(at most 0.5 s) is used when smaller (default 10; env METRICBRIDGE_UPSTREAM_TIMEOUT)",
    )
    add(
        "--upstream-max-bytes",
        variable="METRICBRIDGE_UPSTREAM_MAX_BYTES",
        from_env=positive_int,
        default=64 << 20,
        type=positive_int,
        metavar="BYTES",
        help="largest upstream body accepted (default 67108864, 64 MiB; "
        "env METRICBRIDGE_UPSTREAM_MAX_BYTES)",
    )
    add(
        "--family-sample-limit",
        variable="METRICBRIDGE_FAMILY_SAMPLE_LIMIT",
        from_env=sample_limit,
        default=100_000,
        type=sample_limit,
        metavar="N",
        help="most samples in one upstream family a rule reads; a larger family is not served "
        'and its samples count in metricbridge_samples_dropped_total{reason="sample_limit"} '
        "(default 100000, chosen with the default --upstream-timeout: a family a rule reads "
        "of this size takes about 2 s per fetch on a 2-core machine; 0 = no limit; "
        "env METRICBRIDGE_FAMILY_SAMPLE_LIMIT)",
    )
    add(
        "--no-server-info",
        variable="METRICBRIDGE_NO_SERVER_INFO",
        from_env=boolean,
        default=False,
        action="store_const",
        const=True,
        help="do not poll the engine's /server_info (rows derived from it are then reported "
        "missing; env METRICBRIDGE_NO_SERVER_INFO=1, or true/yes/on)",
    )
    add(
        "--no-cpu-pinning",
        variable="METRICBRIDGE_NO_CPU_PINNING",
        from_env=boolean,
        default=False,
        action="store_const",
        const=True,
        help="let the event loop and the translation thread run on different CPUs (by default "
        "they share one of the allowed CPUs least busy at start, which keeps answers prompt "
        "while a large payload is translated; none when all are over half busy; "
        "env METRICBRIDGE_NO_CPU_PINNING=1)",
    )
    add(
        "--web.enable-lifecycle",
        variable="METRICBRIDGE_WEB_ENABLE_LIFECYCLE",
        from_env=boolean,
        default=False,
        action="store_const",
        const=True,
        dest="enable_lifecycle",
        help="accept POST /-/reload, as Prometheus' flag of that name does (off by default: "
        "it changes state and has no authentication; SIGHUP always reloads; "
        "env METRICBRIDGE_WEB_ENABLE_LIFECYCLE=1)",
    )
    add(
        "--web.max-connections",
        variable="METRICBRIDGE_WEB_MAX_CONNECTIONS",
        from_env=positive_int,
        default=512,
        type=positive_int,
        dest="max_connections",
        metavar="N",
        help="most client connections served at once (default 512, as Prometheus; lowered to "
        "fit the open-file limit). At the cap the longest idle one, else the oldest still "
        "sending its request, is closed for a new one; when all are busy, up to as many more "
        "wait for a slot, then get 503 (env METRICBRIDGE_WEB_MAX_CONNECTIONS)",
    )
    add(
        "--web.read-header-timeout",
        variable="METRICBRIDGE_WEB_READ_HEADER_TIMEOUT",
        from_env=positive_seconds,
        default=10.0,
        type=positive_seconds,
        dest="header_timeout",
        metavar="SECONDS",
        help="close a connection that has not sent a whole request head this long after it "
        "opened, or after its request's first byte (default 10, as Go's ReadHeaderTimeout; "
        "env METRICBRIDGE_WEB_READ_HEADER_TIMEOUT)",
    )
    add(
        "--web.idle-timeout",
        variable="METRICBRIDGE_WEB_IDLE_TIMEOUT",
        from_env=positive_seconds,
        default=300.0,
        type=positive_seconds,
        dest="idle_timeout",
        metavar="SECONDS",
        help="close a keep-alive connection idle this long (default 300; "
        "env METRICBRIDGE_WEB_IDLE_TIMEOUT)",
    )
    add(
        "--web.write-timeout",
        variable="METRICBRIDGE_WEB_WRITE_TIMEOUT",
        from_env=positive_seconds,
        default=30.0,
        type=positive_seconds,
        dest="write_timeout",
        metavar="SECONDS",
        help="abandon a response whose client has not read it all in this long (default 30; "
        "env METRICBRIDGE_WEB_WRITE_TIMEOUT)",
    )
    add(
        "--cache-ttl",
        variable="METRICBRIDGE_CACHE_TTL",
        from_env=non_negative_seconds,
        default=1.0,
        type=non_negative_seconds,
        metavar="SECONDS",
        help="seconds a finished fetch is reused by later scrapes (default 1; 0 = only "
        "scrapes arriving during a fetch share it; env METRICBRIDGE_CACHE_TTL)",
    )
    if container is None:
        use_environment(parser, options)


def usage_with_upstream_required(parser: argparse.ArgumentParser) -> str:
    """The usage line argparse makes, ``-u`` shown as the required flag it is (or its variable).

    It is not ``required=True``: METRICBRIDGE_UPSTREAM, read after parsing, may give it.
    """
    upstream = next(a for a in parser._actions if a.dest == "upstream")  # noqa: SLF001
    upstream.required = True
    try:
        usage = parser.format_usage().removeprefix("usage: ").rstrip()
    finally:
        upstream.required = False
    return usage.replace("%", "%%").replace(parser.prog, "%(prog)s", 1)


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` to a (host, port) pair; no host means every interface."""
    host, sep, port = text.rpartition(":")
    try:
        number = port_number(port) if sep else None
    except argparse.ArgumentTypeError:
        number = None
    if number is None:
        raise ValueError(f"cannot listen on {text!r}: expected [HOST]:PORT")
    return host.strip("[]") or "0.0.0.0", number  # noqa: S104 - a sidecar is scraped via the pod IP
