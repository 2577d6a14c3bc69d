"""The Python sources of one SGLang release, read straight out of its wheel or sdist."""

from __future__ import annotations

import ast
import hashlib
import re
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

_SDIST_PREFIX = re.compile(r"^[^/]+/(?:python/)?")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _package_path(member: str, *, sdist: bool) -> str | None:
    """The ``sglang/...`` path of an archive member, or None when it is not package source."""
    path = _SDIST_PREFIX.sub("", member, count=1) if sdist else member
    if not path.startswith("sglang/") or not path.endswith(".py"):
        return None
    return path


def _read_wheel(archive: Path) -> dict[str, str]:
    texts: dict[str, str] = {}
    with zipfile.ZipFile(archive) as wheel:
        for name in wheel.namelist():
            path = _package_path(name, sdist=False)
            if path is not None:
                texts[path] = wheel.read(name).decode("utf-8", errors="replace")
    return texts


def _read_sdist(archive: Path) -> dict[str, str]:
    texts: dict[str, str] = {}
    with tarfile.open(archive) as sdist:
        for member in sdist.getmembers():
            path = _package_path(member.name, sdist=True)
            handle = sdist.extractfile(member) if path is not None else None
            if path is not None and handle is not None:
                texts[path] = handle.read().decode("utf-8", errors="replace")
    return texts


def is_test_path(path: str) -> bool:
    """Test and benchmark code is not part of what a server exposes."""
    parts = path.split("/")
    skipped = {"test", "tests", "benchmark"}
    return any(p in skipped for p in parts) or parts[-1].startswith("test_")


def read_archive(archive: Path) -> dict[str, str]:
    """Every ``sglang/**/*.py`` file of a wheel (``.whl``) or sdist (``.tar.gz``), by path."""
    if archive.suffix == ".whl":
        return _read_wheel(archive)
    return _read_sdist(archive)


def sha256(archive: Path) -> str:
    """The archive's SHA-256, recorded so a catalogue names exactly what it was read from."""
    digest = hashlib.sha256()
    with archive.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def module_path(module: str) -> str:
    """``sglang.srt.utils`` -> ``sglang/srt/utils.py`` (a package's ``__init__`` is tried later)."""
    return module.replace(".", "/") + ".py"


@dataclass
class Release:
    """One release's sources, parsed on demand (a recent wheel has ~5,000 modules)."""

    version: str
    texts: dict[str, str]
    archive_name: str = ""
    archive_sha256: str = ""
    _trees: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)
    _mentions: dict[str, list[str]] = field(default_factory=dict, repr=False)
    memo: dict[tuple[str, str], object] = field(default_factory=dict, repr=False)

    def tree(self, path: str) -> ast.Module | None:
        """The parsed module at ``path``, or None when it is absent or not valid Python."""
        if path not in self._trees:
            text = self.texts.get(path)
            try:
                self._trees[path] = None if text is None else ast.parse(text)
            except SyntaxError:
                self._trees[path] = None
        return self._trees[path]

    def resolve_module(self, module: str) -> str | None:
        """The file that defines a dotted module name, if the release has it."""
        for path in (module_path(module), module.replace(".", "/") + "/__init__.py"):
            if path in self.texts:
                return path
        return None

    def files_mentioning(self, word: str) -> list[str]:
        """Sorted paths whose text contains ``word`` (a cheap filter before parsing).

        The identifiers in ``word`` must appear whole in the file (an index built once).
        """
        if word not in self._mentions:
            paths: set[str] | None = None
            for ident in _IDENTIFIER.findall(word):
                found = self._identifiers().get(ident, set())
                paths = found if paths is None else paths & found
            pool = self.texts if paths is None else paths
            self._mentions[word] = sorted(p for p in pool if word in self.texts[p])
        return self._mentions[word]

    def _identifiers(self) -> dict[str, set[str]]:
        key = ("identifiers", "")
        if key not in self.memo:
            index: dict[str, set[str]] = {}
            for path, text in self.texts.items():
                for ident in set(_IDENTIFIER.findall(text)):
                    index.setdefault(ident, set()).add(path)
            self.memo[key] = index
        return self.memo[key]  # type: ignore[return-value]
