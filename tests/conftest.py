"""Shared test helpers: fixture paths, the golden-file switch, and the promtool oracle."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures" / "sglang-0.5.23"
TEXT_FIXTURES = sorted(FIXTURES.glob("*.prom"))
OM_FIXTURES = sorted(FIXTURES.glob("*.om.txt"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--update-golden`` to rewrite expected outputs from the current code."""
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden outputs")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are being rewritten in this run."""
    return bool(request.config.getoption("--update-golden"))


def promtool_path() -> str:
    """Path of Prometheus' promtool; CI installs it, a bare laptop may skip those tests."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is required in CI (Debian package 'prometheus')")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


def promtool_check_metrics(exposition: bytes) -> str:
    """Run ``promtool check metrics``; fail on a parse error, return the lint output."""
    result = subprocess.run(  # noqa: S603 - fixed binary, our own input
        [promtool_path(), "check", "metrics"],
        input=exposition,
        capture_output=True,
        timeout=60,
        check=False,
    )
    output = (result.stdout + result.stderr).decode()
    # Exit 3 means lint findings only (e.g. colons in names, which SGLang uses by design);
    # exit 1 with "error while linting" is a parse failure.
    assert "error while linting" not in output, output
    assert result.returncode in (0, 3), output
    return output


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a child process that binds it a moment later.

    Drawn below Linux's ephemeral range (32768-60999): a port the kernel handed out (bind to 0)
    can be handed out again, to an outgoing connection of the test itself, before the child
    binds it, and the child then fails with "address already in use".
    """
    while True:
        port = random.randrange(20000, 32000)  # noqa: S311 - a port, not a secret
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
