"""A model seen as the float network it computes: each value's logical tensor, and each node as the float op it stands for.

In a quantized model one float tensor of the network has several forms: the float value a
node computes (``r1``), its QuantizeLinear's integer output and the DequantizeLinear output
that consumers read (QDQ); an integer output of a QLinearConv with its own scale and zero point
(QOperator); an output of DynamicQuantizeLinear (dynamic). :class:`ModelView` names the
*logical* tensor of every value (its root: the value that the network's op computed), the form
each value has (float, integer, dequantized) with its :class:`QuantParams`, and the value a
comparison should read for it (what consumers read). Nodes that only change a tensor's form
(Q, DQ, DynamicQuantizeLinear) are *transparent*; every other node is *canonical*: the float
op it computes (QLinearConv is a Conv), which of its inputs are activations, and where its
weights are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from onnx import helper, numpy_helper

from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.tools.quant.params import QuantParams

__all__ = ["FORM_OPS", "QUANT_OPS", "RECOMPUTED", "CanonicalNode", "Form", "ModelView", "OpSpec", "WeightSlot", "is_quantized", "quant_format"]

#: The name prefix of the nodes graph-dap adds to a copy of a quantized model to recompute what a quantized op computes
#: before requantizing (see :mod:`.recompute`): ``RECOMPUTED + <the op's output>`` for the float op, and the same
#: followed by ``/...`` for the DequantizeLinear nodes that feed it.
RECOMPUTED = "graph_dap.before_requantize:"


class Form(Enum):
    """What a value holds of its logical tensor."""

    FLOAT = "float"  # the float value itself (a float model's tensor, or a QDQ tensor before its QuantizeLinear)
    INT = "int"  # integers, dequantized with its params
    DEQUANTIZED = "dequantized"  # a DequantizeLinear's output: float, after the tensor's own Q/DQ round trip
    OPAQUE = "opaque"  # integers whose scale is known only at run time or nowhere (ConvInteger's int32 sums)


@dataclass(frozen=True, slots=True)
class WeightSlot:
    """Where a quantized op keeps a weight: its integer input, scale and zero point (-1: none), the float op's input position."""

    value: int
    scale: int
    zero_point: int
    float_position: int
    axis: int | None = None


@dataclass(frozen=True, slots=True)
class OpSpec:
    """A quantized op as the float op it computes."""

    op: str
    acts: tuple[int, ...]  # its activation inputs (-1: every input from 2 on, in steps of 3: QLinearConcat)
    out_params: tuple[int, int] | None  # positions of the output's scale and zero point
    weights: tuple[WeightSlot, ...] = ()
    opaque_output: bool = False  # the output is integer sums whose scale is not an input (ConvInteger)


_UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearSoftmax": "Softmax",
          "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool",
          "QLinearReduceMean": "ReduceMean"}  # fmt: skip
#: QOperator, integer and block-quantized ops (onnxruntime's and ONNX's), as float ops.
QUANT_OPS: dict[str, OpSpec] = {
    "QLinearConv": OpSpec("Conv", (0,), (6, 7), (WeightSlot(3, 4, 5, 1, 0),)),
    "QLinearMatMul": OpSpec("MatMul", (0, 3), (6, 7), (WeightSlot(3, 4, 5, 1, 1),)),
    "QLinearAdd": OpSpec("Add", (0, 3), (6, 7), (WeightSlot(3, 4, 5, 1), WeightSlot(0, 1, 2, 0))),
    "QLinearMul": OpSpec("Mul", (0, 3), (6, 7), (WeightSlot(3, 4, 5, 1), WeightSlot(0, 1, 2, 0))),
    "QLinearConcat": OpSpec("Concat", (-1,), (0, 1)),
    "QGemm": OpSpec("Gemm", (0,), (7, 8), (WeightSlot(3, 4, 5, 1, 0),)),
    "ConvInteger": OpSpec("Conv", (0,), None, (WeightSlot(1, -1, 3, 1, 0),), opaque_output=True),
    "MatMulInteger": OpSpec("MatMul", (0,), None, (WeightSlot(1, -1, 3, 1, 1),), opaque_output=True),
    "MatMulIntegerToFloat": OpSpec("MatMul", (0,), None, (WeightSlot(1, 3, 5, 1, 1),)),
    "DynamicQuantizeMatMul": OpSpec("MatMul", (0,), None, (WeightSlot(1, 2, 3, 1, 1),)),
    "MatMulNBits": OpSpec("MatMul", (0,), None, (WeightSlot(1, 2, 3, 1),)),
    **{q: OpSpec(f, (0,), (3, 4)) for q, f in _UNARY.items()},
}
#: Ops that only change a tensor's form (transparent: see the module).
FORM_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
#: Ops that move integers without changing what they mean: their output keeps their input's params.
_PASS_THROUGH = frozenset({"Flatten", "Reshape", "Transpose", "MaxPool", "Resize", "Squeeze", "Unsqueeze", "Slice", "Gather",
                           "Split", "Pad", "Identity", "DepthToSpace", "SpaceToDepth", "Tile", "Expand", "Concat"})  # fmt: skip
