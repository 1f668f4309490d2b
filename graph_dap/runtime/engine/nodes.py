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

from graph_dap.errors import NodeExecutionError
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine import ortio
from graph_dap.runtime.engine.assembly import assemble_model, signature
from graph_dap.runtime.engine.budget import WeightBudget, weight_bytes
from graph_dap.runtime.engine.options import ORT_ERRORS, check_providers, ort_message, session_options
from graph_dap.runtime.graph import Graph, Node


class NodeRunner:
    """Runs single nodes of one graph; sessions cached by (node, input signature)."""

    def __init__(
        self, graph: Graph, providers: Sequence[str] | None = None, opt_level: str = OptLevel.NONE, budget: WeightBudget | None = None
    ) -> None:
        """``opt_level`` stays "none" for a debugger's steps: a node's values are then exactly the original graph's.

        ``budget``: shared with the model's segment runners (see :mod:`.budget`).
        """
        self.graph = graph
        self.budget = budget
        self.providers = check_providers(providers)
        self.opt_level = opt_level
        self._sessions: dict[tuple[Any, ...], ort.InferenceSession] = {}
        self.sessions_built = 0
        self._folder = graph.weights.data_folder

    def one_node_model(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any]) -> onnx.ModelProto:
        """A model holding only ``node``: inputs typed from ``feeds``, ``constants`` embedded.

        Weights are embedded as the whole model holds them (external data as references to its file),
        so that onnxruntime takes the same kernels (it pre-packs constant weights) and the values match.
        """
        reads = list(node.all_inputs)
        outputs = [o for o in node.outputs if o]
        scope = self.graph.scope_of(node)
        holds = node.has_subgraphs or node.calls is not None
        declared = {r: self.graph.info_at(node.path, r) for r in reads}
        return assemble_model(
            self.graph.model,
            [node.proto],
            f"node_{node.order}",
            feeds,
            constants,
            reads,
            outputs,
            opsets=scope.opsets,
            declared=declared,
            declared_for=reads if holds else (),
            reference=self.graph.weights.reference,
        )

    def _session(self, node: Node, feeds: Mapping[str, Any], constants: Mapping[str, Any], version: int) -> ort.InferenceSession:
        key = (node.id, version) + tuple(signature(feeds[n]) if n in feeds else n for n in node.all_inputs)
        sess = self._sessions.get(key)
        if sess is not None and self.budget is not None:
            self.budget.used(self._sessions, key)
        if sess is None:
            if self.budget is not None:
                self.budget.reserve(self._sessions, key, weight_bytes(constants.values()))
            model = self.one_node_model(node, feeds, constants)
            try:
                sess = ort.InferenceSession(
                    model.SerializeToString(), session_options(self.opt_level, self._folder), providers=self.providers
                )
            except ORT_ERRORS as e:
                if self.budget is not None:
                    self.budget.release(self._sessions, key)
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
            results = ortio.run(sess, names, {n: feeds[n] for n in node.all_inputs if n in feeds}, run_options)
        except ORT_ERRORS as e:
            raise NodeExecutionError(node.id, node.op_type, ort_message(e)) from None
        except ortio.FeedError as e:
            raise NodeExecutionError(node.id, node.op_type, str(e)) from None
        return dict(zip(names, results))
