"""Inputs for a model: given as arrays or files, or made up deterministically.

Every input is checked against what the model declares; a mismatch is an
:class:`InputError` that names the input, what it expects and what it got.
Tensors are numpy arrays (0-d ones stay 0-d; strings as str or object arrays),
sequences are Python lists of arrays, and an absent optional is ``None``; an ONNX
test-data folder may hold ``SequenceProto``, ``OptionalProto`` and ``MapProto`` files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from graph_dap.errors import InputError
from graph_dap.files import ARCHIVE_ERRORS, path_problem
from graph_dap.kinds import ValueKind
from graph_dap.runtime.dtypes import dtype_of, is_extra, is_float, is_integer
from graph_dap.runtime.graph import Graph, ValueInfo
from graph_dap.runtime.tensor import numel

InputsArg = Mapping[str, Any] | str | os.PathLike[str] | None
#: Sizes of symbolic dimensions by dimension name, and whole shapes by input name (``{"batch": 2,
#: "x": (1, 512)}``: an input whose dimensions have no name, or ``-1`` as paddle2onnx writes, is sized so).
Dims = Mapping[str, int | tuple[int, ...]]


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


#: The largest input made up from a declared shape: a quarter of the machine's memory.
MAX_MADE_UP_BYTES = _memory_bytes() // 4


def resolve_inputs(graph: Graph, inputs: InputsArg = None, dims: Dims | None = None) -> dict[str, Any]:
    """Turn any accepted form of inputs into checked arrays, one per graph input."""
    expected = {v.name: v for v in graph.inputs}
    sizes, shapes = _split_dims(dims or {}, expected)
    given = _read(graph, inputs)
    unknown = [k for k in given if k not in expected]
    if unknown:
        names = ", ".join(expected) or "none"
        raise InputError(f"the model has no input '{unknown[0]}' (its inputs: {names})")
    out: dict[str, Any] = {}
    for name, info in expected.items():
        if name in given:
            out[name] = _check(info, given[name], sizes)
            got = np.shape(out[name]) if isinstance(out[name], np.ndarray) else None
            if name in shapes and got != shapes[name]:
                raise InputError(f"input '{name}' is given with shape {list(got or ())}, but its shape is set to {list(shapes[name])}")
        else:
            out[name] = random_input(info, sizes, shapes.get(name))
    return out


def _split_dims(dims: Dims, expected: Mapping[str, ValueInfo]) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """``dims`` as sizes of named dimensions and whole shapes of inputs, each checked."""
    sizes: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for k, v in dims.items():
        if isinstance(v, (tuple, list)):
            if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in v):
                raise InputError(f"the shape of input '{k}' must be non-negative integers, got {list(v)!r}")
            info = expected.get(k)
            if info is None:
                raise InputError(f"a shape is set for '{k}', but the model has no such input (its inputs: {', '.join(expected) or 'none'})")
            if info.kind == ValueKind.TENSOR and info.shape is not None:
                declared = info.type_text()
                if len(info.shape) != len(v):
                    raise InputError(f"input '{k}' is {declared}, of rank {len(info.shape)}; the shape set has {len(v)} dimensions: {list(v)}")
                clash = next((i for i, (d, n) in enumerate(zip(info.shape, v)) if isinstance(d, int) and d != n), None)
                if clash is not None:
                    raise InputError(f"input '{k}' is {declared}: dimension {clash} is {info.shape[clash]}, the shape set says {v[clash]}")
            shapes[k] = tuple(v)
        elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InputError(f"dimension '{k}' must be a non-negative integer, got {v!r}")
        else:
            sizes[k] = v
    return sizes, shapes


def _read(graph: Graph, inputs: InputsArg) -> dict[str, Any]:
    if inputs is None:
        return {}
    if isinstance(inputs, Mapping):
        return dict(inputs)
    path = Path(inputs)
    problem = path_problem(path)
    if problem is not None:
        raise InputError(f"inputs not found: {path}" if problem == "not found" else f"cannot open the inputs {str(path)[:300]}: {problem}")
    if path.is_dir():
        return _read_test_data_dir(graph, path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        if suffix == ".npy":
            if len(graph.inputs) != 1:
                raise InputError(
                    f"a .npy file holds one array, but the model has {len(graph.inputs)} inputs "
                    f"({', '.join(graph.input_names)}); give a .npz keyed by input name"
                )
            return {graph.inputs[0].name: np.load(path, allow_pickle=False)}
        if suffix == ".pb":
            return {graph.inputs[0].name: _read_proto(path, graph.inputs[0])[1]} if len(graph.inputs) == 1 else _read_test_data_dir(graph, path.parent)
    except (*ARCHIVE_ERRORS, DecodeError) as e:
        raise InputError(f"cannot read inputs from {path}: {_archive_problem(path, suffix) or e}") from None
    raise InputError(f"inputs must be a .npz, a .npy or a folder of input_N.pb files, got {path}")


_MAGIC = {".npz": (b"PK", "a .npz (a zip archive of .npy files)"), ".npy": (b"\x93NUMPY", "a .npy file")}


def _archive_problem(path: Path, suffix: str) -> str | None:
    """What a file named .npz or .npy really is when its first bytes say it is not one (numpy then speaks of pickles)."""
    if suffix not in _MAGIC:
        return None
    magic, what = _MAGIC[suffix]
    try:
        with open(path, "rb") as f:
            head = f.read(len(magic))
    except OSError:
        return None
    if head == magic:
        return None
    return "empty file; expected " + what if not head else f"not {what} (it starts with {head!r})"


def _read_test_data_dir(graph: Graph, path: Path) -> dict[str, Any]:
    files = sorted(path.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]) if p.stem.split("_")[1].isdigit() else 0)
    if not files:
        raise InputError(f"folder {path} has no input_N.pb files (the ONNX test-data layout)")
    out: dict[str, Any] = {}
    for i, f in enumerate(files):
        info = graph.inputs[i] if i < len(graph.inputs) else ValueInfo(f"input_{i}")
        name, value = _read_proto(f, info)
        out[name or info.name] = value
    return out


def _read_proto(path: Path, info: ValueInfo) -> tuple[str, Any]:
    """A test-data file as the message the model's input declares: tensor, sequence, optional or map."""
    kinds: dict[str, Any] = {
        "tensor": (onnx.TensorProto, numpy_helper.to_array),
        "sequence": (onnx.SequenceProto, numpy_helper.to_list),
        "optional": (onnx.OptionalProto, numpy_helper.to_optional),
        "map": (onnx.MapProto, numpy_helper.to_dict),
    }
    message_type, convert = kinds.get(info.kind, kinds["tensor"])
    message = message_type()
    try:
        message.ParseFromString(path.read_bytes())
        return message.name, convert(message)
    except (OSError, DecodeError) as e:
        raise InputError(f"cannot read {path} as a {message_type.__name__}: {e}") from None
    except (TypeError, ValueError, NotImplementedError) as e:
        raise InputError(f"{path}: the {message_type.__name__} cannot be converted: {e}") from None


