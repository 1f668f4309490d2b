"""Continuing through onnxruntime's optimized graph: every stop still attributed exactly in the original graph.

A NaN or Inf that arises inside a group onnxruntime fuses (Conv+BatchNormalization, Conv+activation,
MatMul+Add, LayerNorm, attention, Gelu) stops at the exact original node, and the values shown
there equal onnxruntime's without optimizations. A fusion that computes a NaN the original nodes
do not is a stop that says so. The watch is placed where it does not undo the fusions.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import init, make_model, residual_stages, tensor
from onnx import helper

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.options import session_options

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def unoptimized(model: onnx.ModelProto, feeds: dict, names: list[str]) -> dict:
    """onnxruntime's own values of ``names`` without optimizations (each made a graph output)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names if n not in have)
    sess = ort.InferenceSession(m.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feeds)))


def exact(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), what


R = np.random.default_rng(5)


def conv_bn_relu(bad_var: bool):
    """Conv -> BatchNormalization -> Relu: a BN variance of -1 makes NaN in bn (sqrt of a negative)."""
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    var = np.ones(4, np.float32)
    if bad_var:
        var[2] = -1.0
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["y"], name="relu"),
        helper.make_node("Conv", ["y", "w2"], ["z"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    inits = [init("w", w), init("g", np.ones(4, np.float32)), init("b", np.zeros(4, np.float32)), init("m", np.zeros(4, np.float32)),
             init("v", var), init("w2", R.standard_normal((2, 4, 3, 3)).astype(np.float32))]  # fmt: skip
    return make_model(nodes, [tensor("x", [1, 3, 8, 8])], [tensor("z", [1, 2, 8, 8])], inits), {"x": R.standard_normal((1, 3, 8, 8)).astype(np.float32)}, "bn"


def conv_with_an_inf_weight():
    """Conv (an Inf weight meets a zero input: NaN) -> Relu, fused into one FusedConv."""
    w = R.standard_normal((4, 3, 1, 1)).astype(np.float32)
    w[1, 0, 0, 0] = np.inf
    x = R.standard_normal((1, 3, 6, 6)).astype(np.float32)
    x[0, 0, 2, 3] = 0.0
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return make_model(nodes, [tensor("x", [1, 3, 6, 6])], [tensor("y", [1, 4, 6, 6])], [init("w", w)]), {"x": x}, "conv"


def matmul_add():
    """MatMul (Inf times 0: NaN) -> Add: fused into one (FusedMatMul / Gemm)."""
    w = R.standard_normal((8, 8)).astype(np.float32)
    w[3, 5] = np.inf
    x = R.standard_normal((4, 8)).astype(np.float32)
    x[1, 3] = 0.0
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"), helper.make_node("Add", ["mm", "bias"], ["y"], name="add")]
    return make_model(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])], [init("w", w), init("bias", np.ones(8, np.float32))]), {"x": x}, "matmul"


def layer_norm():
    """A decomposed LayerNorm (onnxruntime fuses it into LayerNormalization) of a row holding +Inf: inf - inf in Sub."""
    d = 16
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], name="mean"),
        helper.make_node("Sub", ["x", "mean"], ["dev"], name="dev"),
        helper.make_node("Pow", ["dev", "two"], ["sq"], name="sq"),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], name="var"),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="ve"),
        helper.make_node("Sqrt", ["ve"], ["std"], name="std"),
        helper.make_node("Div", ["dev", "std"], ["norm"], name="norm"),
        helper.make_node("Mul", ["norm", "gamma"], ["scaled"], name="scale"),
        helper.make_node("Add", ["scaled", "beta"], ["y"], name="shift"),
    ]
    inits = [init("two", np.array(2.0, np.float32)), init("eps", np.array(1e-5, np.float32)),
             init("gamma", np.ones(d, np.float32)), init("beta", np.zeros(d, np.float32))]  # fmt: skip
    x = R.standard_normal((3, d)).astype(np.float32)
    x[1, 4] = np.inf
    return make_model(nodes, [tensor("x", [3, d])], [tensor("y", [3, d])], inits, opset=17), {"x": x}, "dev"


def attention():
    """Scaled dot-product attention (MatMul, Div, Softmax, MatMul); a row of scores all -Inf: Softmax makes NaN."""
    q = R.standard_normal((2, 4, 8)).astype(np.float32)
    q[1, 2, :] = -np.inf  # k > 0: the scores of that row are all -inf, and Softmax makes them NaN
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
        helper.make_node("Div", ["scores", "scale"], ["scaled"], name="scaled"),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["probs", "v"], ["out"], name="context"),
    ]
    feeds = {"q": q, "k": np.abs(R.standard_normal((2, 4, 8))).astype(np.float32) + 0.1, "v": R.standard_normal((2, 4, 8)).astype(np.float32)}
    model = make_model(nodes, [tensor(n, [2, 4, 8]) for n in ("q", "k", "v")], [tensor("out", [2, 4, 8])], [init("scale", np.array(2.0, np.float32))])
    return model, feeds, "softmax"


def gelu():
    """A decomposed erf Gelu (fused into Gelu): at -Inf, 0.5 * x * (1 + erf(x / sqrt 2)) is -inf * 0 = NaN in the Mul."""
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["xs"], name="xs"),
        helper.make_node("Erf", ["xs"], ["erf"], name="erf"),
        helper.make_node("Add", ["erf", "one"], ["erf1"], name="erf1"),
        helper.make_node("Mul", ["x", "erf1"], ["xe"], name="xe"),
        helper.make_node("Mul", ["xe", "half"], ["y"], name="half"),
    ]
    inits = [init("sqrt2", np.array(np.sqrt(2.0), np.float32)), init("one", np.array(1.0, np.float32)), init("half", np.array(0.5, np.float32))]
    x = R.standard_normal((4, 8)).astype(np.float32)
    x[2, 6] = -np.inf
    return make_model(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])], inits), {"x": x}, "xe"


