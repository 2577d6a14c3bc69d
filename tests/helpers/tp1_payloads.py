"""tp1.prom rewritten: counters grown or reset, types changed, bytes spoiled."""

from __future__ import annotations

from helpers.paths import FIXTURES

TP1 = (FIXTURES / "tp1.prom").read_bytes()
# tp1.prom: cached_tokens_total{cache_source="device"} over both prompt_tokens_total series, the
# default contract's sglang:device_cache_hit_rate when every counter moves together.
TP1_HIT_RATE = 1771.0 / (12657.0 + 8187.0)


def scaled(factor: float, overrides: dict[str, float] | None = None, base: bytes = TP1) -> bytes:
    """tp1.prom with every counter and histogram value times ``factor`` (per-family overrides).

    Growing factors make counters grow; a smaller factor after a larger one is an engine
    restart. Bucket counts and ``_count`` are rounded, as OpenMetrics wants integers there.
    """
    out, kind, family = [], "", ""
    for line in base.split(b"\n"):
        if line.startswith(b"# TYPE "):
            _, _, family, kind = line.decode().split(" ")
        elif line and not line.startswith(b"#") and kind in ("counter", "histogram"):
            series, value = line.rsplit(b" ", 1)
            new = float(value) * (overrides or {}).get(family, factor)
            if kind == "histogram" and not series.split(b"{")[0].endswith(b"_sum"):
                new = float(round(new))
            out.append(series + b" " + repr(new).encode())
            continue
        out.append(line)
    return b"\n".join(out)


def retyped(payload: bytes, changes: dict[str, tuple[str, str]]) -> bytes:
    """The payload with ``# TYPE`` lines changed: family -> (old type, new type)."""
    for family, (old, new) in changes.items():
        payload = payload.replace(
            f"# TYPE {family} {old}\n".encode(), f"# TYPE {family} {new}\n".encode()
        )
    return payload


def spoiled(payload: bytes, family: str, bad: bytes) -> bytes:
    """The payload with ``bad`` spliced into the first label value of ``family``'s first line."""
    start = payload.index(f"\n{family}{{".encode()) + 1
    quote = payload.index(b'"', start) + 1
    return payload[:quote] + bad + payload[quote:]
