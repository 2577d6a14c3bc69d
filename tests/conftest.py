"""pytest hooks and fixtures shared by the whole suite; helpers live in the ``helpers`` package."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--update-golden`` to rewrite expected outputs from the current code."""
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden outputs")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are being rewritten in this run."""
    return bool(request.config.getoption("--update-golden"))
