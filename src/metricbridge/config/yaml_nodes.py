"""Typed reading of a YAML node tree that remembers line numbers and collects every issue.

PyYAML's ``safe_load`` keeps the last of two duplicate keys without a word (yaml/pyyaml#165)
and forgets where each value came from, so configs are composed into nodes and read here.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import yaml

from metricbridge.errors import ConfigIssue


@dataclass(slots=True)
class Issues:
    """Collects problems instead of stopping at the first."""

    source: str
    items: list[ConfigIssue] = field(default_factory=list)

    def add(self, node: yaml.Node, path: str, message: str) -> None:
        """Record a problem at ``node``'s line."""
        # A node, not an optional line: every issue in a file's content can say where it is.
        self.items.append(ConfigIssue(self.source, node.start_mark.line + 1, path, message))


class _Rule(Protocol):
    """What an issue needs of the rule it concerns."""

    @property
    def name(self) -> str: ...

    @property
    def line(self) -> int: ...


@dataclass(slots=True)
class RuleIssues:
    """Records issues against one rule, at its line unless a finer one is known."""

    issues: Issues
    rule: _Rule

    def add(self, path: str, message: str, line: int | None = None) -> None:
        """Record a problem at ``families.<rule><path>``, on ``line`` or the rule's own."""
        where = f"families.{self.rule.name}{path}"
        # A profile's rule is reported in the profile's file, where its line is.
        source = getattr(self.rule, "origin", None) or self.issues.source
        self.issues.items.append(ConfigIssue(source, line or self.rule.line, where, message))


def compose(text: str, issues: Issues) -> yaml.Node | None:
    """Compose YAML text into a node tree, recording a syntax error as an issue."""
    try:
        root = _composed(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # PyYAML marks every error it raises while composing; line 1 only if some day it does not.
        line = mark.line + 1 if mark is not None else 1
        issues.items.append(ConfigIssue(issues.source, line, "", f"invalid YAML: {exc.problem}"))
        return None
    except yaml.reader.ReaderError as exc:
        # Not a MarkedYAMLError: it carries a character offset, which the line is counted from.
        line = len(_LINE_BREAK.findall(text, 0, exc.position)) + 1
        message = f"invalid YAML: unacceptable character #x{exc.character:04x}: {exc.reason}"
        issues.items.append(ConfigIssue(issues.source, line, "", message))
        return None
    if root is not None and (size := expanded_size(root)) > MAX_EXPANDED_NODES:
        # Aliases make the node tree a graph: reading it walks every path, so a few hundred
        # bytes of nested aliases (the "billion laughs") would be read for ever.
        message = (
            f"the YAML expands to more than {MAX_EXPANDED_NODES:,} values through its aliases "
            f"({size:,}); a rules file that large is not meant"
        )
        issues.items.append(ConfigIssue(issues.source, 1, "", message))
        return None
    return root


def _composed(text: str) -> yaml.Node | None:
    """The node tree of ``text``, composed by libyaml when PyYAML was built with it.

    libyaml composes the shipped rules ten times faster than PyYAML's Python parser, which is
    most of what an offline command spends before reading its input. A text libyaml refuses, or
    one holding a character PyYAML's reader refuses (libyaml is laxer there), is composed again
    by the Python parser, so every error keeps the wording and the line it always had.
    """
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        try:
            return yaml.compose(text, Loader=fast)
        except yaml.YAMLError:
            pass  # the Python parser below raises the error the issue is written from
    return yaml.compose(text, Loader=yaml.SafeLoader)


# Values a rules file may hold once its aliases are expanded: the shipped contract has about
# 1,000; a graph of aliases that expands past this is refused before anything reads it.
MAX_EXPANDED_NODES = 1_000_000


def expanded_size(root: yaml.Node) -> int:
    """How many nodes the tree under ``root`` has with every alias expanded (counted, not built).

    Capped just past ``MAX_EXPANDED_NODES``; each distinct node is visited once.
    """
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order: a node's size once all its children's are known
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            total = 1 + sum(sizes[id(child)] for child in children)
            sizes[id(node)] = min(total, MAX_EXPANDED_NODES + 1)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


# Line breaks as YAML counts them (yaml.reader.Reader.forward), so lines agree with its marks.
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


Entries = dict[str, tuple[yaml.Node, yaml.Node]]
_T = TypeVar("_T")
# A typed reader of one value: None means it refused the value (and recorded why in ``Issues``).
Reader = Callable[[yaml.Node, str, Issues], _T | None]


@dataclass(slots=True)
class Fields:
    """A mapping's entries, read one typed field at a time into the caller's typed locals.

    ``get`` may be called in any order (a dataclass's field order, say): each value's issues are
    held back and ``done`` records them in the file's order of the keys, as a reader walking the
    mapping would. A refused value reads as its default and makes ``done`` return False.
    """

    entries: Entries
    path: str
    issues: Issues
    _failed: bool = False
    _found: dict[str, list[ConfigIssue]] = field(default_factory=dict)

    def get(self, key: str, reader: Reader[_T], default: _T) -> _T:
        """``key``'s value as ``reader`` reads it; ``default`` if absent or refused."""
        if key not in self.entries:
            return default
        sink = Issues(self.issues.source)
        value = reader(self.entries[key][1], f"{self.path}.{key}", sink)
        self._found[key] = sink.items
        if value is None:
            self._failed = True
            return default
        return value

    def done(self) -> bool:
        """Record the issues found, in file order; whether every value read was accepted."""
        for key in self.entries:
            self.issues.items.extend(self._found.pop(key, ()))
        return not self._failed


def mapping(node: yaml.Node, path: str, issues: Issues, allowed: set[str] | None = None) -> Entries:
    """A mapping's entries by key, reporting duplicate and (if ``allowed``) unknown keys."""
    if not isinstance(node, yaml.MappingNode):
        issues.add(node, path, f"expected a mapping, got {_kind(node)}")
        return {}
    entries: Entries = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str):
            issues.add(key_node, path, "keys must be strings")
            continue
        if key in entries:
            first = entries[key][0].start_mark.line + 1
            issues.add(key_node, _join(path, key), f"duplicate key (first defined at line {first})")
            continue
        if allowed is not None and key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            known = ", ".join(sorted(allowed))
            issues.add(key_node, _join(path, key), f"unknown key ({hint}known keys: {known})")
            continue
        entries[key] = (key_node, value_node)
    return entries


