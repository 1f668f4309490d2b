"""What a model declares about its values: element types, shapes, attributes, read from the protobuf."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import helper

from graph_dap.kinds import ValueKind
from graph_dap.runtime.dtypes import dtype_of
from graph_dap.runtime.tensor import numel

_DTYPE_NAMES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
    onnx.TensorProto.COMPLEX64: "complex64",
    onnx.TensorProto.COMPLEX128: "complex128",
    onnx.TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    onnx.TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    onnx.TensorProto.FLOAT8E5M2: "float8_e5m2",
    onnx.TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    onnx.TensorProto.INT4: "int4",
    onnx.TensorProto.UINT4: "uint4",
}

Dim = int | str | None
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """What the model declares (or shape inference found) about one value."""

    name: str
    dtype: str | None = None  # numpy-style name ("float32"), None when unknown
    shape: tuple[Dim, ...] | None = None  # None: rank unknown; str: symbolic dim; None in it: unknown dim
    kind: ValueKind = ValueKind.TENSOR
    proto: onnx.TypeProto | None = field(default=None, compare=False, hash=False, repr=False)  # as the model declares it

    @property
    def numel(self) -> int | None:
        """Elements of a tensor of this type; None when the rank or a dimension is unknown."""
        if self.kind != ValueKind.TENSOR or self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return numel(self.shape)  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int | None:
        """Bytes of a tensor of this type; None when its dtype or a dimension is unknown."""
        n = self.numel
        if n is None or self.dtype in (None, "string"):
            return None
        return n * dtype_of(self.dtype).itemsize

    def type_text(self) -> str:
        """``float32[1,3,H,W]``-style text; ``?`` for what is unknown."""
        dtype = self.dtype or "?"
        if self.kind == ValueKind.SEQUENCE:
            return f"seq({dtype})"
        if self.kind == ValueKind.OPTIONAL:
            return f"optional({dtype})"
        if self.kind == ValueKind.MAP or self.shape is None:
            return dtype
        return f"{dtype}[{','.join(map(dim_text, self.shape))}]"


def dim_text(d: Dim) -> str:
    """A declared dimension as people read it: its size, its name, or ``?`` (unknown, or an expression such as
    ``floor(height/2 - 1/2) + 1`` that symbolic shape inference wrote: too long to be read as a size)."""
    if d is None:
        return "?"
    if isinstance(d, int) or _NAME.fullmatch(d):
        return str(d)
    return "?"


def attribute_value(a: onnx.AttributeProto) -> Any:
    """An attribute as plain Python: strings decoded, graphs and tensors as short ``<...>`` placeholders."""
    if a.type == onnx.AttributeProto.GRAPH:
        return f"<graph {a.g.name or a.name}: {len(a.g.node)} nodes>"
    if a.type == onnx.AttributeProto.GRAPHS:
        return [f"<graph {g.name}: {len(g.node)} nodes>" for g in a.graphs]
    if a.type == onnx.AttributeProto.TENSOR:
        t = a.t
        return f"<tensor {_DTYPE_NAMES.get(t.data_type, '?')}[{','.join(map(str, t.dims))}]>"
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list):
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
    return v


def _dims(shape: onnx.TensorShapeProto) -> tuple[Dim, ...]:
    # paddle2onnx writes dim_value -1 for a dynamic dimension; onnxruntime accepts any size there.
    return tuple(
        (d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim
    )


def type_info(name: str, t: onnx.TypeProto) -> ValueInfo:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        tt = t.tensor_type
        return ValueInfo(name, _DTYPE_NAMES.get(tt.elem_type), _dims(tt.shape) if tt.HasField("shape") else None, proto=t)
    if kind == "sequence_type":
        elem = type_info(name, t.sequence_type.elem_type)
        return ValueInfo(name, elem.dtype, elem.shape, ValueKind.SEQUENCE, proto=t)
    if kind == "optional_type":
        elem = type_info(name, t.optional_type.elem_type)
        return ValueInfo(name, elem.dtype, elem.shape, ValueKind.OPTIONAL, proto=t)
    if kind == "map_type":
        key = _DTYPE_NAMES.get(t.map_type.key_type, "?")
        item = type_info(name, t.map_type.value_type)
        return ValueInfo(name, f"map({key},{item.type_text() if item.kind != ValueKind.TENSOR else item.dtype or '?'})", None, ValueKind.MAP, proto=t)
    return ValueInfo(name, None, None, ValueKind.UNKNOWN)


def value_info(v: onnx.ValueInfoProto) -> ValueInfo:
    return type_info(v.name, v.type)


def dtype_name(elem_type: int) -> str | None:
    """numpy-style name of an ONNX element type."""
    return _DTYPE_NAMES.get(elem_type)
