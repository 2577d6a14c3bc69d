"""``metricbridge --version``: what runs, laid out as the Go exporters' ``version.Print`` is.

It names the reader (compiled, or the slower pure-Python one when the C pass was not built),
the interpreter and each runtime dependency's installed version, read from the installed
metadata: nothing here imports the HTTP stack or the dependencies themselves.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import metricbridge

# A requirement's project name, as PEP 508 spells it: what comes before any version, marker
# or extra.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def reader_mode() -> tuple[str, str]:
    """``compiled`` or ``python``, and why."""
    # The reader's module decides at import which pass it uses; importing it loads no I/O.
    from metricbridge.exposition import line_match  # noqa: PLC0415 - only when asked

    if line_match.COMPILED:
        return "compiled", "the C line pass"
    if os.environ.get("METRICBRIDGE_PURE_PYTHON"):
        return "python", "METRICBRIDGE_PURE_PYTHON is set"
    return "python", "the C line pass was not built at install time; reading is slower"


def runtime_dependencies() -> list[tuple[str, str]]:
    """Each runtime dependency of the installed package and its installed version."""
    from importlib import metadata  # noqa: PLC0415 - only for --version: costly to import

    try:
        requirements = metadata.requires("metricbridge") or []
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return []
    found: list[tuple[str, str]] = []
    for requirement in requirements:
        name = _NAME.match(requirement)
        if name is None or "extra ==" in requirement:
            continue  # the test and lint tools are not what runs
        try:
            found.append((name[0], metadata.version(name[0])))
        except metadata.PackageNotFoundError:
            found.append((name[0], "not installed"))
    return sorted(found, key=lambda item: item[0].lower())


def version_text() -> str:
    """The lines ``--version`` prints."""
    mode, why = reader_mode()
    rows = [
        ("reader", f"{mode} ({why})"),
        ("python version", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("platform", f"{sys.platform}/{platform.machine()}"),
        *runtime_dependencies(),
    ]
    width = max(len(label) for label, _ in rows) + 2
    lines = [f"metricbridge, version {metricbridge.__version__} (reader: {mode})"]
    lines += [f"  {label + ':':<{width}}{value}" for label, value in rows]
    return "\n".join(lines)


class VersionAction(argparse.Action):
    """``--version``: print ``version_text`` and exit 0, computed only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:  # noqa: ANN401 - argparse's keywords
        kwargs.setdefault("help", "show what runs (versions, reader) and exit")
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,  # noqa: ARG002 - argparse's signature
        values: object,  # noqa: ARG002
        option_string: str | None = None,  # noqa: ARG002
    ) -> NoReturn:
        """Print and exit (quietly when the reader left: ``metricbridge --version | head -1``)."""
        try:
            print(version_text(), flush=True)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        parser.exit()
