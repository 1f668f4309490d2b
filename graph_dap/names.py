"""Value names as the expression language writes them: bare when they can be, else in backticks.

A leaf: the worker reads names as typed (`` `a/b:0` ``), the adapter writes them for
``evaluateName`` and completions, and both agree on the quoting here.
"""

from __future__ import annotations

import keyword


def quoted(name: str) -> str:
    """A value name as an expression: bare if it is an identifier, else in backticks (`` `a/b:0` ``)."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return name
    return f"`{name}`"


def unquoted(expression: str) -> str:
    """The value name an expression of one name stands for (the inverse of :func:`quoted`); other text as it is, stripped."""
    text = expression.strip()
    if len(text) > 1 and text[0] == text[-1] == "`":
        return text[1:-1]
    return text
