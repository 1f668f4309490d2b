"""A stop shows what the user's own run computed: onnxruntime's optimized graph at the session's level.

For each fusion that matters (Q/DQ into QLinearConv and QLinearMatMul, MatMul + Add, a decomposed
LayerNormalization, a decomposed Gelu, attention's scaled Q K^T into one FusedMatMul): the watched run's outputs are bit for bit the plain run's (the watch
leaves the fusions alone); a value the optimized graph computes is shown as it computes it (the ground truth:
the model with the tensor as an output); a value fused away is recomputed with the original nodes and says so; a
NaN made inside a fused group is named at its original node.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import as_shown, assert_exact, init, make_model, optimized_nodes, ort_values, tensor
from onnx import helper
from quant_models import quantize

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.engine.fidelity import own_nodes
from graph_dap.runtime.engine.options import session_options

R = np.random.default_rng(27)
pytestmark = pytest.mark.xdist_group("user_run")


def plain_outputs(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), session_options("all"), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(names, feeds)))


def quantized_cnn(tmp: Path) -> tuple[onnx.ModelProto, dict]:
    """A small CNN with a linear head, quantized by onnxruntime's quantize_static in QDQ format, per channel (its Relus
    folded into the Qs): onnxruntime runs it as QLinearConvs and a QLinearMatMul."""
    nodes, inits, x, c = [], [], "x", 3
    for k, cout in enumerate([8, 8]):
        nodes += [
            helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"], name=f"conv{k}", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"relu{k}"),
        ]
        inits += [init(f"w{k}", (R.standard_normal((cout, c, 3, 3)) * 0.3).astype(np.float32)), init(f"b{k}", (R.standard_normal(cout) * 0.1).astype(np.float32))]
        x, c = f"r{k}", cout
    nodes += [helper.make_node("Flatten", [x], ["f"], name="flat"), helper.make_node("MatMul", ["f", "wm"], ["y"], name="fc")]
    inits.append(init("wm", (R.standard_normal((8 * 16 * 16, 10)) * 0.02).astype(np.float32)))
    src = tmp / "float.onnx"
    onnx.save(make_model(nodes, [tensor("x", [1, 3, 16, 16])], [tensor("y", [1, 10])], inits), str(src))
    quantized = quantize(src, tmp / "qdq.onnx", "qdq")
    return onnx.load(str(quantized)), {"x": R.standard_normal((1, 3, 16, 16)).astype(np.float32)}


def layer_norm_gelu_mlp() -> tuple[onnx.ModelProto, dict]:
    """MatMul + Add (a linear layer), a decomposed LayerNormalization and a decomposed Gelu, as exporters write them."""
    d = 16
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["m1"], name="fc1"),
        n("Add", ["m1", "b1"], ["h"], name="fc1_bias"),
        n("ReduceMean", ["h"], ["mu"], name="ln_mean", axes=[-1]),
        n("Sub", ["h", "mu"], ["hc"], name="ln_sub"),
        n("Pow", ["hc", "two"], ["sq"], name="ln_pow"),
        n("ReduceMean", ["sq"], ["var"], name="ln_var", axes=[-1]),
        n("Add", ["var", "eps"], ["ve"], name="ln_eps"),
        n("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
        n("Div", ["hc", "sd"], ["hn"], name="ln_div"),
        n("Mul", ["hn", "gamma"], ["hg"], name="ln_scale"),
        n("Add", ["hg", "beta"], ["ln"], name="ln_shift"),
        n("Div", ["ln", "sqrt2"], ["g1"], name="gelu_div"),
        n("Erf", ["g1"], ["g2"], name="gelu_erf"),
        n("Add", ["g2", "one"], ["g3"], name="gelu_add"),
        n("Mul", ["ln", "g3"], ["g4"], name="gelu_mul"),
        n("Mul", ["g4", "half"], ["act"], name="gelu_half"),
        n("MatMul", ["act", "w2"], ["y"], name="fc2"),
    ]
    inits = [
        init("w1", (R.standard_normal((d, d)) * 0.3).astype(np.float32)),
        init("b1", R.standard_normal(d).astype(np.float32)),
        init("two", np.array(2.0, np.float32)),
        init("eps", np.array(1e-5, np.float32)),
        init("gamma", R.uniform(0.5, 1.5, d).astype(np.float32)),
        init("beta", R.standard_normal(d).astype(np.float32)),
        init("sqrt2", np.array(np.sqrt(2.0), np.float32)),
        init("one", np.array(1.0, np.float32)),
        init("half", np.array(0.5, np.float32)),
        init("w2", (R.standard_normal((d, d)) * 0.3).astype(np.float32)),
    ]
    model = make_model(nodes, [tensor("x", [4, d])], [tensor("y", [4, d])], inits)
    return model, {"x": R.standard_normal((4, d)).astype(np.float32)}


def attention_block() -> tuple[onnx.ModelProto, dict]:
    """One head of self-attention as exporters write it: projections, Q K^T scaled, a causal mask added, Softmax,
    times V (onnxruntime fuses the transpose and the scale into one FusedMatMul)."""
    s, d = 8, 16
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"], name="q_proj"),
        n("MatMul", ["x", "wk"], ["k"], name="k_proj"),
        n("MatMul", ["x", "wv"], ["v"], name="v_proj"),
        n("Transpose", ["k"], ["kt"], name="k_t", perm=[1, 0]),
        n("MatMul", ["q", "kt"], ["scores"], name="qk"),
        n("Div", ["scores", "scale"], ["scaled"], name="scale"),
        n("Add", ["scaled", "mask"], ["masked"], name="mask_add"),
        n("Softmax", ["masked"], ["probs"], name="softmax", axis=-1),
        n("MatMul", ["probs", "v"], ["ctx"], name="pv"),
        n("MatMul", ["ctx", "wo"], ["y"], name="o_proj"),
    ]
    inits = [init(w, (R.standard_normal((d, d)) * 0.3).astype(np.float32)) for w in ("wq", "wk", "wv", "wo")]
    inits += [init("scale", np.array(4.0, np.float32)), init("mask", np.triu(np.full((s, s), -1e4, np.float32), 1))]
    return make_model(nodes, [tensor("x", [s, d])], [tensor("y", [s, d])], inits), {"x": R.standard_normal((s, d)).astype(np.float32)}


def watched_segment_nodes(s: DebugSession, model: onnx.ModelProto) -> tuple[list[str], list[str]]:
    """The ops of the watched whole-model segment as onnxruntime optimized it (the watch's own left out), and the plain model's."""
    with tempfile.TemporaryDirectory() as tmp:
        plan = s.runs.plan(s.levels.main, 0, len(s.sequence))
        assert plan is not None
        feeds, embedded = s.executor.split(plan.reads, s.values.get, s.values.fixed, s.runs.segment_embedded(s.values))
        key = s.segments.key(plan.ran, feeds, plan.wanted, plan.watch, s.constants.version)
        watch = s.segments._sessions[key].result()[4]  # the watch the segment ran (see engine.fidelity)
        segment, _ = s.segments.build_model(plan.ran, feeds, embedded, plan.wanted, watch)
        so = session_options("all")
        so.optimized_model_filepath = os.path.join(tmp, "watched.onnx")
        ort.InferenceSession(segment.SerializeToString(), so, providers=["CPUExecutionProvider"])
        own = own_nodes(onnx.load(so.optimized_model_filepath))
    return [n.op_type for n in own], [n.op_type for n in optimized_nodes(model)]


@pytest.mark.parametrize("kind", ["qdq", "mlp", "attention"])
def test_the_watched_run_is_the_users_own(kind: str, tmp_path: Path) -> None:
    """With the NaN/Inf watch on, the optimized graph keeps every fusion (its nodes are the plain model's) and the
    outputs are the plain ORT_ENABLE_ALL run's bit for bit; a stop's values the optimized graph computes are its own."""
    model, feeds = {"qdq": lambda: quantized_cnn(tmp_path), "mlp": layer_norm_gelu_mlp, "attention": attention_block}[kind]()
    plain_ops = [n.op_type for n in optimized_nodes(model)]
    if kind == "qdq":
        assert "QLinearConv" in plain_ops and "QLinearMatMul" in plain_ops  # (what the test is about)
    elif kind == "attention":
        assert "FusedMatMul" in plain_ops and "Transpose" not in plain_ops
    else:
        assert "LayerNormalization" in plain_ops and {"Gelu", "BiasGelu", "FastGelu"} & set(plain_ops)
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    assert s.continue_().reason is StopReason.END
    for name, want in plain_outputs(model, feeds).items():
        assert_exact(s.value(name), want, f"{kind}: {name} as the user's own run computes it")
        assert s.note(name) == ""
    watched_ops, plain = watched_segment_nodes(s, model)
    assert watched_ops == plain
    if kind == "attention":  # fused into the FusedMatMul: recomputed with the original nodes, from the run's q and k
        shown = s.value("scaled")
        assert s.note("scaled").startswith("recomputed with the original nodes"), s.note("scaled")
        np.testing.assert_array_equal(shown, as_shown(s, model, feeds, ["scaled"])["scaled"])


def test_a_stop_in_a_quantized_model_shows_the_int8_kernels_values(tmp_path: Path) -> None:
    """A breakpoint at the DequantizeLinear that makes the output: what it reads is the QLinearMatMul's int8 output as the
    run computed it (onnxruntime renames every int8 tensor of its optimized graph here, u8 for s8: the check is that the
    original DequantizeLinear, stepped over, makes of it the user's own output bit for bit); the first Conv's float
    output, which the int8 kernel took away, is recomputed with the original nodes (a float simulation) and says the
    run has no such tensor. (A breakpoint inside a fused group splits the run there: see the README.)"""
    model, feeds = quantized_cnn(tmp_path)
    last = next(n for n in model.graph.node if "y" in n.output)
    assert last.op_type == "DequantizeLinear"
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.set_breakpoints([last.name])
    stop = s.continue_()
    assert stop.reason is StopReason.BREAKPOINT and stop.node.name == last.name, stop
    q = last.input[0]  # the int8 tensor it dequantizes
    assert s.note(q) == "" and str(s.value(q).dtype) == "int8"
    c0 = next(n.output[0] for n in model.graph.node if n.name == "conv0")  # the first Conv's float output (its Relu folded)
    value = s.value(c0)
    note = s.note(c0)
    assert note.startswith("recomputed with the original nodes: at level all onnxruntime's graph has no tensor"), note
    np.testing.assert_allclose(value, ort_values(model, feeds, [c0])[c0], rtol=1e-5, atol=1e-5)  # a float simulation
    s.step()
    assert_exact(s.value("y"), plain_outputs(model, feeds)["y"], "y after one step: the original DequantizeLinear, on the run's int8")


def test_a_nan_made_inside_a_fused_group_is_named_at_its_original_node() -> None:
    """fc1's weight holds a NaN: onnxruntime runs MatMul + Add (and the LayerNormalization after) fused; the watch sees the
    NaN come out of the fused kernels, and the original nodes recomputed from the run's values name the MatMul."""
    model, feeds = layer_norm_gelu_mlp()
    for t in model.graph.initializer:
        if t.name == "w1":
            w = onnx.numpy_helper.to_array(t).copy()
            w[3, 5] = np.nan
            t.CopyFrom(onnx.numpy_helper.from_array(w, "w1"))
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node.id == "fc1" and stop.value == "m1", stop.message
    assert "input w1 already held NaN" in stop.message
    assert stop.details["count"] == int(np.isnan(ort_values(model, feeds, ["m1"])["m1"]).sum())
