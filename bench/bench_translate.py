r"""Translation speed and memory against baselines measured in the same run.

    python bench/bench_translate.py [--repeat N] [--skip-parser] [--no-plans] [--cpu-time]
                                    [--summary FILE]

Baselines: ``bytes.split(b"\\n")`` + ``b"\\n".join`` (the cost of touching every line once, in C)
and prometheus_client's text parser. At 1 MB and 10 MB every timed run translates a different
payload: successive scrapes of one simulated engine, 5 s apart, as the sidecar sees them; so
caches that key on repeated bytes (header pairs, parsed lines) help only as much as they would
in production. The 100 KB row is the one real fixture, the same bytes every run, so caches
help it fully. Each payload size has one ``CodecCaches`` for all its runs, as the service's
bridge keeps one for its life, and each output format a ``ScrapeMemory``, as the bridge keeps
one per upstream. Targets: the whole default contract at most 3x split+join and at
least 100x faster than prometheus_client's parser on 1 MB and 10 MB; peak RSS of
``metricbridge translate`` on 10 MB at most 4x the payload above an empty run; the CPU of
``metricbridge translate`` on 10 MB at least 20x less than that of a process parsing the same
file with prometheus_client (both fresh processes, start-up included). ``--summary`` writes
the figures that have targets for bench/bench_service.py's final table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path

from payloads import FIXTURE, SHAPES, evolving_payloads
from prometheus_client.parser import text_string_to_metric_families
from summary import Figure, save

from metricbridge.config.load import load_config
from metricbridge.exposition import reader as exposition_reader
from metricbridge.exposition.byte_scan import BlockProof, values_proven
from metricbridge.exposition.caches import CodecCaches
from metricbridge.exposition.reader import Exposition, read_exposition
from metricbridge.exposition.scrape_memory import ScrapeMemory
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Format, Verify
from metricbridge.translation.caches import TranslationCaches
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import render, run_pipeline
from metricbridge.translation.translate import Translation, translate


class SplitJoin:
    r"""The baseline: ``b"\n".join(payload.split(b"\n"))``, with its memory kept mapped between runs.

    Splitting 10 MB makes some 50,000 line objects, about 9 MB of pymalloc arenas. When the
    last object of an arena is freed, pymalloc returns the arena to the system, and the next
    split faults the pages in again, zeroed: 2,268 minor page faults a run at 10 MB, about a
    third of the baseline's time (measured: 2,307 faults and 26.6 ms against none and 17.3 ms).
    Whether a run paid them depended on what else happened to hold those arenas, so the same
    payload read 9.3-9.6 ms in one table and 6.3-7.0 ms in other measurements of the same run.
    Holding one line in 64 until the next run keeps every arena in use, as a long-running
    process's heap is: no run pays the faults, and the baseline is the work on the lines alone.
    """

    def __init__(self) -> None:
        self.kept: list[bytes] = []

    def __call__(self, payload: bytes) -> bytes:
        """Split and join ``payload``; keep every 64th line until the next call."""
        lines = payload.split(b"\n")
        joined = b"\n".join(lines)
        self.kept = lines[::64]
        return joined


# What a run is timed with: wall time, or with --cpu-time this process's CPU time, which a
# machine shared with other jobs inflates far less (a run the scheduler parks for 20 ms is not
# 20 ms slower).
clock = time.perf_counter


def median_seconds(action: Callable[[bytes], object], inputs: list[bytes]) -> float:
    """Median wall time of ``action`` over ``inputs[1:]``, after a warm-up run on ``inputs[0]``."""
    return interleaved_medians([action], inputs)[0]


def interleaved_medians(
    actions: list[Callable[[bytes], object]], inputs: list[bytes]
) -> list[float]:
    """Median wall time of each action over ``inputs[1:]``, the actions taking turns per input.

    Taking turns, in a rotating order, gives every action the same allocator and cache state:
    timed one after the other, whichever runs first, or right after the baseline frees its
    100,000 lines, pays for the heap growing under 10 MB buffers.
    """
    for action in actions:
        action(inputs[0])
    times: list[list[float]] = [[] for _ in actions]
    for turn, item in enumerate(inputs[1:]):
        for index in range(len(actions)):
            which = (turn + index) % len(actions)
            started = clock()
            actions[which](item)
            times[which].append(clock() - started)
    return [statistics.median(spent) for spent in times]


def peak_rss_kib(args: list[str], stdin: Path, env: dict[str, str]) -> int:
    """Peak RSS of a fresh ``metricbridge`` process, measured by a wrapper that runs only it."""
    probe = (
        "import resource, subprocess, sys\n"
        f"subprocess.run({args!r}, stdin=open({str(stdin)!r}, 'rb'), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    return int(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
        ).stdout
    )


def child_cpu_seconds(args: list[str], stdin: Path, env: dict[str, str]) -> float:
    """User plus system CPU seconds of a fresh process running ``args`` on ``stdin``."""
    probe = (
        "import resource, subprocess, sys\n"
        f"subprocess.run({args!r}, stdin=open({str(stdin)!r}, 'rb'), stdout=subprocess.DEVNULL, check=True)\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(usage.ru_utime + usage.ru_stime)\n"
    )
    return float(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
        ).stdout
    )


# A process that reads an exposition from stdin with prometheus_client, as `translate` does.
CLIENT_PARSE = (
    "import sys\n"
    "from prometheus_client.parser import text_string_to_metric_families\n"
    "for _ in text_string_to_metric_families(sys.stdin.read()): pass\n"
)
CLIENT_PROCESS = [sys.executable, "-c", CLIENT_PARSE]


def as_installed(bytecode: Path) -> dict[str, str]:
    """Let the child processes load compiled bytecode, as an installed package does.

    pip compiles a wheel's modules when it installs them; a machine that sets
    ``PYTHONDONTWRITEBYTECODE`` (or an editable install) would otherwise recompile every module
    in every process, and the figure would time the compiler, not the command. The bytecode
    goes to a directory of the benchmark's own, written by one untimed run of each process.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": str(bytecode)}


