"""What the codec's caches are told an entry costs, and what they are not offered at all."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.strength import examples
from metricbridge.exposition.caches import CodecCaches, labels_size
from metricbridge.exposition.family_parse import parse_family
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.sample_line import _plain_labels
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format, RawFamily

NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,6}", fullmatch=True)
VALUES = st.text(st.characters(blacklist_characters='"\\\n'), max_size=8)


@settings(deadline=None, max_examples=examples(500, 100))
@given(pairs=st.dictionaries(NAMES, VALUES, min_size=1, max_size=5), trailing=st.booleans())
def test_a_plain_label_sets_size_is_worked_out_from_its_text(
    pairs: dict[str, str], trailing: bool
) -> None:
    """The size put without a pass over the pairs is labels_size's, exactly."""
    text = ",".join(f'{key}="{value}"' for key, value in pairs.items()) + ("," if trailing else "")
    alone, cache = ByteLRU("one", 1 << 20), ByteLRU("other", 1 << 20)
    labels = _plain_labels(text, cache)
    assert labels is not None
    alone.put(text, labels, len(text) + labels_size(labels))
    assert cache.bytes == alone.bytes


def test_a_family_too_big_for_the_caches_is_not_offered_to_them() -> None:
    """A rule's family of 60,000 series: parsed and written right, the caches left as they were."""
    lines = "".join(f'big{{id="{index}"}} {index}\n' for index in range(60_000))
    payload = ("# HELP big A big family.\n# TYPE big gauge\n" + lines).encode()
    caches = CodecCaches()
    (family,) = read_exposition(payload, Format.TEXT, caches=caches).families
    assert isinstance(family, RawFamily)
    parsed = parse_family(family, caches=caches)
    assert len(parsed.samples) == 60_000
    assert parsed.samples[-1].labels == (("id", "59999"),)
    assert write_exposition([parsed], Format.TEXT, caches=caches) == payload
    assert len(caches.last_parse) == 0
    assert len(caches.read_label_sets) == 0
    assert len(caches.written_label_sets) == 0
