"""Continuing through onnxruntime's optimized graph: every stop still attributed exactly in the original graph.

A NaN or Inf that arises inside a group onnxruntime fuses (Conv+BatchNormalization, Conv+activation,
MatMul+Add, LayerNorm, attention, Gelu) stops at the exact original node, and the values shown
there equal onnxruntime's without optimizations. A fusion that computes a NaN the original nodes
do not is a stop that says so. The watch is placed where it does not undo the fusions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import (
    as_shown,
    assert_exact,
    init,
    make_model,
    optimized_nodes,
    ort_values,
    run_values,
    tensor,
    whole_plan,
)
from onnx import helper

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.options import session_options

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


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
    return (
        make_model(nodes, [tensor("x", [1, 3, 8, 8])], [tensor("z", [1, 2, 8, 8])], inits),
        {"x": R.standard_normal((1, 3, 8, 8)).astype(np.float32)},
        "bn",
    )


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
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "bias"], ["y"], name="add"),
    ]
    return (
        make_model(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])], [init("w", w), init("bias", np.ones(8, np.float32))]),
        {"x": x},
        "matmul",
    )


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
    feeds = {
        "q": q,
        "k": np.abs(R.standard_normal((2, 4, 8))).astype(np.float32) + 0.1,
        "v": R.standard_normal((2, 4, 8)).astype(np.float32),
    }
    model = make_model(
        nodes,
        [tensor(n, [2, 4, 8]) for n in ("q", "k", "v")],
        [tensor("out", [2, 4, 8])],
        [init("scale", np.array(2.0, np.float32))],
    )
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
    inits = [
        init("sqrt2", np.array(np.sqrt(2.0), np.float32)),
        init("one", np.array(1.0, np.float32)),
        init("half", np.array(0.5, np.float32)),
    ]
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
    shown = [n for n in names if n not in s.graph.initializer_names]
    want = ort_values(model, feeds, shown)
    for name in shown:
        assert_exact(s.value(name), want[name], f"{case}: {name}")  # what is shown is the original graph's, not the fused kernel's


def test_a_fusion_that_computes_a_nan_the_original_nodes_do_not_says_so():
    # Conv folded with its BatchNormalization: a scale of 1e30 multiplies the weights (+1, -1) before
    # the inputs (1e10 each) are summed: inf - inf = NaN, where the original Conv computes 0.
    w = np.array([[[[1.0]], [[-1.0]]]], np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn"),
    ]
    inits = [
        init("w", w),
        init("g", np.array([1e30], np.float32)),
        init("b", np.zeros(1, np.float32)),
        init("m", np.zeros(1, np.float32)),
        init("v", np.ones(1, np.float32)),
    ]
    model = make_model(nodes, [tensor("x", [1, 2, 2, 2])], [tensor("y", [1, 1, 2, 2])], inits)
    feeds = {"x": np.full((1, 2, 2, 2), 1e10, np.float32)}
    assert DebugSession(model, feeds, opt_level="none", break_on=["nan"]).continue_().reason is StopReason.END
    stop = DebugSession(model, feeds, opt_level="all", break_on=["nan"]).continue_()
    assert stop.reason is StopReason.NAN and stop.details["disagreement"] and stop.details["opt_level"] == "all"
    assert stop.value == "y" and set(stop.details["origin"]) == {"conv", "bn"}
    assert "makes NaN in 'y'" in stop.message and "from conv, bn" in stop.message
    assert "the original nodes compute it without NaN (float32[1,1,2,2] min=0 max=0" in stop.message


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
    plain = optimized_nodes(model)
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    for filt in (FaultFilter(True, False), FaultFilter(True, True)):
        plan = s.planner.plan(
            0, len(s.sequence), filt=filt, dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda a, b: [], constants=None,
            version=("probe", filt), optimized=True,
        )  # fmt: skip
        assert plan is not None and plan.watch is not None
        segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
        nodes = optimized_nodes(segment)
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
        assert ("GlobalAveragePool" in {n.op_type for n in watch}) == bool(
            images
        )  # an image is pooled first, in the blocked layout


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
    assert_exact(runs[1][1], runs[0][1], "the same outputs")
    assert any((tmp_path / "cache").glob("*.onnx")) and not any((tmp_path / "cache").glob(".*.tmp"))


def test_the_segment_cache_keeps_within_its_limit_oldest_out_and_clears_stale_temporary_files(tmp_path, monkeypatch):
    import os

    from graph_dap.runtime.engine import cache

    monkeypatch.setattr(cache, "LIMIT_BYTES", 250)
    old = cache.time.time() - 2 * cache.STALE_TMP_SECONDS
    for i, name in enumerate(["a", "b", "c"]):  # a oldest
        (tmp_path / f"{name}.onnx").write_bytes(b"x" * 100)
        os.utime(tmp_path / f"{name}.onnx", (old + i, old + i))
    (tmp_path / ".dead.1.2.tmp").write_bytes(b"x")  # a killed build's
    os.utime(tmp_path / ".dead.1.2.tmp", (old, old))
    (tmp_path / ".live.3.4.tmp").write_bytes(b"x")  # a build under way
    cache._trim(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".live.3.4.tmp", "b.onnx", "c.onnx"]
    cache._trim(tmp_path / "gone")  # a folder removed meanwhile: nothing to do, no error


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


def test_the_worker_prepares_the_next_continue_only_once_the_client_is_idle(tmp_path):
    """A client that steps asks for the next step at once: the worker does not plan and optimize the rest of the model
    at every stop (that made each step 60-200 ms on the PaddleOCR recognizer), only once no request came for a while."""
    import conv_models

    from graph_dap.worker import protocol as p
    from graph_dap.worker.service import WorkerService

    onnx.save(conv_models.mobile(64), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "x.npz", image=R.standard_normal((1, 3, 64, 64)).astype(np.float32))
    service = WorkerService(lambda message: None)
    service.rpc_load(p.LoadArgs(str(tmp_path / "m.onnx"), str(tmp_path / "x.npz"), write_listing=False, opt_level="all"))
    service.rpc_set_break_on(p.BreakOnArgs(("nan",)))
    service.rpc_run(p.RunArgs(p.RunCommand.START))
    for _ in range(3):
        service.rpc_run(p.RunArgs(p.RunCommand.STEP))
    s = service.s
    assert s.segments.sessions_built == 0 and not s.segments._sessions  # nothing built or building while stepping
    service.idle()
    for future in list(s.segments._sessions.values()):
        future.result(60)
    built = s.segments.sessions_built
    assert built >= 1
    assert service.rpc_run(p.RunArgs(p.RunCommand.CONTINUE)).reason == "end"
    assert s.segments.sessions_built == built  # pressing continue only ran what was built while idle


def test_a_stop_shows_the_runs_values_and_steps_run_the_original_nodes_from_them():
    """At level all a stop shows what the user's optimized run computed: a value the segment kept is the run's, as
    onnxruntime's optimized model computes it (here a fused Conv+BatchNormalization+Relu's output); values the run
    did not keep (fused away, or in onnxruntime's blocked layout) are recomputed with the original nodes and say
    so; a step runs one original node, on the run's values."""
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
    original = ort_values(model, feeds, ["r1"])
    s = DebugSession(model, feeds, opt_level="all", break_on=["nan", "inf"])
    s.set_breakpoints(["conv2"])
    assert s.continue_().node.id == "conv2"
    run_r1 = run_values(model, feeds, ["r1"])["r1"]  # the fused kernel's output, as the user's own run makes it
    assert_exact(s.value("r1"), run_r1, "r1 at the stop")
    assert s.note("r1") == ""
    assert not np.array_equal(run_r1, original["r1"])  # (the fused kernel's last bits: the two are told apart)
    shown = {name: s.value(name) for name in ("c0", "bn0", "r0", "c1", "bn1")}  # not kept by the run: computed again as it
    for name, want in as_shown(s, model, feeds, list(shown)).items():  # computes them, or by the original nodes
        assert_exact(shown[name], want, name)
    for name in ("c0", "bn0", "c1", "bn1"):  # (each Conv fused with its BatchNormalization and Relu: no such tensor in the run)
        assert s.note(name).startswith("recomputed with the original nodes: at level all onnxruntime's graph has no tensor"), name
    for _ in range(3):  # the steps read the run's r1
        s.step()
    tail = make_model(nodes[6:], [tensor("r1", [1, 4, 16, 16])], [tensor("r2", [1, 4, 16, 16])], inits)
    want = ort_values(tail, {"r1": run_r1})
    for name in ("c2", "bn2", "r2"):
        assert_exact(s.value(name), want[name], f"{name} after three steps")
        assert s.note(name).startswith("recomputed with the original nodes"), name


def weights_by_constant_of_shape():
    """Conv weights and a MatMul weight that ConstantOfShape makes (as in the onnx wheel's light models):
    onnxruntime folds them into initializers of the whole model and pre-packs them."""

    def made(name: str, shape: list[int], value: float) -> list[onnx.NodeProto]:
        return [
            helper.make_node(
                "Constant",
                [],
                [f"{name}_shape"],
                value=helper.make_tensor(f"{name}_shape", onnx.TensorProto.INT64, [len(shape)], shape),
            ),
            helper.make_node(
                "ConstantOfShape", [f"{name}_shape"], [name], value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [value])
            ),
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


def test_weights_made_by_constant_of_shape_are_filled_in_the_segments_as_in_the_whole_model():
    """The session holds a ConstantOfShape's output as a view of its one value (no memory); the segments
    compute it again, so onnxruntime folds it into a pre-packed initializer as in the whole model. The
    outputs are onnxruntime's own at ORT_ENABLE_ALL, bit for bit."""
    model, feeds = weights_by_constant_of_shape()
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    assert s.store.fixed["k"].shape == (64 * 16 * 16, 64) and not any(s.store.fixed["k"].strides)
    assert s.continue_().reason is StopReason.END
    plain = ort.InferenceSession(model.SerializeToString(), session_options("all"), providers=["CPUExecutionProvider"])
    assert_exact(s.outputs()["y"], plain.run(["y"], feeds)[0], "y as the user's own run computes it")
    plan = whole_plan(s)
    assert {"w2", "k"} <= {o for n in plan.ran for o in n.outputs} and not {"w2", "k"} & set(plan.reads)
    assert_exact(s.value("k"), np.full((64 * 16 * 16, 64), 0.001, np.float32), "k as shown")


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
    assert_exact(s.outputs()["y"], plain.run(["y"], feeds)[0], "y as the user's own run computes it")
    plan = whole_plan(s)
    fed, embedded = s.executor.split(plan.reads, s.values.get, s.values.fixed, s.runs.segment_embedded(s.values))
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
    assert_exact(s.outputs()["y"], ort_values(changed, {**feeds, "k": k}, ["y"])["y"], "y with the new k")


def test_a_continue_that_leaves_the_level_asked_says_so_in_the_report(tmp_path, capsys):
    """A com.microsoft op that onnx's shape inference does not type: the first watched continue learns the types node by
    node, without optimizations; the run's report says so (text and JSON), and a restart that runs at the level says nothing."""
    from graph_dap import cli
    from graph_dap.cli.report import stop_report

    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft", name="gelu"), helper.make_node("Relu", ["g"], ["y"], name="relu")]
    model = make_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])], extra_opsets=[("com.microsoft", 1)])
    path = tmp_path / "gelu.onnx"
    onnx.save(model, str(path))
    assert cli.main(["run", str(path), "--break-on", "nan"]) == 0
    text = capsys.readouterr().out
    assert "outputs (as the run computed them):" in text
    note = "gelu .. relu (2 nodes) ran node by node without optimizations: the types of their values were not known yet"
    assert f"note: not all of the run was at optimization level all:\n  {note}" in text
    s = DebugSession(path, None, break_on=["nan"], opt_level="all")
    s.start()
    end = s.continue_()
    assert stop_report(s, end)["opt_level"] == {"asked": "all", "kept": False, "unoptimized": [note]}
    s.restart()
    end = s.continue_()
    assert stop_report(s, end)["opt_level"] == {"asked": "all", "kept": True, "unoptimized": []}
    plain = ort.InferenceSession(str(path), session_options("all")).run(["y"], {"x": s.value("x")})[0]
    np.testing.assert_array_equal(s.outputs()["y"], plain)


