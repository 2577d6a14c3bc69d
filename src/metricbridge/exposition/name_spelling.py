"""How a family read with UTF-8 names spells them for a scraper's ``escaping``.

The reader knows every family by legacy names (``{"my.metric"}`` is ``my_metric``) and keeps
the UTF-8 names it read with (``Spellings``). Under ``escaping=underscores``, what Prometheus 2
and any scraper that names no escaping get, that is the whole story: the legacy names are what
the underscores escaping makes of them. Under the others, the writer asks ``Spelling`` for each
name instead: ``allow-utf-8`` quotes the UTF-8 name where the grammar needs it, ``dots`` and
``values`` escape it their way (``model.names.escape_name``), as client_golang does.
"""

from __future__ import annotations

from dataclasses import dataclass

from metricbridge.exposition.sample_line import escape_label_value
from metricbridge.model.family import FamilyMeta
from metricbridge.model.names import LABEL_NAME, METRIC_NAME, Escaping, escape_name, legacy_name

# What a sample or header name may add to, or take from, a name the reader noted: the text
# format's counter header is the OpenMetrics one's name plus ``_total``, a histogram's samples
# its name plus ``_bucket``.
_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created", "_info", "_gsum", "_gcount")


def _quoted(name: str) -> str:
    return '"' + escape_label_value(name) + '"'


@dataclass(frozen=True, slots=True)
class Spelling:
    """One family's names under one escaping other than ``underscores``."""

    names: dict[str, str]
    labels: dict[str, str]
    escaping: Escaping

    @classmethod
    def of(cls, meta: FamilyMeta, escaping: Escaping) -> Spelling | None:
        """The spelling of ``meta``'s family, or None when its legacy names are what is served.

        None too for a family renamed since it was read: its names are the bridge's own.
        """
        spellings = meta.spellings
        if escaping is Escaping.UNDERSCORES or spellings is None or spellings.family != meta.name:
            return None
        return cls(dict(spellings.names), dict(spellings.labels), escaping)

    def metric(self, legacy: str) -> tuple[str, bool]:
        """A metric name as written, and whether it goes inside the braces (a quoted one)."""
        original = self._original(legacy)
        if original is None:
            return legacy, False
        if self.escaping is Escaping.ALLOW_UTF8:
            if METRIC_NAME.fullmatch(original):
                return original, False
            return _quoted(original), True
        return escape_name(original, self.escaping), False

    def label(self, legacy: str) -> str:
        """A label name as written."""
        original = self.labels.get(legacy)
        if original is None or legacy_name(original, label=True) != legacy:
            return legacy
        if self.escaping is Escaping.ALLOW_UTF8:
            return original if LABEL_NAME.fullmatch(original) else _quoted(original)
        return escape_name(original, self.escaping, label=True)

    def _original(self, legacy: str) -> str | None:
        """The UTF-8 name ``legacy`` was read as, or a suffix away from one that was."""
        original = self.names.get(legacy)
        if original is None:
            original = next(
                (
                    found
                    for noted, text in self.names.items()
                    if (found := _kin(legacy, noted, text))
                ),
                None,
            )
        # Only a name the legacy one stands for: anything else is spelled as the bridge knows it.
        if original is None or legacy_name(original) != legacy:
            return None
        return original


def _kin(legacy: str, noted: str, text: str) -> str | None:
    """The UTF-8 spelling of ``legacy`` if it is ``noted`` with a suffix added or taken away."""
    if legacy.startswith(noted) and legacy[len(noted) :] in _SUFFIXES:
        return text + legacy[len(noted) :]
    if noted.startswith(legacy):
        suffix = noted[len(legacy) :]
        if suffix in _SUFFIXES and text.endswith(suffix):
            return text[: -len(suffix)]
    return None
