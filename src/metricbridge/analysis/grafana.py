"""Find the Prometheus queries in a Grafana dashboard's JSON model.

Walks what mimirtool's ``pkg/mimirtool/analyze/grafana.go`` walks (panels, the panels of
collapsed rows, legacy ``rows[].panels``, templating) plus annotations, library panels and
per-target datasources. Pure: takes the decoded JSON, returns what it found and what it had to
skip, and the values of the dashboard's constant, custom and interval variables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from metricbridge.analysis.templating import variable_query_expr

__all__ = ["DashboardQueries", "Found", "Skipped", "read_dashboard"]

_LEGEND = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_VARIABLE_REF = re.compile(r"^\$\{?(\w+)(?::\w+)?\}?$")
# Grafana's built-in pseudo-datasources, as a legacy string or as the uid of {"type": "datasource"}.
_SPECIAL_DATASOURCES = {"-- Grafana --": "grafana", "-- Dashboard --": "dashboard"}
_MIXED = "-- Mixed --"
_MODEL_KEYS = frozenset({"panels", "rows", "templating"})


@dataclass(frozen=True, slots=True)
class Found:
    """One query: ``expr`` is PromQL still holding Grafana variables."""

    location: str
    kind: str  # "panel target", "template variable" or "annotation"
    raw: str
    expr: str
    legend_labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something that holds a query this check cannot verify."""

    location: str
    message: str


@dataclass(frozen=True, slots=True)
class DashboardQueries:
    """Everything found in one dashboard, in document order."""

    found: tuple[Found, ...]
    skipped: tuple[Skipped, ...]
    variables: dict[str, str] = field(default_factory=dict)


def read_dashboard(document: Mapping[str, object]) -> DashboardQueries:
    """Find the queries of a dashboard, an export wrapper or an external export.

    Raises ``ValueError`` if ``document`` is not a classic Grafana dashboard model.
    """
    outer = _dict(document)
    board = _unwrap(outer)
    reader = _Reader(board, outer)
    reader.panels(_list(board.get("panels")), None)
    for row in map(_dict, _list(board.get("rows"))):  # schemaVersion < 16
        reader.panels(_list(row.get("panels")), _titled("row", row, "title"))
    reader.templating()
    reader.annotations()
    return DashboardQueries(tuple(reader.found), tuple(reader.skipped), reader.values)


def _unwrap(outer: dict[str, object]) -> dict[str, object]:
    """Find the dashboard model inside API wrappers and Kubernetes-style resources."""
    board = _dict(outer.get("dashboard")) or outer  # {"meta": ..., "dashboard": ...}
    spec = _dict(board.get("spec"))  # {"apiVersion": "dashboard.grafana.app/v1...", "spec": ...}
    if "elements" in spec or "elements" in board:
        raise ValueError("Grafana dashboard schema v2 (spec.elements) is not supported")
    board = spec if _MODEL_KEYS & spec.keys() else board
    if not _MODEL_KEYS & board.keys():
        raise ValueError("not a Grafana dashboard: no 'panels', 'rows' or 'templating'")
    return board


def _library(elements: object) -> dict[str, dict[str, object]]:
    """Library panel models by uid, from ``__elements``.

    Grafana 9 and later export a mapping of uid to element; Grafana 8 a list of elements, each
    carrying its own uid.
    """
    if isinstance(elements, list):
        pairs = [(_str(_dict(e).get("uid")), e) for e in elements]
    else:
        pairs = list(_dict(elements).items())
    return {uid: _dict(_dict(e).get("model")) for uid, e in pairs if uid}