def test_a_segment_over_large_weights_keeps_checkpoints_where_values_have_two_readers(monkeypatch):
    """Over large weights (a language model's), an optimized segment keeps the values live at a few cuts where each
    has two readers (materialized anyway): a NaN found deep in it is confirmed by the original nodes from the nearest
    (benchmarks/bench_llm.py: 76 nodes recomputed instead of 1,162, no session let go). Below the threshold, none."""
    from graph_dap.runtime import load_graph
    from graph_dap.runtime.engine import planning
    from graph_dap.runtime.engine.faults import FaultFilter

    rng = np.random.default_rng(3)
    nodes, inits, h = [], [], "x"
    for i in range(10):  # residual blocks: h = h + Relu(h @ W_i); h has two readers between blocks
        w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
        if i == 7:
            w[2, 5] = np.nan
        inits.append(init(f"w{i}", w))
        nodes += [
            helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("Add", [h, f"r{i}"], [f"h{i}"], name=f"res{i}"),
        ]
        h = f"h{i}"
    model = make_model(nodes, [tensor("x", [4, 8])], [tensor(h, [4, 8])], inits)
    graph = load_graph(model)
    seq = list(graph.nodes)
    last = {**{i: k for k, n in enumerate(seq) for i in n.inputs}, h: len(seq)}  # (the output: read after the run)
    dtypes = {o: "float32" for n in seq for o in n.outputs}

    def kept(heavy: int) -> list[str]:
        monkeypatch.setattr(planning, "HEAVY_BYTES", heavy)
        plan = planning.SegmentPlanner(graph.main, seq, last).plan(
            0, len(seq), filt=FaultFilter(True, True), dtypes=dtypes, budget=1 << 30, conditions=lambda *_: [], constants=None,
            version=0, optimized=True,
        )  # fmt: skip
        assert plan is not None
        return plan.wanted

    assert kept(planning.HEAVY_BYTES) == ["h9"]  # 2.5 KB of weights: only what the run returns
    checkpoints = kept(0)[1:]
    assert checkpoints and all(c.startswith("h") and len(graph.consumers(c)) == 2 for c in checkpoints)
    monkeypatch.setattr(planning, "HEAVY_BYTES", 0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    s = DebugSession(model, {"x": x}, break_on=["nan", "inf"], opt_level="all")
    s.start()
    stop = s.continue_()
    assert (stop.reason, stop.node.id) == (StopReason.NAN, "mm7")
    # Watching for NaN alone, the run's end is watched alone (Relu keeps NaN, MatMul and Add carry it): the fault is
    # looked for after the last checkpoint whose values are all finite, and nothing before it runs again.
    n = DebugSession(model, {"x": x}, break_on=["nan"], opt_level="all")
    n.start()
    stop = n.continue_()
    assert (stop.reason, stop.node.id) == (StopReason.NAN, "mm7")
    assert n.runs.plan(n.levels.main, 0, len(n.sequence)).watch.watched == ["h9"]
    assert n.executions["mm0"] == 1 and n.executions["mm7"] == 2, dict(n.executions)
    truth = ort_values(model, {"x": x}, ["h6"])["h6"]
    np.testing.assert_allclose(s.value("h6"), truth, rtol=1e-6, atol=1e-6)  # (a checkpoint: the run's value)
