"""``metricbridge demo`` says why the missing rows are missing, from the rows' states."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

from metricbridge.render.contract import missing_breakdown
from metricbridge.translation.contract_index import MissingClass


def test_the_breakdown_names_each_class_in_a_fixed_order() -> None:
    classes = Counter({MissingClass.PENDING: 2, MissingClass.ENGINE: 75, MissingClass.UPSTREAM: 12})
    assert missing_breakdown(classes) == (
        "89 (75 need engine instrumentation, 12 not seen upstream yet, 2 pending a second fetch)"
    )
    assert missing_breakdown(Counter()) == "0"


def test_the_demo_breaks_its_missing_rows_down() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metricbridge",
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "0.1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("contract rows: "))
    totals = json.loads(lines[at].removeprefix("contract rows: "))
    found = re.fullmatch(r"missing: (\d+) \((.*)\)", lines[at + 1])
    assert found, lines[at + 1]
    assert int(found.group(1)) == totals["missing"]
    counts = {}
    for part in found.group(2).split(", "):
        number, _, words = part.partition(" ")
        counts[words] = int(number)
    assert sum(counts.values()) == totals["missing"]
    assert counts["need engine instrumentation"] > 0
