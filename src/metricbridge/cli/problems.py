"""How a command reports a rules file it cannot use: the same lines, whichever command it is.

Every command that loads a rules file (serve at start-up, demo, translate, config check, check,
contract, diff, rules) prints a ``ConfigError`` with ``print_config_error``: one line per issue,
``file:line: path: message``, then how many there are, on stderr.
"""

from __future__ import annotations

import sys
from typing import TextIO

from metricbridge.errors import ConfigError, UnknownProfileError

__all__ = ["config_error_lines", "print_config_error"]


def config_error_lines(exc: ConfigError) -> list[str]:
    """Each issue as ``file:line: path: message``, then the count (an unknown profile: one line)."""
    if isinstance(exc, UnknownProfileError):
        return [str(issue) for issue in exc.issues]
    return [*(str(issue) for issue in exc.issues), f"{len(exc.issues)} issue(s) found"]


def print_config_error(exc: ConfigError, file: TextIO | None = None) -> None:
    """Print ``exc`` for the command line (stderr unless ``file`` is given)."""
    print("\n".join(config_error_lines(exc)), file=sys.stderr if file is None else file)
