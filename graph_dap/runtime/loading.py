"""Loading a model: reading the file, checking its external data (never from outside its folder), shape inference.

External data stays in its files: :mod:`.weights` maps it when something reads it.

:func:`load_graph` is the one way in; what it builds is the IR of :mod:`.graph`.
A failed shape inference is logged and noted on the graph (the listing shows it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper, helper

from graph_dap import log as _log
from graph_dap.errors import ModelError
from graph_dap.files import path_problem
from graph_dap.runtime.checks import check_tensors
from graph_dap.runtime.graph import Graph, ValueInfo, value_info
from graph_dap.runtime.tensor import numel
from graph_dap.runtime.weights import locate, uses_external_data

_logger = _log.get_logger(__name__)


# -- loading -----------------------------------------------------------------------


def load_graph(model: str | os.PathLike[str] | onnx.ModelProto, path: str | os.PathLike[str] | None = None) -> Graph:
    """Load a model from a path (external data kept inside its folder) or a ModelProto.

    ``path``: for a ModelProto, the file it was read from (the graph and its listing name it).
    """
    if isinstance(model, onnx.ModelProto):
        return _build(model, Path(path).resolve() if path is not None else None)
    file = Path(model)
    return _build(read_model(file, external_data=False), file.resolve())


def read_model(path: str | os.PathLike[str], external_data: bool = True) -> onnx.ModelProto:
    """Read a model file, without building its graph; with ``external_data``, its external data too
    (never from outside its folder). Without it the tensors keep their references, checked when the
    graph is built (:mod:`.weights`).

    Tensors whose shape or data is impossible, and names declared twice, are refused here
    (:func:`~graph_dap.runtime.checks.check_tensors`); a ModelProto built in memory is taken as it is.
    """
    path = Path(path)
    problem = path_problem(path)
    if problem is not None:
        raise ModelError(f"model not found: {path}" if problem == "not found" else f"cannot open the model {str(path)[:300]}: {problem}")
    if not path.is_file():
        raise ModelError(f"model path is not a file: {path}")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (OSError, DecodeError, RuntimeError, ValueError) as e:  # onnx.load: protobuf's and onnx's own errors
        raise ModelError(f"cannot read {path} as an ONNX model: {e}") from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{path} holds no ONNX graph (is it an ONNX model?)")
    if external_data:
        _load_external_data(proto, path.parent)
    check_tensors(proto)  # before shape inference or anything else looks at a tensor
    return proto


def _build(model: onnx.ModelProto, path: Path | None) -> Graph:
    inferred, notes = _inferred_infos(model)
    return Graph(model, path, inferred, notes)


def _load_external_data(model: onnx.ModelProto, base: Path) -> None:
    """Read external tensor data into the tensors, refusing any location outside ``base``."""
    root = base.resolve()
    for tensor in external_data_helper._get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        target = locate(tensor, root).file
        try:
            external_data_helper.load_external_data_for_tensor(tensor, str(root))
        except (OSError, ValueError) as e:
            raise ModelError(f"tensor '{tensor.name}': cannot read external data {target}: {e}") from None
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT


_SMALL_INITIALIZER = 1024  # elements; kept for shape inference (Reshape targets...)


InferredInfos = dict[tuple[tuple[int, str], ...], dict[str, ValueInfo]]


def _inferred_infos(model: onnx.ModelProto) -> tuple[InferredInfos, tuple[str, ...]]:
    """Shapes from onnx shape inference (on a copy without large initializer data), per graph; notes when it failed."""
    light = onnx.ModelProto()
    light.CopyFrom(model) if model.ByteSize() < 64 * 1024 * 1024 else _copy_without_big_data(model, light)
    g = light.graph
    keep, moved = [], []
    for t in g.initializer:
        if numel(t.dims) <= _SMALL_INITIALIZER:
            keep.append(t)
        else:
            moved.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    if moved:
        del g.initializer[:]
        g.initializer.extend(keep)
        present = {v.name for v in g.input}
        g.input.extend(v for v in moved if v.name not in present)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        _logger.info("shape inference failed: %s", e)
        return {}, (f"shape inference failed ({first}); value types are those the model declares",)
    out: InferredInfos = {}

    def collect(graph: onnx.GraphProto, where: tuple[tuple[int, str], ...]) -> None:
        out[where] = {v.name: value_info(v) for v in list(graph.value_info) + list(graph.output)}
        for index, node in enumerate(graph.node):
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    collect(a.g, (*where, (index, a.name)))

    collect(inferred.graph, ())
    return out, ()


def infos_at_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> dict[str, ValueInfo]:
    """The main graph's value types when its inputs have ``shapes`` (a model with dynamic dimensions, sized by the
    inputs it is run with): onnx shape inference on a copy without large initializer data; {} when it fails."""
    light = onnx.ModelProto()
    _copy_without_big_data(model, light)
    for v in light.graph.input:
        if v.name in shapes and v.type.HasField("tensor_type"):
            dims = v.type.tensor_type.shape.dim
            del dims[:]
            for n in shapes[v.name]:
                dims.add().dim_value = int(n)
    return _inferred_infos(light)[0].get((), {})


def _copy_without_big_data(model: onnx.ModelProto, into: onnx.ModelProto) -> None:
    into.ir_version = model.ir_version
    into.opset_import.extend(model.opset_import)
    into.functions.extend(model.functions)
    g = into.graph
    src = model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    present = {v.name for v in src.input}
    for t in src.initializer:
        if numel(t.dims) <= _SMALL_INITIALIZER:
            g.initializer.append(t)
        elif t.name not in present:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))


