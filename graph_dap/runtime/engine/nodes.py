"""Running nodes through onnxruntime, one node at a time, sessions cached.

Each node runs as a one-node model built with the concrete types of the values
it is fed, so what the debugger shows is exactly what onnxruntime computes. The
sessions share one global thread pool: per-session pools starve each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx
import onnxruntime as ort
from onnx import helper

from graph_dap.errors import NodeExecutionError
from graph_dap.runtime.engine.models import signature, tensor_proto, type_proto_of
from graph_dap.runtime.engine.options import check_providers, ort_message, session_options
from graph_dap.runtime.graph import Graph, Node


class NodeRunner:
    """Runs single nodes of one graph; sessions cached by (node, input signature)."""

    def __init__(self, graph: Graph, providers: Sequence[str] | None = None, opt_level: str = "none") -> None:
        self.graph = graph
        self.providers = check_providers(providers)
        self.opt_level = opt_level
        self._sessions: dict[tuple[Any, ...], ort.InferenceSession] = {}
        self.sessions_built = 0

    def one_node_model(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any]) -> onnx.ModelProto:
        """A model holding only ``node``: inputs typed from ``feeds``, ``constants`` embedded.

        Weights are embedded as the whole model embeds them, so that onnxruntime
        takes the same kernels (it pre-packs constant weights) and the values match.
        """
        m = self.graph.model
        inputs = [helper.make_value_info(name, type_proto_of(feeds[name])) for name in node.all_inputs if name in feeds]
        inits = [tensor_proto(name, constants[name]) for name in node.all_inputs if name not in feeds]
        outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.outputs if o]
        g = helper.make_graph([node.proto], f"node_{node.order}", inputs, outputs, inits)
        model = helper.make_model(g, opset_imports=list(m.opset_import), ir_version=max(m.ir_version, 4))
        model.functions.extend(m.functions)
        return model

    def _session(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any], version: int) -> ort.InferenceSession:
        key = (node.order, version) + tuple(signature(feeds[n]) if n in feeds else n for n in node.all_inputs)
        sess = self._sessions.get(key)
        if sess is None:
            model = self.one_node_model(node, feeds, constants)
            try:
                sess = ort.InferenceSession(
                    model.SerializeToString(), session_options(self.opt_level), providers=self.providers
                )
            except Exception as e:
                raise NodeExecutionError(node.id, node.op_type, ort_message(e)) from None
            self._sessions[key] = sess
            self.sessions_built += 1
        return sess

    def run(
        self,
        node: Node,
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any] | None = None,
        version: int = 0,
        run_options: ort.RunOptions | None = None,
    ) -> dict[str, Any]:
        """Outputs of ``node`` by output name; each input is in ``feeds`` or ``constants``."""
        constants = constants or {}
        sess = self._session(node, feeds, constants, version)
        names = [o for o in node.outputs if o]
        try:
            results = sess.run(names, {n: feeds[n] for n in node.all_inputs if n in feeds}, run_options)
        except Exception as e:
            raise NodeExecutionError(node.id, node.op_type, ort_message(e)) from None
        return dict(zip(names, results))
