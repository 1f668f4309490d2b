"""Feeding and fetching values of every element type through onnxruntime.

onnxruntime's numpy bridge knows neither bfloat16, float8 nor int4/uint4: it refuses such
arrays as feeds, and returns some of them as raw ``uint8`` (float8e4m3fn) or not at all.
A run whose feeds or outputs include one goes through ``OrtValue`` s instead: feeds are
made with their ONNX element type (int4/uint4 packed two per byte), outputs are copied
out of onnxruntime's buffer bit for bit and read as the ``ml_dtypes`` type. Every other
run is a plain ``InferenceSession.run``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from graph_dap.errors import GraphDapError
from graph_dap.runtime import dtypes

#: onnxruntime's type names of the extra element types, by ml_dtypes name.
_ORT_NAMES = {
    "tensor(bfloat16)": "bfloat16",
    "tensor(float8e4m3fn)": "float8_e4m3fn",
    "tensor(float8e4m3fnuz)": "float8_e4m3fnuz",
    "tensor(float8e5m2)": "float8_e5m2",
    "tensor(float8e5m2fnuz)": "float8_e5m2fnuz",
    "tensor(int4)": "int4",
    "tensor(uint4)": "uint4",
}


class FeedError(GraphDapError):
    """A value that onnxruntime cannot be fed alongside an extra-typed one (a sequence, a map)."""


def extra_outputs(sess: ort.InferenceSession) -> frozenset[str]:
    """Names of ``sess``'s outputs whose element type the numpy bridge cannot return."""
    return frozenset(o.name for o in sess.get_outputs() if o.type in _ORT_NAMES)


def run(
    sess: ort.InferenceSession,
    names: Sequence[str],
    feeds: Mapping[str, Any],
    run_options: ort.RunOptions | None = None,
    extra: frozenset[str] | None = None,
) -> list[Any]:
    """``sess.run(names, feeds, run_options)``, for every element type (see the module's docstring).

    ``extra``: :func:`extra_outputs` of ``sess``, when the caller keeps it.
    """
    extra = extra_outputs(sess) if extra is None else extra
    special = any(isinstance(v, np.ndarray) and dtypes.is_extra(v.dtype) for v in feeds.values())
    if not special and not any(n in extra for n in names):
        return list(sess.run(list(names), dict(feeds), run_options))
    values = {k: to_ortvalue(k, v) for k, v in feeds.items()}
    outs = sess.run_with_ort_values(list(names), values, run_options)
    return [from_ortvalue(o) for o in outs]


def to_ortvalue(name: str, value: Any) -> ort.OrtValue:
    """A CPU ``OrtValue`` of an array (its ONNX element type kept; int4/uint4 packed)."""
    if not isinstance(value, np.ndarray | np.generic):
        raise FeedError(f"'{name}' ({type(value).__name__}) cannot be fed in the same run as bfloat16, float8 or int4 values")
    a = np.ascontiguousarray(value)
    kind = str(a.dtype)
    if kind in dtypes.PACKED:
        packed = dtypes.pack4(a)
        ov = ort.OrtValue.ortvalue_from_shape_and_type(list(a.shape), dtypes.EXTRA[kind])
        if packed.size and ov.tensor_size_in_bytes():
            ctypes.memmove(ov.data_ptr(), packed.ctypes.data, min(packed.nbytes, ov.tensor_size_in_bytes()))
        return ov
    if kind in dtypes.EXTRA:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(dtypes.bits(a), dtypes.EXTRA[kind])
    return ort.OrtValue.ortvalue_from_numpy(a)


def from_ortvalue(ov: ort.OrtValue) -> Any:
    """An output ``OrtValue`` as numpy: extra element types copied out bit for bit."""
    if not ov.is_tensor():
        raise FeedError("onnxruntime returned a non-tensor value in a run with bfloat16, float8 or int4 values")
    kind = _ORT_NAMES.get(ov.data_type())
    if kind is None:
        return ov.numpy()
    shape = tuple(int(d) for d in ov.shape())
    size = ov.tensor_size_in_bytes()
    raw = np.empty(size, np.uint8)
    if size:
        ctypes.memmove(raw.ctypes.data, ov.data_ptr(), size)
    if kind in dtypes.PACKED:
        return dtypes.unpack4(raw, kind, shape)
    return dtypes.from_bits(raw.view(np.uint16) if kind == "bfloat16" else raw, kind).reshape(shape)
