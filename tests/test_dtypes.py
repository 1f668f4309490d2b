"""Every element type onnxruntime's CPU provider runs: bfloat16, the four float8s, float16, int4/uint4, strings.

Each model holds a tensor of the type inside it (not only at its edges), made by a node from float32
values, so that a NaN or Inf appears first in that tensor. onnxruntime is the ground truth: each model
also casts the tensor back to float32 in-graph, and what onnxruntime makes of it must equal the session's
value read as float32 (ml_dtypes' conversion is exact). Complex tensors are left out: onnxruntime's CPU
provider has no kernel for them, not even Identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime import DebugSession, StopReason, dtypes, load_graph
from graph_dap.runtime.engine.options import session_options
from graph_dap.runtime.tools.compare import compare_model
from graph_dap.runtime.tools.dump import dump_model, open_dump
from graph_dap.runtime.tools.tensor_view import tensor_view

FLOATS = {
    "bfloat16": TensorProto.BFLOAT16,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float16": TensorProto.FLOAT16,
}
INTS = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4}
# float32 values whose cast overflows every type above: 3.4e38 is float32, but rounds up past bfloat16's largest.
X = np.array([1.0, -2.0, 3.4e38, 0.0], np.float32)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto], inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "dtypes", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def float_model(kind: str) -> onnx.ModelProto:
    """x -> scale (Mul) -> down (Cast to ``kind``: y) -> ident (z) -> up (Cast to float32: w) -> add (out)."""
    t = FLOATS[kind]
    saturate = {"saturate": 0} if kind.startswith("float8") else {}  # out of range: Inf or NaN, not the largest number
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["x2"], name="scale"),
        helper.make_node("Cast", ["x2"], ["y"], to=t, name="down", **saturate),
        helper.make_node("Identity", ["y"], ["z"], name="ident"),
        helper.make_node("Cast", ["z"], ["w"], to=TensorProto.FLOAT, name="up"),
        helper.make_node("Add", ["w", "w"], ["out"], name="add"),
    ]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("z", t, [4])]
    k = numpy_helper.from_array(np.array([1.0], np.float32), "k")
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], outputs, [k])


def int_model(kind: str) -> onnx.ModelProto:
    """x -> quant (QuantizeLinear to ``kind``: q) -> dequant (DequantizeLinear: y)."""
    t = INTS[kind]
    zp = numpy_helper.from_array(np.zeros((), dtypes.dtype_of(kind)), "zp")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "sc")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], name="quant"),
        helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], name="dequant"),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6]), helper.make_tensor_value_info("q", t, [6])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])], outputs, [scale, zp])


def ort_float32(model: onnx.ModelProto, feeds: dict[str, Any], names: list[str]) -> dict[str, np.ndarray]:
    """What onnxruntime computes for float32 outputs ``names`` of ``model`` (its numpy bridge, nothing of graph-dap's)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names)
    sess = ort.InferenceSession(m.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feeds)))


