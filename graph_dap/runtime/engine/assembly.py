"""Models built for onnxruntime from parts of a graph: one node, or a segment of nodes.

Inputs are typed from the run-time values fed; constants are embedded as
initializers (weights in external data as references to the same file), as the whole model holds them, so that onnxruntime takes the same
kernels (it pre-packs constant weights) and the values match. Values read by
nodes that hold subgraphs are typed as the model declares them where that fits:
with concrete shapes, onnxruntime type-checks an If's branch that is not taken
against them and may reject it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graph_dap.kinds import ValueKind
from graph_dap.runtime.engine.store import nbytes
from graph_dap.runtime.graph import ValueInfo


def elem_type_of(dtype: np.dtype[Any]) -> int:
    """ONNX's element type for a numpy dtype (strings and objects are ONNX strings)."""
    if dtype.kind in "OUS":
        return onnx.TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(dtype)


def type_proto_of(value: Any, declared: ValueInfo | None = None, prefer_declared: bool = False) -> onnx.TypeProto:
    """The ONNX type of a run-time value: a tensor with its concrete shape, a sequence, an optional.

    ``declared``: the model's type for it. It is used for what a value cannot tell (that it is
    an optional, the element type of an empty sequence), and, with ``prefer_declared``, in place
    of the concrete shape wherever the value fits it.
    """
    if declared is not None and declared.proto is not None and declared.kind in (ValueKind.OPTIONAL, ValueKind.SEQUENCE, ValueKind.MAP):
        if declared.kind != ValueKind.OPTIONAL or prefer_declared or value is None or _fits_optional(declared, value):
            return declared.proto
    if declared is not None and prefer_declared and declared.proto is not None and declared.kind == ValueKind.TENSOR and _fits(declared, value):
        return declared.proto
    if value is None:
        return helper.make_optional_type_proto(helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None))
    if isinstance(value, list):
        elem = np.asarray(value[0]).dtype if value else np.dtype(np.float32)
        return helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem_type_of(elem), None))
    a = np.asarray(value)
    return helper.make_tensor_type_proto(elem_type_of(a.dtype), list(a.shape))


def _fits_optional(info: ValueInfo, value: Any) -> bool:
    inner = info.proto.optional_type.elem_type if info.proto is not None else None
    if inner is None:
        return False
    return isinstance(value, list) == (inner.WhichOneof("value") == "sequence_type")


def _fits(info: ValueInfo, value: Any) -> bool:
    """Whether a tensor value has the declared dtype, rank and fixed dims."""
    if value is None or isinstance(value, list):
        return False
    a = np.asarray(value)
    want = "string" if a.dtype.kind in "OUS" else str(a.dtype)
    if want != info.dtype:
        return False
    if info.shape is None:
        return True
    return len(info.shape) == a.ndim and all(not isinstance(d, int) or d == n for d, n in zip(info.shape, a.shape))


def signature(value: Any) -> tuple[Any, ...]:
    """What a session built for ``value``'s type depends on: dtype and shape (a sequence: its element type)."""
    if value is None:
        return ("none",)
    if isinstance(value, list):
        return ("seq", str(np.asarray(value[0]).dtype) if value else "?")
    a = np.asarray(value)
    return (a.dtype.str if a.dtype.kind != "V" else str(a.dtype), a.shape)  # bfloat16, float8 and int4 all read "<V..."


def tensor_proto(name: str, value: Any) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        return value
    a = np.asarray(value)
    if a.dtype.kind in "OUS":
        strings: list[Any] = [x if isinstance(x, bytes) else str(x).encode() for x in a.reshape(-1)]
        return helper.make_tensor(name, onnx.TensorProto.STRING, a.shape, strings)
    return numpy_helper.from_array(a, name)


def _initializer(name: str, value: Any, reference: Callable[[Any], onnx.TensorProto | None] | None) -> onnx.TensorProto:
    original = reference(value) if reference is not None else None
    if original is None:
        return tensor_proto(name, value)
    if original.name == name:
        return original
    renamed = onnx.TensorProto()
    renamed.CopyFrom(original)  # a reference: no data in it
    renamed.name = name
    return renamed


