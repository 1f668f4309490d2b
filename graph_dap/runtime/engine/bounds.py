"""Bounds that let the Inf watch leave a Relu's input unwatched, so onnxruntime can fuse the Relu.

With the inf filter, a Relu hides a -Inf in its input (Relu(-Inf) is 0): the tensor before it
had to be summed itself, which keeps onnxruntime from fusing the Relu into its Conv, MatMul or
Gemm. But such a tensor, ``pre = Conv(x, W, b)`` (or MatMul, Gemm, then perhaps a
BatchNormalization or an Add of a constant), can only hold -Inf when ``x`` holds a NaN or an
Inf (watched on their own) or when the sums overflow, and they cannot overflow when

    |pre| <= A * max|x| + B < FLT_MAX,

with ``A`` the largest L1 norm of a row of ``W`` (scaled by the BatchNormalization) and ``B`` what
the biases and the normalization's shifts add. For ``x >= 0`` (a Relu's output, a pool of one...)
``max|x| <= sum(x)``: the watch sums ``x`` (it is the end of the chain before: no fusion lost) and
checks ``A * sum(x) + B`` instead of ``sum(x)``. That is non-finite when ``x`` holds NaN or Inf, or
when an overflow cannot be ruled out; the exact check then looks at ``pre`` too. A NaN or +Inf in
``pre`` reaches the Relu's output, which is watched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_dap.runtime.graph import Lookup, Node

MARGIN = 16.0  # on A and B: rounding in the sums, and a pool's mean times its size
# The largest A and B a check can take: A is multiplied by a pool's pixel count (up to 2**24) and both
# must stay float32 numbers, or the check would not see an overflow.
LIMIT = float(np.finfo(np.float32).max) / 2**25
_CHUNK = 1 << 22  # elements of a weight read at a time

# Ops whose output is >= 0 whatever their input, and ops that keep a >= 0 input >= 0 (first input).
_NON_NEGATIVE = frozenset({"Relu", "Sigmoid", "Softmax", "Abs", "Exp"})
_KEEPS_SIGN = frozenset(
    {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten", "Reshape", "Identity", "Transpose", "Squeeze",
     "Unsqueeze", "Dropout"}
)  # fmt: skip
_ALL_INPUTS = frozenset({"Add", "Concat", "Mul", "Max"})  # >= 0 when every input is


@dataclass(frozen=True, slots=True)
class Bound:
    """``|tensor| <= scale * sum(source) + offset``, ``source >= 0``; ``chain``: the tensors from
    the Conv's (MatMul's, Gemm's) output to this one, each within the bound (and each may hold the
    first -Inf: the exact check looks at them all)."""

    source: str
    scale: float
    offset: float
    chain: tuple[str, ...]


def _standard(node: Node) -> bool:
    return node.domain in ("", "ai.onnx")


def _row_l1_max(w: np.ndarray, axis: int) -> float:
    """The largest sum of absolute values over all axes but ``axis`` (0, or 1 of a matrix), in float64,
    a few million elements at a time (a classifier's weight may be hundreds of MB)."""
    if w.size and all(s == 0 for s in w.strides):  # one value broadcast (a ConstantOfShape weight)
        return float(abs(w.flat[0])) * (w.size // w.shape[axis])
    if w.size == 0:
        return 0.0
    per_row = max(1, w.size // w.shape[0])
    step = max(1, _CHUNK // per_row)
    if axis == 0:
        best = 0.0
        for i in range(0, w.shape[0], step):
            best = max(best, float(np.abs(w[i : i + step].reshape(min(step, w.shape[0] - i), -1)).sum(axis=1, dtype=np.float64).max()))
        return best
    acc = np.zeros(w.shape[1], np.float64)
    for i in range(0, w.shape[0], step):
        acc += np.abs(w[i : i + step]).sum(axis=0, dtype=np.float64)
    return float(acc.max())


def _max_abs(v: Any) -> float:
    a = np.asarray(v)
    return float(np.abs(a.astype(np.float64)).max()) if a.size else 0.0


class Bounds:
    """Bounds of the tensors of one scope, from its constant weights (read once each)."""

    def __init__(self, graph: Lookup, constants: Mapping[str, Any]) -> None:
        self.graph = graph
        self.constants = constants
        self._norms: dict[tuple[str, int], float] = {}
        self._signs: dict[str, bool] = {}

    def _norm(self, name: str, axis: int) -> float | None:
        value = self.constants.get(name)
        if value is None or not isinstance(value, np.ndarray) or value.dtype.kind != "f" or (axis == 1 and value.ndim != 2):
            return None
        key = (name, axis)
        if key not in self._norms:
            self._norms[key] = _row_l1_max(value, axis)
        norm = self._norms[key]
        return norm if np.isfinite(norm) else None

    def _const_max(self, name: str) -> float | None:
        if not name:
            return 0.0
        value = self.constants.get(name)
        if value is None or not isinstance(value, np.ndarray) or value.dtype.kind != "f":
            return None
        m = _max_abs(value)
        return m if np.isfinite(m) else None

    def non_negative(self, name: str, depth: int = 0) -> bool:
        """Whether ``name`` is >= 0 (or NaN) by how it is made."""
        if name not in self._signs:
            producer = self.graph.producer(name)
            ok = False
            if producer is not None and _standard(producer) and depth < 64 and producer.outputs[0] == name:
                op = producer.op_type
                data = [i for i in producer.inputs if i]
                if op in _NON_NEGATIVE:
                    ok = True
                elif op in _KEEPS_SIGN:
                    ok = bool(data) and self.non_negative(data[0], depth + 1)
                elif op in _ALL_INPUTS:
                    ok = bool(data) and all(self.non_negative(i, depth + 1) for i in data)
            self._signs[name] = ok
        return self._signs[name]

    def of(self, name: str, produced: Callable[[str], bool]) -> Bound | None:
        """The bound of ``name`` over the sum of a non-negative tensor that ``produced`` (in the same segment)."""
        producer = self.graph.producer(name)
        if producer is None or not _standard(producer) or producer.outputs[0] != name:
            return None
        op, ins, a = producer.op_type, producer.inputs, producer.attributes
        if op in ("Conv", "MatMul", "Gemm"):
            x = ins[0]
            if len(ins) < 2 or not produced(x) or not self.non_negative(x):
                return None
            if op == "Conv":
                norm, bias = self._norm(ins[1], 0), self._const_max(ins[2] if len(ins) > 2 else "")
            elif op == "MatMul":
                w = self.constants.get(ins[1])
                norm = self._norm(ins[1], 1) if isinstance(w, np.ndarray) and w.ndim == 2 else None
                bias = 0.0
            else:
                if a.get("transA", 0):
                    return None
                alpha, beta = abs(float(a.get("alpha", 1.0))), abs(float(a.get("beta", 1.0)))
                norm = self._norm(ins[1], 0 if a.get("transB", 0) else 1)
                c = self._const_max(ins[2] if len(ins) > 2 else "")
                norm = None if norm is None else alpha * norm
                bias = None if c is None else beta * c
            if norm is None or bias is None:
                return None
            return Bound(x, norm, bias, (name,))
        if op == "BatchNormalization" and not a.get("training_mode", 0) and len(ins) >= 5:
            inner = self.of(ins[0], produced)
            scale, shift, mean, var = (self.constants.get(i) for i in ins[1:5])
            if inner is None or not all(isinstance(v, np.ndarray) for v in (scale, shift, mean, var)):
                return None
            mean_max, shift_max = self._const_max(ins[3]), self._const_max(ins[2])
            if mean_max is None or shift_max is None:
                return None  # (an Inf shift makes -Inf of any value: nothing to bound)
            eps = float(a.get("epsilon", 1e-5))
            with np.errstate(all="ignore"):
                gain = float(np.max(np.abs(np.asarray(scale, np.float64)) / np.sqrt(np.asarray(var, np.float64) + eps)))
            if not np.isfinite(gain):
                return None
            scaled = max(gain, 1.0)  # (the chain's earlier tensors are within the unscaled bound)
            return Bound(inner.source, scaled * inner.scale, scaled * (inner.offset + mean_max) + shift_max, (*inner.chain, name))
        if op in ("Add", "Sub", "Mul") and len(ins) == 2:  # with a constant (a scale or a bias, as some exporters write a BN)
            for k in (0, 1):
                c = self._const_max(ins[1 - k]) if ins[1 - k] in self.constants else None
                inner = self.of(ins[k], produced) if c is not None else None
                if inner is not None and c is not None:
                    if op == "Mul":
                        m = max(c, 1.0)  # (the chain's earlier tensors are within the unscaled bound)
                        return Bound(inner.source, m * inner.scale, m * inner.offset, (*inner.chain, name))
                    return Bound(inner.source, inner.scale, inner.offset + c, (*inner.chain, name))
        return None