def offline_translate(big: bytes, *, skip_parser: bool) -> list[Figure]:
    """Peak RSS and CPU of ``metricbridge translate`` on ``big``, against prometheus_client's."""
    with tempfile.TemporaryDirectory() as tmp:
        source, empty = Path(tmp) / "big.prom", Path(tmp) / "empty.prom"
        source.write_bytes(big)
        empty.write_bytes(b"")
        tiny = Path(tmp) / "tiny.prom"
        tiny.write_bytes(b"up 1\n")
        env = as_installed(Path(tmp) / "bytecode")
        for warm_up in ([sys.executable, "-m", "metricbridge", "translate", "-"], CLIENT_PROCESS):
            child_cpu_seconds(warm_up, tiny, env)
        command = [sys.executable, "-m", "metricbridge", "translate", "--validation=structure", "-"]
        loaded, idle = peak_rss_kib(command, source, env), peak_rss_kib(command, empty, env)
        default = [sys.executable, "-m", "metricbridge", "translate", "-"]
        ours = statistics.median(child_cpu_seconds(default, source, env) for _ in range(3))
        theirs = (
            float("nan")
            if skip_parser
            else statistics.median(child_cpu_seconds(CLIENT_PROCESS, source, env) for _ in range(3))
        )
    extra = (loaded - idle) * 1024
    print(
        f"\npeak RSS of `metricbridge translate` on {len(big):,} bytes: {loaded / 1024:.1f} MiB; "
        f"on an empty input: {idle / 1024:.1f} MiB; difference {extra / len(big):.2f}x the payload (target <= 4x)"
    )
    print(
        f"CPU of `metricbridge translate` on it: {ours:.2f} s (median of 3 processes); "
        f"a process parsing it with prometheus_client: {theirs:.2f} s; "
        f"{theirs / ours:.1f}x faster (target >= 20x)"
    )
    return [
        Figure.at_least(
            "offline translate 10 MB vs prometheus_client", theirs / ours, 20, "x faster"
        ),
        Figure.at_most("offline translate 10 MB: peak RSS / payload", extra / len(big), 4, "x"),
    ]


