"""The codec's caches: byte-bounded LRUs the caller owns, and no state of the core's own.

Before, the core kept module-level dicts bounded by entry count: ten 1 MiB HELP texts changing
on every scrape took the process from 45 to 2,476 MiB in 60 scrapes. These tests hold the
caches to their byte budgets under that load, and the core to keeping nothing between calls
but what a caller passes in.
"""

from __future__ import annotations

import ast
import copy
import importlib
import pkgutil
import tracemalloc
from collections import OrderedDict, deque
from pathlib import Path

import pytest

import metricbridge.exposition
import metricbridge.translation
from helpers.paths import TEXT_FIXTURES
from helpers.strength import count
from metricbridge.config.load import load_config
from metricbridge.exposition.caches import DEFAULT_BUDGETS, CodecCaches, MiB
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.cache import ENTRY_OVERHEAD, ByteLRU
from metricbridge.model.family import Format, Verify
from metricbridge.simulator.engine import SimulatedEngine
from metricbridge.translation.compiled import CompiledRules
from metricbridge.translation.compiler import compile_rules
from metricbridge.translation.translate import translate

# --- the cache type -------------------------------------------------------------------------


def test_bytes_are_the_len_of_what_is_held_plus_the_overhead() -> None:
    cache: ByteLRU[str, str] = ByteLRU("t", 10_000)
    cache.put("a", "x" * 100, 101)
    cache.put("b", "y" * 50, 51)
    assert cache.bytes == 101 + 51 + 2 * ENTRY_OVERHEAD
    assert cache.entries == len(cache) == 2
    cache.put("a", "z", 2)  # a new value for a key replaces the old one's bytes
    assert cache.bytes == 2 + 51 + 2 * ENTRY_OVERHEAD
    assert cache.get("a") == "z"


def test_least_recently_used_entries_leave_first_and_the_bound_holds() -> None:
    entry = 1000
    cache: ByteLRU[int, str] = ByteLRU("t", 3 * (entry + ENTRY_OVERHEAD))
    for key in range(3):
        cache.put(key, str(key), entry)
    assert cache.get(0) == "0"  # 0 is now the most recently used; 1 the least
    cache.put(3, "3", entry)
    assert 1 not in cache
    assert [key for key in range(4) if key in cache] == [0, 2, 3]
    assert cache.evictions == 1
    for key in range(4, 100):
        cache.put(key, str(key), entry)
        assert cache.bytes <= cache.budget
    assert cache.entries == 3
    assert cache.evictions == 97


def test_an_entry_bigger_than_the_budget_is_not_cached_at_all() -> None:
    cache: ByteLRU[str, str] = ByteLRU("t", 4096)
    cache.put("small", "s", 10)
    cache.put("huge", "h" * 8192, 8192)
    assert "huge" not in cache
    assert cache.get("small") == "s"  # nothing was evicted to make room for it
    assert cache.evictions == 0
    cache.put("small", "S" * 8192, 8192)  # nor kept in its old, smaller form
    assert "small" not in cache
    assert cache.bytes == 0


def test_hits_misses_and_evictions_count_and_survive_a_reset() -> None:
    cache: ByteLRU[str, str] = ByteLRU("t", 2 * (1 + ENTRY_OVERHEAD))
    assert cache.get("a") is None
    cache.put("a", "1", 1)
    cache.put("b", "2", 1)
    cache.put("c", "3", 1)
    assert cache.get("c") == "3"
    assert cache.get("a") is None
    assert (cache.hits, cache.misses, cache.evictions) == (1, 2, 1)
    cache.reset()
    assert (cache.entries, cache.bytes) == (0, 0)
    assert (cache.hits, cache.misses, cache.evictions) == (1, 2, 1)  # counters only grow
    assert cache.get("c") is None


def test_a_zero_budget_caches_nothing_and_a_negative_one_is_refused() -> None:
    cache: ByteLRU[str, str] = ByteLRU("t", 0)
    cache.put("a", "1", 1)
    assert cache.entries == 0
    with pytest.raises(ValueError, match="budget"):
        ByteLRU("t", -1)


