"""The models behind the listings: loaded once per file version, kept without their weights.

A :class:`ModelVersion` is what the server knows about one model file as it was at
one ``(mtime, size)``: its :class:`~graph_dap.runtime.graph.model.Graph`, its listing
(rendered by :func:`~graph_dap.runtime.listing.render_listing`, the text the listing
file must hold), the statistics of its initializers, and what the checker and strict
shape inference said. The initializers' data is read once, for the statistics, and
then dropped: the graph kept is built on a copy whose large initializers hold their
type and shape only, so that the server's memory follows the graph, not the weights.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from graph_dap import log as _log
from graph_dap.errors import GraphDapError
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.listing import Listing, render_listing
from graph_dap.runtime.loading import load_graph, read_model
from graph_dap.runtime.tensor import TensorSummary, numel, summarize

_logger = _log.get_logger(__name__)

#: Initializers up to this many elements keep their data (shape inference reads Reshape targets and such).
SMALL_INITIALIZER = 1024
_PREVIEW = 8  # elements shown in full in a hover
_TWO_GB = 2**31 - 1
_NODE_IN_MESSAGE = re.compile(r"\(op_type:([\w.]+), node name: ([^)]*)\)")


@dataclass(frozen=True, slots=True)
class InitializerStats:
    """An initializer's statistics, and its elements when there are few."""

    summary: TensorSummary
    values: tuple[float | int | bool, ...] | None  # all of them when at most a few
    positive: bool  # every element > 0
    nonnegative: bool  # every element >= 0
    nonzero: bool  # no element == 0
    integral: bool  # every element a whole number


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem that onnx reported, on a node (by id) or on the model as a whole."""

    code: str
    message: str
    node: str | None = None


@dataclass(frozen=True, slots=True)
class ModelVersion:
    """One model file at one version: graph, listing, initializer statistics, onnx's findings."""

    path: Path
    stamp: tuple[int, int]  # (mtime_ns, size) of the file when it was read
    graph: Graph
    listing: Listing
    initializers: dict[str, InitializerStats]
    findings: tuple[Finding, ...]  # checker and strict shape inference

    @property
    def opset(self) -> int:
        """The model's ai.onnx opset."""
        return self.graph.opsets.get("ai.onnx", 1)


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """A model file that could not be loaded, with the one-line reason."""

    path: Path
    stamp: tuple[int, int] | None
    message: str


_M_ARENA_MAX = -8  # mallopt's parameter number (glibc)