def scrape_series(repeat: int) -> dict[str, list[bytes]]:
    """Per payload size, ``repeat + 1`` successive scrapes (the first one warms up)."""
    fixture = FIXTURE.read_bytes()
    series = {"100KB(tp1 fixture)": [fixture] * (repeat * 3 + 1)}  # one real scrape, repeated
    for name, (dp, tp) in SHAPES.items():
        count = repeat if dp * tp > 64 else repeat * 3
        series[name] = evolving_payloads(dp, tp, count + 1)
    return series


# prove_block's arguments but the caches, as the reader passed them.
ProveCall = tuple[bytes, int, int, tuple[bytes, ...], Format, bool]


def verification_costs(inputs: list[bytes], rules: CompiledRules, caches: CodecCaches) -> float:
    """Median seconds of the reader's proofs over each input, replayed on their own.

    ``byte_scan.prove_block`` for every block, then the values of all of them, recorded while
    the reader reads the input, then replayed with the same caches.
    """
    original = exposition_reader.prove_block
    replays: dict[int, list[ProveCall]] = {}
    for payload in inputs:
        calls: list[ProveCall] = []

        def spy(  # noqa: PLR0913, PLR0917 - prove_block's signature, and the list it records into
            payload: bytes,
            start: int,
            end: int,
            needles: tuple[bytes, ...],
            fmt: Format,
            caches: CodecCaches | None,
            *,
            keep_values: bool = False,
            calls: list[ProveCall] = calls,
        ) -> BlockProof | None:
            calls.append((payload, start, end, needles, fmt, keep_values))
            return original(payload, start, end, needles, fmt, caches, keep_values=keep_values)

        exposition_reader.prove_block = spy
        try:
            read_exposition(payload, Format.TEXT, rules.validation, caches=caches)
        finally:
            exposition_reader.prove_block = original
        replays[id(payload)] = calls

    def proofs(payload: bytes) -> bool:
        values: list[list[bytes]] = []
        for body, start, end, needles, fmt, keep in replays[id(payload)]:
            proof = original(body, start, end, needles, fmt, caches, keep_values=keep)
            if proof is not None and not proof.settled and proof.values is not None:
                values.append(proof.values)
        return values_proven(chain.from_iterable(values), caches)

    return median_seconds(proofs, inputs)


def stage_costs(
    inputs: list[bytes], rules: CompiledRules, caches: CodecCaches, remembered: TranslationCaches
) -> tuple[float, float, float]:
    """Median seconds of reading, translating and writing each input, the stages taking turns.

    Each stage is timed on the previous stage's output for the same input, computed beforehand.
    Reading goes through a scrape memory, as the service's does.
    """
    memory = ScrapeMemory()
    read = {
        id(p): read_exposition(p, Format.TEXT, rules.validation, caches=caches, memory=memory)
        for p in inputs
    }
    done = {
        id(p): translate(read[id(p)].families, rules, caches=caches, remembered=remembered)
        for p in inputs
    }

    def reading(payload: bytes) -> Exposition:
        return read_exposition(payload, Format.TEXT, rules.validation, caches=caches, memory=memory)

    def translating(payload: bytes) -> Translation:
        return translate(read[id(payload)].families, rules, caches=caches, remembered=remembered)

    def writing(payload: bytes) -> bytes:
        return write_exposition(done[id(payload)].families, Format.TEXT, caches=caches)

    reading_time, translating_time, writing_time = interleaved_medians(
        [reading, translating, writing], inputs
    )
    return reading_time, translating_time, writing_time


