"""Label names an expression creates (``label_replace``, ``label_join``, ``count_values``).

A legend such as ``{{model}}`` may read a label the query made itself, not one the data has;
``promql.analyze`` leaves created names out of its label uses but does not list them, so this
walk collects them for the legend check. Pure.
"""

from __future__ import annotations

import promql_parser

__all__ = ["produced_labels"]

_TARGET_ARGUMENT = {"label_replace": 1, "label_join": 1}


def produced_labels(expr: str) -> frozenset[str]:
    """Every label name ``expr`` creates; empty if it does not parse (reported elsewhere)."""
    try:
        root = promql_parser.parse(expr)
    except (ValueError, RecursionError):
        return frozenset()
    found: set[str] = set()
    stack: list[object] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, promql_parser.Call):
            args = list(node.args)
            index = _TARGET_ARGUMENT.get(str(node.func.name))
            if index is not None and len(args) > index:
                target = args[index]
                if isinstance(target, promql_parser.StringLiteral):
                    found.add(str(target.val))
            stack.extend(args)
        elif isinstance(node, promql_parser.AggregateExpr):
            if isinstance(node.param, promql_parser.StringLiteral):  # count_values("label", v)
                found.add(str(node.param.val))
            stack.extend(n for n in (node.expr, node.param) if n is not None)
        elif isinstance(node, promql_parser.BinaryExpr):
            stack.extend((node.lhs, node.rhs))
        elif isinstance(
            node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
        ):
            stack.append(node.expr)
    return frozenset(found)
