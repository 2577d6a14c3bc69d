"""pytest hooks and fixtures shared by the whole suite; helpers live in the ``helpers`` package."""

from __future__ import annotations

import os

import pytest

from helpers import strength


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--update-golden`` rewrites expected outputs; ``--campaign`` runs campaigns at full size."""
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden outputs")
    parser.addoption(
        "--campaign",
        action="store_true",
        help="run every campaign at full strength (CI runs `pytest -m campaign --campaign`)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Pass ``--campaign`` on through the environment, which xdist workers and subprocesses see."""
    if config.getoption("--campaign"):
        os.environ[strength.ENVIRONMENT] = "1"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of a module sized by ``helpers.strength`` is a campaign: CI runs it at full size."""
    sized = (strength.examples, strength.count, strength.full)
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and any(value in sized for value in vars(module).values()):
            item.add_marker(pytest.mark.campaign)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test that lost its ``xdist_group`` under ``--dist loadgroup``: it runs anywhere.

    Grouping keeps one campaign's phases on one worker, in order, with its module fixture set up
    once; pytest-xdist does it by suffixing each grouped test's node id with ``@group``, which a
    pytest it does not support ignores without a word.
    """
    lost = item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    if lost and getattr(item.config.option, "loadgroup", False):
        pytest.fail(
            "--dist loadgroup is not grouping this test (its node id has no @group suffix): "
            "install the pytest and pytest-xdist versions in constraints.txt",
            pytrace=False,
        )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are being rewritten in this run."""
    return bool(request.config.getoption("--update-golden"))
