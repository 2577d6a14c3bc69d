"""The compile step and the translation keep no state of their own between calls.

What depends on the rules is compiled (``compile_rules``); what depends on the payload is
computed per call or held by a cache object the caller passes in. So no module of the core
rooms holds a container that a translation changes, nor a function cache of what it is sent.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from types import ModuleType

import pytest

from helpers.paths import TEXT_FIXTURES
from metricbridge.config.load import load_config
from metricbridge.exposition.reader import read_exposition
from metricbridge.model.family import Format
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.pipeline import run_pipeline
from metricbridge.translation.translate import SynthState, translate

# Every module of the core rooms, found rather than listed, so a new one is checked too.
# The core, and the simulator (its caches were module-level too; it measured no slower without).
CORE_ROOMS = ("model", "exposition", "config", "translation", "engines", "simulator")
MODULES = sorted(
    info.name
    for room in CORE_ROOMS
    for info in pkgutil.iter_modules(
        importlib.import_module(f"metricbridge.{room}").__path__, f"metricbridge.{room}."
    )
)
# Function caches that remember only what ships with the package, never what an upstream or a
# user sends: a bounded number of entries, each the same for the process's whole life.
ALLOWED_CACHES = {
    "metricbridge.engines.loader": {"load_catalogue"},  # one parse per shipped catalogue file
}
_CONTAINERS = (dict, list, set, bytearray)


def _containers(module: ModuleType) -> dict[str, object]:
    return {
        name: copy.deepcopy(value)
        for name, value in vars(module).items()
        if isinstance(value, _CONTAINERS) and not name.startswith("__")
    }


@pytest.mark.parametrize("name", MODULES)
def test_no_function_cache(name: str) -> None:
    """No function of the module remembers answers (functools.lru_cache and the like)."""
    module = importlib.import_module(name)
    cached = [
        attr
        for attr, value in vars(module).items()
        if hasattr(value, "cache_info") and getattr(value, "__module__", None) == name
    ]
    assert set(cached) <= ALLOWED_CACHES.get(name, set())


def test_translations_change_no_module_container() -> None:
    """Every fixture translated twice, rates and warm-zero included: module globals unchanged."""
    modules = [importlib.import_module(name) for name in MODULES]
    before = {module.__name__: _containers(module) for module in modules}
    rules = compile_rules(load_config())
    for path in TEXT_FIXTURES:
        payload = path.read_bytes()
        run_pipeline(payload, Format.TEXT, rules)
        families = read_exposition(payload, Format.TEXT).families
        state = SynthState()
        for now in (0.0, 5.0, 20.0):
            info = {"max_running_requests": 48}
            state = translate(families, rules, state, now=now, server_info=info).state
    after = {module.__name__: _containers(module) for module in modules}
    assert after == before