def one_malloc_arena() -> None:
    """Let every thread allocate from one glibc arena: a model loaded in a worker thread then leaves
    no arena of its own behind (measured: 7 MB on a 10,000-node model). A no-op elsewhere."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass


def release_memory() -> None:
    """Give the memory freed by a load back to the system (glibc keeps it otherwise: the full model's
    copies made while loading would stay in the server's RSS)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def stamp_of(path: Path) -> tuple[int, int] | None:
    """``(mtime_ns, size)`` of a file; None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def load_version(path: Path) -> ModelVersion | LoadFailure:
    """Load ``path`` into a :class:`ModelVersion`; a :class:`LoadFailure` saying why it cannot be."""
    stamp = stamp_of(path)
    if stamp is None:
        return LoadFailure(path, None, f"model not found: {path}")
    try:
        full = read_model(path)
    except GraphDapError as error:
        return LoadFailure(path, stamp, str(error))
    except Exception as error:  # noqa: BLE001 - onnx raises many kinds on malformed files: the failure is shown
        return LoadFailure(path, stamp, f"cannot load {path}: {type(error).__name__}: {error}")
    findings = [*_checker(full, path)]
    initializers = {t.name: _stats(t) for t in full.graph.initializer}
    light = _without_large_data(full)
    del full
    release_memory()
    try:
        graph = load_graph(light, path)
    except GraphDapError as error:
        return LoadFailure(path, stamp, str(error))
    findings += _strict_inference(light)
    return ModelVersion(path, stamp, graph, render_listing(graph), initializers, tuple(findings))


def _checker(model: onnx.ModelProto, path: Path) -> list[Finding]:
    try:
        onnx.checker.check_model(model if model.ByteSize() < _TWO_GB else str(path))
    except onnx.checker.ValidationError as error:
        return [_finding("onnx-checker", str(error))]
    except Exception as error:  # noqa: BLE001 - the checker itself failed: a finding says so
        return [Finding("onnx-checker", f"the onnx checker failed: {type(error).__name__}: {error}")]
    return []


def _strict_inference(model: onnx.ModelProto) -> list[Finding]:
    """What strict shape inference with type checks says (type mismatches, incompatible shapes)."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as error:  # noqa: BLE001 - InferenceError, ValidationError, RuntimeError...: findings say what
        text = str(error)
        located = [(m.group(1), m.group(2).strip()) for m in _NODE_IN_MESSAGE.finditer(text)]
        code = "type-mismatch" if "type" in text.lower() and "inconsistent" in text.lower() else "shape-inference"
        if not located:
            return [Finding(code, _first_line(text))]
        parts = re.split(_NODE_IN_MESSAGE, text)
        # re.split with 2 groups: [before, op, name, after, op, name, after, ...]
        out = []
        for k, (op, name) in enumerate(located):
            detail = parts[3 + 3 * k].strip(" :\n")
            detail = re.sub(r"^\[\w+\]\s*", "", detail).strip()
            kind = "type-mismatch" if "type" in detail.lower() and "inconsistent" in detail.lower() else code
            out.append(Finding(kind, f"{op}: {_first_line(detail) or 'shape inference failed'}", name or f"op:{op}"))
        return out
    return []


def _finding(code: str, text: str) -> Finding:
    m = re.search(r"Bad node spec for node\. Name: (.*?) OpType: ([\w.]+)", text)
    message = _first_line(text)
    if m:
        return Finding(code, message, m.group(1).strip() or f"op:{m.group(2)}")
    m = _NODE_IN_MESSAGE.search(text)
    if m:
        return Finding(code, message, m.group(2).strip() or f"op:{m.group(1)}")
    return Finding(code, message)


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _stats(t: onnx.TensorProto) -> InitializerStats:
    try:
        a = numpy_helper.to_array(t)
    except Exception as error:  # noqa: BLE001 - onnx raises many kinds on a tensor it cannot decode: no statistics for it
        _logger.info("initializer %s cannot be decoded (%s: %s): its statistics are left out", t.name, type(error).__name__, error)
        a = np.zeros(0, np.float32)
    s = summarize(a)
    numeric = a.dtype.kind in "biuf" and a.size > 0
    if numeric:
        lo, hi = (float(a.min()), float(a.max())) if a.dtype.kind != "f" else (s.min, s.max)
        finite = s.nan == 0 and s.posinf + s.neginf == 0
        positive = finite and lo is not None and lo > 0
        nonnegative = finite and lo is not None and lo >= 0
        nonzero = s.zeros == 0 and s.nan == 0
        integral = a.dtype.kind in "biu" or (finite and bool(np.all(np.equal(np.mod(a, 1), 0))))
        del hi
    else:
        positive = nonnegative = nonzero = integral = False
    values = tuple(a.reshape(-1).tolist()) if a.size <= _PREVIEW and a.dtype.kind in "biuf" else None
    return InitializerStats(s, values, positive, nonnegative, nonzero, integral)


def _without_large_data(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose initializers above :data:`SMALL_INITIALIZER` elements hold no data."""
    light = onnx.ModelProto()
    _copy_fields(model, light, skip="graph")
    _copy_fields(model.graph, light.graph, skip="initializer")
    for t in model.graph.initializer:
        if numel(t.dims) <= SMALL_INITIALIZER:
            light.graph.initializer.append(t)
            continue
        shell = light.graph.initializer.add()
        shell.name = t.name
        shell.data_type = t.data_type
        shell.dims.extend(t.dims)
    return light


def _copy_fields(src: Any, dst: Any, skip: str) -> None:
    """Copy every set field of protobuf message ``src`` into ``dst``, but ``skip``."""
    for fd, value in src.ListFields():
        if fd.name == skip:
            continue
        target = getattr(dst, fd.name)
        if fd.is_repeated:
            target.extend(value)
        elif fd.type == fd.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(dst, fd.name, value)
