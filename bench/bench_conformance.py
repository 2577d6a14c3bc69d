"""What holding families to their type's rules costs, against split+join and the read itself.

    python bench/bench_conformance.py

Same process, the measurements taking turns per payload (``interleaved_medians``), on successive
scrapes of the simulated 1 MB and 10 MB engines: the default read and, alone, the screen it
runs over the families it serves unparsed (``exposition.semantics.screen_raw``: one regex search
per counter, histogram and summary body); the full read and, alone, the rules over every family
it parsed (``first_breach``), which that read includes. Shares of the read are steadier than
milliseconds on a busy machine.
"""

from __future__ import annotations

from bench_translate import interleaved_medians
from payloads import SHAPES, evolving_payloads

from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.semantics import first_breach, screen_raw
from metricbridge.model.family import Family, Format, Verify


def main() -> None:
    """Print one line per payload size."""
    for name, (dp, tp) in SHAPES.items():
        inputs = evolving_payloads(dp, tp, 8 if dp * tp > 64 else 12)
        caches, full_caches = CodecCaches(), CodecCaches()
        fast = {id(p): read_exposition(p, Format.TEXT, caches=caches) for p in inputs}
        full = {
            id(p): read_exposition(p, Format.TEXT, Verify.FULL, caches=full_caches) for p in inputs
        }

        def split_join(p: bytes) -> bytes:
            return b"\n".join(p.split(b"\n"))

        def read(p: bytes, caches: CodecCaches = caches) -> object:
            return read_exposition(p, Format.TEXT, caches=caches)

        def screen(p: bytes, fast: dict = fast, caches: CodecCaches = caches) -> object:
            return screen_raw(list(fast[id(p)].families), Format.TEXT, caches=caches)

        def read_full(p: bytes, caches: CodecCaches = full_caches) -> object:
            return read_exposition(p, Format.TEXT, Verify.FULL, caches=caches)

        def rules(p: bytes, full: dict = full) -> object:
            families = full[id(p)].families
            return [first_breach(f, Format.TEXT) for f in families if isinstance(f, Family)]

        base, r, s, rf, c = interleaved_medians(
            [split_join, read, screen, read_full, rules], inputs
        )
        print(
            f"{name}: split+join {base * 1e3:.2f} ms | default read {r / base:.2f}x, of which "
            f"the screen {s / base:.2f}x ({s / r:.1%}) | full read {rf / base:.1f}x, of which "
            f"the rules {c / base:.1f}x ({c / rf:.1%})"
        )


if __name__ == "__main__":
    main()