def bits_of(a: np.ndarray) -> np.ndarray:
    return np.asarray(dtypes.bits(np.asarray(a)))


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_the_fast_watch_stops_where_the_type_first_holds_nan_or_inf(kind):
    s = DebugSession(float_model(kind), {"x": X}, break_on=["nan", "inf"])
    s.start()
    stop = s.continue_()
    want = StopReason.NAN if kind in dtypes.NO_INF else StopReason.INF
    assert (stop.reason, stop.node.id if stop.node else None, stop.value) == (want, "down", "y")
    # one segment ran all five nodes (then, in one more call, the two that make y and its producer's input,
    # to find it exactly): the sums saw it, not a node-by-node check; had they missed y, the first sum to
    # fire would be float32 w's, at "up"
    assert s.segments.sessions_built == 1 and s.executions["add"] == 1 and s.ort_calls == 2
    y = s.value("y")
    assert str(y.dtype) == kind
    truth = ort_float32(float_model(kind), {"x": X}, ["w"])["w"]  # onnxruntime's own Cast of the same tensor
    np.testing.assert_array_equal(dtypes.numeric(y).astype(np.float32), truth)


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_summaries_and_the_tensor_view_show_nan_and_inf(kind):
    s = DebugSession(float_model(kind), {"x": X})
    s.start()
    s.continue_()
    summary = s.summary("z")
    assert summary.dtype == kind and summary.zeros == 1 and summary.min == -2.0 and summary.max == 1.0
    if kind in dtypes.NO_INF:
        assert (summary.nan, summary.posinf) == (1, 0)
    else:
        assert (summary.nan, summary.posinf) == (0, 1)
    view = tensor_view("z", s.value("z"))
    assert view["dtype"] == kind and view["data"] == [[1.0, -2.0, "nan" if kind in dtypes.NO_INF else "inf", 0.0]]
    assert sum(view["histogram"]["counts"]) == 3  # the finite ones


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_set_value_keeps_every_bit_and_onnxruntime_computes_from_it(kind):
    dt = dtypes.dtype_of(kind)
    # every bit pattern of the low byte, NaNs and Infs included where the type has them
    raw = np.array([0x00, 0x7F, 0x80, 0x3C], np.uint8 if dt.itemsize == 1 else np.uint16)
    if dt.itemsize == 2:
        raw = raw | np.uint16(0x3F00)
    new = dtypes.from_bits(raw, kind) if kind != "float16" else raw.view(np.float16)
    s = DebugSession(float_model(kind), {"x": X})
    s.start()
    s.run_to("ident")
    s.set_value("y", new)
    np.testing.assert_array_equal(bits_of(s.value("y")), bits_of(new))
    s.continue_()
    np.testing.assert_array_equal(bits_of(s.value("z")), bits_of(new))
    np.testing.assert_array_equal(s.value("w"), dtypes.numeric(new).astype(np.float32))  # onnxruntime's Cast


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_dump_and_compare_round_trip_bit_for_bit(tmp_path, kind):
    model = float_model(kind)
    dump_model(model, tmp_path / "run.npz", {"x": X})
    s = DebugSession(model, {"x": X})
    s.start()
    s.continue_()
    with open_dump(tmp_path / "run.npz") as d:
        for name in ("y", "z"):
            got = d.get(name)
            assert str(got.dtype) == kind
            np.testing.assert_array_equal(bits_of(got), bits_of(s.value(name)))
    result = compare_model(model, f"dump:{tmp_path / 'run.npz'}").to_dict()
    assert result["failed"] == 0 and result["compared"] == 5  # x2, y, z, w, out


@pytest.mark.parametrize("kind", sorted(INTS))
def test_int4_values_step_set_dump_and_compare(tmp_path, kind):
    x = np.array([-4, -1, 0, 1.5, 3.5, 2], np.float32)
    model = int_model(kind)
    truth = ort_float32(model, {"x": x}, ["y"])["y"]
    s = DebugSession(model, {"x": x})
    s.start()
    s.step()  # quant
    q = s.value("q")
    assert str(q.dtype) == kind
    s.step()  # dequant, fed an int4 tensor
    np.testing.assert_array_equal(s.value("y"), truth)
    np.testing.assert_array_equal(dtypes.numeric(q).astype(np.float32) * 0.5, truth)
    summary = s.summary("q")
    assert summary.dtype == kind and summary.max == 7 and summary.zeros == int(np.count_nonzero(truth == 0))
    assert tensor_view("q", q)["data"] == [[int(v) for v in dtypes.numeric(q)]]
    s.set_value("q", np.array([1, 2, 3, 4, 5, 6]).astype(q.dtype))
    s.continue_()
    np.testing.assert_array_equal(s.value("y"), np.array([1, 2, 3, 4, 5, 6], np.float32) * 0.5)
    dump_model(model, tmp_path / "q.npz", {"x": x})
    with open_dump(tmp_path / "q.npz") as d:
        assert str(d.get("q").dtype) == kind
        np.testing.assert_array_equal(dtypes.numeric(d.get("q")), dtypes.numeric(q))
    assert compare_model(model, f"dump:{tmp_path / 'q.npz'}").to_dict()["failed"] == 0


