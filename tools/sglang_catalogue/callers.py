"""Up the call chain from where a family records values: which feature's code calls it, and when.

A collector method (``observe_kv_transfer_metrics``) is often called through helpers of no
feature (``req_time_stats.py``) from the code of one (``disaggregation/prefill.py``), or only from
code that runs while a process starts (``emit_constants``, from ``Scheduler.__init__``). Both are
read by walking the callers a few levels up, by function name as the rest of the extractor does.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from . import classify
from .calls import called
from .sources import Release, is_test_path

_DEPTH = 3  # levels of callers read above the function that records the value
# A function called from more modules than this is a utility, and its callers say nothing.
_FAN_OUT = 12
# Functions that run once while a process starts; what only they call runs at start-up too.
_STARTUP = re.compile(r"__init__|__post_init__|\w*startup\w*|_?launch_\w+|lifespan")


@dataclass(frozen=True)
class Site:
    """A call of a function: the module and the function the call is in ("" at module level)."""

    path: str
    function: str
    owner: str  # ``Class.function``, or ``function`` outside a class


def _index(release: Release, path: str) -> dict[str, list[Site]]:
    """Every call of a module, by the name it calls, with the function it is made in."""
    key = ("call_index", path)
    if key not in release.memo:
        index: dict[str, list[Site]] = {}
        tree = release.tree(path)
        pending: list[tuple[ast.AST, str, str]] = [(tree, "", "")] if tree else []
        while pending:
            node, cls, function = pending.pop()
            if isinstance(node, ast.Call) and (name := called(node)) is not None:
                owner = f"{cls}.{function}" if cls and function else function
                index.setdefault(name, []).append(Site(path, function, owner))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    pending.append((child, child.name, ""))
                elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    pending.append((child, cls, child.name))
                else:
                    pending.append((child, cls, function))
        release.memo[key] = index
    return release.memo[key]  # type: ignore[return-value]


def sites(release: Release, name: str) -> list[Site] | None:
    """Where a function or method called ``name`` is called (tests excluded), each place once.

    None when more than ``_FAN_OUT`` modules call it: a utility, whose callers say nothing
    (and reading them all would parse much of the release).
    """
    paths = [p for p in release.files_mentioning(f"{name}(") if not is_test_path(p)]
    if len(paths) > _FAN_OUT:
        return None
    found = [site for path in paths for site in _index(release, path).get(name, [])]
    return list(dict.fromkeys(found))


def _own_features(site: Site) -> set[str]:
    """Features a call site's module, or its function's name, belongs to."""
    return set(classify.reach_features(frozenset({site.path}))) | set(
        classify.function_features(site.function)
    )


def reach(release: Release, name: str, path: str, depth: int = 0) -> list[set[str]]:
    """The features of each chain of callers of ``name`` (a function of module ``path``).

    A call site in a module or a function of a feature ends its chain with that feature; an
    untagged one is followed to its own callers, up to ``_DEPTH`` levels. A function nobody
    calls is its own chain; one called from everywhere ends every chain untagged.
    """
    callers = sites(release, name)
    if callers is None:
        return [set()]
    if not callers:
        return [_own_features(Site(path, name, name))]
    chains: list[set[str]] = []
    for site in callers:
        tags = _own_features(site)
        if tags or depth >= _DEPTH or not site.function or site.function == name:
            chains.append(tags)
        else:
            chains += reach(release, site.function, site.path, depth + 1)
    return chains


def startup_origin(release: Release, name: str, depth: int = 0) -> str | None:
    """The start-up function every call chain of ``name`` begins in, or None.

    None as soon as one chain is not start-up code: called at module level, from a function
    that runs later, from too many places, or not at all within ``_DEPTH`` levels.
    """
    # The recording function's own name proves nothing: it must be called from start-up code.
    if depth and _STARTUP.fullmatch(name):
        return name
    callers = sites(release, name) if depth < _DEPTH else None
    if not callers:
        return None
    origins = []
    for site in callers:
        if not site.function or site.function == name:
            return None
        origin = startup_origin(release, site.function, depth + 1)
        if origin is None:
            return None
        origins.append(site.owner if origin == site.function else origin)
    return min(origins)
