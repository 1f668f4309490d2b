"""Models built for onnxruntime from parts of a graph: one node, or a segment of nodes.

Inputs are typed from the run-time values fed; constants are embedded as
initializers, as the whole model embeds them, so that onnxruntime takes the same
kernels (it pre-packs constant weights) and the values match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


def type_proto_of(value: Any) -> onnx.TypeProto:
    """The ONNX type of a run-time value: a tensor with its concrete shape, or a sequence."""
    if isinstance(value, list):
        elem = np.asarray(value[0]).dtype if value else np.dtype(np.float32)
        return helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(elem), None)
        )
    a = np.asarray(value)
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))


def signature(value: Any) -> tuple[Any, ...]:
    if isinstance(value, list):
        return ("seq", str(value[0].dtype) if value else "?")
    a = np.asarray(value)
    return (a.dtype.str, a.shape)


def tensor_proto(name: str, value: Any) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), name)


def assemble_model(
    source: onnx.ModelProto,
    nodes: Sequence[onnx.NodeProto],
    name: str,
    feeds: Mapping[str, Any],
    constants: Mapping[str, Any],
    reads: Sequence[str],
    outputs: Sequence[str],
    extra_initializers: Sequence[onnx.TensorProto] = (),
) -> onnx.ModelProto:
    """A model of ``nodes`` with ``source``'s opsets and functions.

    Each name in ``reads`` is an input typed from ``feeds`` or, when not fed, an
    initializer from ``constants``; ``outputs`` are left untyped for onnxruntime to infer.
    """
    inputs = [helper.make_value_info(r, type_proto_of(feeds[r])) for r in reads if r in feeds]
    inits = [tensor_proto(r, constants[r]) for r in reads if r not in feeds] + list(extra_initializers)
    out_infos = [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]
    g = helper.make_graph(list(nodes), name, inputs, out_infos, inits)
    model = helper.make_model(g, opset_imports=list(source.opset_import), ir_version=max(source.ir_version, 4))
    model.functions.extend(source.functions)
    return model
