# ruff: noqa: INP001 - a standalone script, like bench/
"""Coverage-guided fuzzing of the reader, the default contract and the writer (atheris/libFuzzer).

    pip install atheris
    python fuzz/fuzz_pipeline.py -max_total_time=300        # corpus in fuzz/corpus/ (git-ignored)

The first input byte picks the wire format and the validation mode; the rest is the payload,
seeded from the real SGLang fixtures. A crash is anything but ``ExpositionError`` escaping the
pipeline, or a comment line written that is not a valid header; in ``validation: full`` also
output that prometheus_client's text parser or our own full read refuses. The number of cases
run is libFuzzer's ``stat::number_of_executed_units`` (``-print_final_stats=1``).
Inputs that trip bugs already pinned as ``xfail(strict=True)`` tests are skipped (``known_bug``
of tests/test_fuzz_contract.py, shared with Hypothesis), so a run reports only new ones. This
is the long, offline complement of that module (Hypothesis, bounded, in CI).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["metricbridge"]):
    from metricbridge.config.load import load_config
    from metricbridge.errors import ExpositionError
    from metricbridge.exposition.reader import read_exposition
    from metricbridge.model.family import Format, Verify
    from metricbridge.translation.compiler import compile_rules
    from metricbridge.translation.pipeline import render, run_pipeline

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
# One list of known bugs for Hypothesis and libFuzzer: the same filter, the same reproducers.
from test_fuzz_contract import VALID_COMMENT, known_bug, oracle_refuses_reserved_labels

ROOT = Path(__file__).resolve().parent
FIXTURES = ROOT.parent / "tests" / "fixtures" / "sglang-0.5.23"
CORPUS = ROOT / "corpus"
RULES = compile_rules(load_config())
MODES = [
    (fmt, dataclasses.replace(RULES, validation=verify)) for fmt in Format for verify in Verify
]


def one_input(data: bytes) -> None:
    """LibFuzzer's entry point: one payload through one (format, validation) mode."""
    if not data:
        return
    fmt, rules = MODES[data[0] % len(MODES)]
    payload = data[1:]
    if known_bug(payload, fmt):
        return
    try:
        outcome = run_pipeline(payload, fmt, rules)
    except ExpositionError:
        return
    for out_fmt in Format:
        output = render(outcome, out_fmt)
        for line in output.split(b"\n"):
            if line.startswith(b"#") and not VALID_COMMENT.fullmatch(line):
                raise AssertionError(f"invalid header written: {line!r}")
        if rules.validation is Verify.FULL and output:
            problems = read_exposition(output, out_fmt, Verify.FULL).problems
            if problems:
                raise AssertionError(f"own output has problems: {problems}")
    if rules.validation is Verify.FULL and not oracle_refuses_reserved_labels(payload):
        list(text_string_to_metric_families(render(outcome, Format.TEXT).decode()))


def seed_corpus() -> None:
    """Seed fuzz/corpus/ with the small fixtures, each behind a mode byte for its format."""
    if CORPUS.exists() and any(CORPUS.iterdir()):
        return
    CORPUS.mkdir(exist_ok=True)
    for path in sorted(FIXTURES.glob("*")):
        if path.suffix not in (".prom", ".txt") or path.stat().st_size > 20_000:
            continue
        fmt = Format.OPENMETRICS if path.name.endswith(".om.txt") else Format.TEXT
        for mode, (mode_fmt, _) in enumerate(MODES):
            if mode_fmt is fmt:
                (CORPUS / f"{path.stem}-{mode}").write_bytes(bytes([mode]) + path.read_bytes())
    tp1 = (FIXTURES / "tp1.prom").read_bytes()
    for size in (2_000, 8_000):  # slices of a busy engine: counters, histograms, derive inputs
        cut = tp1[:size].rsplit(b"\n", 1)[0] + b"\n"
        (CORPUS / f"tp1-head-{size}").write_bytes(b"\x00" + cut)


def main() -> None:
    """Seed the corpus, then hand over to libFuzzer (its flags pass through)."""
    seed_corpus()
    args = [sys.argv[0], *sys.argv[1:]]
    if not any(not arg.startswith("-") for arg in args[1:]):
        args.append(str(CORPUS))
    if not any(arg.startswith("-max_len") for arg in args):
        args.append("-max_len=24000")
    if not any(arg.startswith("-artifact_prefix") for arg in args):
        (ROOT / "artifacts").mkdir(exist_ok=True)
        args.append(f"-artifact_prefix={ROOT / 'artifacts'}/")
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    if "--clean" in sys.argv:
        shutil.rmtree(CORPUS, ignore_errors=True)
        sys.exit(0)
    main()
