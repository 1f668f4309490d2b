"""Constant nodes whose outputs are known without onnxruntime: a ``Constant``'s is its attribute, a
``ConstantOfShape``'s a view of its one value. A converter's model can hold hundreds of Constant nodes (PaddleOCR's
text detector: 342 of its 672 nodes); a one-node session each cost the start of a run a third of a second."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from onnx import AttributeProto, TensorProto, numpy_helper

from graph_dap.runtime.graph import Node

_LISTS = {"value_floats": np.float32, "value_ints": np.int64}
# Element types whose arrays numpy and onnxruntime hold alike (others, bfloat16 and float8 among them, go to onnxruntime)
_PLAIN = {
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32,
    TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
}  # fmt: skip
_SCALARS = {"value_float": np.float32, "value_int": np.int64}


def known_outputs(node: Node, fixed: Mapping[str, Any]) -> dict[str, Any] | None:
    """``node``'s outputs when they are known without running it (see the module's docstring); None otherwise."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    if node.op_type == "Constant":
        value = _constant(node)
    elif node.op_type == "ConstantOfShape":
        value = _filled(node, fixed)
    else:
        return None
    return None if value is None else {node.outputs[0]: value}


def _constant(node: Node) -> np.ndarray | None:
    """A Constant's value as onnxruntime's Constant kernel gives it (None for a sparse or external one: onnxruntime's)."""
    if node.inputs or len(node.proto.attribute) != 1:
        return None
    a = node.proto.attribute[0]
    if a.name == "value" and a.type == AttributeProto.TENSOR:
        plain = a.t.data_type in _PLAIN and a.t.data_location != TensorProto.EXTERNAL
        return numpy_helper.to_array(a.t) if plain else None
    if a.name in _SCALARS:
        return np.array(a.f if a.name == "value_float" else a.i, _SCALARS[a.name])
    if a.name in _LISTS:
        return np.array(list(a.floats) if a.name == "value_floats" else list(a.ints), _LISTS[a.name])
    if a.name == "value_string":
        return np.array(a.s.decode("utf-8"), dtype=object)
    if a.name == "value_strings":
        return np.array([v.decode("utf-8") for v in a.strings], dtype=object)
    return None


def _filled(node: Node, fixed: Mapping[str, Any]) -> np.ndarray | None:
    """A ConstantOfShape's output as a read-only view of its one value: no memory for the weights the
    onnx wheel's light models make so (segments fill them again, as the whole model does). None for
    another node, or a shape that onnxruntime must judge."""
    if len(node.inputs) != 1:
        return None
    shape = fixed.get(node.inputs[0])
    if not isinstance(shape, np.ndarray) or shape.ndim != 1 or shape.dtype != np.int64 or (shape < 0).any():
        return None
    value = next((numpy_helper.to_array(a.t) for a in node.proto.attribute if a.name == "value"), np.zeros(1, np.float32))
    if value.size != 1:
        return None
    return np.broadcast_to(value.reshape(()).copy(), tuple(int(d) for d in shape))
