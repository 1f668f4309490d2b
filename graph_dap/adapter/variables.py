"""Variables: the handles a client refers to, and the DAP ``Variable`` bodies of tensors.

Like vscode-mock-debug's ``Handles``: every expandable thing (a scope, a tensor, a
slice of one) gets a small integer when it is first shown, and the table is cleared
at every stop, since the values may have changed.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from graph_dap.kinds import ValueKind
from graph_dap.names import unquoted
from graph_dap.worker.protocol import Summary

T = TypeVar("T")

#: Above this many children, a container is paged (``indexedVariables``).
PAGE = 100
#: At most this many children in one unpaged answer.
MAX_UNPAGED = 1000
#: The children a quantized tensor adds before its statistics (those of the reference only with one): see quant_forms.
QUANT_PARTS = ("integer", "dequantized", "reference", "error")
#: VS Code's non-standard Variable property: its value becomes the ``debugProtocolVariableMenuContext`` context key.
TENSOR_MENU_KEY = "__vscodeVariableMenuContext"


class ScopeKind(enum.StrEnum):
    """The scopes of a frame."""

    INPUTS = "inputs"  # the node's inputs
    ATTRIBUTES = "attributes"  # the node's attributes
    LAST = "last"  # the outputs of the node that ran last
    VALUES = "values"  # every value computed so far
    INITIALIZERS = "initializers"
    OUTPUTS = "outputs"  # the graph's outputs
    MODULE = "module"  # a Python frame's module scope


@dataclass(frozen=True, slots=True)
class ScopeRef:
    """One scope of a frame, of its ``kind``; ``level``: the frame's.

    ``source``: for the module scope of a Python (or module) frame, which one (0: the innermost).
    """

    kind: ScopeKind
    node: str | None
    level: int = 0
    source: int | None = None


@dataclass(frozen=True, slots=True)
class TensorRef:
    """A value (``temp`` for an evaluate result) or a slice of it at ``index``, as the frame at ``level`` sees it."""

    name: str
    index: tuple[int, ...] = ()
    temp: int | None = None
    expression: str = ""  # what evaluates to this tensor or slice
    level: int = 0

    def child(self, i: int) -> TensorRef:
        return TensorRef(self.name, self.index + (i,), self.temp, subscript(self.expression, (i,)), self.level)


class Handles(Generic[T]):
    """Small positive integers for objects; the same object gets the same number."""

    def __init__(self) -> None:
        self._by_id: dict[int, T] = {}
        self._ids: dict[T, int] = {}
        self._extra: dict[int, Any] = {}

    def create(self, value: T, extra: Any = None) -> int:
        handle = self._ids.get(value)
        if handle is None:
            handle = len(self._by_id) + 1
            self._by_id[handle] = value
            self._ids[value] = handle
        if extra is not None:
            self._extra[handle] = extra
        return handle

    def get(self, handle: int) -> T | None:
        return self._by_id.get(handle)

    def extra(self, handle: int) -> Any:
        return self._extra.get(handle)

    def reset(self) -> None:
        self._by_id.clear()
        self._ids.clear()
        self._extra.clear()


_SETTABLE = re.compile(r"\s*(`[^`]+`|[A-Za-z_]\w*)\s*((?:\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*\]\s*)*)$")


@dataclass(slots=True)
class VariableState:
    """What the client may refer to until the run moves on: scopes and tensors, memory, settable expressions."""

    handles: Handles[Any] = field(default_factory=Handles)
    memory: Handles[Any] = field(default_factory=Handles)
    settable: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # evaluateName -> value, index
    computed_at: dict[int, list[str]] = field(default_factory=dict)  # per frame level, its values computed at this stop
    pending: set[tuple[int, str]] = field(default_factory=set)  # (level, name): shown shape only, being summarized
    ready: set[tuple[int, str]] = field(default_factory=set)  # summarized before the page that showed them was answered

    def reset(self) -> None:
        """The run moves on: every reference handed out so far is gone."""
        self.handles.reset()
        self.memory.reset()
        self.settable.clear()
        self.computed_at.clear()
        self.pending.clear()
        self.ready.clear()

    def shown_pending(self, level: int, names: Iterable[str]) -> bool:
        """A page showed these weights shape only; True when some are summarized already (the worker's event came
        before its answer): the client is to ask again at once."""
        shown = {(level, n) for n in names}
        early = shown & self.ready
        self.ready -= early
        self.pending |= shown - early
        return bool(early)

    def summarized(self, level: int, names: Iterable[str]) -> bool:
        """The worker summarized these weights; True when a page of this stop showed some of them shape only."""
        done = {(level, n) for n in names}
        shown = done & self.pending
        self.pending -= shown
        self.ready |= done - shown
        return bool(shown)

    def remember(self, ref: TensorRef) -> None:
        """A value (or a slice of one) shown to the client: ``setExpression`` may name it by its expression."""
        if ref.temp is None:
            self.settable[ref.expression] = (ref.name, ref.index)


def parse_settable(expression: str) -> tuple[str, tuple[int, ...]] | None:
    """``x``, `` `a/b` ``, ``x[0, 2]`` or ``x[0][2]`` as (value name, index); None otherwise."""
    m = _SETTABLE.match(expression)
    if m is None:
        return None
    index = tuple(int(i) for i in re.findall(r"-?\d+", m.group(2)))
    return unquoted(m.group(1)), index


def subscript(expression: str, index: tuple[int, ...]) -> str:
    if not index:
        return expression
    if expression.endswith("]") and not expression.endswith("`]"):
        return f"{expression[:-1]}, {', '.join(map(str, index))}]"
    return f"{expression}[{', '.join(map(str, index))}]"


def value_text(summary: Summary) -> str:
    """A value's line in Variables and hovers: its summary, and whether it is stale or was recomputed."""
    text = f"{summary.text} (stale: recomputed when the run moves on)" if summary.stale else summary.text
    return f"{text} ({summary.note})" if summary.note else text


