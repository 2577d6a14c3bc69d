"""Option values: one checker per kind of value, shared by a flag and its environment variable.

A flag backed by a ``METRICBRIDGE_*`` variable is declared with ``default=None`` and listed on
its command's parser (``add_env_option``, ``use_environment``); after parsing,
``apply_environment`` fills each such flag the command line left unset, from its variable or
else its default. The variables are read then, not while the parser is built, so a bad value
can only stop the command that reads it.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from metricbridge.errors import EnvError

__all__ = [
    "MISSING_UPSTREAM",
    "ArgumentContainer",
    "EnvError",
    "EnvOption",
    "add_env_option",
    "apply_environment",
    "boolean",
    "choice",
    "config_path",
    "describe_os_error",
    "existing_file",
    "non_negative_seconds",
    "port_number",
    "positive_int",
    "positive_seconds",
    "use_environment",
]

_ENV_OPTIONS = "env_options"  # Namespace attribute: the chosen command's EnvOption tuple
# What a bare `metricbridge` and a `serve` without an upstream say first.
MISSING_UPSTREAM = (
    "--upstream is required (or METRICBRIDGE_UPSTREAM); "
    "try 'metricbridge demo' to see it work without SGLang"
)
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class ArgumentContainer(Protocol):
    """A parser or an argument group: anything ``add_argument`` can be called on."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action:  # noqa: ANN401
        """Add one option, as ``argparse.ArgumentParser.add_argument`` does."""


@dataclass(frozen=True, slots=True)
class EnvOption:
    """A flag's variable: how its text becomes the flag's value, and the value when unset."""

    dest: str
    variable: str
    convert: Callable[[str], object]
    default: object
    # Older names of the variable, read when it is unset (the flag's own old spelling's).
    aliases: tuple[str, ...] = ()


def add_env_option(
    container: ArgumentContainer,
    *flags: str,
    variable: str,
    from_env: Callable[[str], object],
    default: object,
    aliases: tuple[str, ...] = (),
    **kwargs: Any,  # noqa: ANN401 - passed to add_argument unchanged
) -> EnvOption:
    """Add a flag that falls back to ``variable``; ``use_environment`` makes a parser read it.

    ``from_env`` turns the variable's text into the flag's value and raises
    ``argparse.ArgumentTypeError`` (or ``ValueError``) on bad text; the flag's own ``type``
    should be the same checker, so both are refused for the same reason.
    """
    action = container.add_argument(*flags, default=None, **kwargs)
    return EnvOption(action.dest, variable, from_env, default, aliases)


def use_environment(parser: argparse.ArgumentParser, options: Iterable[EnvOption]) -> None:
    """Have ``apply_environment`` fill these flags when ``parser``'s command is the one run."""
    known: tuple[EnvOption, ...] = parser.get_default(_ENV_OPTIONS) or ()
    parser.set_defaults(**{_ENV_OPTIONS: (*known, *options)})


def apply_environment(args: argparse.Namespace) -> None:
    """Fill the chosen command's unset flags from their variables; raise ``EnvError`` on bad text.

    An empty variable counts as unset, as ``${VAR:-default}`` treats it: manifests often
    blank a variable rather than remove it.
    """
    for option in getattr(args, _ENV_OPTIONS, ()):
        if getattr(args, option.dest) is not None:
            continue  # the flag wins over its variable
        name, text = option.variable, ""
        for candidate in (option.variable, *option.aliases):  # the new name first, then old ones
            if os.environ.get(candidate, "").strip():
                name, text = candidate, os.environ[candidate]
                break
        if not text:
            setattr(args, option.dest, option.default)
            continue
        try:
            value = option.convert(text)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise EnvError(f"environment variable {name}: {exc}") from None
        setattr(args, option.dest, value)


def positive_seconds(text: str) -> float:
    """A finite number of seconds above zero."""
    return _seconds(text, minimum_allowed=False)


def non_negative_seconds(text: str) -> float:
    """A finite number of seconds, zero allowed."""
    return _seconds(text, minimum_allowed=True)


def _seconds(text: str, *, minimum_allowed: bool) -> float:
    expected = "a number of seconds >= 0" if minimum_allowed else "a number of seconds > 0"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected {expected}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not minimum_allowed):
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected {expected}")
    return value


def positive_int(text: str) -> int:
    """A whole number above zero."""
    return _whole_number(text, 1, None, "invalid value {text!r}: expected a whole number > 0")


def port_number(text: str) -> int:
    """A TCP port, 0 (the system picks a free one) to 65535."""
    return _whole_number(text, 0, 65535, "invalid port {text!r}: expected 0 to 65535")


def _whole_number(text: str, low: int, high: int | None, message: str) -> int:
    # ASCII digits only: int() also reads "١٢٣" as 123, and "1_0", "+80" and " 80 ".
    value = int(text) if text.isascii() and text.isdigit() else None
    if value is None or value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(message.format(text=text))
    return value


def choice(values: Iterable[str]) -> Callable[[str], str]:
    """One of ``values``, in any letter case (``JSON`` is ``json``)."""
    allowed = tuple(values)

    def check(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise argparse.ArgumentTypeError(
                f"invalid value {text!r}: expected one of {', '.join(allowed)}"
            )
        return value

    return check


def boolean(text: str) -> bool:
    """1/0, true/false, yes/no, on/off, in any letter case."""
    value = text.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(
        f"invalid value {text!r}: expected 1/0, true/false, yes/no or on/off"
    )


def profile_names(text: str) -> list[str]:
    """METRICBRIDGE_PROFILE: profile names, comma-separated; empty items are skipped.

    Whether each is shipped is load_config's to say, with the shipped ones listed.
    """
    return [name.strip() for name in text.split(",") if name.strip()]


PROFILE_HELP = (
    "layer a shipped profile over the rules (repeatable; `metricbridge profiles` lists them)"
)


def existing_file(what: str) -> Callable[[str], Path]:
    """A variable's file that exists (``what`` names it in the error); reading it is the loader's.

    Only the variable is checked here, so that the error names it; a flag names its file
    itself, and the loader's "FILE: cannot read: ..." says all there is to say.
    """

    def check(text: str) -> Path:
        path = Path(text)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: is a directory")
        if not path.exists():
            raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: no such file")
        return path

    return check


# METRICBRIDGE_CONFIG: a rules file that exists.
config_path = existing_file("rules file")


def describe_os_error(exc: OSError) -> str:
    """The OS's reason alone, lower-cased: ``address already in use``, not asyncio's wrapping.

    asyncio re-raises a failed bind as "error while attempting to bind on address (...): ...";
    the errno still names the reason, and the address is already in our own message.
    """
    if exc.errno is not None and exc.errno > 0:
        text = os.strerror(exc.errno)
    else:  # getaddrinfo's errors carry negative codes; their strerror is the reason
        text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]