def main() -> None:
    """Run every measurement and print a table of ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--skip-parser", action="store_true", help="skip the slow prometheus_client baseline"
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time runs by this process's CPU time, not wall"
    )
    parser.add_argument(
        "--no-plans",
        action="store_true",
        help="keep no scrape plans (translation_plans budget 0): every payload the full way",
    )
    parser.add_argument("--summary", type=Path, help="write the figures with targets here (JSON)")
    args = parser.parse_args()
    global clock  # noqa: PLW0603 - the script's one setting, read by every timing
    clock = time.process_time if args.cpu_time else time.perf_counter
    budgets = {"translation_plans": 0} if args.no_plans else None
    rules = compile_rules(load_config())
    full = dataclasses.replace(rules, validation=Verify.FULL)
    print(
        f"{'payload':>20} {'bytes':>10} {'split+join':>11} {'translate':>10} {'ratio':>6} {'->OM':>6} "
        f"{'full-verify':>11} {'client parser':>13} {'speed-up':>8}"
    )
    series = scrape_series(args.repeat)
    figures: list[Figure] = []
    for name, inputs in series.items():
        payload = inputs[0]
        caches, remembered = CodecCaches(), TranslationCaches(budgets)
        # One scrape memory per output, as the service keeps one per upstream: each reads every
        # payload of the series once, in order.
        memories = {fmt: ScrapeMemory() for fmt in Format}

        def run(  # noqa: PLR0913, PLR0917 - the loop's caches bound as defaults
            p: bytes,
            fmt: Format,
            rules: CompiledRules,
            caches: CodecCaches = caches,
            memory: ScrapeMemory | None = None,
            remembered: TranslationCaches = remembered,
        ) -> bytes:
            outcome = run_pipeline(
                p, Format.TEXT, rules, caches=caches, memory=memory, remembered=remembered
            )
            return render(outcome, fmt, caches=caches)

        base, text, om = interleaved_medians(
            [
                SplitJoin(),
                lambda p, m=memories[Format.TEXT]: run(p, Format.TEXT, rules, memory=m),
                lambda p, m=memories[Format.OPENMETRICS]: run(
                    p, Format.OPENMETRICS, rules, memory=m
                ),
            ],
            inputs,
        )
        verified = median_seconds(lambda p: run(p, Format.TEXT, full), inputs[:2])
        if args.skip_parser:
            parser_time, speedup = float("nan"), "-"
        else:
            parser_time = median_seconds(
                lambda p: list(text_string_to_metric_families(p.decode())), inputs[:2]
            )
            speedup = f"{parser_time / text:.0f}x"
        print(
            f"{name:>20} {len(payload):>10,} {base * 1e3:>9.2f}ms {text * 1e3:>8.2f}ms {text / base:>5.2f}x "
            f"{om / base:>5.2f}x {verified / base:>10.1f}x {parser_time * 1e3:>11.0f}ms {speedup:>8}"
        )
        if name == "1MB":
            figures.append(Figure.at_most("translation 1 MB vs split+join", text / base, 3, "x"))
            figures.append(
                Figure.at_least(
                    "translation 1 MB vs prometheus_client", parser_time / text, 100, "x faster"
                )
            )
    print("\nwhere the time goes (ratios to split+join; verification replayed on its own):")
    for name in SHAPES:
        inputs = series[name]
        base = median_seconds(SplitJoin(), inputs)
        caches = CodecCaches()
        reading, translating, writing = stage_costs(
            inputs, rules, caches, TranslationCaches(budgets)
        )
        floor = verification_costs(inputs, rules, caches)
        rest = reading + translating + writing - floor
        print(
            f"{name:>20}: read {reading / base:.2f}x, translate {translating / base:.2f}x, "
            f"write {writing / base:.2f}x\n{'':>22}verification {floor / base:.2f}x (split, "
            f"heads and values proven); everything else "
            f"{rest * 1e3:.2f} ms = {rest / base:.2f}x, the ratio if verification were free"
        )
    big = series[list(SHAPES)[-1]][0]
    figures += offline_translate(big, skip_parser=args.skip_parser)
    if args.summary is not None:
        save(figures, args.summary)


if __name__ == "__main__":
    main()