def tensor_variable(
    summary: Summary,
    ref: TensorRef,
    handles: Handles[Any],
    memory: Handles[Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A ``Variable`` for a tensor: summary line, lazily expanded statistics and slices."""
    var: dict[str, Any] = {
        "name": name or summary.name,
        "value": value_text(summary),
        "type": summary.type,
        "evaluateName": ref.expression,
        "variablesReference": 0,
    }
    if not summary.available:
        var["presentationHint"] = {"kind": "data", "attributes": ["readOnly"]}
        return var
    named = len(summary.stats) + (len(QUANT_PARTS) if summary.quantized else 0)
    indexed = summary.shape[0] if summary.kind == ValueKind.SEQUENCE or summary.shape else 0
    if summary.kind == ValueKind.SEQUENCE:
        indexed, named = summary.size, 0
    if named or indexed:
        var["variablesReference"] = handles.create(ref, summary)
        if named:
            var["namedVariables"] = named
        if indexed:
            var["indexedVariables"] = indexed
    if memory is not None and summary.kind == ValueKind.TENSOR and summary.size:
        var["memoryReference"] = f"m{memory.create(ref)}"
    if summary.kind == ValueKind.TENSOR:
        var[TENSOR_MENU_KEY] = "tensor"  # VS Code's context key for the View Tensor menu item
    hint: dict[str, Any] = {"kind": "data"}
    if summary.stale:
        hint["attributes"] = ["hasSideEffects"]
    var["presentationHint"] = hint
    return var


def stat_variables(summary: Summary) -> list[dict[str, Any]]:
    """The statistics children of a tensor (read-only numbers)."""
    return [
        {
            "name": key,
            "value": value,
            "variablesReference": 0,
            "presentationHint": {"kind": "property", "attributes": ["readOnly"]},
        }
        for key, value in summary.stats
    ]


def element_variable(parent: TensorRef, index: int, text: str, dtype: str, key: str = "") -> dict[str, Any]:
    """One number of a tensor's last axis, or one item of a map (``key``: its key as a Python literal)."""
    return {
        "name": key or f"[{index}]",
        "value": text,
        "type": dtype,
        "evaluateName": f"{parent.expression}[{key}]" if key else subscript(parent.expression, (index,)),
        "variablesReference": 0,
    }