def sequence(node: yaml.Node, path: str, issues: Issues) -> list[yaml.Node]:
    """A sequence's items."""
    if not isinstance(node, yaml.SequenceNode):
        issues.add(node, path, f"expected a list, got {_kind(node)}")
        return []
    return list(node.value)


def string(node: yaml.Node, path: str, issues: Issues) -> str | None:
    """A scalar as a string (numbers and booleans are refused where a string is expected)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
        issues.add(node, path, f"expected a string, got {_kind(node)}")
        return None
    return str(node.value)


def boolean(node: yaml.Node, path: str, issues: Issues) -> bool | None:
    """A YAML boolean."""
    if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
        issues.add(node, path, f"expected true or false, got {_kind(node)}")
        return None
    return bool(yaml.safe_load(node.value))


_PLAIN_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def number(node: yaml.Node, path: str, issues: Issues) -> float | None:
    """A finite YAML int or float; an unquoted ``1e-3`` counts too (YAML 1.1 reads it as text)."""
    plain_float = (
        isinstance(node, yaml.ScalarNode)
        and not node.style  # plain: None from PyYAML's parser, "" from libyaml's
        and _PLAIN_FLOAT.fullmatch(node.value)
    )
    if not plain_float and (
        not isinstance(node, yaml.ScalarNode)
        or node.tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    ):
        issues.add(node, path, f"expected a number, got {_kind(node)}")
        return None
    value = float(node.value) if plain_float else float(yaml.safe_load(node.value))
    if not math.isfinite(value):
        issues.add(node, path, f"expected a finite number, got {node.value!r}")
        return None
    return value


def strings(node: yaml.Node, path: str, issues: Issues) -> tuple[str, ...]:
    """A list of strings."""
    items = sequence(node, path, issues)
    values = (string(item, f"{path}[{i}]", issues) for i, item in enumerate(items))
    return tuple(value for value in values if value is not None)


def string_map(
    node: yaml.Node, path: str, issues: Issues, *, key_pattern: re.Pattern[str]
) -> dict[str, str]:
    """A mapping of names (checked against ``key_pattern``) to strings."""
    out: dict[str, str] = {}
    for key, (key_node, value_node) in mapping(node, path, issues).items():
        if not key_pattern.fullmatch(key):
            issues.add(key_node, _join(path, key), f"invalid name {key!r}")
            continue
        value = string(value_node, _join(path, key), issues)
        if value is not None:
            out[key] = value
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    tag = node.tag.rsplit(":", 1)[-1]
    return f"{tag} {node.value!r}" if node.value != "" else "nothing"
