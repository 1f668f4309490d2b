"""Many groups' local runs as one model: each group's nodes side by side, renamed, fed from its own inputs.

A group's local error runs its nodes on values the full run never computes (the float model's,
quantized as the model quantizes them). Run node by node, that is a one-node session per node
and an onnxruntime call per node; here a batch of groups becomes one model (each group's values
prefixed ``g{index}__``, its reads graph inputs) and one session and one run compute them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from graph_dap.errors import CompareError
from graph_dap.runtime.engine.options import ORT_ERRORS, check_providers, ort_message, session_options
from graph_dap.runtime.graph import Graph, Node

__all__ = ["LocalRun", "run_local"]

LocalRun = tuple[int, Sequence[Node], Mapping[str, np.ndarray], Sequence[str]]  # group index, nodes, feeds, wanted


def _name(index: int, value: str) -> str:
    return f"g{index}__{value}"


def run_local(graph: Graph, runs: Sequence[LocalRun], providers: Sequence[str] | None = None) -> dict[tuple[int, str], Any]:
    """Run each ``(index, nodes, feeds, wanted)`` of ``graph``'s nodes in one model; ``{(index, value): array}``."""
    inits = {t.name: t for t in graph.model.graph.initializer}
    nodes: list[onnx.NodeProto] = []
    inputs: list[onnx.ValueInfoProto] = []
    outputs: list[str] = []
    feeds: dict[str, Any] = {}
    used_inits: dict[str, onnx.TensorProto] = {}
    for index, group_nodes, group_feeds, wanted in runs:
        made = {o for n in group_nodes for o in n.outputs if o}
        for raw, value in group_feeds.items():
            name = _name(index, raw)
            a = np.asarray(value)
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
            feeds[name] = a
        for n in group_nodes:
            p = onnx.NodeProto()
            p.CopyFrom(n.proto)
            renamed = []
            for i in p.input:
                if not i or i in made or i in group_feeds:
                    renamed.append(_name(index, i) if i else i)
                elif i in inits:
                    used_inits[i] = inits[i]
                    renamed.append(i)
                else:
                    raise CompareError(f"group {index} reads '{i}', which it neither computes nor is given")
            p.input[:] = renamed
            p.output[:] = [_name(index, o) if o else o for o in p.output]
            p.name = _name(index, n.id)
            nodes.append(p)
        outputs += [_name(index, w) for w in wanted]
    model = helper.make_model(
        helper.make_graph(nodes, "graph_dap_local", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                          list(used_inits.values())),  # fmt: skip
        opset_imports=list(graph.model.opset_import),
    )
    model.ir_version = graph.model.ir_version
    model.functions.extend(graph.model.functions)
    try:
        sess = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=check_providers(providers))
        values = sess.run(outputs, feeds)
    except ORT_ERRORS as e:
        raise CompareError(f"onnxruntime failed on the groups run on the float model's values: {ort_message(e)}") from None
    out: dict[tuple[int, str], Any] = {}
    k = 0
    for index, _, _, wanted in runs:
        for w in wanted:
            out[(index, w)] = values[k]
            k += 1
    return out
