"""The safe tensor expression language of watch, hover, REPL, conditions and logpoints.

:mod:`.functions` is the whitelist, :mod:`.validate` refuses what is off it before
anything runs, :mod:`.evaluator` walks what passes. Nothing is handed to ``eval``.
"""

from __future__ import annotations

from graph_dap.runtime.expr.evaluator import (
    ATTRIBUTES,
    DEFAULT_SIZE_CAP,
    FUNCTIONS,
    Expression,
    compile_expression,
    evaluate,
    format_value,
    interpolate,
    is_truthy,
)

__all__ = [
    "ATTRIBUTES",
    "DEFAULT_SIZE_CAP",
    "FUNCTIONS",
    "Expression",
    "compile_expression",
    "evaluate",
    "format_value",
    "interpolate",
    "is_truthy",
]
