"""The corpus of converters' models (tests/data/converters, made by tests/data/make_converter_models.py) and
its ground truth: onnxruntime's own value of every tensor, control flow inlined, optimizations off.

RELIABILITY.md lists the models and what each exercises.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from inline import inline_ifs
from models import ort_values
from onnx import helper

from graph_dap.runtime import Graph, Node, load_graph
from graph_dap.runtime.graph import Scope

CORPUS = Path(__file__).resolve().parent / "data" / "converters"


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault to inject: ``kind`` (nan, posinf) in ``target`` (an input, initializer or constant) at element ``at``."""

    target: str
    kind: str
    at: int = 0

    @property
    def filter(self) -> str:
        return "nan" if self.kind == "nan" else "inf"

    def inject(self, value: np.ndarray) -> np.ndarray:
        out = np.array(value, copy=True)
        out.reshape(-1)[self.at % out.size] = np.nan if self.kind == "nan" else np.inf
        return out


# name -> the faults injected in it: a shallow one, then a deep one (two levels of If deep for the VAD model)
FAULTS: dict[str, tuple[Fault, ...]] = {
    "skl_forest_int_zipmap": (Fault("X", "nan"),),  # the trees route NaN down a branch: no NaN comes out
    "skl_forest_str": (Fault("X", "posinf", 1),),
    "skl_pipeline_str_zipmap": (Fault("X", "nan", 2),),  # NaN through the scaler, the classifier, into the maps
    "skl_pipeline_int": (Fault("X", "posinf"),),
    "bert_torch": (Fault("bert.embeddings.word_embeddings.weight", "nan", 5), Fault("onnx::MatMul_342", "posinf", 3)),
    "bert_optimized": (Fault("Attention_0_qkv_weight", "nan", 7), Fault("bert.pooler.dense.weight", "posinf", 2)),
    "bert_quant_dynamic": (Fault("Attention_0_qkv_bias", "nan", 1), Fault("onnx::MatMul_342_scale", "posinf")),
    "cnn_qdq": (Fault("image", "nan", 40), Fault("block.3.bias", "posinf", 2)),
    "cnn_qoperator": (Fault("image", "nan", 40), Fault("head.weight_scale", "posinf")),
    "keras_tf2onnx": (Fault("functional_1/conv2d_1/convolution/ReadVariableOp:0", "nan", 3), Fault("functional_1/probs_1/Cast/ReadVariableOp:0", "posinf", 4)),
    "paddle_style": (Fault("conv1_weights", "nan", 9), Fault("conv2_weights", "posinf", 11)),
    "paddle2onnx": (Fault("x", "nan", 17), Fault("conv2d_2.w_0", "posinf")),
    # the state c is read only by the LSTM two levels of If deep: the first NaN is made there
    "vad_nested_if_lstm": (Fault("input", "posinf", 5), Fault("c", "nan", 1)),
}
NAMES = sorted(FAULTS)


@dataclass(frozen=True, slots=True)
class Subject:
    """One corpus model loaded once: its proto, graph and inputs."""

    name: str
    path: Path
    proto: onnx.ModelProto
    graph: Graph
    feeds: dict[str, Any]


def load(name: str) -> Subject:
    path = CORPUS / f"{name}.onnx"
    with np.load(CORPUS / f"{name}.inputs.npz") as z:
        feeds = {k: z[k] for k in z.files}
    proto = onnx.load(str(path))
    return Subject(name, path, proto, load_graph(proto), feeds)


def truth(subject: Subject, fault: Fault | None = None, value: np.ndarray | None = None) -> dict[str, Any]:
    """onnxruntime's value of every tensor of ``subject`` (with ``fault`` injected: ``value`` in its target),
    every If inlined, optimizations off. The target is fed as an input (its initializer or producer taken out)."""
    m = onnx.ModelProto()
    m.CopyFrom(subject.proto)
    feeds = dict(subject.feeds)
    if fault is not None and value is not None:
        feeds[fault.target] = value
        if fault.target not in subject.feeds:
            nodes = [n for n in m.graph.node if fault.target not in n.output]
            del m.graph.node[:]
            m.graph.node.extend(nodes)
            inits = [t for t in m.graph.initializer if t.name != fault.target]
            del m.graph.initializer[:]
            m.graph.initializer.extend(inits)
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            m.graph.input.append(helper.make_tensor_value_info(fault.target, elem, value.shape))
    del m.graph.output[:]  # ort_values makes every node output (and so every graph output) an output
    inlined = inline_ifs(m, feeds)
    values = ort_values(inlined, feeds)
    values.update(feeds)
    return values


def walk(graph: Graph, values: dict[str, Any], scope: Scope | None = None) -> Iterator[Node]:
    """The nodes a run goes through, in the debugger's run order: inside each If, its taken branch's
    (as ``values``, the truth, decides), before the If itself."""
    for node in (scope or graph.main).nodes:
        if node.op_type == "If" and node.enterable:
            taken = bool(np.asarray(values[node.inputs[0]]).reshape(-1)[0])
            yield from walk(graph, values, graph.subscope(node, "then_branch" if taken else "else_branch"))
        yield node


def first_fault(graph: Graph, values: dict[str, Any], fault: Fault) -> str | None:
    """The first value (in run order) holding the fault's kind, as onnxruntime computes it; None: none does."""
    for node in walk(graph, values):
        for name in node.outputs:
            v = values.get(name)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                if (np.isnan(v) if fault.kind == "nan" else np.isinf(v)).any():
                    return name
    return None
