"""Element types beyond numpy's own: bfloat16, the float8 family, int4 and uint4 (from ``ml_dtypes``).

numpy sees these as opaque (``dtype.kind == "V"``), so every place that asks "is this a
number, can it hold NaN or Inf" asks here instead. Their names are ``ml_dtypes``' (the
ones ``onnx.helper.tensor_dtype_to_np_dtype`` gives): ``bfloat16``, ``float8_e4m3fn``,
``float8_e4m3fnuz``, ``float8_e5m2``, ``float8_e5m2fnuz``, ``int4``, ``uint4``. In memory
int4 and uint4 hold one element per byte; ONNX and onnxruntime pack two per byte.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

#: The extra element types by name, with their ONNX element type (``onnx.TensorProto``'s numbers,
#: written out so that this module does not import onnx).
EXTRA: dict[str, int] = {
    "bfloat16": 16,
    "float8_e4m3fn": 17,
    "float8_e4m3fnuz": 18,
    "float8_e5m2": 19,
    "float8_e5m2fnuz": 20,
    "uint4": 21,
    "int4": 22,
}
EXTRA_FLOATS = frozenset({"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
PACKED = frozenset({"int4", "uint4"})  # two elements per byte in ONNX and onnxruntime
#: Floating types that have no Inf (an overflow is NaN, or saturates): only NaN can be watched in them.
NO_INF = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz"})
_BITS = {1: np.uint8, 2: np.uint16}


def dtype_of(name: str) -> np.dtype[Any]:
    """The numpy dtype of an element type name (``float32``, ``bfloat16``, ``int4``...)."""
    if name in EXTRA:
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def is_extra(dtype: np.dtype[Any] | str) -> bool:
    """Whether ``dtype`` is one of :data:`EXTRA` (numpy's own ufuncs and onnxruntime's numpy bridge lack them)."""
    return str(dtype) in EXTRA


def is_float(dtype: np.dtype[Any] | str) -> bool:
    """Whether values of ``dtype`` are floating point (numpy's floats, bfloat16, float8)."""
    name = str(dtype)
    return name in EXTRA_FLOATS or (name not in EXTRA and np.dtype(dtype).kind == "f")


def can_fault(dtype: np.dtype[Any] | str) -> bool:
    """Whether values of ``dtype`` can hold NaN or Inf (floats, complex, bfloat16, float8)."""
    name = str(dtype)
    return name in EXTRA_FLOATS or (name not in EXTRA and np.dtype(dtype).kind in "fc")


def is_numeric(dtype: np.dtype[Any] | str) -> bool:
    """Whether values of ``dtype`` are numbers (bool, integers, floats, complex, and the extra types)."""
    return str(dtype) in EXTRA or np.dtype(dtype).kind in "biufc"


def is_integer(dtype: np.dtype[Any] | str) -> bool:
    """Whether ``dtype`` holds integers or booleans (int4 and uint4 included)."""
    return str(dtype) in PACKED or (str(dtype) not in EXTRA and np.dtype(dtype).kind in "biu")


def numeric(a: np.ndarray) -> np.ndarray:
    """``a`` as numpy computes with it: the extra floats as float32 (exact), int4/uint4 as int8/uint8; others as they are."""
    name = str(a.dtype)
    if name in EXTRA_FLOATS:
        return a.astype(np.float32)
    if name == "int4":
        return a.astype(np.int8)
    if name == "uint4":
        return a.astype(np.uint8)
    return a


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an extra-typed array as unsigned integers (``a`` itself otherwise)."""
    if str(a.dtype) in EXTRA:
        return np.ascontiguousarray(a).view(_BITS[a.dtype.itemsize])
    return a


def from_bits(raw: np.ndarray, name: str) -> np.ndarray:
    """The inverse of :func:`bits`: ``raw`` (unsigned integers) read as element type ``name``."""
    if name in EXTRA:
        return np.ascontiguousarray(raw).view(dtype_of(name))
    return raw


def pack4(a: np.ndarray) -> np.ndarray:
    """int4/uint4 elements (one per byte) packed two per byte, low nibble first, as ONNX stores them."""
    nibbles = np.ascontiguousarray(a).reshape(-1).view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def unpack4(raw: np.ndarray, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes (two elements each, low nibble first) as an int4/uint4 array of ``shape``."""
    n = int(np.prod(shape, dtype=np.int64))
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2] = raw & 0x0F
    nibbles[1::2] = raw >> 4
    nibbles = nibbles[:n]
    values = nibbles.astype(np.int8)
    if name == "int4":
        values[values >= 8] -= 16
    return values.astype(dtype_of(name)).reshape(shape)
