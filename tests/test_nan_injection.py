"""NaN and Inf injected into weights and inputs at several depths stop at exactly the first producing node."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from light import LIGHT_MODELS, light_inputs
from models import chain_model, ort_values
from onnx import helper, numpy_helper

from graph_dap.runtime import DebugSession, StopReason, load_graph

KINDS = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}


def _first_faulty(model: onnx.ModelProto, feeds, kind: str) -> int:
    """The first node, in run order, an exhaustive per-tensor check finds holding NaN (or Inf)."""
    g = load_graph(model)
    values = ort_values(model, feeds)
    for node in g.nodes:
        for o in node.outputs:
            v = values.get(o)
            if v is None or np.asarray(v).dtype.kind != "f":
                continue
            bad = np.isnan(v) if kind == "nan" else np.isinf(v)
            if bad.any():
                return node.index  # the file position: ids of replaced unnamed nodes differ
    raise AssertionError("the injected fault never showed: bad test")


def _with_value(model: onnx.ModelProto, name: str, array: np.ndarray) -> onnx.ModelProto:
    """A copy of ``model`` where ``name`` (an initializer or a node output) holds ``array``."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.name == name:
            t.CopyFrom(numpy_helper.from_array(array, name))
            return m
    for i, n in enumerate(m.graph.node):
        if name in n.output:
            const = helper.make_node("Constant", [], [name], name=n.name, value=numpy_helper.from_array(array))
            m.graph.node.remove(n)
            m.graph.node.insert(i, const)
            return m
    raise AssertionError(name)


def _targets(path_or_model):
    """An input, and weights whose first consumers sit at about 10%, 50% and 90% depth."""
    g = load_graph(path_or_model)
    weights = []
    for name in list(g.initializer_names) + [o for n in g.nodes if n.is_static for o in n.outputs]:
        users = [c for c in g.consumers(name) if not c.is_static]
        info = g.value_info(name)
        if users and info.dtype == "float32" and info.shape and np.prod([d for d in info.shape if isinstance(d, int)]) > 1:
            weights.append((min(u.order for u in users), name))
    weights.sort()
    picks = [weights[int(f * (len(weights) - 1))][1] for f in (0.1, 0.5, 0.9)]
    return [g.input_names[0]] + picks


def _cases():
    """The chain model and every light model (the whole test corpus), each fault kind, both engines."""
    cases = [("chain", chain_model(), kind, fast) for kind in KINDS for fast in (True, False)]
    for name, path in LIGHT_MODELS.items():
        cases += [(name, path, kind, True) for kind in KINDS]
        if name in ("squeezenet", "resnet50"):
            cases += [(name, path, kind, False) for kind in KINDS]
    return cases


@pytest.mark.parametrize("label,model,kind,fast", _cases(), ids=[f"{c[0]}-{c[2]}-{'fast' if c[3] else 'nodes'}" for c in _cases()])
def test_injected_fault_found_at_first_producer(label, model, kind, fast):
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
    feeds = light_inputs(proto) if label != "chain" else {"x": np.random.default_rng(3).standard_normal((1, 2, 8, 8)).astype(np.float32)}
    filter_ = "nan" if kind == "nan" else "inf"
    for depth, target in enumerate(_targets(proto)):
        s = DebugSession(proto, feeds, break_on=[filter_], fast=fast)
        s.start()
        original = np.asarray(s.value(target))
        injected = original.copy()
        flat = injected.reshape(-1)
        flat[(depth * 7919) % flat.size] = KINDS[kind]
        if target in feeds:
            truth_feeds = dict(feeds, **{target: injected})
            s = DebugSession(proto, truth_feeds, break_on=[filter_], fast=fast)
            s.start()
            truth_model = proto
        else:
            s.set_value(target, injected)
            truth_feeds, truth_model = feeds, _with_value(proto, target, injected)
        stop = s.continue_()
        expected = _first_faulty(truth_model, truth_feeds, filter_)
        assert stop.reason is (StopReason.NAN if filter_ == "nan" else StopReason.INF), (target, stop.message)
        assert stop.node.index == expected, f"{label}: fault in {target} found at {stop.node.id}, expected node #{expected}"
        assert stop.details["count"] >= 1


def test_targets_cover_several_depths():
    path = LIGHT_MODELS["resnet50"]
    targets = _targets(path)
    assert len(set(targets)) == 4 and os.path.exists(path)