def test_strings_step_summarize_and_match_onnxruntime(tmp_path):
    nodes = [
        helper.make_node("Identity", ["s"], ["t"], name="ident"),
        helper.make_node("Concat", ["t", "s"], ["u"], name="concat", axis=0),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("s", TensorProto.STRING, [2])], [helper.make_tensor_value_info("u", TensorProto.STRING, [4])])
    feeds = {"s": np.array(["ab", "ç"], object)}
    truth = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"]).run(["u"], feeds)[0]
    s = DebugSession(model, feeds)
    s.start()
    s.continue_()
    assert s.value("u").tolist() == truth.tolist() == ["ab", "ç", "ab", "ç"]
    assert s.summary("u").text() == "string[4] ['ab', 'ç', 'ab', 'ç']"  # onnxruntime's strings are ONNX's string type
    dump_model(model, tmp_path / "s.npz", feeds)
    with open_dump(tmp_path / "s.npz") as d:
        assert d.get("u").tolist() == truth.tolist()
    assert compare_model(model, f"dump:{tmp_path / 's.npz'}").to_dict()["failed"] == 0


def test_random_inputs_of_every_type_run():
    """An input declared bfloat16 (or float8, int4) gets random values of that type, not float32."""
    for kind, t in {**FLOATS, **INTS}.items():
        nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, name="up")]
        model = _model(nodes, [helper.make_tensor_value_info("x", t, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
        s = DebugSession(model)
        assert str(s.inputs["x"].dtype) == kind
        s.start()
        s.continue_()
        np.testing.assert_array_equal(s.value("y"), dtypes.numeric(s.inputs["x"]).astype(np.float32))
        assert load_graph(model).value_info("x").dtype == kind


@pytest.mark.parametrize("exclude", [(), ("op:Cast",)])
def test_the_watch_inside_an_if_sees_bfloat16(exclude):
    """A bfloat16 tensor inside a branch: the If runs in the segment, watched inside; Inf from an excluded op is left out."""
    branch = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16, name="down"),
            helper.make_node("Cast", ["b"], ["c"], to=TensorProto.FLOAT, name="up"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [4])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["d"], name="same")], "else", [], [helper.make_tensor_value_info("d", TensorProto.FLOAT, [4])]
    )
    nodes = [
        helper.make_node("If", ["cond"], ["r"], then_branch=branch, else_branch=other, name="if"),
        helper.make_node("Abs", ["r"], ["out"], name="abs"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    model = _model(nodes, inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])])
    s = DebugSession(model, {"x": X, "cond": np.array(True)}, break_on=["inf"], inf_exclude=exclude)
    s.start()
    stop = s.continue_()
    if exclude:  # the Casts' Inf is left out inside (IsNaN and Where on the float32 cast); it leaves the branch as r
        assert (stop.reason, stop.node.id if stop.node else None, stop.value) == (StopReason.INF, "if", "r")
        truth = ort_float32(model, {"x": X, "cond": np.array(True)}, ["r"])["r"]
        np.testing.assert_array_equal(s.value("r"), truth)
    else:
        assert (stop.reason, stop.node.id if stop.node else None, stop.value) == (StopReason.INF, "down", "b")
        assert str(s.value("b").dtype) == "bfloat16"


def test_a_debugger_client_sees_and_sets_bfloat16_values(dap, tmp_path):
    """Over DAP: the Inf filter stops in the bfloat16 tensor, its variables and tensor view show it, setVariable edits it."""
    model = tmp_path / "bf16.onnx"
    onnx.save(float_model("bfloat16"), str(model))
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=X)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=["inf"])
    dap.wait_for_stop("exception")
    assert dap.top_frame()["name"] == "down (Cast)"
    y = dap.scope_variables("Last outputs")["y"]
    assert y["value"].startswith("bfloat16[4] min=-2 max=1") and "inf=1" in y["value"]
    elements = dap.variables(y["variablesReference"])
    assert [elements[f"[{i}]"]["value"] for i in range(4)] == ["1", "-2", "inf", "0"]
    view = dap.request("graphDap/tensorView", {"name": "y"})
    assert view["dtype"] == "bfloat16" and view["data"] == [[1.0, -2.0, "inf", 0.0]] and view["posinf"] == 1
    values = dap.scopes()["Values"]["variablesReference"]
    dap.request("setVariable", variablesReference=y["variablesReference"], name="[2]", value="0.5")
    assert dap.evaluate("y.astype('float32').sum()")["result"] == "-0.5"
    dap.request("setVariable", variablesReference=values, name="y", value="y * 2")
    dap.request("setExceptionBreakpoints", filters=[])
    dap.request("continue", threadId=1)
    dap.wait_for_end()
