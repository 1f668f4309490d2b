"""NaN and Inf injected into weights and inputs at several depths stop at exactly the first producing node.

The stop is checked against an exhaustive check: every node output up to the stop, as onnxruntime
computes it with the fault in place. onnxruntime gets the faulty tensor as a graph input (its initializer
or producing node taken out of the model), never written into the model: vgg19's fc6 weight alone is 400 MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import pytest
from light import LIGHT_MODELS, light_inputs
from models import chain_feeds, chain_model, ort_values
from onnx import helper

from graph_dap.runtime import DebugSession, Graph, StopReason, load_graph

KINDS = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}


@dataclass(frozen=True, slots=True)
class Subject:
    """A model under test, loaded once for all its cases: the proto, its graph, inputs and injection targets."""

    proto: onnx.ModelProto
    graph: Graph
    feeds: dict[str, np.ndarray]
    targets: list[str]


def _targets(g: Graph) -> list[str]:
    """An input, and weights whose first consumers sit at about 10%, 50% and 90% depth."""
    weights = []
    for name in list(g.initializer_names) + [o for n in g.nodes if n.is_constant for o in n.outputs]:
        users = [c for c in g.consumers(name) if not c.is_constant]
        info = g.value_info(name)
        if users and info.dtype == "float32" and info.shape and np.prod([d for d in info.shape if isinstance(d, int)]) > 1:
            weights.append((min(u.order for u in users), name))
    weights.sort()
    picks = [weights[int(f * (len(weights) - 1))][1] for f in (0.1, 0.5, 0.9)]
    return [g.input_names[0]] + picks


def _load(label: str) -> Subject:
    if label == "chain":
        proto, feeds = chain_model(), chain_feeds(3)
    else:
        proto = onnx.load(LIGHT_MODELS[label])
        feeds = light_inputs(proto)
    graph = load_graph(proto)
    return Subject(proto, graph, feeds, _targets(graph))


@pytest.fixture(scope="module")
def subjects() -> dict[str, Subject]:
    """The models loaded so far in this module, by label (the cases of one model share one load)."""
    return {}


def _truth_model(subject: Subject, target: str, injected: np.ndarray, last: int) -> onnx.ModelProto:
    """The nodes of ``subject`` up to file position ``last`` in run order, with ``target`` a graph input
    (its initializer or producing node taken out) and every node output a graph output."""
    order = [n.index for n in subject.graph.nodes]
    keep = set(order[: order.index(last) + 1])
    m = onnx.ModelProto()
    m.CopyFrom(subject.proto)
    nodes = [n for i, n in enumerate(subject.proto.graph.node) if i in keep and target not in n.output]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    del m.graph.output[:]  # ort_values makes every node output a graph output
    inits = [t for t in m.graph.initializer if t.name != target]
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    if target not in {i.name for i in m.graph.input}:  # older models list their initializers as inputs too
        m.graph.input.append(helper.make_tensor_value_info(target, onnx.TensorProto.FLOAT, injected.shape))
    return m


def _first_faulty(subject: Subject, target: str, injected: np.ndarray, kind: str, last: int) -> int:
    """The first node, in run order up to ``last`` (a file position), that an exhaustive per-tensor check
    finds holding NaN (or Inf) when ``target`` holds ``injected``; its producer counts as holding it.

    Nodes after ``last`` cannot change which node is the first: onnxruntime computes only those before.
    """
    values: dict[str, Any] = ort_values(_truth_model(subject, target, injected, last), dict(subject.feeds, **{target: injected}))
    values[target] = injected
    for node in subject.graph.nodes:
        for o in node.outputs:
            v = values.get(o)
            if v is None or np.asarray(v).dtype.kind != "f":
                continue
            bad = np.isnan(v) if kind == "nan" else np.isinf(v)
            if bad.any():
                return node.index  # the file position
        if node.index == last:
            break
    raise AssertionError(f"node #{last} holds no {kind}, nor any node before it")


def _cases() -> list[Any]:
    """The chain model and every light model (the whole test corpus), each fault kind, both engines.

    The cases of one model run on one xdist worker (``--dist loadgroup``), so that it is loaded once there.
    CI runs every kind on the chain model and the NaN case of every light model (on both engines for two of
    them); the light models' +Inf and -Inf cases are in the long run (``--run-long``): the suite's time.
    """
    labels = [("chain", (True, False))] + [
        (name, (True, False) if name in ("squeezenet", "resnet50") else (True,)) for name in LIGHT_MODELS
    ]
    return [
        pytest.param(
            label,
            kind,
            fast,
            id=f"{label}-{kind}-{'fast' if fast else 'nodes'}",
            marks=[pytest.mark.xdist_group(f"nan-{label}")] + ([pytest.mark.long] if label != "chain" and kind != "nan" else []),
        )
        for label, engines in labels
        for kind in KINDS
        for fast in engines
    ]


@pytest.mark.parametrize("label,kind,fast", _cases())
def test_injected_fault_found_at_first_producer(subjects: dict[str, Subject], label: str, kind: str, fast: bool) -> None:
    if label not in subjects:
        subjects[label] = _load(label)
    subject = subjects[label]
    filter_ = "nan" if kind == "nan" else "inf"
    for depth, target in enumerate(subject.targets):
        s = DebugSession(subject.graph, subject.feeds, break_on=[filter_], fast=fast)
        s.start()
        original = np.asarray(s.value(target))
        injected = original.copy()
        flat = injected.reshape(-1)
        flat[(depth * 7919) % flat.size] = KINDS[kind]
        if target in subject.feeds:
            s = DebugSession(subject.graph, dict(subject.feeds, **{target: injected}), break_on=[filter_], fast=fast)
            s.start()
        else:
            s.set_value(target, injected)
        stop = s.continue_()
        del s  # its values go before onnxruntime computes them again
        assert stop.reason is (StopReason.NAN if filter_ == "nan" else StopReason.INF), (target, stop.message)
        assert stop.node is not None
        expected = _first_faulty(subject, target, injected, filter_, stop.node.index)
        assert stop.node.index == expected, f"{label}: fault in {target} found at {stop.node.id}, expected node #{expected}"
        assert stop.details["count"] >= 1


def test_targets_cover_several_depths() -> None:
    path = LIGHT_MODELS["resnet50"]
    targets = _targets(load_graph(path))
    assert len(set(targets)) == 4


def test_every_light_model_is_a_case() -> None:
    assert LIGHT_MODELS, "the onnx wheel ships the light models"
    assert {p.values[0] for p in _cases()} == {"chain", *LIGHT_MODELS}
