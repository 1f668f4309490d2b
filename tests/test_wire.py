"""A model's variants as bytes (graph/wire.py): a skeleton and the initializers serialized once, concatenated as
protobuf's wire format allows, are the same model to onnx and onnxruntime as the changed copy they replace."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from graph_dap.runtime import load_graph
from graph_dap.runtime.engine.options import session_options


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 8, 1, 1)).astype(np.float32), "w2")
    unused = numpy_helper.from_array(np.arange(5, dtype=np.int64), "unused")
    g = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
            helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2"),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [w1, w2, unused],
        doc_string="kept",
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    m.metadata_props.add(key="k", value="v")
    return m


def _session(data: bytes, folder=None) -> ort.InferenceSession:
    return ort.InferenceSession(data, session_options("none", folder), providers=["CPUExecutionProvider"])


def test_a_variant_with_more_outputs_is_the_model_copied_and_changed(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path))
    graph = load_graph(path)
    skeleton = graph.wire.skeleton()
    assert not skeleton.graph.initializer and len(skeleton.graph.node) == 3  # the model less its weights
    skeleton.graph.output.extend([helper.make_empty_tensor_value_info("c1")])
    data = graph.wire.to_bytes(skeleton)
    copy = onnx.ModelProto()
    copy.CopyFrom(graph.model)
    copy.graph.output.extend([helper.make_empty_tensor_value_info("c1")])
    parsed = onnx.ModelProto.FromString(data)  # protobuf merges the second graph field into the first
    assert [t.name for t in parsed.graph.initializer] == ["w1", "w2", "unused"]
    assert parsed == copy
    assert parsed.graph.doc_string == "kept" and parsed.metadata_props[0].value == "v" and parsed.producer_name == "test"
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)}
    got = _session(data).run(["c1", "y"], x)
    want = _session(copy.SerializeToString()).run(["c1", "y"], x)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert graph.model.graph.initializer and len(graph.model.graph.output) == 1  # the model itself is unchanged


def test_a_variant_takes_only_the_initializers_it_names_once_each_and_external_data_stays_a_reference(tmp_path):
    path = tmp_path / "ext.onnx"
    onnx.save_model(_model(), str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    graph = load_graph(path)
    skeleton = graph.wire.skeleton()
    del skeleton.graph.node[2]  # conv1 and relu1 only: reads w1
    skeleton.graph.output[0].name = "r1"
    data = graph.wire.to_bytes(skeleton, ["w1", "w1"])
    parsed = onnx.ModelProto.FromString(data)
    assert [t.name for t in parsed.graph.initializer] == ["w1"]
    assert parsed.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL  # a reference, read from the folder
    x = {"x": np.ones((1, 3, 6, 6), np.float32)}
    (got,) = _session(data, graph.weights.folder).run(["r1"], x)
    w1 = numpy_helper.to_array(graph.model.graph.initializer[0], str(tmp_path))
    ref = helper.make_model(
        helper.make_graph(
            [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"])], "ref",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 6, 6])], [helper.make_empty_tensor_value_info("r1")],
            [numpy_helper.from_array(w1, "w1")],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )  # fmt: skip
    (want,) = _session(ref.SerializeToString()).run(["r1"], x)
    assert np.array_equal(got, want)
