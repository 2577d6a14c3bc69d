"""Relabel replacement templates: Prometheus' ``$1``/``${name}`` converted once, at load."""

from __future__ import annotations

import re

from metricbridge.errors import TemplateError
from metricbridge.model.regex import Match, Pattern

_REFERENCE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([0-9]+)|([A-Za-z_][A-Za-z0-9_]*))|\$\$")


# A template as parts: literal text, or the number of the regex group whose match goes there.
Expansion = tuple[str | int, ...]


def template_parts(template: str, pattern: Pattern) -> Expansion:
    """``template`` parsed once into what ``expand`` joins; ``TemplateError`` for a bad group.

    Unlike Go's ``Expand``, which silently substitutes "" for a missing group, such a reference
    is an error: in a rules file it is always a typo.

    Parsed once because the relabel hot path expands one per series. Adjacent literals are one part.
    """
    parts: list[str | int] = []

    def literal(text: str) -> None:
        if not text:
            return
        if parts and isinstance(parts[-1], str):
            parts[-1] += text
        else:
            parts.append(text)

    last = 0
    for match in _REFERENCE.finditer(template):
        literal(template[last : match.start()])
        last = match.end()
        if match.group() == "$$":
            literal("$")
            continue
        ref = match.group(1) or match.group(2) or match.group(3)
        if ref.isdigit():
            if int(ref) > pattern.groups:
                raise TemplateError(
                    f"refers to group ${ref}, but the regex has {pattern.groups} group(s)"
                )
            parts.append(int(ref))
        elif ref in pattern.groupindex:
            parts.append(pattern.groupindex[ref])
        else:
            raise TemplateError(f"refers to group {ref!r}, which the regex does not define")
    literal(template[last:])
    return tuple(parts)


def expand(parts: Expansion, hit: Match) -> str:
    """The template that ``parts`` came from, with ``hit``'s groups in place.

    A group that took no part in the match inserts "", as ``re`` does.
    """
    if len(parts) == 1 and isinstance(literal := parts[0], str):
        return literal
    return "".join(part if isinstance(part, str) else (hit.group(part) or "") for part in parts)
