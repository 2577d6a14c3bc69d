"""The fast path and the full parse agree on what is wrong with a payload, line for line.

``metricbridge translate`` reads through the service's fast path (``validation: structure``):
a block the proofs refuse is parsed line by line, so every problem is the one a full parse
names, at the same line. These payloads are real SGLang output with a few bytes broken,
read cold and then again through a warm scrape memory, as an upstream's next scrape is.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.paths import FIXTURES
from helpers.strength import examples
from metricbridge.errors import ExpositionError
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.scrape_memory import ScrapeMemory
from metricbridge.model.family import Format, Verify

SOURCES = {
    Format.TEXT: (FIXTURES / "tp1.prom").read_bytes(),
    Format.OPENMETRICS: (FIXTURES / "tp1.om.txt").read_bytes(),
}
# Bytes that matter to the grammar, and a few that do not.
ALPHABET = b' {}",=\n#_a1.eE+-xN\\\t'


@st.composite
def broken(draw: st.DrawFn, source: bytes) -> bytes:
    """``source`` with one to four bytes replaced, deleted or inserted."""
    data = bytearray(source)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data) - 1))
        byte = draw(st.sampled_from(ALPHABET))
        edit = draw(st.sampled_from(("replace", "delete", "insert")))
        if edit == "replace":
            data[pos] = byte
        elif edit == "delete":
            del data[pos]
        else:
            data.insert(pos, byte)
    return bytes(data)


def _verdict(
    payload: bytes, fmt: Format, verify: Verify, **memo: CodecCaches | ScrapeMemory
) -> object:
    """What reading ``payload`` came to: problems by line and families; or the refusal."""
    try:
        exposition = read_exposition(payload, fmt, verify, **memo)  # type: ignore[arg-type]
    except ExpositionError as exc:  # nothing usable: a payload without '# EOF', say
        return exc.line, exc.message
    problems = sorted(
        ((p.line or 0, p.family or "", p.message, p.family_kept) for p in exposition.problems),
        key=repr,
    )
    return problems, [family.name for family in exposition.families]


@pytest.mark.parametrize("fmt", list(Format))
@settings(deadline=None, max_examples=examples(300, 40))
@given(data=st.data())
def test_structure_names_the_problems_full_names(fmt: Format, data: st.DataObject) -> None:
    payload = data.draw(broken(SOURCES[fmt]))
    full = _verdict(payload, fmt, Verify.FULL)
    caches, memory = CodecCaches(), ScrapeMemory()
    # Warm: the memory holds the intact payload's layout, as after the engine's last scrape.
    read_exposition(SOURCES[fmt], fmt, Verify.STRUCTURE, caches=caches, memory=memory)
    warm = _verdict(payload, fmt, Verify.STRUCTURE, caches=caches, memory=memory)
    cold = _verdict(payload, fmt, Verify.STRUCTURE, caches=CodecCaches())
    assert cold == full
    assert warm == full
