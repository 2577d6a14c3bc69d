"""Where the test data lives: the tests folder and the real SGLang 0.5.23 expositions."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures" / "sglang-0.5.23"
TEXT_FIXTURES = sorted(FIXTURES.glob("*.prom"))
OM_FIXTURES = sorted(FIXTURES.glob("*.om.txt"))