def test_codec_caches_have_budgets_of_a_few_tens_of_mib_at_most() -> None:
    caches = CodecCaches()
    assert [cache.name for cache in caches] == list(DEFAULT_BUDGETS)
    assert caches.budget == sum(DEFAULT_BUDGETS.values()) <= 64 * MiB
    assert CodecCaches({"proven_heads": 0}).proven_heads.budget == 0
    with pytest.raises(ValueError, match="no cache named"):
        CodecCaches({"nonsense": 1})


# --- sized for real engines ---------------------------------------------------------------


@pytest.fixture(scope="module")
def rules() -> CompiledRules:
    return compile_rules(load_config())


def _scrape(payload: bytes, rules: CompiledRules, caches: CodecCaches) -> None:
    """What the bridge does with one upstream body: read, translate, write both formats."""
    exposition = read_exposition(payload, Format.TEXT, rules.validation, caches=caches)
    translation = translate(exposition.families, rules, caches=caches)
    for fmt in Format:
        write_exposition(translation.families, fmt, caches=caches)


def test_every_real_fixture_stays_cached(rules: CompiledRules) -> None:
    """One set of caches through every SGLang fixture, twice: nothing is evicted."""
    caches = CodecCaches()
    for _ in range(2):
        for fixture in TEXT_FIXTURES:
            _scrape(fixture.read_bytes(), rules, caches)
    for cache in caches:
        assert cache.evictions == 0, cache
    assert caches.read_headers.hits > 0
    assert caches.proven_heads.hits > 0
    assert caches.written_headers.hits > 0


def test_a_10_mb_engine_stays_cached(rules: CompiledRules) -> None:
    """Successive scrapes of a 10 MB simulated engine (88 DP x 2 TP) evict nothing."""
    engine = SimulatedEngine(dp_size=88, tp_size=2, seed=7)
    engine.advance(60.0, arrivals_per_second=40.0)
    caches = CodecCaches()
    for _ in range(2):
        payload = engine.render()
        assert len(payload) > 9_000_000
        _scrape(payload, rules, caches)
        engine.advance(5.0, arrivals_per_second=40.0)
    for cache in caches:
        assert cache.evictions == 0, cache
    assert caches.read_headers.hits > 0


_DEFAULT_TOTAL = sum(DEFAULT_BUDGETS.values())

# --- the growth that was --------------------------------------------------------------------


def _help_payload(scrape: int, families: int, size: int) -> bytes:
    """``families`` gauges whose HELP texts of ``size`` bytes change on every scrape."""
    lines = []
    for index in range(families):
        text = f"{scrape}-{index}-".ljust(size, "h")
        lines.append(f"# HELP big_{index} {text}\n# TYPE big_{index} gauge\n")
        lines.append(f'big_{index}{{a="1"}} {scrape}\n')
    return "".join(lines).encode()


def test_help_texts_changing_every_scrape_stay_within_the_budgets(rules: CompiledRules) -> None:
    """60 scrapes (20 in the README's run), each with ten new 1 MiB HELP texts: the caches hold
    no more than their budget, which the first scrape already passes.

    Entry-bounded, the header caches kept every one of them (2.4 GiB of RSS after 60 scrapes).
    """
    caches = CodecCaches()
    tracemalloc.start()
    try:
        for scrape in range(count(60, 20)):
            _scrape(_help_payload(scrape, 10, MiB), rules, caches)
            for cache in caches:
                assert cache.bytes <= cache.budget, cache
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caches.bytes <= caches.budget
    # What is still allocated after the last scrape: the caches' budget at most, not 60 x 10
    # header pairs of 2 MiB each (read and written) that the old caches kept.
    assert held < _DEFAULT_TOTAL + 16 * MiB, held


def test_label_values_changing_every_scrape_stay_within_the_budgets(
    rules: CompiledRules,
) -> None:
    """A family a rule parses (scale), its 1 MiB label value new on every scrape, 50 scrapes (20
    in the README's run: 20 MiB of label values against budgets of 8 MiB)."""
    family = "sglang:encoder_cache_size_mb"
    assert family in rules.by_input  # scaled by the default rules: its lines are parsed
    caches = CodecCaches()
    tracemalloc.start()
    try:
        for scrape in range(count(50, 20)):
            value = f"{scrape}-".ljust(MiB, "v")
            payload = f'# HELP {family} U.\n# TYPE {family} gauge\n{family}{{a="{value}"}} 0.5\n'
            _scrape(payload.encode(), rules, caches)
            for cache in caches:
                assert cache.bytes <= cache.budget, cache
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < _DEFAULT_TOTAL + 16 * MiB, held


