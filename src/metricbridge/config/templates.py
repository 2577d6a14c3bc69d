"""Relabel replacement templates: Prometheus' ``$1``/``${name}`` converted once, at load."""

from __future__ import annotations

import re

from metricbridge.errors import TemplateError

_REFERENCE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([0-9]+)|([A-Za-z_][A-Za-z0-9_]*))|\$\$")


def compile_template(template: str, pattern: re.Pattern[str]) -> str:
    """Turn ``$1``/``${1}``/``${name}``/``$name`` into an ``re`` expansion template.

    Unlike Go's ``Expand``, which silently substitutes "" for a missing group, a reference the
    regex cannot satisfy is an error: in a rules file it is always a typo.
    """
    out: list[str] = []
    last = 0
    for match in _REFERENCE.finditer(template):
        out.append(template[last : match.start()].replace("\\", "\\\\"))
        last = match.end()
        if match.group() == "$$":
            out.append("$")
            continue
        ref = match.group(1) or match.group(2) or match.group(3)
        if ref.isdigit():
            if int(ref) > pattern.groups:
                raise TemplateError(
                    f"refers to group ${ref}, but the regex has {pattern.groups} group(s)"
                )
            out.append(f"\\g<{int(ref)}>")
        elif ref in pattern.groupindex:
            out.append(f"\\g<{ref}>")
        else:
            raise TemplateError(f"refers to group {ref!r}, which the regex does not define")
    out.append(template[last:].replace("\\", "\\\\"))
    return "".join(out)