def _dtype_text(a: np.ndarray) -> str:
    return "string" if a.dtype.kind in "OUS" else str(a.dtype)


def _check(info: ValueInfo, value: Any, dims: Mapping[str, int], what: str = "") -> Any:
    label = what or f"input '{info.name}'"
    want = info.type_text()
    if info.kind == ValueKind.OPTIONAL:
        if value is None:
            return None
        return _check(ValueInfo(info.name, info.dtype, info.shape, ValueKind.SEQUENCE if isinstance(value, list) else ValueKind.TENSOR), value, dims, label)
    if info.kind == ValueKind.SEQUENCE:
        if not isinstance(value, (list, tuple)):
            raise InputError(f"{label} expects {want} (a list of arrays), got {type(value).__name__}")
        element = ValueInfo(info.name, info.dtype, info.shape)
        return [_check(element, v, dims, f"{label}[{k}]") for k, v in enumerate(value)]
    if info.kind == ValueKind.MAP:
        if not isinstance(value, dict):
            raise InputError(f"{label} expects a map (a dict), got {type(value).__name__}")
        return value
    if value is None or isinstance(value, (list, tuple, dict)):
        raise InputError(f"{label} expects {want} (an array), got {type(value).__name__}")
    a = np.asarray(value)
    if a.dtype.kind == "O" and info.dtype != "string":
        raise InputError(f"{label} expects {want}, got an array of Python objects")
    got = f"{_dtype_text(a)}[{','.join(map(str, a.shape))}]"
    if info.dtype is not None and info.dtype != _dtype_text(a):
        raise InputError(f"{label} expects {want}, got {got}")
    if info.shape is not None:
        if len(info.shape) != a.ndim:
            raise InputError(f"{label} expects {want}, got {got}")
        for d, n in zip(info.shape, a.shape):
            if isinstance(d, int) and d != n:
                raise InputError(f"{label} expects {want}, got {got}")
            if isinstance(d, str) and d in dims and dims[d] != n:
                raise InputError(f"{label} expects {want} with {d}={dims[d]}, got {got}")
    if info.dtype == "string" and a.dtype.kind in "US":
        a = a.astype(object)
    return np.require(a, requirements="C")  # keeps a 0-d array 0-d (ascontiguousarray makes it 1-d)


def random_input(info: ValueInfo, dims: Mapping[str, int] | None = None, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Deterministic values for an input: its declared dtype and shape (or ``shape``), symbolic dims from ``dims`` or 1."""
    dims = dims or {}
    if info.kind != ValueKind.TENSOR:
        raise InputError(f"input '{info.name}' is a {info.kind}; graph-dap cannot make one up, give it explicitly")
    if info.dtype is None or info.dtype == "string":
        raise InputError(f"input '{info.name}' has type {info.dtype or 'unknown'}; give it explicitly")
    if shape is None:
        shape = tuple(d if isinstance(d, int) else dims.get(d, 1) if isinstance(d, str) else 1 for d in (info.shape or ()))
    dt = dtype_of(info.dtype)
    size = numel(shape) * dt.itemsize
    if size > MAX_MADE_UP_BYTES:
        raise InputError(
            f"input '{info.name}' declares {info.dtype}[{','.join(map(str, shape))}] ({size / 2**30:,.1f} GiB): "
            f"too large to make up (limit {MAX_MADE_UP_BYTES / 2**30:.1f} GiB); give the inputs, or smaller sizes for its symbolic dimensions"
        )
    rng = np.random.default_rng(_seed(info.name))
    if is_float(dt):
        return rng.standard_normal(shape).astype(dt)
    if is_integer(dt) and is_extra(dt):  # int4, uint4
        return rng.integers(0, 8, shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 10, shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    raise InputError(f"input '{info.name}' has type {info.dtype}; give it explicitly")


def _seed(name: str) -> int:
    h = 2166136261
    for ch in name.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h