CASES = {
    "conv+batchnorm": lambda: conv_bn_relu(True),
    "conv+activation": conv_with_an_inf_weight,
    "matmul+add": matmul_add,
    "layernorm": layer_norm,
    "attention": attention,
    "gelu": gelu,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_nan_inside_a_fused_group_stops_at_the_exact_original_node(case):
    model, feeds, expected = CASES[case]()
    first = DebugSession(model, feeds, opt_level="none", fast=False, break_on=["nan"]).continue_()
    assert first.node is not None and first.node.id == expected  # the original graph's own first NaN
    s = DebugSession(model, feeds, opt_level="all", break_on=["nan"])
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node.id == expected, stop.message
    assert not stop.details.get("disagreement")
    node = s.graph.node(expected)
    names = [n for n in node.all_inputs if s.has_value(n)] + [o for o in node.outputs if o]
    want = unoptimized(model, feeds, [n for n in names if n not in s.graph.initializer_names])
    for name, value in want.items():
        exact(s.value(name), value, f"{case}: {name}")  # what is shown is the original graph's, not the fused kernel's


def test_a_fusion_that_computes_a_nan_the_original_nodes_do_not_says_so():
    # Conv folded with its BatchNormalization: a scale of 1e30 multiplies the weights (+1, -1) before
    # the inputs (1e10 each) are summed: inf - inf = NaN, where the original Conv computes 0.
    w = np.array([[[[1.0]], [[-1.0]]]], np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn")]
    inits = [init("w", w), init("g", np.array([1e30], np.float32)), init("b", np.zeros(1, np.float32)), init("m", np.zeros(1, np.float32)), init("v", np.ones(1, np.float32))]
    model = make_model(nodes, [tensor("x", [1, 2, 2, 2])], [tensor("y", [1, 1, 2, 2])], inits)
    feeds = {"x": np.full((1, 2, 2, 2), 1e10, np.float32)}
    assert DebugSession(model, feeds, opt_level="none", break_on=["nan"]).continue_().reason is StopReason.END
    stop = DebugSession(model, feeds, opt_level="all", break_on=["nan"]).continue_()
    assert stop.reason is StopReason.NAN and stop.details["disagreement"] and stop.details["opt_level"] == "all"
    assert stop.tensor == "y" and set(stop.details["origin"]) == {"conv", "bn"}
    assert "makes NaN in 'y'" in stop.message and "from conv, bn" in stop.message
    assert "the original nodes compute it without NaN (float32[1,1,2,2] min=0 max=0" in stop.message


def _optimized_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    with tempfile.TemporaryDirectory() as tmp:
        so = session_options("all")
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return list(onnx.load(so.optimized_model_filepath).graph.node)


@pytest.mark.parametrize("name", ["mobile", "resnet"])
def test_the_watch_leaves_the_optimized_graph_as_it_is(name):
    """On the benchmark's convolutional models (BatchNormalization and HardSwish after every Conv), the
    optimized segment that a watched continue runs has exactly the nodes onnxruntime makes of the model
    without the watch (each Conv with its BatchNormalization folded in and its activation fused): the
    propagation rules leave the ends of the fused chains watched, and nothing inside them is an output.
    The watch adds its own few nodes (a pool, a reorder, a sum, a cast, a reshape per watched tensor)."""
    import conv_models

    model = getattr(conv_models, name)(96)
    feeds = {"image": R.standard_normal((1, 3, 96, 96)).astype(np.float32)}
    plain = _optimized_nodes(model)
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    for filt in (FaultFilter(True, False), FaultFilter(True, True)):
        plan = s.planner.plan(
            0, len(s.sequence), filt=filt, dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda a, b: [], constants=None,
            version=("probe", filt), optimized=True,
        )  # fmt: skip
        assert plan is not None and plan.watch is not None
        segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
        nodes = _optimized_nodes(segment)
        # the watch's nodes: its sums, and what only they read (a pool of an image in onnxruntime's blocked layout)
        returned = {o.name for o in segment.graph.output if not o.name.startswith("__g")}
        watch: list[onnx.NodeProto] = []
        for n in reversed(nodes):
            readers = [m for m in nodes if set(m.input) & set(n.output)]
            if all(o.startswith("__g") for o in n.output) or (
                readers and not set(n.output) & returned and all(any(m is w for w in watch) for m in readers)
            ):
                watch.append(n)
        own = sorted(n.op_type for n in nodes if n not in watch)
        assert own == sorted(n.op_type for n in plain), (name, filt)
        assert len(watch) <= 5 * len(plan.watch.watched) + 1
        images = [t for t in plan.watch.watched if np.prod(s.graph.value_info(t).shape[2:]) > 1]
        assert ("GlobalAveragePool" in {n.op_type for n in watch}) == bool(images)  # an image is pooled first, in the blocked layout


def test_a_second_launch_loads_its_optimized_segments_from_disk(tmp_path, monkeypatch):
    import conv_models

    monkeypatch.setenv("GRAPH_DAP_CACHE", str(tmp_path / "cache"))
    model = conv_models.resnet(64)
    feeds = {"image": R.standard_normal((1, 3, 64, 64)).astype(np.float32)}
    runs = []
    for _ in range(2):
        s = DebugSession(model, feeds, break_on=["nan", "inf"])
        assert s.continue_().reason is StopReason.END
        runs.append((s.segments.sessions_from_disk, s.value("pooled")))
    assert runs[0][0] == 0 and runs[1][0] >= 1  # the second built nothing with the optimizer
    exact(runs[1][1], runs[0][1], "the same outputs")
    assert any((tmp_path / "cache").glob("*.onnx")) and not any((tmp_path / "cache").glob(".*.tmp"))


def test_the_next_segment_is_built_while_the_session_is_stopped():
    import conv_models

    model = conv_models.mobile(64)
    s = DebugSession(model, {"image": R.standard_normal((1, 3, 64, 64)).astype(np.float32)}, break_on=["nan"])
    s.start()
    threads = s.prepare_next()
    assert threads
    for t in threads:
        t.join(60)
    built = s.segments.sessions_built
    assert s.continue_().reason is StopReason.END
    assert s.segments.sessions_built == built  # pressing continue only ran it


def test_steps_after_a_stop_in_an_optimized_segment_compute_with_the_original_values():
    """What a step or a recomputation reads is the original graph's value, never a fused kernel's that the segment left."""
    rng = np.random.default_rng(11)
    nodes, inits, x = [], [], "x"
    for k in range(3):
        nodes += [
            helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], name=f"conv{k}", pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"c{k}", f"g{k}", f"b{k}", f"m{k}", f"v{k}"], [f"bn{k}"], name=f"bn{k}"),
            helper.make_node("Relu", [f"bn{k}"], [f"r{k}"], name=f"relu{k}"),
        ]
        inits += [init(f"w{k}", rng.standard_normal((4, 4 if k else 3, 3, 3)).astype(np.float32)), init(f"g{k}", rng.uniform(0.5, 2, 4).astype(np.float32)),
                  init(f"b{k}", rng.standard_normal(4).astype(np.float32)), init(f"m{k}", rng.standard_normal(4).astype(np.float32)),
                  init(f"v{k}", rng.uniform(0.5, 2, 4).astype(np.float32))]  # fmt: skip
        x = f"r{k}"
    model = make_model(nodes, [tensor("x", [1, 3, 16, 16])], [tensor("r2", [1, 4, 16, 16])], inits)
    feeds = {"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    outputs = [o for n in nodes for o in n.output]
    want = unoptimized(model, feeds, outputs)
    s = DebugSession(model, feeds, opt_level="all", break_on=["nan", "inf"])
    s.set_breakpoints(["conv2"])
    assert s.continue_().node.id == "conv2"
    for _ in range(3):  # nothing looked at before: the steps read the segment's live-out r1 themselves
        s.step()
    for name in outputs:
        exact(s.value(name), want[name], f"{name} after three steps")
    s.restart()
    assert s.continue_().node.id == "conv2"
    exact(s.value("r1"), want["r1"], "r1 at the stop")


def weights_by_constant_of_shape():
    """Conv weights and a MatMul weight that ConstantOfShape makes (as in the onnx wheel's light models):
    onnxruntime folds them into initializers of the whole model and pre-packs them."""
    def made(name: str, shape: list[int], value: float) -> list[onnx.NodeProto]:
        return [
            helper.make_node("Constant", [], [f"{name}_shape"], value=helper.make_tensor(f"{name}_shape", onnx.TensorProto.INT64, [len(shape)], shape)),
            helper.make_node("ConstantOfShape", [f"{name}_shape"], [name], value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [value])),
        ]
    nodes = [
        *made("w", [32, 3, 3, 3], 0.01),
        *made("w2", [64, 32, 3, 3], 0.02),
        *made("k", [64 * 16 * 16, 64], 0.001),
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "k"], ["y"], name="mm"),
    ]
    model = make_model(nodes, [tensor("x", [1, 3, 16, 16])], [tensor("y", [1, 64])])
    return model, {"x": R.standard_normal((1, 3, 16, 16)).astype(np.float32)}


