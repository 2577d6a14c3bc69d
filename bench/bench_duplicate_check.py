"""What it would cost ``validation: structure`` to catch repeated series, against translation.

    python bench/bench_duplicate_check.py [--repeat 9]

The fast path proves that no series repeats in a block it serves unparsed (exposition_reader's
invariant) with the one-space trick below, its heads kept for the next scrape. Three ways to
check uniqueness, each over the sample lines the fast path vouches for, timed against the
whole translation (default contract) in the same run:

- ``series keys``: split lines, cut each at its last space, compare set and list sizes;
- ``one-space trick``: vouched lines have exactly one space, so replacing spaces by newlines
  and splitting gives keys and values alternately, all in C;
- ``whole lines``: a set of lines, which catches only a repeat with the same value.
"""

from __future__ import annotations

import argparse

from bench_translate import median_seconds
from payloads import payloads

from metricbridge.config.load import load_config
from metricbridge.model.family import Format
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import render, run_pipeline


def series_keys(lines: bytes) -> bool:
    """Unique if no two lines share everything before their last space."""
    keys = [line[: line.rfind(b" ")] for line in lines.split(b"\n") if line]
    return len(set(keys)) == len(keys)


def one_space_trick(lines: bytes) -> bool:
    """Unique series keys, for lines with exactly one space each (what the fast path vouches)."""
    keys = lines.replace(b" ", b"\n").split(b"\n")[:-1:2]
    return len(set(keys)) == len(keys)


def whole_lines(lines: bytes) -> bool:
    """Unique lines (a repeated series with a different value goes unnoticed)."""
    split = lines.split(b"\n")
    return len(set(split)) == len(split)


def main() -> None:
    """Print translation time and each check's time and share of it, per payload."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rules = compile_rules(load_config())
    print(
        f"{'payload':>20} {'translate':>10} {'series keys':>17} {'one-space trick':>17} {'whole lines':>17}"
    )
    for name, payload in payloads().items():
        samples = b"".join(
            line + b"\n" for line in payload.split(b"\n") if line and line[:1] != b"#"
        )
        translate = median_seconds(
            lambda p=payload: render(run_pipeline(p, Format.TEXT, rules), Format.TEXT), args.repeat
        )
        cells = []
        for check in (series_keys, one_space_trick, whole_lines):
            if not check(samples):
                raise SystemExit(f"{name}: the payload itself repeats a series")
            seconds = median_seconds(lambda c=check, s=samples: c(s), args.repeat)
            cells.append(f"{seconds * 1e3:6.2f}ms ({seconds / translate:4.0%})")
        print(f"{name:>20} {translate * 1e3:8.2f}ms " + " ".join(f"{c:>17}" for c in cells))


if __name__ == "__main__":
    main()
