"""How hard the campaigns push: sized for minutes in the README's run, at full strength in CI.

The README's test command runs every campaign (fuzzing, property tests, fault and hostile
campaigns, long scrape sequences) at a smaller size, so that a newcomer's run takes minutes and
still exercises each one. ``.ci/run`` then runs ``pytest -m campaign --campaign``: the tests
marked ``campaign`` again, with every size at the figure the test was written for.
``--campaign`` is passed to the workers and subprocesses through the environment.
"""

from __future__ import annotations

import os

ENVIRONMENT = "METRICBRIDGE_TEST_CAMPAIGN"


def full() -> bool:
    """Whether this run is CI's campaign run (``--campaign``)."""
    return os.environ.get(ENVIRONMENT) == "1"


def examples(campaign: int, default: int | None = None) -> int:
    """Hypothesis examples: ``campaign`` in the campaign run, else ``default`` (a fifth of it)."""
    if full():
        return campaign
    return default if default is not None else max(10, campaign // 5)


def count(campaign: int, default: int) -> int:
    """A campaign's size (scrapes, connections, rounds): ``campaign`` in the campaign run."""
    return campaign if full() else default
