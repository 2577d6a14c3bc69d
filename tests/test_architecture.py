"""The pure translation core imports no I/O library, directly or through another module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "metricbridge"
CORE = [
    "model", "errors", "numbers", "sample_line", "exposition_reader", "exposition_writer",
    "yaml_nodes", "config", "config_checks", "config_outputs", "config_synth", "templates",
    "rules", "ops",
    "translate", "series", "warm_zero", "derive", "idle", "naming", "pipeline", "report",
    "promql", "templating", "byte_scan", "family_names", "family_parse", "created_series",
    "catalog", "check", "resolve", "findings", "upgrade_diff", "export_rules", "name_filter",
    "gzip_framing",
]  # fmt: skip
FORBIDDEN = {"aiohttp", "asyncio", "prometheus_client", "socket", "urllib.request", "http"}


def _imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _closure(module: str) -> set[str]:
    """Every import reachable from ``module`` through metricbridge's own modules."""
    seen, todo, external = set(), [module], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in _imports(current):
            if name.startswith("metricbridge."):
                todo.append(name.removeprefix("metricbridge."))
            elif name != "metricbridge":
                external.add(name)
    return external


@pytest.mark.parametrize("module", CORE)
def test_core_module_is_free_of_io_libraries(module: str) -> None:
    """No forbidden library is reachable from a core module (an import-linter 'forbidden' contract)."""
    reachable = _closure(module)
    bad = {name for name in reachable if name.split(".")[0] in FORBIDDEN or name in FORBIDDEN}
    assert not bad, f"{module} reaches {sorted(bad)}"
