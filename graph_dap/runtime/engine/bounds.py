"""Bounds that let the Inf watch leave an activation's input unwatched, so onnxruntime can fuse it.

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

Bounds compose. ``x`` may itself be bounded (an FPN's sum of lateral Convs and upsamplings), or be a
value the segment is fed, of any sign (a model's input, what the part before made): the check reads
``sum(|x|)``. A residual ``Add`` (``Sum`` in older exports) of bounded tensors adds their bounds, one
check reading all their sums (a projection shortcut); before a Relu, a term ``>= 0`` made in the
segment (an earlier block's Relu) needs none: ``pre + shortcut >= pre``, and its +Inf reaches the
Relu's output. With every source finite and the check finite, every tensor inside a bound is finite:
one that holds a NaN or an Inf fires the check, and needs no sum of its own. So an activation that
hides both infinities (a Sigmoid) can leave its input to a bound too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from graph_dap.runtime.graph import Lookup, Node
from graph_dap.runtime.weights import release_pages

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
_WITHIN = _KEEPS_SIGN - {"Dropout"}  # the largest magnitude out at most the first input's (a Dropout's only in inference)


@dataclass(frozen=True, slots=True)
class Bound:
    """``|tensor| <= sum(scale * sum(source) for source, scale in terms) + offset``, each source >= 0 (or fed to the
    segment: ``sum(|source|)``); ``chain``: the tensors from the Convs' (MatMuls', Gemms') outputs to this one, each
    within the bound (and each may hold the first fault: the exact check looks at them all)."""

    terms: tuple[tuple[str, float], ...]
    offset: float
    chain: tuple[str, ...]

    def scaled(self, factor: float, name: str, offset: float = 0.0) -> Bound:
        """``factor`` times this bound plus ``offset``, the bound of ``name`` (made from this tensor)."""
        return Bound(tuple((x, factor * a) for x, a in self.terms), factor * self.offset + offset, (*self.chain, name))


@dataclass(frozen=True, slots=True)
class Within:
    """The tensors of a segment a bound may read: ``made`` (in its chain, or a source: float32, computed in the
    segment by a node whose Inf counts) and ``fed`` (float32 values it reads from outside: a check reads ``sum(|x|)``)."""

    made: Callable[[str], bool]
    fed: Callable[[str], bool]


class Check(NamedTuple):
    """What the watch checks in place of a tensor's sum: ``scale * sum(tensor) + offset`` plus ``a * sum(y)`` for each
    ``(y, a)`` of ``terms``, the other sources of the bounds it covers (earlier in the run and watched, or fed)."""

    scale: float
    offset: float
    terms: tuple[tuple[str, float], ...] = ()

    def covering(self, bound: Bound, home: str) -> Check:
        """This check made to rule out an overflow within ``bound`` too (with the margin), at ``home`` (one of its sources,
        or a watched tensor >= 0 after them): each factor the larger of the two, and never under 1 (0 times a sum that
        overflowed would read NaN, as if the segment had made one)."""
        terms = dict(self.terms)
        own = max(self.scale, 1.0)
        for x, a in bound.terms:
            if x == home:
                own = max(own, MARGIN * a)
            else:
                terms[x] = max(terms.get(x, 1.0), MARGIN * a)
        return Check(own, max(self.offset, MARGIN * bound.offset), tuple(sorted(terms.items())))


def _sum(bounds: list[Bound], name: str) -> Bound:
    """The bound of ``name``, a sum of tensors within ``bounds`` (a source twice adds its scales)."""
    terms: dict[str, float] = {}
    for b in bounds:
        for x, a in b.terms:
            terms[x] = terms.get(x, 0.0) + a
    chain = dict.fromkeys(t for b in bounds for t in b.chain)
    return Bound(tuple(terms.items()), sum(b.offset for b in bounds), (*chain, name))


def _standard(node: Node) -> bool:
    return node.domain in ("", "ai.onnx")


def _row_l1_max(w: np.ndarray, axis: int) -> float:
    """The largest sum of absolute values over all axes but ``axis`` (0, or 1 of a matrix), in float64,
    a few million elements at a time (a classifier's weight may be hundreds of MB). +Inf for a weight that
    holds a NaN or an Inf: it bounds nothing (its reader makes the fault from finite inputs)."""
    if w.size and all(s == 0 for s in w.strides):  # one value broadcast (a ConstantOfShape weight)
        return _finite_or_inf(float(abs(w.flat[0])) * (w.size // w.shape[axis]))
    if w.size == 0:
        return 0.0
    per_row = max(1, w.size // w.shape[0])
    step = max(1, _CHUNK // per_row)
    if axis == 0:
        best = 0.0
        for i in range(0, w.shape[0], step):
            row = _finite_or_inf(float(np.abs(w[i : i + step].reshape(min(step, w.shape[0] - i), -1)).sum(axis=1, dtype=np.float64).max()))
            best = max(best, row)  # (not a NaN: max() would drop it)
        return best
    acc = np.zeros(w.shape[1], np.float64)
    for i in range(0, w.shape[0], step):
        acc += np.abs(w[i : i + step]).sum(axis=0, dtype=np.float64)
    return _finite_or_inf(float(acc.max()))


def _max_abs(v: Any) -> float:
    a = np.asarray(v)
    return _finite_or_inf(float(np.abs(a.astype(np.float64)).max())) if a.size else 0.0


def _finite_or_inf(x: float) -> float:
    return x if math.isfinite(x) else math.inf


class Bounds:
    """Bounds of the tensors of one scope, from its constant weights (read once each)."""

    def __init__(self, graph: Lookup, constants: Mapping[str, Any]) -> None:
        self.graph = graph
        self.constants = constants
        self._norms: dict[tuple[str, int], float] = {}
        self._signs: dict[str, frozenset[str] | None] = {}

    def _norm(self, name: str, axis: int) -> float | None:
        value = self.constants.get(name)
        if value is None or not isinstance(value, np.ndarray) or value.dtype.kind != "f" or (axis == 1 and value.ndim != 2):
            return None
        key = (name, axis)
        if key not in self._norms:
            self._norms[key] = _row_l1_max(value, axis)
            release_pages(value)  # (a model's weights, read for their norms, would all stay in the process's memory)
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

    def non_negative(self, name: str, produced: Callable[[str], bool]) -> bool:
        """Whether ``name`` is >= 0 (or NaN) by how it is made, every tensor it is made from down to a
        Relu (Sigmoid...) computed in the segment (``produced``): a value from outside may have been set."""
        made_from = self._made_from(name)
        return made_from is not None and all(produced(t) for t in made_from)

    def _made_from(self, name: str, depth: int = 0) -> frozenset[str] | None:
        """The tensors that make ``name`` >= 0 (it among them), None when nothing does."""
        if name not in self._signs:
            producer = self.graph.producer(name)
            found: frozenset[str] | None = None
            if producer is not None and _standard(producer) and depth < 64 and producer.outputs[0] == name:
                op = producer.op_type
                data = [i for i in producer.inputs if i]
                reads = data[:1] if op in _KEEPS_SIGN else data if op in _ALL_INPUTS else []
                parts = [self._made_from(i, depth + 1) for i in reads]
                if op in _NON_NEGATIVE:
                    found = frozenset((name,))
                elif parts and all(p is not None for p in parts):
                    found = frozenset((name,)).union(*(p for p in parts if p is not None))
            self._signs[name] = found
        return self._signs[name]

    def held(self, x: str, within: Within, depth: int = 0) -> Bound | None:
        """A bound on ``max|x|``: ``x``'s own sum when ``x >= 0`` (``x`` a source: watched), the sum of ``|x|`` when the
        segment is fed ``x`` (of any sign: a value from outside may have been set), else ``x``'s bound."""
        if self.non_negative(x, within.made) or within.fed(x):
            return Bound(((x, 1.0),), 0.0, ())
        return self.of(x, within, depth=depth + 1)

    def of(self, name: str, within: Within, below: bool = False, depth: int = 0) -> Bound | None:
        """The bound of ``name``, made in the segment, over the sums of the non-negative tensors it makes (or of ``|x|``, ``x`` fed).

        ``below``: a bound from below is enough (a Relu's input: only -Inf hides), so a residual ``Add``
        or ``Sum`` leaves out its terms >= 0 (``a + b >= a`` for ``b >= 0``, rounding included)."""
        producer = self.graph.producer(name)
        if producer is None or not _standard(producer) or producer.outputs[0] != name or depth > 64 or not within.made(name):
            return None
        op, ins, a = producer.op_type, producer.inputs, producer.attributes
        if op in ("Conv", "MatMul", "Gemm"):
            inner = self.held(ins[0], within, depth) if len(ins) >= 2 else None
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
            if inner is None or norm is None or bias is None:
                return None
            factor = max(norm, 1.0) if inner.chain else norm  # (the chain's earlier tensors are within the bound)
            return inner.scaled(factor, name, bias)
        if op in _WITHIN or (op in ("Resize", "Upsample") and _interpolates(producer)):
            inner = self.held(ins[0], within, depth) if ins else None
            return None if inner is None else inner.scaled(1.0, name)
        if op == "BatchNormalization" and not a.get("training_mode", 0) and len(ins) >= 5:
            inner = self.of(ins[0], within, depth=depth + 1)
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
            return inner.scaled(scaled, name, scaled * mean_max + shift_max)
        if op in ("Add", "Sub", "Mul") and len(ins) == 2 and any(i in self.constants for i in ins):
            for k in (0, 1):  # with a constant (a scale or a bias, as some exporters write a BN)
                c = self._const_max(ins[1 - k]) if ins[1 - k] in self.constants else None
                inner = self.of(ins[k], within, depth=depth + 1) if c is not None else None
                if inner is not None and c is not None:
                    if op == "Mul":
                        return inner.scaled(max(c, 1.0), name)  # (the chain's earlier tensors are within the unscaled bound)
                    return inner.scaled(1.0, name, c)
            return None
        if op in ("Add", "Sum", "Concat") and ins and all(ins):  # a residual connection (a projection shortcut, an FPN's)
            left = [i for i in ins if not (below and self.non_negative(i, within.made))]
            parts = [self.held(i, within, depth) for i in left]
            kept = [b for b in parts if b is not None]
            return _sum(kept, name) if kept and len(kept) == len(parts) else None
        return None


def _interpolates(node: Node) -> bool:
    """Whether a Resize (Upsample) makes each output a weighted mean of inputs (nearest, linear): ``max|out| <= max|in|``.
    Not cubic (it overshoots), nor crop-and-resize (it fills with ``extrapolation_value``), nor antialiased."""
    a = node.attributes
    return (
        a.get("mode", "nearest") in ("nearest", "linear", "bilinear")
        and a.get("coordinate_transformation_mode") != "tf_crop_and_resize"
        and not a.get("antialias", 0)
    )
