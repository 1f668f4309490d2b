"""The graph model: order, ids, producers and consumers, statics, loading."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from models import chain_model, init, make_model, tensor
from onnx import helper

from graph_dap.runtime import ModelError, load_graph


def test_nodes_in_topological_order_keep_file_index():
    nodes = [
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Neg", ["x"], ["a"], name="first"),
    ]
    g = load_graph(make_model(nodes, [tensor("x", [2])], [tensor("b", [2])]))
    assert [n.id for n in g.nodes] == ["first", "second"]
    assert [n.index for n in g.nodes] == [1, 0]
    assert [n.order for n in g.nodes] == [0, 1]


def test_node_ids_for_unnamed_and_duplicate_names():
    nodes = [
        helper.make_node("Neg", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"], name="dup"),
        helper.make_node("Neg", ["b"], ["c"], name="dup"),
        helper.make_node("Neg", ["c"], ["d"], name="Neg_0"),
        helper.make_node("Relu", ["d"], ["e"], name="uniq"),
    ]
    g = load_graph(make_model(nodes, [tensor("x", [2])], [tensor("e", [2])]))
    ids = [n.id for n in g.nodes]
    assert ids[1:3] == ["Neg_1", "Neg_2"]  # duplicate names fall back to op_index
    assert ids[3] == "Neg_0" and ids[0] == "Neg_0_1"  # the real name wins, the made-up one moves
    assert ids[4] == "uniq"
    assert len(set(ids)) == len(ids)


def test_cycle_is_an_error_naming_a_node():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Relu", ["a"], ["b"], name="n2"),
    ]
    with pytest.raises(ModelError, match=r"cycle through node n1 \(Add\)"):
        load_graph(make_model(nodes, [tensor("x", [2])], [tensor("b", [2])]))


def test_dangling_input_is_an_error_naming_node_and_value():
    nodes = [helper.make_node("Add", ["x", "ghost"], ["a"], name="adder")]
    with pytest.raises(ModelError, match=r"node adder \(Add\) reads 'ghost'"):
        load_graph(make_model(nodes, [tensor("x", [2])], [tensor("a", [2])]))


def test_producers_consumers_inputs_initializers_shapes():
    g = load_graph(chain_model())
    assert g.input_names == ("x",)
    assert set(g.initializer_names) == {"w", "b", "s"}
    assert g.output_names == ("y", "side")
    assert g.producer("c").id == "conv"
    assert g.producer("x") is None
    assert [n.id for n in g.consumers("x")] == ["conv", "side"]
    assert g.value_info("r").shape == (1, 4, 8, 8)
    assert g.value_info("r").dtype == "float32"
    assert g.opsets == {"ai.onnx": 17}
    assert [n.id for n in g.downstream(["r"])] == ["add", "mul", "sigmoid"]


def test_static_nodes_are_flagged():
    nodes = [
        helper.make_node("Constant", [], ["k"], name="const", value=onnx.numpy_helper.from_array(np.ones(2, np.float32))),
        helper.make_node("Mul", ["k", "w"], ["kw"], name="fold"),
        helper.make_node("Add", ["x", "kw"], ["y"], name="live"),
        helper.make_node("RandomUniformLike", ["kw"], ["r"], name="random"),
    ]
    g = load_graph(make_model(nodes, [tensor("x", [2])], [tensor("y", [2]), tensor("r", [2])], [init("w", np.ones(2, np.float32))]))
    assert {n.id: n.is_constant for n in g.nodes} == {"const": True, "fold": True, "live": False, "random": False}


def test_subgraph_outer_scope_reads_are_inputs():
    then_g = helper.make_graph([helper.make_node("Add", ["a", "k"], ["t"])], "then", [], [tensor("t", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["a"], ["e"])], "else", [], [tensor("e", [2])])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    g = load_graph(make_model(nodes, [tensor("x", [2]), tensor("c", [], onnx.TensorProto.BOOL)], [tensor("y", [2])],
                              [init("k", np.ones(2, np.float32))]))
    branch = g.node("branch")
    assert branch.implicit_inputs == ("a", "k")
    assert [n.id for n in g.consumers("a")] == ["branch"]


def test_load_errors(tmp_path):
    with pytest.raises(ModelError, match="model not found"):
        load_graph(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    with pytest.raises(ModelError, match="bad.onnx"):
        load_graph(bad)


def _external_model(tmp_path, location: str):
    model = chain_model()
    w = next(t for t in model.graph.initializer if t.name == "w")
    data = onnx.numpy_helper.to_array(w).tobytes()
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": "0", "length": str(len(data))}.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    return model, data


def test_external_data_inside_the_model_folder(tmp_path):
    model, data = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(data)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = load_graph(path)
    w = next(t for t in g.model.graph.initializer if t.name == "w")
    assert w.data_location == onnx.TensorProto.EXTERNAL and not w.raw_data  # never read into the proto
    assert g.weights.array(w).tobytes() == data  # mapped from the file


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    model, data = _external_model(tmp_path, "../secret.bin")
    (tmp_path / "secret.bin").write_bytes(data)
    onnx.save(model, str(inner / "m.onnx"))
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_graph(inner / "m.onnx")


def test_a_failed_shape_inference_is_noted_and_shown_in_the_listing():
    from graph_dap.runtime import render_listing

    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")  # a domain the model imports no opset of
    model = make_model([node], [tensor("x", [2])], [tensor("y", [2])])
    g = load_graph(model)
    assert len(g.notes) == 1 and g.notes[0].startswith("shape inference failed (")
    header = render_listing(g).text.split("\n\n")[0]
    assert f"# note: {g.notes[0]}" in header.splitlines()
    assert load_graph(chain_model()).notes == ()
