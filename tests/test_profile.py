"""Profiles: every computing node timed by onnxruntime's own profiler, mapped back to the model."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from light import LIGHT_MODELS, light_inputs
from models import chain_model, init, make_model, ort_values, tensor
from onnx import helper

from graph_dap.errors import OptionError
from graph_dap.runtime import load_graph
from graph_dap.runtime.tools.profile import ProfileError, fused_graph, profile_model


def _computing(model: onnx.ModelProto) -> set[str]:
    """Ids of the nodes onnxruntime runs a kernel for: all but Constant (made an initializer at load)."""
    return {n.id for n in load_graph(model).nodes if n.op_type != "Constant"}


def _with_constant() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Constant", [], ["k"], name="k", value=onnx.numpy_helper.from_array(np.full((4,), 2, np.float32))),
        helper.make_node("Mul", ["x", "k"], ["m"], name="mul"),
        helper.make_node("Relu", ["m"], ["y"], name=""),  # unnamed: graph-dap names it by op and index
    ]
    return make_model(nodes, [tensor("x", [3, 4])], [tensor("y", [3, 4])])


def test_profile_covers_every_computing_node_with_its_bytes():
    model = _with_constant()
    feeds = {"x": np.ones((3, 4), np.float32)}
    prof = profile_model(model, feeds, repeat=3)
    assert {n.name for n in prof.nodes} == _computing(model) == {"mul", "Relu_2"}
    assert prof.not_timed == (("k", "Constant nodes become initializers when onnxruntime loads the model"),)
    truth = ort_values(model, feeds)
    graph = load_graph(model)
    for n in prof.nodes:
        node = graph.node(n.name)
        assert n.op_type == node.op_type and n.index == node.index
        assert n.bytes == sum(truth[o].nbytes for o in node.outputs)
        assert n.runs == 3 and n.time_ms > 0
    assert sum(n.share for n in prof.nodes) == pytest.approx(1.0)
    assert prof.total_ms == pytest.approx(sum(n.time_ms for n in prof.nodes))
    assert [n.time_ms for n in prof.nodes] == sorted((n.time_ms for n in prof.nodes), reverse=True)


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1", "resnet50"])
def test_profile_of_a_light_model_covers_every_computing_node(name):
    path = LIGHT_MODELS[name]
    model = onnx.load(path)
    prof = profile_model(path, light_inputs(model), repeat=1)
    assert {n.name for n in prof.nodes} == _computing(model)
    assert len(prof.nodes) > 30 and prof.not_timed == ()
    assert all(n.index is not None for n in prof.nodes)


def test_nodes_inside_subgraphs_are_not_counted_twice():
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="inner_neg")], "then", [], [tensor("t", [4])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"], name="inner_abs")], "else", [], [tensor("e", [4])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    model = make_model(nodes, [tensor("x", [4])], [tensor("y", [4])], [init("zero", np.array(0, np.float32))])
    prof = profile_model(model, {"x": np.ones(4, np.float32)}, repeat=2)
    assert {n.name for n in prof.nodes} == {"sum", "gt", "branch"}
    assert all(n.runs == 2 for n in prof.nodes)


def test_to_dict_has_the_documented_shape():
    prof = profile_model(chain_model(), repeat=2)
    d = json.loads(json.dumps(prof.to_dict()))
    assert set(d) >= {"total_ms", "nodes", "method", "repeat", "run_ms", "not_timed"}
    assert d["repeat"] == 2 and d["warmup"] == 1 and "enable_profiling" in d["method"]
    for n in d["nodes"]:
        assert set(n) == {"name", "op_type", "index", "time_ms", "share", "bytes", "source", "module"}
    assert d["nodes"][0]["time_ms"] >= d["nodes"][-1]["time_ms"]


def test_chrome_trace_is_valid_trace_event_json(tmp_path):
    prof = profile_model(chain_model(), repeat=2)
    out = tmp_path / "trace.json"
    prof.write_chrome_trace(out)
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert all({"name", "ph", "ts", "dur", "pid", "tid"} <= set(e) for e in complete)
    assert all(isinstance(e["ts"], int | float) and e["dur"] >= 0 for e in complete)
    node_events = [e for e in complete if e["cat"] != "run"]
    assert len(node_events) == 6 * 2 and len(complete) - len(node_events) == 2
    assert {e["name"] for e in node_events} == _computing(chain_model())
    assert os.listdir(tmp_path) == ["trace.json"]


def _conv_bn_relu() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "me", "va"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Identity", ["r"], ["idn"], name="ident"),
        helper.make_node("Flatten", ["idn"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "mw"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "mb"], ["y"], name="add"),
    ]
    inits = [
        init("w", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
        init("sc", np.ones(4, np.float32)),
        init("bi", np.zeros(4, np.float32)),
        init("me", np.zeros(4, np.float32)),
        init("va", np.ones(4, np.float32)),
        init("mw", rng.standard_normal((256, 5)).astype(np.float32)),
        init("mb", rng.standard_normal(5).astype(np.float32)),
    ]
    return make_model(nodes, [tensor("x", [1, 2, 8, 8])], [tensor("y", [1, 5])], inits)


def test_the_fused_graph_names_where_each_node_came_from():
    fused = fused_graph(_conv_bn_relu(), "extended")
    by_name = fused.by_name()
    conv = by_name["conv"]
    assert conv.op_type == "FusedConv" and conv.origin == ("conv", "bn", "relu") and conv.index is None
    gemm = next(n for n in fused.nodes if n.op_type == "Gemm")
    assert gemm.origin == ("mm", "add")
    assert by_name["flat"].origin == ("ident", "flat") and by_name["flat"].index is None
    covered = [o for n in fused.nodes for o in n.origin]
    assert sorted(covered) == sorted(n.id for n in load_graph(_conv_bn_relu()).nodes)
    assert fused.removed == ()
    assert "conv (com.microsoft.FusedConv)  <- conv, bn, relu" in fused.text()


def test_an_unfused_node_keeps_its_index():
    fused = fused_graph(chain_model(), "basic")
    side = fused.by_name()["side"]
    assert side.origin == ("side",) and side.index == 5


def test_profiling_the_optimized_graph_maps_times_to_the_original_nodes(tmp_path):
    model = _conv_bn_relu()
    prof = profile_model(model, repeat=1, opt_level="extended")
    names = {n.name: n for n in prof.nodes}
    assert names["conv"].op_type == "FusedConv" and names["conv"].origin == ("conv", "bn", "relu")
    assert {o for n in prof.nodes for o in n.origin} == {n.id for n in load_graph(model).nodes}
    assert prof.to_dict()["fused"]["opt_level"] == "extended"
    assert "from" in prof.to_dict()["nodes"][0]


def test_saving_the_optimized_model(tmp_path):
    target = tmp_path / "opt.onnx"
    fused_graph(_conv_bn_relu(), "extended", save_to=target)
    saved = onnx.load(str(target))
    assert any(n.op_type == "FusedConv" for n in saved.graph.node)


def test_bad_profile_requests_are_refused():
    with pytest.raises(ProfileError, match="repeat must be at least 1"):
        profile_model(chain_model(), repeat=0)
    with pytest.raises(OptionError, match="unknown optimization level"):
        profile_model(chain_model(), opt_level="max")
