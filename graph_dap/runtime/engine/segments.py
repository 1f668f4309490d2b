"""Running many nodes in one onnxruntime call, optionally watched for NaN and Inf.

A *segment* is a set of nodes (a contiguous run, or the ancestors of some values)
built into one model whose inputs are the values it reads from outside and whose
outputs are exactly what the caller needs afterwards. Constants and initializers
are embedded so onnxruntime can pre-pack weights as it does for the whole model.

Watching adds, right after each watched tensor's producer, ``ReduceSum`` to a
scalar; all scalars are concatenated into one small extra output. A sum is
non-finite iff the tensor holds NaN or Inf, except that a sum of large finite
values can overflow: hits are always confirmed on the exact tensor.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime.engine.models import assemble_model, signature
from graph_dap.runtime.engine.options import ORT_ERRORS, ort_message, session_options
from graph_dap.runtime.engine.watch import WatchPlan
from graph_dap.runtime.graph import Graph, Node

SENTINEL = "__graph_dap_sentinel"


@dataclass(slots=True)
class SegmentResult:
    values: dict[str, Any]
    watched: list[str]  # the watched tensors, in the order of ``sums``
    sums: np.ndarray | None  # one float32 sum per watched tensor


class SegmentRunner:
    """Builds and caches one session per (node set, outputs, watch plan, input types)."""

    def __init__(self, graph: Graph, providers: list[str], opt_level: str) -> None:
        self.graph = graph
        self.providers = providers
        self.opt_level = opt_level
        self._sessions: dict[tuple[Any, ...], tuple[ort.InferenceSession, list[str], list[str]]] = {}
        self.sessions_built = 0

    def clear(self) -> None:
        self._sessions.clear()

    def run(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Iterable[str],
        watch: WatchPlan | None = None,
        run_options: ort.RunOptions | None = None,
        version: int = 0,
    ) -> SegmentResult:
        """Run ``nodes`` (in run order); ``constants`` are embedded, ``feeds`` fed."""
        outs = list(dict.fromkeys(outputs))
        key = (
            tuple(n.id for n in nodes),
            tuple(outs),
            tuple(watch.watched) if watch else (),
            tuple((k, signature(v)) for k, v in sorted(feeds.items())),
            version,
        )
        entry = self._sessions.get(key)
        if entry is None:
            model, watched = self.build_model(nodes, feeds, constants, outs, watch)
            try:
                sess = ort.InferenceSession(model.SerializeToString(), self._options(), providers=self.providers)
            except ORT_ERRORS as e:
                raise SegmentError(ort_message(e)) from None
            fetch = outs + ([SENTINEL] if watched else [])
            entry = (sess, fetch, watched)
            self._sessions[key] = entry
            self.sessions_built += 1
        sess, fetch, watched = entry
        try:
            results = sess.run(fetch, dict(feeds), run_options)
        except ORT_ERRORS as e:
            raise SegmentError(ort_message(e)) from None
        values = dict(zip(outs, results[: len(outs)]))
        return SegmentResult(values, watched, results[-1] if watched else None)

    def optimized_model(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Sequence[str],
        watch: WatchPlan | None,
    ) -> onnx.ModelProto:
        """The graph onnxruntime's optimizer makes of a segment (to say which fused node computed what)."""
        model, _ = self.build_model(nodes, feeds, constants, list(dict.fromkeys(outputs)), watch)
        with tempfile.TemporaryDirectory(prefix="graph-dap-optimized-") as tmp:
            so = self._options()
            so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
            try:
                ort.InferenceSession(model.SerializeToString(), so, providers=self.providers)
            except ORT_ERRORS as e:
                raise SegmentError(ort_message(e)) from None
            return onnx.load(so.optimized_model_filepath, load_external_data=False)

    def _options(self) -> ort.SessionOptions:
        so = session_options(self.opt_level)
        so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
        return so

    def build_model(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Sequence[str],
        watch: WatchPlan | None,
    ) -> tuple[onnx.ModelProto, list[str]]:
        """The segment's model and the watched tensors in the order of its sentinel."""
        produced = {o for n in nodes for o in n.outputs if o}
        reads = list(dict.fromkeys(i for n in nodes for i in n.all_inputs if i not in produced))
        inits: list[onnx.TensorProto] = []
        watch_set = set(watch.watched) if watch is not None else set()
        rewrites = watch.rewrites if watch is not None else {}
        node_protos: list[onnx.NodeProto] = []
        sums: list[str] = []
        watched: list[str] = []
        if watch:
            inits.append(numpy_helper.from_array(np.array([1], np.int64), "__graph_dap_shape1"))
        for n in nodes:
            inner = rewrites.get(n.id)
            if inner is not None:  # a control-flow node watched inside: its flag is one more sum
                node_protos.extend(inner.protos)
                sums.append(inner.flag)
                watched.append(inner.flag)
            else:
                node_protos.append(n.proto)
            for o in n.outputs:
                if o in watch_set:
                    i = len(sums)
                    s, c, r = f"__gd_sum{i}", f"__gd_cast{i}", f"__gd_r{i}"
                    node_protos.append(helper.make_node("ReduceSum", [o], [s], keepdims=0))
                    node_protos.append(helper.make_node("Cast", [s], [c], to=TensorProto.FLOAT))
                    node_protos.append(helper.make_node("Reshape", [c, "__graph_dap_shape1"], [r]))
                    sums.append(r)
                    watched.append(o)
        if sums:
            node_protos.append(helper.make_node("Concat", sums, [SENTINEL], axis=0))
        outs = list(outputs) + ([SENTINEL] if sums else [])
        scope = self.graph.scope_of(nodes[0])
        holders = [n for n in nodes if n.has_subgraphs or n.calls is not None]
        declared_for = {r for n in holders for r in n.all_inputs}
        declared = {r: self.graph.info_at(scope.path, r) for r in reads}
        model = assemble_model(
            self.graph.model,
            node_protos,
            "segment",
            feeds,
            constants,
            reads,
            outs,
            inits,
            opsets=scope.opsets,
            declared=declared,
            declared_for=declared_for,
        )
        return model, watched


class SegmentError(Exception):
    """onnxruntime could not build or run a segment; the caller falls back to single nodes."""