#: Where a constant handed to onnxruntime from memory "is" (see :func:`memory_tensor`): no file is ever read there.
MEMORY_LOCATION = "__graph_dap_memory__"
#: Constants from this size up are handed from memory rather than written into the model.
MEMORY_BYTES = 64 << 10
#: The element types onnxruntime's OrtValue takes from numpy (not ml_dtypes' bfloat16 or float8).
_MEMORY_TYPES = frozenset(("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1"))


def memory_tensor(name: str, value: Any) -> onnx.TensorProto | None:
    """An initializer whose data onnxruntime takes from ``value``'s own memory (no copy into the
    model's bytes; see :func:`add_memory`), or None for a value that is not a plain numeric array."""
    if not isinstance(value, np.ndarray) or value.dtype.str[1:] not in _MEMORY_TYPES:
        return None
    t = onnx.TensorProto()
    t.name = name
    t.data_type = elem_type_of(value.dtype)
    t.dims.extend(value.shape)
    t.data_location = onnx.TensorProto.EXTERNAL
    for key, text in (("location", MEMORY_LOCATION), ("offset", "0"), ("length", str(value.nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = key, text
    return t


def add_memory(so: Any, memory: Mapping[str, np.ndarray]) -> list[Any]:
    """Hand ``memory``'s arrays to a session about to be built with ``so``; the session reads them in
    place (onnxruntime pre-packs from them, folds and fuses them as its own). The returned values
    (and the arrays) must live as long as the session."""
    if not memory:
        return []
    import onnxruntime as ort

    names = list(memory)
    arrays = [np.ascontiguousarray(memory[n]) for n in names]
    values = [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays]
    so.add_external_initializers(names, values)
    return [values, arrays]


def opset_imports(opsets: Mapping[str, int]) -> list[onnx.OperatorSetIdProto]:
    return [helper.make_opsetid("" if d == "ai.onnx" else d, v) for d, v in opsets.items()]


def assemble_model(
    source: onnx.ModelProto,
    nodes: Sequence[onnx.NodeProto],
    name: str,
    feeds: Mapping[str, Any],
    constants: Mapping[str, Any],
    reads: Sequence[str],
    outputs: Sequence[str],
    extra_initializers: Sequence[onnx.TensorProto] = (),
    *,
    opsets: Mapping[str, int] | None = None,
    declared: Mapping[str, ValueInfo] | None = None,
    declared_for: Collection[str] = (),
    functions: Sequence[onnx.FunctionProto] = (),
    reference: Callable[[Any], onnx.TensorProto | None] | None = None,
    memory: dict[str, np.ndarray] | None = None,
    from_memory: Collection[str] = (),
) -> onnx.ModelProto:
    """A model of ``nodes`` with ``source``'s functions and ``opsets`` (default: ``source``'s).

    Each name in ``reads`` is an input typed from ``feeds`` (and ``declared``, see :func:`type_proto_of`)
    or, when not fed, an initializer from ``constants``; names in ``declared_for`` are typed as declared
    wherever the value fits.
    ``outputs`` are left untyped for onnxruntime to infer. ``reference(value)``: the model's own
    external-data tensor for a constant that is its mapped weight (see :mod:`graph_dap.runtime.weights`),
    kept as a reference so that onnxruntime reads the file itself; other constants are embedded.
    Constants named in ``from_memory`` of :data:`MEMORY_BYTES` or more are not written into the
    model: they go into ``memory``, for :func:`add_memory` to hand to the session.
    """
    declared = declared or {}
    inputs = [helper.make_value_info(r, type_proto_of(feeds[r], declared.get(r), r in declared_for)) for r in reads if r in feeds]
    inits = []
    for r in reads:
        if r in feeds:
            continue
        value = constants[r]
        held = memory_tensor(r, value) if memory is not None and r in from_memory and nbytes(value) >= MEMORY_BYTES else None
        if held is not None:
            memory[r] = value  # type: ignore[index]
            inits.append(held)
        else:
            inits.append(_initializer(r, value, reference))
    inits += list(extra_initializers)
    out_infos = [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]
    g = helper.make_graph(list(nodes), name, inputs, out_infos, inits)
    imports = opset_imports(opsets) if opsets is not None else list(source.opset_import)
    model = helper.make_model(g, opset_imports=imports, ir_version=max(source.ir_version, 4))
    model.functions.extend(source.functions)
    model.functions.extend(functions)
    return model