class _Reader:
    """Collects what one dashboard holds."""

    def __init__(self, board: dict[str, object], outer: dict[str, object]) -> None:
        """Index the variables, datasource inputs and library panels the walk resolves against."""
        self.board = board
        self.found: list[Found] = []
        self.skipped: list[Skipped] = []
        self.values: dict[str, str] = {}
        self.datasources: dict[str, str] = {}
        self.library = _library(board.get("__elements")) or _library(outer.get("__elements"))
        for item in _list(board.get("__inputs")) + _list(outer.get("__inputs")):
            self._input(_dict(item))
        for item in _variables(board):
            self._variable(_dict(item))

    def _input(self, item: dict[str, object]) -> None:
        name = _str(item.get("name"))
        if item.get("type") == "datasource":
            self.datasources[name] = _str(item.get("pluginId"))
        elif item.get("type") == "constant":
            self.values[name] = _str(item.get("value"))

    def _variable(self, var: dict[str, object]) -> None:
        name, kind = _str(var.get("name")), var.get("type")
        if kind == "datasource":
            self.datasources[name] = _str(var.get("query"))
        elif kind == "constant":
            self.values[name] = _str(var.get("query"))
        elif kind in {"custom", "interval"} and (value := _selected_value(var)) is not None:
            self.values[name] = value

    def panels(self, panels: list[object], parent: str | None) -> None:
        """Walk a panel list; an expanded row owns the panels that follow it."""
        row = parent
        for panel in map(_dict, panels):
            if panel.get("type") == "row":
                here = _join(parent, _titled("row", panel, "title"))
                self.panels(_list(panel.get("panels")), here)  # a collapsed row's own panels
                row = here
            else:
                self.panel(panel, _join(row, _panel_label(panel)))

    def panel(self, panel: dict[str, object], location: str) -> None:
        """Collect the queries of one panel, resolving a library panel first."""
        model = self._model(panel, location)
        if model is None:
            return
        inherited = model.get("datasource")
        for index, target in enumerate(map(_dict, _list(model.get("targets")))):
            ref = _str(target.get("refId")) or f"#{index + 1}"
            self._target(target, inherited, f"{location} > query {ref}")

    def _model(self, panel: dict[str, object], location: str) -> dict[str, object] | None:
        ref = _dict(panel.get("libraryPanel"))
        if not ref:
            return panel
        uid = _str(ref.get("uid"))
        model = _dict(ref.get("model")) or self.library.get(uid) or {}
        if model or "targets" in panel:  # older saves keep the model beside the reference
            return model or panel
        name = _str(ref.get("name"))
        self.skip(location, f'library panel "{name}" (uid {uid}) is not inlined in this file')
        return None

    def _target(self, target: dict[str, object], inherited: object, location: str) -> None:
        own = target.get("datasource")
        kind = self._datasource_type(own if own is not None else inherited)
        if not _is_prometheus(kind):
            self.skip(location, f'datasource type "{kind}" is not Prometheus')
            return
        expr = target.get("expr")
        if isinstance(expr, str) and expr.strip():
            legend = _legend_labels(_str(target.get("legendFormat")))
            self.found.append(Found(location, "panel target", expr, expr, legend))

    def templating(self) -> None:
        """Collect the queries of ``query`` variables."""
        for var in map(_dict, _variables(self.board)):
            if var.get("type") != "query":
                continue
            location = f'variable "{_str(var.get("name"))}"'
            kind = self._datasource_type(var.get("datasource"))
            if not _is_prometheus(kind):
                self.skip(location, f'datasource type "{kind}" is not Prometheus')
                continue
            query = _variable_query(var.get("query"))
            if query is None:
                self.skip(location, "variable query is neither a string nor has a 'query' field")
            elif query.strip() and (expr := variable_query_expr(query)) is not None:
                self.found.append(Found(location, "template variable", query, expr))

    def annotations(self) -> None:
        """Collect annotation queries; their title, text and tag keys read labels."""
        for ann in map(_dict, _list(_dict(self.board.get("annotations")).get("list"))):
            if ann.get("builtIn"):
                continue
            location = _titled("annotation", ann, "name")
            kind = self._datasource_type(ann.get("datasource"))
            expr = ann.get("expr") or _dict(ann.get("target")).get("expr")
            if not _is_prometheus(kind):
                self.skip(location, f'datasource type "{kind}" is not Prometheus')
            elif isinstance(expr, str) and expr.strip():
                text = _str(ann.get("titleFormat")) + _str(ann.get("textFormat"))
                tags = [t.strip() for t in _str(ann.get("tagKeys")).split(",") if t.strip()]
                labels = tuple(dict.fromkeys([*_legend_labels(text), *tags]))
                self.found.append(Found(location, "annotation", expr, expr, labels))

    def skip(self, location: str, message: str) -> None:
        """Record something that cannot be checked."""
        self.skipped.append(Skipped(location, message))

    def _datasource_type(self, datasource: object) -> str | None:
        """Resolve a datasource reference to a plugin type; None if unknown or mixed."""
        ref = _dict(datasource)
        kind = _str(ref.get("type"))
        if kind and kind != "datasource" and not _VARIABLE_REF.match(kind):
            return kind
        name = _str(ref.get("uid")) if ref else _str(datasource)
        if match := _VARIABLE_REF.match(name):
            return self.datasources.get(match[1]) or None
        return None if name == _MIXED else _SPECIAL_DATASOURCES.get(name)


def _is_prometheus(kind: str | None) -> bool:
    # Unknown means the dashboard default, most likely Prometheus; also accept the Amazon and
    # Azure Managed Prometheus plugins, which take PromQL.
    return kind is None or "prometheus" in kind.lower()


def _variable_query(query: object) -> str | None:
    """Read a variable query: a string, or an object from Grafana's variable editor."""
    if isinstance(query, str):
        return query
    spec = _dict(query)
    if isinstance(spec.get("query"), str):
        return _str(spec.get("query"))
    label, metric = _str(spec.get("label")), _str(spec.get("metric"))
    if label:
        return f"label_values({metric}, {label})" if metric else f"label_values({label})"
    return None


def _selected_value(var: dict[str, object]) -> str | None:
    """Pick the one value a custom or interval variable stands for; None if it may be several."""
    current = _dict(var.get("current")).get("value")
    if isinstance(current, list) and len(current) == 1:
        current = current[0]
    if isinstance(current, str) and current:
        return None if current.startswith("$__") else current
    if current is not None:
        return None  # several values selected
    options = [_str(_dict(o).get("value")) for o in _list(var.get("options"))]
    options = options or [o.split(" : ")[-1].strip() for o in _str(var.get("query")).split(",")]
    return options[0] if options and options[0] else None


def _legend_labels(template: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_LEGEND.findall(template)))


def _variables(board: dict[str, object]) -> list[object]:
    return _list(_dict(board.get("templating")).get("list"))


def _panel_label(panel: dict[str, object]) -> str:
    title = _str(panel.get("title")) or _str(_dict(panel.get("libraryPanel")).get("name"))
    return f'panel "{title}"' if title else f"panel #{_str(panel.get('id')) or '?'}"


def _titled(what: str, item: dict[str, object], key: str) -> str:
    return f'{what} "{_str(item.get(key))}"'


def _join(parent: str | None, child: str) -> str:
    return child if parent is None else f"{parent} > {child}"


def _dict(value: object) -> dict[str, object]:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _str(value: object) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return ""
    return str(value)
