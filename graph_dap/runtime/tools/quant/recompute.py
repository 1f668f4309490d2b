"""What a QOperator op computes before it requantizes, recomputed with the float op.

``quantize_static`` folds a Relu (or a Clip) into the range of its producer's output: in QOperator
format the producer (a QLinearConv, QLinearAdd...) writes the activated tensor as integers, and the
float tensor before the Relu exists only inside its kernel, as the sum it requantizes. To compare
that tensor with the float model's, a copy of the quantized model gets, beside such an op, its
float op run on its own inputs dequantized (the activations by DequantizeLinear nodes, the weights
and the bias dequantized here): the value the kernel requantizes, up to float rounding. These nodes
are named with :data:`~.view.RECOMPUTED` so that every report can tell them from the model's own;
the user's model is never changed, and kernels and sensitivity run the user's model, not the copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.tools.quant.view import RECOMPUTED, ModelView

__all__ = ["FLOAT_INPUTS", "with_recomputed"]

#: QOperator ops whose output a Relu or Clip can be folded into, as (the float op, its inputs as (value, scale,
#: zero point, axis of a per-channel weight) positions of the quantized op).
FLOAT_INPUTS: dict[str, tuple[str, tuple[tuple[int, int, int, int], ...]]] = {
    "QLinearConv": ("Conv", ((0, 1, 2, 0), (3, 4, 5, 0))),
    "QLinearMatMul": ("MatMul", ((0, 1, 2, -1), (3, 4, 5, -1))),
    "QLinearAdd": ("Add", ((0, 1, 2, 0), (3, 4, 5, 0))),
    "QLinearMul": ("Mul", ((0, 1, 2, 0), (3, 4, 5, 0))),
}


def _free_name(taken: set[str], name: str) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    taken.add(out)
    return out


def _recompute(view: ModelView, node: Node, taken: set[str]) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None:
    """The nodes and initializers that recompute ``node``'s value before requantizing; None when its params are not
    constants."""
    op, positions = FLOAT_INPUTS[node.op_type]
    ins = node.inputs
    out = node.outputs[0]
    prefix = RECOMPUTED + out
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    floats: list[str] = []
    scales: list[np.ndarray] = []
    for k, (value, scale, zero_point, axis) in enumerate(positions):
        params = view.quant_params(node, scale, zero_point, axis=axis)
        if params is None or value >= len(ins) or not ins[value]:
            return None
        scales.append(np.asarray(params.scale, np.float32))
        if ins[value] in view.static:
            q = view.integers(ins[value])
            if q is None:
                return None
            name = _free_name(taken, f"{out}__dequantized{k}")
            inits.append(numpy_helper.from_array(params.dequantize(q).astype(np.float32), name))
        else:
            if not params.per_tensor:
                return None
            name = _free_name(taken, f"{out}__dequantized{k}")
            zp = [ins[zero_point]] if zero_point < len(ins) and ins[zero_point] else []
            nodes.append(helper.make_node("DequantizeLinear", [ins[value], ins[scale], *zp], [name], name=f"{prefix}/dequantize{k}"))
        floats.append(name)
    if node.op_type == "QLinearConv" and len(ins) > 8 and ins[8]:
        bias = view.constant(ins[8])
        if bias is None:
            return None
        name = _free_name(taken, f"{out}__bias")
        inits.append(numpy_helper.from_array((bias.astype(np.float64) * scales[0] * scales[1]).astype(np.float32), name))
        floats.append(name)
    result = _free_name(taken, f"{out}__before_requantize")
    float_node = helper.make_node(op, floats, [result], name=prefix)
    float_node.attribute.extend(node.proto.attribute)  # QLinearConv's are Conv's
    nodes.append(float_node)
    return nodes, inits


def with_recomputed(view: ModelView, outputs: Sequence[str]) -> Graph | None:
    """A copy of the quantized model ``view`` sees that also computes, for each of ``outputs`` (integer outputs of
    QOperator ops), the value its op requantizes; None when none of them can be recomputed. The copy keeps its path."""
    graph = view.graph
    taken = set(graph.value_names()) | {n.name for n in graph.model.graph.node}
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    for name in dict.fromkeys(outputs):
        producer = graph.producer(name)
        if producer is None or producer.op_type not in FLOAT_INPUTS or producer.outputs[0] != name:
            continue
        made = _recompute(view, producer, taken)
        if made is not None:
            nodes += made[0]
            inits += made[1]
    if not nodes:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    model.graph.node.extend(nodes)  # after the model's own: their indices stay those of the user's model
    model.graph.initializer.extend(inits)
    return load_graph(model, graph.path)
