"""A whole model watched for NaN and Inf in one onnxruntime call: the fast engine's watch, for a program's own runs.

:func:`watched_model` returns the model with, right after each watched tensor's producer,
a ``ReduceSum`` of that tensor (of its ``GlobalAveragePool`` for an image, see
:func:`~graph_dap.runtime.engine.watch.pooled_first`), and the sums concatenated into one extra output
(:data:`SENTINEL`). Which tensors are watched follows the segment watch
(:func:`~graph_dap.runtime.engine.watch.watch_plan`: a tensor whose consumer always
carries its NaN/Inf on to a watched tensor is left out), and If, Loop and Scan nodes are
watched inside (:mod:`~graph_dap.runtime.engine.instrument`). Everything else of the
model (its initializers, functions, opsets, metadata) is kept, so it runs in a session
built with the program's own options and providers, and its outputs are the model's.

A flagged sum is a hint, not a proof: a sum of large finite values can overflow. A run
that :meth:`WatchedModel.flagged` names is handed to the debugger, which confirms the
fault on the exact tensor (and finds nothing when there is none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.instrument import Instruments
from graph_dap.runtime.engine.watch import Keep, keeps, pooled_first, summed, watch_plan
from graph_dap.runtime.graph import Graph, Node

SENTINEL = "__graph_dap_watch"
_SHAPE1 = "__graph_dap_watch_shape1"


@dataclass(frozen=True, slots=True)
class WatchedModel:
    """The model with its watch: ``sentinel`` is None when nothing in it can hold NaN or Inf."""

    model: onnx.ModelProto
    filter: FaultFilter
    sentinel: str | None
    watched: tuple[str, ...]  # tensor names (or inner flags), in the order of the sentinel's sums
    producers: tuple[Node, ...]  # the node behind each sum
    inner: tuple[bool, ...]  # whether a sum is the flag of a control-flow node watched inside

    def flagged(self, sums: np.ndarray) -> bool:
        """Whether the sentinel's sums say some watched tensor may hold what the filter stops on."""
        for s, inner in zip(np.asarray(sums, np.float32).tolist(), self.inner):
            if np.isnan(s):
                return True
            if np.isinf(s) and (inner or self.filter.inf):  # an excluded node's sum holds no Inf (see watched_model)
                return True
        return False


def watched_model(graph: Graph, filt: FaultFilter) -> WatchedModel:
    """``graph``'s model with the NaN/Inf watch of ``filt`` (nan and/or inf) over its main graph and bodies."""
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    del model.graph.node[:]
    main = graph.main
    dtypes = {o: main.value_info(o).dtype or "" for n in main.nodes for o in n.outputs if o}
    running = [n for n in main.nodes if not n.is_constant]
    large, expected = filt.intent.large, filt.nan_excluded
    plan = watch_plan(main, running, dtypes, filt.never_prune, filt.nan, filt.inf, large=large, nan_expected=expected) if filt.active else None
    # A node whose Inf (NaN) is expected keeps only its NaNs (infinities) in its sum, or none when neither is watched:
    # what it guards is then watched itself, or a fault from upstream would go unseen.
    excluded = {o for n in running if filt.never_prune(n) for o in n.outputs if o}
    watched_set = set(plan.watched) | {t for t, g in plan.guards.items() if g in excluded} if plan is not None else set()
    instruments = Instruments(graph)
    protos: list[onnx.NodeProto] = []
    sums: list[str] = []
    watched: list[str] = []
    producers: list[Node] = []
    inner: list[bool] = []
    for n in main.nodes:
        if plan is not None and not n.is_constant and n.enterable and n.calls is None and instruments.can(n):
            rewritten = instruments.get(n, filt)
            protos.extend(rewritten.protos)
            sums.append(rewritten.flag)
            watched.append(rewritten.flag)
            producers.append(n)
            inner.append(True)
        else:
            protos.append(n.proto)
        for o in n.outputs:
            keep = keeps(filt, n)
            if not o or o not in watched_set or keep is Keep.NONE:
                continue
            i = len(sums)
            assert plan is not None
            made, source = summed(o, plan, dtypes[o], keep, f"{SENTINEL}_w{i}")
            protos.extend(made)
            s, c, r = f"{SENTINEL}_sum{i}", f"{SENTINEL}_cast{i}", f"{SENTINEL}_r{i}"
            if pooled_first(main.value_info(o)):
                protos.append(helper.make_node("GlobalAveragePool", [source], [f"{SENTINEL}_gap{i}"]))
                source = f"{SENTINEL}_gap{i}"
            protos.append(helper.make_node("ReduceSum", [source], [s], keepdims=0))
            protos.append(helper.make_node("Cast", [s], [c], to=TensorProto.FLOAT))
            protos.append(helper.make_node("Reshape", [c, _SHAPE1], [r]))
            sums.append(r)
            watched.append(o)
            producers.append(n)
            inner.append(False)
    model.graph.node.extend(protos)
    sentinel = None
    if sums:
        model.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), _SHAPE1))
        model.graph.node.append(helper.make_node("Concat", sums, [SENTINEL], axis=0))
        model.graph.output.append(helper.make_tensor_value_info(SENTINEL, TensorProto.FLOAT, [len(sums)]))
        sentinel = SENTINEL
    return WatchedModel(model, filt, sentinel, tuple(watched), tuple(producers), tuple(inner))
