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
from graph_dap.runtime.tools.quant.stream import Sessions

__all__ = ["LocalModel", "LocalRun"]

LocalRun = tuple[int, Sequence[Node], Mapping[str, np.ndarray], Sequence[str]]  # group index, nodes, feeds, wanted


def _name(index: int, value: str) -> str:
    return f"g{index}__{value}"


class LocalModel:
    """Each ``(index, nodes, feeds, wanted)`` of ``graph``'s nodes in one model and one session, built here (perhaps
    beside another; or kept in ``sessions`` from a run of the same groups on feeds of the same types), to :meth:`run`
    once."""

    def __init__(self, graph: Graph, runs: Sequence[LocalRun], providers: Sequence[str] | None = None, sessions: Sessions | None = None) -> None:
        self.runs = runs
        self.feeds = {_name(index, raw): np.asarray(value) for index, _, group_feeds, _ in runs for raw, value in group_feeds.items()}
        self.outputs = [_name(index, w) for index, _, _, wanted in runs for w in wanted]
        if sessions is None:
            self.session = self._build(graph, providers)
        else:
            shapes = tuple((name, a.dtype.str, a.shape) for name, a in self.feeds.items())
            key = ("local", id(graph), tuple(n.id for _, nodes, _, _ in runs for n in nodes), shapes, tuple(self.outputs), tuple(providers or ()))
            self.session = sessions.get(key, lambda: self._build(graph, providers))

    def run(self) -> dict[tuple[int, str], Any]:
        """``{(index, value): array}`` for each run's wanted values."""
        try:
            values = self.session.run(self.outputs, self.feeds)
        except ORT_ERRORS as e:
            raise CompareError(f"onnxruntime failed on the groups run on the float model's values: {ort_message(e)}") from None
        out: dict[tuple[int, str], Any] = {}
        k = 0
        for index, _, _, wanted in self.runs:
            for w in wanted:
                out[(index, w)] = values[k]
                k += 1
        return out

    def _build(self, graph: Graph, providers: Sequence[str] | None) -> Any:
        """The session of the runs' nodes side by side (renamed), fed by :attr:`feeds`, computing :attr:`outputs`."""
        inits = set(graph.initializer_names)
        nodes: list[onnx.NodeProto] = []
        inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in self.feeds.items()]
        used_inits: dict[str, None] = {}  # in the order first read
        for index, group_nodes, group_feeds, _ in self.runs:
            made = {o for n in group_nodes for o in n.outputs if o}
            for n in group_nodes:
                p = onnx.NodeProto()
                p.CopyFrom(n.proto)
                renamed = []
                for i in p.input:
                    if not i or i in made or i in group_feeds:
                        renamed.append(_name(index, i) if i else i)
                    elif i in inits:
                        used_inits[i] = None
                        renamed.append(i)
                    else:
                        raise CompareError(f"group {index} reads '{i}', which it neither computes nor is given")
                p.input[:] = renamed
                p.output[:] = [_name(index, o) if o else o for o in p.output]
                p.name = _name(index, n.id)
                nodes.append(p)
        model = helper.make_model(
            helper.make_graph(nodes, "graph_dap_local", inputs, [helper.make_empty_tensor_value_info(o) for o in self.outputs]),
            opset_imports=list(graph.model.opset_import),
        )
        model.ir_version = graph.model.ir_version
        model.functions.extend(graph.model.functions)
        try:
            data = graph.wire.to_bytes(model, used_inits)  # the weights it reads, serialized once per model
            folder = graph.weights.folder if graph.weights.has_external else None
            sess = ort.InferenceSession(data, session_options("none", folder), providers=check_providers(providers))
        except ORT_ERRORS as e:
            raise CompareError(f"onnxruntime failed on the groups run on the float model's values: {ort_message(e)}") from None
        return sess
