"""The worker's calls that look at values: summaries, slices, raw bytes, expressions, edits.

A mixin of :class:`~graph_dap.worker.service.WorkerService`. Results of
expressions that are whole tensors stay here as numbered *temps* until the next stop,
so that the adapter can page through them like any value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from graph_dap.errors import ExpressionError, GraphDapError
from graph_dap.runtime import expr
from graph_dap.runtime.session import DebugSession
from graph_dap.runtime.tools.tensor_view import tensor_view
from graph_dap.worker.wire import missing_wire, number_text, summary_wire

_MAX_CHILDREN = 10_000  # slices summarized per children call
_MAX_READ = 1 << 24  # bytes per read_memory call
_NAME_LIKE = re.compile(r"^[^\s()\[\],]+$")  # no spaces, calls or subscripts: meant as a value name


class ValueCalls:
    """``rpc_<method>`` calls on the values of the session at its current stop."""

    def __init__(self) -> None:
        self._temps: dict[int, Any] = {}
        self._next_temp = 0

    @property
    def s(self) -> DebugSession:
        raise NotImplementedError

    def forget_temps(self) -> None:
        """Drop the results of expressions (at a stop or a new model: they describe the old values)."""
        self._temps.clear()

    def _value(self, name: str, temp: int | None = None) -> Any:
        if temp is not None:
            if temp not in self._temps:
                raise GraphDapError("that result is gone: evaluate the expression again")
            return self._temps[temp]
        return self.s.value(name)

    def rpc_values(self) -> dict[str, Any]:
        s = self.s
        return {"computed": s.computed_values(), "stale": [n for n in s.computed_values() if s.is_stale(n)]}

    def rpc_summaries(self, names: list[str], hex: bool = False) -> list[dict[str, Any]]:
        s = self.s
        out: list[dict[str, Any]] = []
        for name in names:
            if s.has_value(name):
                out.append(summary_wire(name, s.value(name), s.is_stale(name), hex))
                continue
            producer = s.graph.producer(name)
            out.append(missing_wire(name, s.graph.value_info(name), producer.label if producer else None))
        return out

    def _array(self, name: str, temp: int | None, index: Sequence[int]) -> np.ndarray:
        value = self._value(name, temp)
        if isinstance(value, list):
            value = value[index[0]] if index else value
            index = index[1:]
            if isinstance(value, list):
                raise GraphDapError("a sequence has no elements to show here")
        a = np.asarray(value)
        try:
            return a[tuple(index)] if index else a
        except IndexError as e:
            raise GraphDapError(f"bad index {list(index)}: {e}") from None

    def rpc_children(
        self, name: str, index: list[int], start: int = 0, count: int = 0, temp: int | None = None, hex: bool = False
    ) -> dict[str, Any]:
        """Slices of ``value[index]`` along its first axis: summaries, or numbers at the last axis."""
        value = self._value(name, temp)
        if isinstance(value, list) and not index:
            elements = [
                {"index": i, **summary_wire(f"[{i}]", v)}
                for i, v in enumerate(value[start : start + (count or len(value))], start)
            ]
            return {"items": elements, "total": len(value)}
        a = self._array(name, temp, index)
        if a.ndim == 0:
            return {"items": [], "total": 0}
        total = int(a.shape[0])
        stop = min(total, start + (count or total), start + _MAX_CHILDREN)
        items: list[dict[str, Any]] = []
        for i in range(max(start, 0), stop):
            sub = a[i]
            if sub.ndim == 0:
                items.append({"index": i, "scalar": number_text(sub[()], hex), "dtype": str(a.dtype)})
            else:
                items.append({"index": i, **summary_wire(f"[{i}]", sub, hex_=hex)})
        return {"items": items, "total": total}

    def rpc_slice_summary(self, name: str, index: list[int], temp: int | None = None, hex: bool = False) -> dict[str, Any]:
        return summary_wire(name, self._array(name, temp, index), hex_=hex)

    def rpc_read_memory(self, name: str, offset: int, count: int, temp: int | None = None) -> dict[str, Any]:
        a = np.ascontiguousarray(self._array(name, temp, []))
        if a.dtype.kind in "OUS":
            raise GraphDapError(f"'{name}' holds {a.dtype} data, which has no raw bytes to show")
        raw = a.reshape(-1).view(np.uint8)
        size = int(raw.size)
        begin = max(0, min(offset, size))
        end = max(begin, min(size, offset + min(count, _MAX_READ)))
        return {"data": raw[begin:end].tobytes(), "size": size, "start": begin}

    def rpc_evaluate(self, expression: str, clipboard: bool = False, hex: bool = False) -> dict[str, Any]:
        s = self.s
        text = expression.strip()
        name = _unquoted(text)
        if s.graph.has_value(name):
            s.value(name)  # raises "not computed yet" with the producer's name
            result: dict[str, Any] = {"value": name, "summary": summary_wire(name, s.value(name), s.is_stale(name), hex)}
            if clipboard:
                result["text"] = self._full_text(s.value(name))
            return result
        value = s.evaluate(text)
        if isinstance(value, np.ndarray | list) and not (isinstance(value, np.ndarray) and value.size == 1 and value.ndim == 0):
            self._next_temp += 1
            self._temps[self._next_temp] = value
            result = {"temp": self._next_temp, "summary": summary_wire(text, value, hex_=hex)}
            if clipboard:
                result["text"] = self._full_text(value)
            return result
        if isinstance(value, np.generic | int | float | bool | complex) or (isinstance(value, np.ndarray) and value.ndim == 0):
            scalar = np.asarray(value).reshape(())[()]
            return {
                "text": number_text(scalar, hex),
                "type": type(scalar).__name__ if not isinstance(scalar, np.generic) else str(scalar.dtype),
            }
        return {"text": expr.format_value(value, 100_000 if clipboard else 1_000), "type": type(value).__name__}

    @staticmethod
    def _full_text(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(ValueCalls._full_text(v) for v in value) + "]"
        with np.printoptions(threshold=100_000, linewidth=120):
            return np.array2string(np.asarray(value), separator=", ")

    def rpc_set_value(self, name: str, expression: str, index: list[int] | None = None) -> dict[str, Any]:
        s = self.s
        new = s.evaluate(expression)
        if index:
            current = np.array(s.value(name), copy=True)
            target = current[tuple(index)]
            new_arr = np.asarray(new)
            if new_arr.dtype.kind not in "biufc" or (new_arr.ndim and not np.can_cast(new_arr.dtype, current.dtype, "same_kind")):
                raise GraphDapError(f"cannot store {new_arr.dtype} values into '{name}' ({current.dtype})")
            try:
                current[tuple(index)] = new_arr
            except (ValueError, TypeError) as e:
                shape = list(np.shape(target))
                raise GraphDapError(f"'{name}'{list(index)} is {current.dtype}{shape}: {e}") from None
            stale = s.set_value(name, current)
            part = current[tuple(index)]
        else:
            stale = s.set_value(name, new)
            part = s.value(name)
        if np.ndim(part) == 0:
            return {"scalar": number_text(np.asarray(part)[()]), "stale": stale, "summary": None}
        return {"summary": summary_wire(name, part), "stale": stale}

    def rpc_outputs(self) -> list[dict[str, Any]]:
        return [summary_wire(name, v) for name, v in self.s.outputs().items()]

    def rpc_tensor_view(self, name: str, index: list[int] | None = None, max_size: int = 256) -> dict[str, Any]:
        """A 2-D slice of a value (or of what an expression gives), downsampled here, with its statistics."""
        s = self.s
        text = name.strip()
        plain = _unquoted(text)
        if s.graph.has_value(plain):
            value = s.value(plain)  # raises "not computed yet" with the producer's name
        else:
            try:
                value = s.evaluate(text)
            except ExpressionError as e:
                unknown = re.match(r"unknown value '(.*)'$", str(e))
                if unknown or _NAME_LIKE.match(text):
                    raise GraphDapError(f"no value named '{unknown[1] if unknown else plain}' (not computed yet?)") from None
                raise
        return tensor_view(name, value, index, max_size)


def _unquoted(text: str) -> str:
    """A value name as typed, without the backquotes that let any name be written (`` `a/b:0` ``)."""
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] == "`" else text