def _whole_plan(s):
    plan = s.planner.plan(
        0, len(s.sequence), filt=s._filter, dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda a, b: [],
        constants=s.store.fixed, version=0, optimized=True,
    )  # fmt: skip
    assert plan is not None
    return plan


def test_weights_made_by_constant_of_shape_are_filled_in_the_segments_as_in_the_whole_model():
    """The session holds a ConstantOfShape's output as a view of its one value (no memory); the segments
    compute it again, so onnxruntime folds it into a pre-packed initializer as in the whole model. The
    outputs are onnxruntime's own at ORT_ENABLE_ALL, and exactly its unoptimized ones as the original graph computes them."""
    model, feeds = weights_by_constant_of_shape()
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    assert s.store.fixed["k"].shape == (64 * 16 * 16, 64) and not any(s.store.fixed["k"].strides)
    assert s.continue_().reason is StopReason.END
    plain = ort.InferenceSession(model.SerializeToString(), session_options("all"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(s.outputs(exact=False)["y"], plain.run(["y"], feeds)[0], rtol=1e-5, atol=1e-6)
    exact(s.outputs()["y"], unoptimized(model, feeds, ["y"])["y"], "y as the original graph computes it")
    plan = _whole_plan(s)
    assert {"w2", "k"} <= {o for n in plan.ran for o in n.outputs} and not {"w2", "k"} & set(plan.reads)
    exact(s.value("k"), np.full((64 * 16 * 16, 64), 0.001, np.float32), "k as shown")


def test_weights_computed_once_are_embedded_from_memory_in_optimized_segments():
    """A large constant computed once at start (here a weight stored transposed, as Constant + Transpose) goes
    into an optimized segment as an initializer read in place (onnxruntime pre-packs it as in the whole
    model), neither fed nor copied into the segment's bytes."""
    kt = R.standard_normal((64, 4096)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["kt"], value=onnx.numpy_helper.from_array(kt, "kt")),
        helper.make_node("Transpose", ["kt"], ["k"], name="t", perm=[1, 0]),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "k"], ["m"], name="mm"),
        helper.make_node("Tanh", ["m"], ["y"], name="tanh"),
    ]
    model = make_model(nodes, [tensor("x", [8, 4096])], [tensor("y", [8, 64])])
    feeds = {"x": R.standard_normal((8, 4096)).astype(np.float32)}
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    assert "k" in s.segments.from_memory
    assert s.continue_().reason is StopReason.END
    plain = ort.InferenceSession(model.SerializeToString(), session_options("all"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(s.outputs(exact=False)["y"], plain.run(["y"], feeds)[0], rtol=1e-5, atol=1e-6)
    exact(s.outputs()["y"], unoptimized(model, feeds, ["y"])["y"], "y as the original graph computes it")
    plan = _whole_plan(s)
    fed, embedded = s.executor.split(plan.reads, s.values.get, s.values.fixed, s._segment_embedded(s.values))
    assert "k" in embedded and "k" not in fed
    memory: dict = {}
    segment, _ = s.segments.build_model(plan.ran, fed, embedded, plan.wanted, plan.watch, memory)
    assert "k" in memory and segment.ByteSize() < 64 << 10  # k alone is 1 MB


def test_a_weight_made_once_and_then_set_is_fed_with_its_new_value():
    """Once a computed constant is set, optimized segments are fed it: the next continue runs with the new value."""
    model, feeds = weights_by_constant_of_shape()
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    s.continue_()
    s.restart()
    s.start()
    k = np.full((64 * 16 * 16, 64), 0.003, np.float32)
    s.set_value("k", k)
    assert s.continue_().reason is StopReason.END
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    nodes = [n for n in changed.graph.node if "k" not in n.output and n.output[0] != "k_shape"]
    del changed.graph.node[:]
    changed.graph.node.extend(nodes)
    changed.graph.input.append(tensor("k", list(k.shape)))  # fed, as the original graph computes it: not pre-packed
    exact(s.outputs()["y"], unoptimized(changed, {**feeds, "k": k}, ["y"])["y"], "y with the new k")


def relu_chain(w1: np.ndarray, first: str = "Relu"):
    """x -> Relu -> Conv -> BatchNormalization -> Relu -> Conv -> BatchNormalization -> Relu: each Conv's input is >= 0
    (``first``: Identity, and the first Conv reads the model's input, of any sign)."""
    c = w1.shape[0]
    nodes = [
        helper.make_node(first, ["x"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["y1"], name="relu1"),
        helper.make_node("Conv", ["y1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "g", "b", "m", "v"], ["b2"], name="bn2"),
        helper.make_node("Relu", ["b2"], ["y2"], name="relu2"),
    ]
    inits = [init("w1", w1), init("w2", R.standard_normal((c, c, 3, 3)).astype(np.float32)), init("g", np.full(c, 0.5, np.float32)),
             init("b", np.full(c, 0.1, np.float32)), init("m", np.zeros(c, np.float32)), init("v", np.ones(c, np.float32))]  # fmt: skip
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("y2", [1, c, 8, 8])], inits)


def watched_whole(model: onnx.ModelProto, feeds: dict):
    """A session stopped at entry with the nan and inf filters, and the plan of its whole run as an optimized continue."""
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    plan = s.planner.plan(
        0, len(s.sequence), filt=FaultFilter(True, True), dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda a, b: [],
        constants=s.store.fixed, version="probe", optimized=True,
    )  # fmt: skip
    return s, plan


def test_with_the_inf_filter_a_relu_is_fused_into_its_conv_and_a_hidden_minus_inf_is_still_found():
    """A Relu hides -Inf (Relu(-Inf) is 0), so the Inf watch had to sum the tensor before it, which kept
    onnxruntime from fusing the Relu into its Conv. A Conv of a >= 0 input can only make -Inf by overflow,
    which the sum of its input, scaled by the weights' norms, rules out or flags: the Relu's output and
    the Conv's input are watched instead, both ends of fused chains."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32))
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert plan.watch.bounded == {"c1": "r0", "b1": "r0", "c2": "y1", "b2": "y1"}
    assert set(plan.watch.watched) == {"r0", "y1", "y2"}
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = [n for n in _optimized_nodes(segment) if not all(o.startswith("__g") for o in n.output)]  # (the watch's are __g...)
    assert [n.op_type for n in own] == [n.op_type for n in _optimized_nodes(model)]
    convs = [n for n in own if n.op_type in ("Conv", "FusedConv")]
    assert len(convs) == 2 and all(dict((a.name, a.s) for a in n.attribute).get("activation") == b"Relu" for n in convs)
    assert s.continue_().reason is StopReason.END
    exact(s.value("y2"), unoptimized(model, feeds, ["y2"])["y2"], "y2")

    # Negative weights and a huge input: conv1 overflows to -Inf, which the Relu turns into 0
    bad = relu_chain(np.full((6, 4, 3, 3), -1.0, np.float32))
    huge = {"x": np.full((1, 4, 8, 8), 1e37, np.float32)}
    values = unoptimized(bad, huge, ["c1", "y1", "y2"])
    assert np.isneginf(values["c1"]).any() and np.isfinite(values["y1"]).all() and np.isfinite(values["y2"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.tensor == "c1", stop.message
    exact(s.value("c1"), values["c1"], "c1")


def test_a_normalization_that_makes_minus_inf_itself_keeps_its_output_watched():
    """An Inf shift makes -Inf of any value: no bound holds, the tensor before the Relu is summed itself."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32))
    shift = next(t for t in model.graph.initializer if t.name == "b")
    shift.CopyFrom(init("b", np.array([0.1, -np.inf, 0.1, 0.1, 0.1, 0.1], np.float32)))
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None and "b1" in plan.watch.watched and "b1" not in plan.watch.bounded
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "bn1" and stop.tensor == "b1", stop.message


def residual(c: int = 8, weights: dict | None = None, var: dict | None = None, plain_bn: bool = False):
    """r0 = Relu(x); a projection block ``out1 = Relu(Add(BN(Conv(Relu(BN(Conv(r0))))), BN(Conv1x1(r0))))`` and an
    identity block ``out2 = Relu(Sum(BN(Conv(Relu(BN(Conv(out1))))), out1))`` (older exports' Sum), as in resnet50.
    ``weights``, ``var``: a conv's weights and its normalization's variance, by block part (b1a, b1b, b1s, b2a, b2b);
    ``plain_bn``: normalizations that change (almost) nothing."""
    rng = np.random.default_rng(21)
    nodes, inits = [helper.make_node("Relu", ["x"], ["r0"], name="relu0")], []

    def conv_bn(x: str, cin: int, name: str, k: int = 3) -> str:
        w = (weights or {}).get(name)
        w = rng.standard_normal((c, cin, k, k)).astype(np.float32) * 0.3 if w is None else w
        nodes.extend([
            helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], name=f"{name}/conv", pads=[w.shape[-1] // 2] * 4),
            helper.make_node("BatchNormalization", [f"{name}.c", *(f"{name}.{p}" for p in "gbmv")], [f"{name}.bn"], name=f"{name}/bn"),
        ])  # fmt: skip
        g, b, m, v = (np.ones(c), np.zeros(c), np.zeros(c), np.ones(c)) if plain_bn else (
            rng.uniform(0.5, 1.5, c), rng.standard_normal(c) * 0.1, rng.standard_normal(c) * 0.1, rng.uniform(0.5, 1.5, c))
        v = (var or {}).get(name, v)
        inits.extend([init(f"{name}.w", w), *(init(f"{name}.{p}", np.asarray(a, np.float32)) for p, a in zip("gbmv", (g, b, m, v)))])
        return f"{name}.bn"

    nodes.append(helper.make_node("Relu", [conv_bn("r0", 4, "b1a")], ["y1"], name="b1a/relu"))
    nodes.append(helper.make_node("Add", [conv_bn("y1", c, "b1b"), conv_bn("r0", 4, "b1s", k=1)], ["sum1"], name="b1/add"))
    nodes.append(helper.make_node("Relu", ["sum1"], ["out1"], name="b1/relu"))
    nodes.append(helper.make_node("Relu", [conv_bn("out1", c, "b2a")], ["y2"], name="b2a/relu"))
    nodes.append(helper.make_node("Sum", [conv_bn("y2", c, "b2b"), "out1"], ["sum2"], name="b2/sum"))
    nodes.append(helper.make_node("Relu", ["sum2"], ["out2"], name="b2/relu"))
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("out2", [1, c, 8, 8])], inits)


def first_fault_in_run_order(model: onnx.ModelProto, feeds: dict, skip: tuple[str, ...] = ()):
    """The exhaustive answer: the first node (in the graph's order, its run order here) with a NaN or Inf in its output, from
    onnxruntime's unoptimized values of every tensor; ``skip``: nodes whose Inf is excluded."""
    values = unoptimized(model, feeds, [o for n in model.graph.node for o in n.output])
    for n in model.graph.node:
        for o in n.output:
            a = values[o]
            if np.isnan(a).any() or (n.name not in skip and np.isinf(a).any()):
                return n.name, o, values
    return None, None, values


def test_a_residual_blocks_relu_is_fused_with_its_conv_and_sum_under_the_inf_watch():
    """A residual block ends in Relu(Add(BN(Conv(y)), shortcut)), which onnxruntime fuses into one Conv reading the shortcut
    as its Sum input. The Add is left to a bound: from below by the Conv's bound when the shortcut is >= 0 (an earlier
    block's Relu), by both bounds, in one check, when the shortcut is a projection BN(Conv(r0))."""
    model = residual()
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    watch = plan.watch
    assert {"sum1", "sum2"} <= set(watch.bounded) and not {"sum1", "sum2"} & set(watch.watched)
    assert watch.bounded["sum1"] == watch.bounded["b1s.c"] == "y1" and dict(watch.scales["y1"].terms).keys() == {"r0"}  # the projection's source
    assert watch.bounded["sum2"] == "y2" and not watch.scales["y2"].terms  # the shortcut out1 >= 0 needs no bound
    assert {"r0", "y1", "out1", "y2", "out2"} == set(watch.watched)
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = [n for n in _optimized_nodes(segment) if not all(o.startswith("__g") for o in n.output)]
    assert [n.op_type for n in own] == [n.op_type for n in _optimized_nodes(model)]
    fused = [n for n in own if n.op_type in ("Conv", "FusedConv") and len(n.input) == 4]  # (X, W, B and the Sum)
    assert len(fused) == 2 and all(dict((a.name, a.s) for a in n.attribute).get("activation") == b"Relu" for n in fused)
    assert s.continue_().reason is StopReason.END
    exact(s.value("out2"), unoptimized(model, feeds, ["out2"])["out2"], "out2")


def _diagonal(c: int, cin: int, value: float, k: int = 1) -> np.ndarray:
    """Weights that scale channel ``o % cin`` into channel ``o`` (the middle tap of a k x k kernel): no padding effects."""
    w = np.zeros((c, cin, k, k), np.float32)
    for o in range(c):
        w[o, o % cin, k // 2, k // 2] = value
    return w


def _scaled(b1b: float, b1s: float, b2b: np.ndarray | float = 1.0) -> dict:
    """Normalizations that change nothing; y1 = x, out1 = (b1b + b1s) * x, y2 = out1 (x > 0 uniform)."""
    b2b = _diagonal(8, 8, b2b, 3) if isinstance(b2b, float) else b2b
    weights = {"b1a": _diagonal(8, 4, 1.0, 3), "b1b": _diagonal(8, 8, b1b, 3), "b1s": _diagonal(8, 4, b1s), "b2a": _diagonal(8, 8, 1.0, 3), "b2b": b2b}
    return {"weights": weights, "plain_bn": True}


RESIDUAL_FAULTS = {
    # the identity block's Conv overflows to -Inf (72 taps of 1e37): its Sum and the Relu hide it
    "conv overflow in the identity block": (_scaled(0.5, 0.5, np.full((8, 8, 3, 3), -1.0, np.float32)), 1e37, "b2b/conv", {"sum1", "sum2"}),
    # the projection shortcut's Conv overflows to -Inf; r0's own check reads b1a's tiny weights: y1's check, with r0's sum, fires
    "shortcut overflow": ({"weights": {"b1a": np.full((8, 4, 3, 3), 1e-36, np.float32), "b1s": np.full((8, 4, 1, 1), -20.0, np.float32)}}, 1e37,
                          "b1s/conv", {"sum1", "sum2"}),
    # two finite halves of -2e38: the projection block's Add makes -Inf itself
    "add overflow": (_scaled(-20.0, -20.0), 1e37, "b1/add", {"sum1", "sum2"}),
    # and +Inf: the shortcut out1 (2e38) plus the Conv of it (2e38); the Relu passes it on
    "sum overflow to +inf": (_scaled(10.0, 10.0), 1e37, "b2/sum", {"sum1", "sum2"}),
    # a normalization of variance -1 makes NaN (its chain is not bounded: the Sum after it is summed itself)
    "nan in the identity block": ({"var": {"b2b": -np.ones(8)}}, None, "b2b/bn", {"sum1"}),
    "nan in the shortcut": ({"var": {"b1s": -np.ones(8)}}, None, "b1s/bn", {"sum2"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RESIDUAL_FAULTS))
def test_a_fault_a_fused_residual_block_hides_is_found_at_the_exact_original_node(case):
    """Each stop is the exhaustive check's: the first tensor, in run order, holding NaN or Inf, with onnxruntime's unoptimized values."""
    options, value, expected, bounded = RESIDUAL_FAULTS[case]
    model = residual(**options)
    x = np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32) if value is None else np.full((1, 4, 8, 8), value, np.float32)
    feeds = {"x": x}
    node, tensor_name, values = first_fault_in_run_order(model, feeds)
    assert node == expected  # (the case makes the fault it says)
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert {"sum1", "sum2"} & set(plan.watch.bounded) == bounded
    stop = s.continue_()
    assert stop.node.id == expected and stop.tensor == tensor_name, stop.message
    assert stop.reason is (StopReason.NAN if np.isnan(values[tensor_name]).any() else StopReason.INF)
    producer = s.graph.node(expected)
    for name in [*producer.inputs, *producer.outputs]:
        if name and name in values:
            exact(s.value(name), values[name], f"{case}: {name}")


def test_a_source_whose_inf_is_excluded_bounds_nothing():
    """With r0's Relu excluded from the Inf filter, its +Inf would not fire its check: the Conv of it (which turns it
    into -Inf, hidden by the next Relu) keeps its own sum, and the stop is the exhaustive check's (it was missed)."""
    model = relu_chain(np.full((6, 4, 3, 3), -1.0, np.float32))
    x = np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32)
    x[0, 1, 3, 3] = np.inf
    feeds = {"x": x}
    node, name, values = first_fault_in_run_order(model, feeds, skip=("relu0",))
    assert node == "conv1" and np.isneginf(values[name]).any() and np.isfinite(values["y2"]).all()
    s = DebugSession(model, feeds, break_on=["nan", "inf"], inf_exclude=["relu0"])
    s.start()
    plan = _whole_plan(s)
    assert plan.watch is not None and "r0" not in plan.watch.checked and "b1" in plan.watch.watched
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.tensor == name, stop.message
    exact(s.value(name), values[name], name)


def fpn(p0_weights: np.ndarray | None = None, out_weights: np.ndarray | None = None):
    """A feature pyramid as in det640: s0 = Relu(Conv(Relu(x))), s1 = Relu(Conv(s0)) at half size, their 1x1 lateral Convs
    (no activation: of any sign) merged top-down, td = Add(lat0, Resize(lat1)), then p0 = Relu(Conv(td)), p1 = Relu(Conv(lat1)),
    y = Relu(Conv(Concat(p0, Resize(p1)))), prob = Sigmoid(Resize(Conv1x1(y))). Every Relu's input is a Conv of tensors
    bounded by the sums of s0 and s1 or p0 and p1; the Sigmoid's (which hides +Inf and -Inf) by the sum of y."""
    rng = np.random.default_rng(8)
    w = {"w0": _diagonal(8, 4, 1.0, 3), "w1": _diagonal(8, 8, 1.0, 3), "l0": _diagonal(8, 8, 1.0), "l1": _diagonal(8, 8, 1.0),
         "p0": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.3 if p0_weights is None else p0_weights,
         "p1": _diagonal(8, 8, 1.0, 3), "h": rng.standard_normal((4, 16, 3, 3)).astype(np.float32) * 0.3,
         "o": rng.standard_normal((1, 4, 1, 1)).astype(np.float32) if out_weights is None else out_weights}  # fmt: skip
    conv = lambda x, k, out, **a: helper.make_node("Conv", [x, k], [out], name=out, pads=[w[k].shape[-1] // 2] * 4, **a)  # noqa: E731
    nodes = [
        helper.make_node("Relu", ["x"], ["r0"], name="relu0"),
        conv("r0", "w0", "c0"), helper.make_node("Relu", ["c0"], ["s0"], name="s0"),
        conv("s0", "w1", "c1", strides=[2, 2]), helper.make_node("Relu", ["c1"], ["s1"], name="s1"),
        conv("s0", "l0", "lat0"), conv("s1", "l1", "lat1"),
        helper.make_node("Resize", ["lat1", "", "two"], ["up"], name="up", mode="linear"),
        helper.make_node("Add", ["lat0", "up"], ["td"], name="td"),
        conv("td", "p0", "c2"), helper.make_node("Relu", ["c2"], ["p0out"], name="p0"),
        conv("lat1", "p1", "c3"), helper.make_node("Relu", ["c3"], ["p1out"], name="p1"),
        helper.make_node("Resize", ["p1out", "", "two"], ["p1up"], name="p1up", mode="nearest"),
        helper.make_node("Concat", ["p0out", "p1up"], ["fuse"], name="fuse", axis=1),
        conv("fuse", "h", "c4"), helper.make_node("Relu", ["c4"], ["y"], name="head"),
        conv("y", "o", "c5"), helper.make_node("Resize", ["c5", "", "two"], ["big"], name="big", mode="nearest"),
        helper.make_node("Sigmoid", ["big"], ["prob"], name="prob"),
    ]  # fmt: skip
    inits = [init(k, v) for k, v in w.items()] + [init("two", np.array([1, 1, 2, 2], np.float32))]
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("prob", [1, 1, 16, 16])], inits)


def test_a_conv_of_a_bounded_tensor_of_any_sign_is_bounded_too():
    """An FPN's Convs read sums of lateral Convs and upsamplings, of any sign, but within the bound of the sums of the
    Relus they come from (a nearest or linear Resize keeps the largest magnitude, a Concat's is its parts' largest): their
    Relus fuse. So is the head's Sigmoid's input (it hides +Inf and -Inf alike): neither it nor the Conv before it is summed."""
    model = fpn()
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    watch = plan.watch
    assert {"c2", "c3", "c4", "td", "lat0", "up", "fuse"} <= set(watch.bounded) and not {"c2", "c3", "c4"} & set(watch.watched)
    assert watch.bounded["c2"] == "s1" and dict(watch.scales["s1"].terms).keys() == {"s0"}  # td: lat0 (of s0) + Resize(lat1 (of s1))
    assert watch.bounded["c4"] == "p1out" and dict(watch.scales["p1out"].terms).keys() == {"p0out"}
    # the Sigmoid's input is left to it and to y's check, the Conv before it (a Resize carries no fault on) to the check alone
    assert watch.bounded["big"] == watch.bounded["c5"] == "y" and "big" not in watch.watched and "c5" not in {*watch.watched, *watch.guards}
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = [n for n in _optimized_nodes(segment) if not all(o.startswith("__g") for o in n.output)]
    plain = _optimized_nodes(model)
    assert [n.op_type for n in own] == [n.op_type for n in plain]
    assert sum(n.op_type == "Relu" for n in own) == 1  # (r0: the input's)
    assert s.continue_().reason is StopReason.END
    exact(s.value("prob"), unoptimized(model, feeds, ["prob"])["prob"], "prob")

    # td = 2e37 everywhere; c2's 72 taps of -1 overflow to -Inf, which its Relu hides
    bad = fpn(np.full((8, 8, 3, 3), -1.0, np.float32))
    huge = {"x": np.full((1, 4, 8, 8), 1e37, np.float32)}
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "c2" and np.isfinite(values["prob"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "c2" and stop.tensor == name, stop.message
    exact(s.value("c2"), values["c2"], "c2")
    exact(s.value("td"), values["td"], "td")

    # y = 1e37 (at least) somewhere; the 1x1 head Conv of weight 1e2 makes +Inf, which the Sigmoid turns into 1
    bad = fpn(out_weights=np.full((1, 4, 1, 1), 1e2, np.float32))
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "c5" and np.isposinf(values["c5"]).any() and np.isfinite(values["prob"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "c5" and stop.tensor == name, stop.message
    exact(s.value("c5"), values["c5"], "c5")


def test_a_conv_of_a_value_the_segment_is_fed_is_bounded_by_the_sum_of_its_magnitudes():
    """A Conv of the model's input (of any sign: a network's first Conv, or a part's first, fed what the part before
    made) is bounded by the sum of |input|, which the check reads: its Relu fuses too, and an overflow is still found."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32), first="Identity")
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert plan.watch.bounded["b1"] == "y1" and "x" in dict(plan.watch.scales["y1"].terms) and "x" in plan.watch.checked
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = [n for n in _optimized_nodes(segment) if not all(o.startswith("__g") for o in n.output)]
    assert [n.op_type for n in own] == [n.op_type for n in _optimized_nodes(model)]
    assert "ReduceL1" in {n.op_type for n in segment.graph.node}
    assert s.continue_().reason is StopReason.END

    bad = relu_chain(np.full((6, 4, 3, 3), 1.0, np.float32), first="Identity")
    huge = {"x": np.full((1, 4, 8, 8), -1e37, np.float32)}  # 36 taps of -1e37: -Inf, hidden by the Relu
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "conv1" and np.isfinite(values["y1"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.tensor == name, stop.message
    exact(s.value(name), values[name], name)


def test_a_shortcut_set_from_outside_is_not_taken_to_be_non_negative():
    """out1 is a Relu's output, but once set (here to -FLT_MAX) and fed to the segment after it, it is any value: the
    identity block's Sum (-FLT_MAX plus a Conv of -1e33) makes -Inf, which its Relu hides. The check reads sum(|out1|)."""
    model = residual(weights={"b2a": _diagonal(8, 8, -1e33 / 3.4e38, 3), "b2b": _diagonal(8, 8, -1.0, 3)}, plain_bn=True)
    feeds = {"x": np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32)}
    low = np.full((1, 8, 8, 8), -np.finfo(np.float32).max, np.float32)
    stops = []
    for kwargs in ({"opt_level": "none", "fast": False}, {}):  # the exhaustive check, then the watched optimized continue
        s = DebugSession(model, feeds, break_on=["nan", "inf"], **kwargs)
        s.set_breakpoints(["b2a/conv"])
        assert s.continue_().node.id == "b2a/conv"
        s.set_breakpoints([])
        s.set_value("out1", low)
        stop = s.continue_()
        stops.append((stop.reason, stop.node.id if stop.node else None, stop.tensor))
        assert stop.reason is StopReason.INF, stop.message
        assert np.isneginf(s.value("sum2")).all() and np.isfinite(s.value("b2b.bn")).all()
    assert stops[0] == stops[1] == (StopReason.INF, "b2/sum", "sum2")


def test_a_nan_in_a_fed_value_that_no_node_reads_stops_nothing():
    """A strided Conv skips the input's odd positions: a NaN there reaches no output, and the exhaustive check runs
    to the end. The check reads sum(|x|) (NaN), taken as +Inf: looked at, nothing found, and no stop claiming the
    optimized graph made a NaN."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
    ]
    model = make_model(nodes, [tensor("x", [1, 3, 8, 8])], [tensor("r", [1, 4, 4, 4])], [init("w", R.standard_normal((4, 3, 1, 1)).astype(np.float32))])
    x = R.standard_normal((1, 3, 8, 8)).astype(np.float32)
    x[0, 1, 3, 5] = np.nan
    assert first_fault_in_run_order(model, {"x": x})[0] is None
    s, plan = watched_whole(model, {"x": x})
    assert plan is not None and plan.watch is not None and plan.watch.bounded == {"c": "r"} and "x" in plan.watch.checked
    stop = s.continue_()
    assert stop.reason is StopReason.END, stop.message


def test_a_watched_run_in_parts_is_cut_where_no_residual_sum_reads_across():
    """A cut where a value live across it is read by an Add makes that Add read a model input, which onnxruntime runs
    in its plain layout (no Conv+Add+Relu fusion, for that block and every one after it in the part): the parts are cut
    before a projection block instead (its input read by two Convs), and every block's Add and Relu fuse into its Conv."""
    model = residual_stages("pipiii")
    s = DebugSession(model, {"x": R.standard_normal((1, 16, 8, 8)).astype(np.float32)}, break_on=["nan", "inf"])
    s.start()
    bounds = s.planner.parts(0, len(s.sequence), 2)
    assert len(bounds) == 3 and s.sequence[bounds[1]].id == "b2a"  # (the even cut falls inside b2, before identity block b3)
    fused = 0
    for a, b in zip(bounds, bounds[1:]):
        for filt in (FaultFilter(False, False), FaultFilter(True, True)):
            plan = s.planner.plan(a, b, filt=filt, dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda x, y: [],
                                  constants=s.store.fixed, version="probe", optimized=True)  # fmt: skip
            assert plan is not None
            zeros = lambda r: np.zeros((1, 16, 8, 8), np.float32)  # noqa: E731  (every value read is 1x16x8x8)
            feeds, embedded = s.executor.split(plan.reads, zeros, s.values.fixed, s._segment_embedded(s.values))
            segment, _ = s.segments.build_model(plan.ran, feeds, embedded, plan.wanted, plan.watch)
            convs = [n for n in _optimized_nodes(segment) if n.op_type == "Conv" and len(n.input) == 4]
            fused += len(convs) if filt.active else 0
            assert all(dict((t.name, t.s) for t in n.attribute).get("activation") == b"Relu" for n in convs)
    assert fused == 6