#: Ops whose inputs may be swapped.
COMMUTATIVE = frozenset({"Add", "Mul", "Sum", "Max", "Min"})


def is_quantized(graph: Graph) -> bool:
    """Whether the model holds quantization ops (Q/DQ, QOperator, integer or block-quantized ops)."""
    return bool(quant_format(graph))


def quant_format(graph: Graph) -> str:
    """How the model is quantized: ``QOperator``, ``dynamic``, ``weight-only (MatMulNBits)``, ``QDQ``, or '' (float)."""
    ops = {n.op_type for n in graph.nodes}
    if ops & {"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QGemm", "QLinearConcat"}:
        return "QOperator"
    if ops & {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}:
        return "dynamic"
    if "MatMulNBits" in ops:
        return "weight-only (MatMulNBits)"
    if ops & {"QuantizeLinear", "DequantizeLinear"}:
        activations = any(n.op_type == "QuantizeLinear" and not n.is_constant for n in graph.nodes)
        return "QDQ" if activations else "weight-only (DequantizeLinear)"
    return ""


def _constant_value(node: Node) -> np.ndarray | None:
    """A Constant node's value from its proto (``value``, ``value_float(s)``, ``value_int(s)``); None for strings and
    sparse tensors. (``Node.attributes`` holds attributes as text.)"""
    for a in node.proto.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(v)
        if a.name in ("value_float", "value_floats"):
            return np.asarray(v, np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.asarray(v, np.int64)
    return None


@dataclass(frozen=True, slots=True)
class CanonicalNode:
    """A node as the float op it computes: its activation inputs (raw value names) and the spec of a quantized op."""

    node: Node
    op: str
    acts: tuple[str, ...]
    spec: OpSpec | None


class ModelView:
    """The logical tensors and canonical nodes of one model (float or quantized)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.quantized = is_quantized(graph)
        self._inits = {t.name: t for t in graph.model.graph.initializer}
        self._const_cache: dict[str, np.ndarray | None] = {}
        self.static = {o for n in graph.nodes if n.is_constant for o in n.outputs if o} | set(self._inits)
        self.root: dict[str, str] = {}  # value -> its logical tensor (the root value)
        self.form: dict[str, Form] = {}
        self.params: dict[str, QuantParams] = {}
        self.members: dict[str, list[str]] = {}  # logical tensor -> its values, root first
        self.before_requantize: dict[str, str] = {}  # a quantized op's output -> its value before requantizing, recomputed
        self.recomputed: set[str] = set()  # the values of graph-dap's recomputing nodes (RECOMPUTED): not the model's own
        self.nodes: list[CanonicalNode] = []
        for name in graph.input_names:
            self._set(name, name, Form.FLOAT)
        for n in graph.nodes:
            if n.is_constant:
                continue
            self._add(n)

    # -- building ------------------------------------------------------------------

    def _set(self, value: str, root: str, form: Form, params: QuantParams | None = None) -> None:
        self.root[value] = root
        self.form[value] = form
        if params is not None:
            self.params[value] = params
        self.members.setdefault(root, []).append(value)

    def constant(self, name: str) -> np.ndarray | None:
        """The value of a constant (an initializer or a Constant node's output); None when it is computed."""
        if name in self._const_cache:
            return self._const_cache[name]
        value: np.ndarray | None = None
        if name in self._inits:
            value = np.asarray(self.graph.weights.array(self._inits[name]))
        else:
            p = self.graph.producer(name)
            if p is not None and p.is_constant_op:
                value = _constant_value(p)
        self._const_cache[name] = value
        return value

    def quant_params(self, node: Node, scale: int, zero_point: int, axis: int | None = None, dtype: str | None = None) -> QuantParams | None:
        """The params made of ``node``'s inputs at ``scale`` and ``zero_point`` (-1 or absent: none), if constant."""
        ins = node.inputs
        if scale < 0 or scale >= len(ins) or not ins[scale]:
            return None
        s = self.constant(ins[scale])
        if s is None:
            return None
        zp = self.constant(ins[zero_point]) if 0 <= zero_point < len(ins) and ins[zero_point] else None
        if zp is None and 0 <= zero_point < len(ins) and ins[zero_point]:
            return None
        a = node.attributes.get("axis", 1) if axis is None else axis
        block = int(node.attributes.get("block_size", 0) or 0)
        if dtype is None and zp is None and node.attributes.get("output_dtype"):
            dtype = str(helper.tensor_dtype_to_np_dtype(int(node.attributes["output_dtype"])))
        return QuantParams.make(s, zp, int(a), block, dtype=dtype)

    def _add(self, n: Node) -> None:
        op = n.op_type
        outs = [o for o in n.outputs if o]
        if n.name.startswith(RECOMPUTED):  # graph-dap's own recomputation: float values of their own, matched with nothing
            for o in outs:
                self._set(o, o, Form.FLOAT)
            self.recomputed.update(outs)
            if op != "DequantizeLinear":  # the float op (its DequantizeLinear nodes are named ``.../dequantize<i>``)
                self.before_requantize[n.name[len(RECOMPUTED) :]] = outs[0]
            return
        if op in ("QuantizeLinear", "DequantizeLinear") and n.inputs[0] not in self.static:
            src = n.inputs[0]
            root = self.root.get(src, src)
            params = self.quant_params(n, 1, 2)
            if op == "QuantizeLinear":
                self._set(outs[0], root, Form.INT, params)
            else:
                self._set(outs[0], root, Form.DEQUANTIZED if params is not None else Form.FLOAT, params)
            return
        if op == "DynamicQuantizeLinear":
            src = n.inputs[0]
            self._set(outs[0], self.root.get(src, src), Form.OPAQUE)  # its scale is computed at run time
            for o in outs[1:]:
                self._set(o, o, Form.OPAQUE)
            return
        spec = QUANT_OPS.get(op)
        if spec is not None:
            positions = range(2, len(n.inputs), 3) if spec.acts == (-1,) else spec.acts
            acts = tuple(n.inputs[i] for i in positions if i < len(n.inputs) and n.inputs[i] and n.inputs[i] not in self.static)
            self.nodes.append(CanonicalNode(n, spec.op, acts, spec))
            if spec.opaque_output:
                for o in outs:
                    self._set(o, o, Form.OPAQUE)
            elif spec.out_params is not None:
                params = self.quant_params(n, *spec.out_params, axis=1)
                self._set(outs[0], outs[0], Form.INT if params is not None else Form.OPAQUE, params)
            else:
                self._set(outs[0], outs[0], Form.FLOAT)
            return
        acts = tuple(i for i in n.inputs if i and i not in self.static)
        self.nodes.append(CanonicalNode(n, op, acts, None))
        first = n.inputs[0] if n.inputs else ""
        inherited = self.params.get(first) if self.form.get(first) is Form.INT and op in _PASS_THROUGH else None
        for o in outs:
            if inherited is not None:
                self._set(o, o, Form.INT, inherited)
            elif self.form.get(first) in (Form.INT, Form.OPAQUE) and op not in ("Cast",):
                self._set(o, o, Form.OPAQUE)
            else:
                self._set(o, o, Form.FLOAT)

    # -- lookups -------------------------------------------------------------------

    def logical(self, value: str) -> str:
        """The logical tensor ``value`` is a form of (itself for a float model's values and for constants)."""
        return self.root.get(value, value)

    def readable(self, logical: str) -> str | None:
        """The value a comparison reads for ``logical``: what consumers read (a DequantizeLinear's output), else the
        root when it is float or integer with known params; None when no value of it can be dequantized."""
        members = self.members.get(logical, [logical])
        for m in members:
            if self.form.get(m) is Form.DEQUANTIZED:
                return m
        root = members[0]
        if self.form.get(root) is Form.FLOAT or (self.form.get(root) is Form.INT and root in self.params):
            return root
        return None

    def consumers(self, logical: str) -> list[CanonicalNode]:
        """Canonical nodes that read any form of ``logical``."""
        forms = set(self.members.get(logical, [logical]))
        return [c for c in self.nodes if forms.intersection(c.acts)]

    def shape(self, value: str) -> tuple[Any, ...] | None:
        info = self.graph.value_info(value)
        return None if info.shape is None else tuple(info.shape)

    def integers(self, name: str) -> np.ndarray | None:
        """A constant's integers: an integer initializer, or a QuantizeLinear of a float constant, quantized here (what
        quantize_static writes for a weight held by a Constant node: a Q/DQ pair computed at run time)."""
        c = self.constant(name)
        if c is not None:
            return c
        p = self.graph.producer(name)
        if p is None or p.op_type != "QuantizeLinear" or not p.inputs or self.constant(p.inputs[0]) is None:
            return None
        params = self.quant_params(p, 1, 2)
        x = self.constant(p.inputs[0])
        return None if params is None or x is None else params.quantize(x)

    def weight_value(self, name: str) -> np.ndarray | None:
        """A constant read by a node: an initializer, or a DequantizeLinear of one (dequantized here)."""
        c = self.constant(name)
        if c is not None:
            return c
        p = self.graph.producer(name)
        if p is not None and p.op_type == "DequantizeLinear" and p.is_constant:
            q = self.integers(p.inputs[0])
            params = self.quant_params(p, 1, 2, dtype=None)
            if q is not None and params is not None:
                return params.dequantize(q)
        return None
