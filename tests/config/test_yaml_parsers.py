"""Rules files read the same whether libyaml or PyYAML's Python parser composes them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from metricbridge.config import yaml_nodes
from metricbridge.config.load import load_config, parse_config
from metricbridge.errors import ConfigError

ROOT = Path(__file__).parents[2]
DATA = ROOT / "src" / "metricbridge" / "data"
SHIPPED = [ROOT / "config" / "aliases.yaml", *sorted(DATA.glob("profiles/*.yaml"))]
INVALID = sorted((ROOT / "tests" / "config_invalid").glob("*.yaml"))

pytestmark = pytest.mark.skipif(
    not hasattr(yaml, "CSafeLoader"), reason="PyYAML was built without libyaml"
)


def _python_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(yaml, "CSafeLoader")


def _shape(node: yaml.Node) -> object:
    """What reading a node can see: its kind, tag, place, value and whether it is plain."""
    if isinstance(node, yaml.ScalarNode):
        value: object = node.value
        plain: object = not node.style
    elif isinstance(node, yaml.MappingNode):
        value, plain = [(_shape(key), _shape(item)) for key, item in node.value], None
    else:
        value, plain = [_shape(item) for item in node.value], None
    return type(node).__name__, node.tag, node.start_mark.line, node.start_mark.column, value, plain


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_libyaml_composes_the_shipped_rules_as_the_python_parser_does(path: Path) -> None:
    text = path.read_text()
    fast = yaml.compose(text, Loader=yaml.CSafeLoader)
    slow = yaml.compose(text, Loader=yaml.SafeLoader)
    assert _shape(fast) == _shape(slow)


def test_the_shipped_rules_load_equal_under_either_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    text = SHIPPED[0].read_text()
    fast = parse_config(text, "aliases.yaml")
    _python_only(monkeypatch)
    assert parse_config(text, "aliases.yaml") == fast


@pytest.mark.parametrize("path", INVALID, ids=lambda path: path.stem)
def test_a_broken_file_gets_the_same_issues_under_either_parser(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError) as fast:
        load_config(path)
    _python_only(monkeypatch)
    with pytest.raises(ConfigError) as slow:
        load_config(path)
    assert str(fast.value) == str(slow.value)


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 2\n",  # unclosed flow sequence
        "a: 1\n b: 2\n",  # bad indentation
        "a: 'x\n",  # unclosed quote
        "a: b: c\n",  # mapping values not allowed here
        "a: \x07\n",  # a character PyYAML's reader refuses
        "a: *missing\n",  # an undefined alias
    ],
)
def test_a_syntax_error_keeps_the_python_parsers_words_and_line(text: str) -> None:
    via_libyaml = yaml_nodes.Issues("f.yaml")
    yaml_nodes.compose(text, via_libyaml)
    with pytest.MonkeyPatch.context() as patch:
        _python_only(patch)
        via_python = yaml_nodes.Issues("f.yaml")
        yaml_nodes.compose(text, via_python)
    assert via_libyaml.items, text
    assert via_libyaml.items == via_python.items


@pytest.mark.parametrize("text", ["x: 1e-3\n", "x: 5\n", "x: 0x1f\n", "x: '1'\n", "x: 2.5\n"])
def test_numbers_read_the_same_under_either_parser(text: str) -> None:
    def read() -> tuple[float | None, list[object]]:
        issues = yaml_nodes.Issues("f.yaml")
        root = yaml_nodes.compose(text, issues)
        assert isinstance(root, yaml.MappingNode)
        return yaml_nodes.number(root.value[0][1], "x", issues), list(issues.items)

    fast = read()
    with pytest.MonkeyPatch.context() as patch:
        _python_only(patch)
        assert read() == fast


def test_a_valid_file_is_composed_by_libyaml_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    loaders: list[type] = []
    compose = yaml.compose

    def recorded(text: str, Loader: type) -> yaml.Node | None:  # noqa: N803 - PyYAML's name
        loaders.append(Loader)
        return compose(text, Loader=Loader)

    monkeypatch.setattr(yaml, "compose", recorded)
    assert yaml_nodes.compose(SHIPPED[0].read_text(), yaml_nodes.Issues("aliases.yaml"))
    assert loaders == [yaml.CSafeLoader]