# --- no state of the core's own -------------------------------------------------------------

_MUTABLE = (dict, list, set, OrderedDict, deque, bytearray)
_MUTATORS = {
    "append",
    "clear",
    "extend",
    "insert",
    "pop",
    "popitem",
    "remove",
    "setdefault",
    "update",
    "add",
    "discard",
    "move_to_end",
    "appendleft",
}


def _core_modules() -> list[str]:
    names = []
    for package in (metricbridge.exposition, metricbridge.translation):
        names.append(package.__name__)
        names.extend(
            info.name for info in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
        )
    return names


def _containers() -> dict[str, object]:
    """Every module-level mutable container of the reader, writer and translation modules."""
    found = {}
    for name in _core_modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            qualified = f"{name}.{attribute}"
            if attribute.startswith("__"):
                continue
            if isinstance(value, _MUTABLE):
                found[qualified] = copy.deepcopy(value)
    return found


def test_translating_leaves_every_module_level_container_as_it_was(
    rules: CompiledRules,
) -> None:
    """Reading, translating and writing real payloads, cached and not, changes no module global."""
    before = _containers()
    for fixture in TEXT_FIXTURES:
        payload = fixture.read_bytes()
        _scrape(payload, rules, CodecCaches())
        exposition = read_exposition(payload, Format.TEXT, Verify.FULL)
        write_exposition(translate(exposition.families, rules).families, Format.OPENMETRICS)
    after = _containers()
    assert after.keys() == before.keys()
    changed = [name for name, value in after.items() if value != before[name]]
    assert not changed


def _module_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _mutations(path: Path) -> list[str]:
    """Statements inside functions that change a module-level name's container or rebind it."""
    tree = ast.parse(path.read_text())
    module_names = _module_level_names(tree)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Global | ast.Nonlocal):
                found.append(f"{where} global {', '.join(node.names)}")
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                if isinstance(node.value, ast.Name) and node.value.id in module_names:
                    found.append(f"{where} {node.value.id}[...] assigned")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in module_names
            ):
                found.append(f"{where} {node.func.value.id}.{node.func.attr}()")
    return found


@pytest.mark.parametrize(
    "package", [metricbridge.exposition, metricbridge.translation], ids=lambda p: p.__name__
)
def test_no_function_changes_a_module_level_name(package: object) -> None:
    """The source agrees: no function mutates or rebinds a module-level container."""
    folder = Path(package.__file__).parent  # type: ignore[attr-defined]
    found = [hit for path in sorted(folder.glob("*.py")) for hit in _mutations(path)]
    assert found == []


def test_no_function_of_the_wire_code_remembers_answers() -> None:
    """No functools.lru_cache or the like in exposition/: its memory is the caller's caches."""
    cached = [
        f"{name}.{attribute}"
        for name in _core_modules()
        if name.startswith("metricbridge.exposition")
        for attribute, value in vars(importlib.import_module(name)).items()
        if hasattr(value, "cache_info") and getattr(value, "__module__", None) == name
    ]
    assert cached == []


def test_bytes_never_read_over_the_budget_by_another_thread() -> None:
    """The self-metrics read a cache's figures on the event loop while the worker thread puts:
    ``bytes`` must be within the budget at every instant, not just between puts (it read
    8,389,030 of 8,388,608 in the hostile campaign, with room made after the entry went in)."""
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    cache: ByteLRU[int, str] = ByteLRU("c", 64 * ENTRY_OVERHEAD)
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(cache.bytes)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython will
    reader = threading.Thread(target=read)
    reader.start()
    try:
        for key in range(200_000):
            cache.put(key, "", 3 * ENTRY_OVERHEAD)  # every put past the first few evicts
    finally:
        done.set()
        reader.join()
        sys.setswitchinterval(interval)
    assert len(seen) > 1000
    assert max(seen) <= cache.budget
