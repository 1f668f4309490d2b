"""The fast engine: in-graph NaN/Inf watch with pruning, few onnxruntime calls, memory budget, Inf policy."""

from __future__ import annotations

import numpy as np
import pytest
from models import assert_same, init, make_model, ort_values, tensor
from onnx import TensorProto, helper

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.watch import watch_plan

# op, extra inputs (name, array), attributes, input shape, pruned?
R = np.random.default_rng(5)
W4 = R.standard_normal((4, 4)).astype(np.float32)
RULES = [
    ("Add", [("k", W4)], {}, [4, 4], True),
    ("Sum", [("k", W4)], {}, [4, 4], True),
    ("Sub", [("k", W4)], {}, [4, 4], True),
    ("Mul", [("k", W4)], {}, [4, 4], True),
    ("Div", [("k", W4 + 5)], {}, [4, 4], True),
    ("MatMul", [("k", W4)], {}, [4, 4], True),
    ("Gemm", [("k", W4)], {}, [4, 4], True),
    ("Reshape", [("k", np.array([2, 8], np.int64))], {}, [4, 4], True),
    ("Flatten", [], {}, [4, 4], True),
    ("Identity", [], {}, [4, 4], True),
    ("Transpose", [], {"perm": [1, 0]}, [4, 4], True),
    ("Unsqueeze", [("k", np.array([0], np.int64))], {}, [4, 4], True),
    ("Squeeze", [("k", np.array([0], np.int64))], {}, [1, 16], True),
    ("Concat", [("k", W4)], {"axis": 0}, [4, 4], True),
    ("LayerNormalization", [("k", np.ones(4, np.float32))], {}, [4, 4], True),
    ("BatchNormalization", [("sc", np.ones(2, np.float32)), ("bi", np.zeros(2, np.float32)),
                            ("mu", np.zeros(2, np.float32)), ("va", np.ones(2, np.float32))], {}, [1, 2, 4, 4], True),
    ("GlobalAveragePool", [], {}, [1, 2, 4, 4], True),
    ("AveragePool", [], {"kernel_shape": [2, 2], "strides": [2, 2]}, [1, 2, 4, 4], True),
    ("Conv", [("k", R.standard_normal((3, 2, 3, 3)).astype(np.float32))], {"pads": [1, 1, 1, 1]}, [1, 2, 4, 4], True),
    # not pruned: windows skip positions, the denominator of Div, a non-propagating op, beta=0
    ("AveragePool", [], {"kernel_shape": [1, 1], "strides": [2, 2]}, [1, 2, 4, 4], False),
    ("Conv", [("k", R.standard_normal((3, 2, 1, 1)).astype(np.float32))], {"strides": [2, 2]}, [1, 2, 4, 4], False),
    ("Div", [("k", W4)], {"swap": True}, [4, 4], False),
    ("Gemm", [("a", W4), ("k", W4)], {"beta": 0.0, "swap3": True}, [4, 4], False),
    ("Relu", [], {}, [4, 4], False),
    ("Softmax", [], {}, [4, 4], False),
]


def rule_model(op, extras, attrs, shape):
    """x -> Neg -> t -> OP(t, ...) -> c -> Relu -> y: t is pruned iff OP carries faults on."""
    attrs = dict(attrs)
    swap, swap3 = attrs.pop("swap", False), attrs.pop("swap3", False)
    ins = ["t"] + [name for name, _ in extras]
    if swap:
        ins = [ins[1], ins[0]]
    if swap3:
        ins = [ins[1], ins[2], ins[0]]
    nodes = [
        helper.make_node("Neg", ["x"], ["t"], name="neg"),
        helper.make_node(op, ins, ["c"], name="op", **attrs),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    inits = [init(name, arr) for name, arr in extras]
    return make_model(nodes, [tensor("x", shape)], [tensor("y", None)], inits)


@pytest.mark.parametrize("op,extras,attrs,shape,pruned", RULES, ids=[f"{r[0]}-{'pruned' if r[4] else 'kept'}-{i}" for i, r in enumerate(RULES)])
def test_pruning_rule_on_its_own(op, extras, attrs, shape, pruned):
    model = rule_model(op, extras, attrs, shape)
    s = DebugSession(model, break_on=["nan", "inf"])
    nodes = list(s.sequence)
    plan = watch_plan(s.graph, nodes, s.executor.dtypes, FaultFilter(True, True).never_prune)
    assert ("t" in plan.guards) is pruned
    assert ("t" in plan.watched) is not pruned
    # whatever the plan, a fault in t is found at its producer, for NaN, +Inf and -Inf
    for bad in (np.nan, np.inf, -np.inf):
        for where in (0, int(np.prod(shape)) - 1, 5):
            x = R.standard_normal(shape).astype(np.float32)
            x.reshape(-1)[where] = bad
            s = DebugSession(model, {"x": x}, break_on=["nan"] if np.isnan(bad) else ["inf"])
            s.start()
            stop = s.continue_()
            assert stop.reason in (StopReason.NAN, StopReason.INF), (bad, where, stop.message)
            assert stop.node.id == "neg" and stop.value == "t" and s.current.id == "op"


UNARY_NAN = ["Relu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "Tanh", "Softplus", "Exp", "Erf", "Reciprocal", "Sign", "Atan", "Softmax"]
UNARY_BOTH = ["LeakyRelu", "HardSwish", "Softsign", "Log", "Sqrt", "Abs", "Neg", "Gelu", "Sin", "Cos", "Floor", "Ceil", "Round",
              "Mish", "Dropout", "Asinh", "Sinh", "Cosh", "ReduceSum", "ReduceMean"]  # fmt: skip


@pytest.mark.parametrize("op", UNARY_NAN + UNARY_BOTH)
def test_an_activation_guards_the_tensor_before_it_for_what_it_keeps(op):
    """NaN in -> NaN out for every one of them: with the nan filter alone the tensor before it goes unwatched
    (so Conv -> BatchNormalization -> activation is watched at its end, and can be fused); with nan+inf only
    when the op also keeps +-Inf non-finite. Whatever the plan, the fault is found at its producer."""
    model = rule_model(op, [], {}, [4, 4])
    opset = 20  # Gelu, Mish
    model.opset_import[0].version = opset
    s = DebugSession(model, break_on=["nan"])
    nodes = list(s.sequence)
    assert "t" in watch_plan(s.graph, nodes, s.executor.dtypes, FaultFilter(True, False).never_prune, True, False).guards
    both = watch_plan(s.graph, nodes, s.executor.dtypes, FaultFilter(True, True).never_prune, True, True)
    assert ("t" in both.guards) is (op in UNARY_BOTH)
    for bad, filters in ((np.nan, ["nan"]), (np.inf, ["nan", "inf"]), (-np.inf, ["nan", "inf"]), (np.nan, ["nan", "inf"])):
        x = R.standard_normal((4, 4)).astype(np.float32)
        x[1, 2] = bad
        s = DebugSession(model, {"x": -x}, break_on=filters)
        stop = s.continue_()
        assert stop.reason in (StopReason.NAN, StopReason.INF), (op, bad, stop.message)
        assert stop.node.id == "neg" and stop.value == "t", (op, bad, stop.message)


KEEPS_FINITE = ["Relu", "Tanh", "Sigmoid", "HardSigmoid", "Erf", "Atan", "Sign", "Abs", "Neg", "Floor", "Ceil", "Round", "Softsign",
                "Sin", "Cos", "Identity", "Flatten", "Transpose"]  # fmt: skip
EXTREMES = np.array([[0.0, -0.0, 1e-45, -1e-45], [1.17e-38, 3.0e38, -3.0e38, np.finfo(np.float32).max],
                     [-np.finfo(np.float32).max, 1e30, -1e30, 88.8], [-88.8, 1e4, -1e4, 0.5]], np.float32)  # fmt: skip


@pytest.mark.parametrize("op", KEEPS_FINITE)
def test_an_op_that_keeps_finite_values_finite_needs_no_watch_after_a_watched_tensor(op):
    """With nan and inf watched, what such an op makes of a watched tensor cannot hold the first fault:
    onnxruntime maps every finite float32 (to +-FLT_MAX and denormals) to a finite value; Exp does not."""
    for kind in (op, "Exp"):
        nodes = [helper.make_node("Neg", ["x"], ["t"], name="neg"), helper.make_node(kind, ["t"], ["c"], name="op")]
        model = make_model(nodes, [tensor("x", [4, 4])], [tensor("t", None), tensor("c", None)], [])
        model.opset_import[0].version = 20
        c = ort_values(model, {"x": -EXTREMES})["c"]
        assert bool(np.isfinite(c).all()) is (kind != "Exp"), kind
        s = DebugSession(model, break_on=["nan", "inf"])
        plan = watch_plan(s.graph, list(s.sequence), s.executor.dtypes, FaultFilter(True, True).never_prune)
        assert plan.watched == (["t", "c"] if kind == "Exp" else ["t"]), kind
        nan_only = watch_plan(s.graph, list(s.sequence), s.executor.dtypes, FaultFilter(True, False).never_prune, True, False)
        assert nan_only.watched == ["t", "c"]  # an Inf goes unwatched: Sin or Cos may make NaN of it
        for bad in (np.nan, np.inf):
            x = R.standard_normal((4, 4)).astype(np.float32)
            x[2, 1] = bad
            s = DebugSession(model, {"x": -x}, break_on=["nan", "inf"])
            stop = s.continue_()
            assert stop.reason in (StopReason.NAN, StopReason.INF) and stop.node.id == "neg" and stop.value == "t", stop.message
            carried = s.continue_()  # what the op makes of it (Sin of Inf: NaN) is reported next, as before
            assert carried.reason is StopReason.END or carried.node.id == "op", carried.message


def long_chain(n=60, size=64):
    nodes = []
    for i in range(n):
        nodes.append(helper.make_node("MatMul", [f"v{i}", "w"], [f"u{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Tanh", [f"u{i}"], [f"v{i + 1}"], name=f"tanh{i}"))
    w = (R.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)
    return make_model(nodes, [tensor("v0", [size, size])], [tensor(f"v{n}", [size, size])], [init("w", w)])


def test_runs_use_one_onnxruntime_call_each():
    model = long_chain()
    x = R.standard_normal((64, 64)).astype(np.float32)
    s = DebugSession(model, {"v0": x}, break_on=["nan", "inf"])
    s.set_breakpoints(["tanh50"])
    s.start()
    calls = s.ort_calls
    stop = s.continue_()
    assert stop.node.id == "tanh50" and s.ort_calls - calls == 1
    calls = s.ort_calls
    assert s.continue_().reason is StopReason.END and s.ort_calls - calls == 1
    s.restart()
    calls = s.ort_calls
    s.goto("tanh30")  # its input needs 60 nodes: one segment
    assert s.ort_calls - calls == 1
    s.set_breakpoints([])
    s.set_value("u30", np.zeros((64, 64), np.float32))
    calls = s.ort_calls
    assert s.continue_().reason is StopReason.END and s.ort_calls - calls == 1
    truth = ort_values(model, {"v0": x})
    assert not np.array_equal(s.value("v60"), truth["v60"])  # the set value changed the result
    # every value of the timeline is readable and exact (recomputed from what is kept)
    s2 = DebugSession(model, {"v0": x})
    s2.start()
    s2.continue_()
    for name in ("u0", "v17", "u44", "v60"):
        assert_same(s2.value(name), truth[name], name)


def test_memory_budget_bounds_what_is_kept_and_everything_stays_readable():
    size = 256  # 256 KB per value; 120 values = 30 MB computed
    model = long_chain(60, size)
    x = R.standard_normal((size, size)).astype(np.float32)
    truth = ort_values(model, {"v0": x})
    s = DebugSession(model, {"v0": x}, memory_budget_mb=2)
    s.start()
    for _ in range(80):
        s.step()
    assert s.store.evictions > 0
    assert s.store.peak_cached_bytes <= 2 * (1 << 20) + 2 * size * size * 4
    for name in ("u0", "v3", "u20", "v40"):
        assert_same(s.value(name), truth[name], name)
    for _ in range(5):
        s.step_back()
    assert s.current.id == "tanh37" and not s.has_value("v38")
    assert_same(s.value("u37"), truth["u37"], "u37")
    s.set_value("v10", np.zeros((size, size), np.float32))
    assert s.continue_().reason is StopReason.END
    s2 = DebugSession(model, {"v0": x})
    s2.start()
    s2.run_to("mm10")
    s2.set_value("v10", np.zeros((size, size), np.float32))
    s2.continue_()
    assert_same(s.value("v60"), s2.value("v60"), "v60")
    assert s.store.cached_bytes <= 2 * (1 << 20) + 2 * size * size * 4


def attention_model(seq=6, dim=8):
    """One masked self-attention head: the causal mask is Where(mask, -inf, scores), as exporters write it."""
    r = np.random.default_rng(2)
    wq, wk = (r.standard_normal((dim, dim)).astype(np.float32) for _ in range(2))
    causal = np.triu(np.ones((seq, seq), bool), 1)
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="attn/q"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="attn/k"),
        helper.make_node("Transpose", ["k"], ["kt"], name="attn/kt", perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="attn/scores"),
        helper.make_node("Where", ["causal", "neg_inf", "scores"], ["masked"], name="attn/mask"),
        helper.make_node("Softmax", ["masked"], ["probs"], name="attn/softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "x"], ["y"], name="attn/out"),
    ]
    inits = [init("wq", wq), init("wk", wk), init("causal", causal), init("neg_inf", np.array(-np.inf, np.float32))]
    return make_model(nodes, [tensor("x", [seq, dim])], [tensor("y", [seq, dim])], inits)


@pytest.mark.parametrize("fast", [True, False])
def test_inf_policy_excludes_attention_masks(fast):
    model = attention_model()
    s = DebugSession(model, break_on=["nan", "inf"], fast=fast)
    s.start()
    assert s.continue_().reason is StopReason.END  # the -inf put in place by a Where is recognized as a mask
    for exclude in (["op:Where"], ["*mask*"]):
        s = DebugSession(model, break_on=["nan", "inf"], inf_exclude=exclude, fast=fast)
        s.start()
        assert s.continue_().reason is StopReason.END
    # a NaN from the excluded node is still found
    x = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    x[2, 3] = np.nan
    s = DebugSession(model, {"x": x}, break_on=["nan", "inf"], inf_exclude=["op:Where"], fast=fast)
    s.start()
    assert s.continue_().node.id == "attn/q"


def test_overflowing_sum_of_finite_values_is_not_a_stop():
    big = np.full((4, 4), 3e38, np.float32)  # finite, but its sum overflows to +inf
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="copy"), helper.make_node("Relu", ["a"], ["y"], name="relu"),
             helper.make_node("Neg", ["y"], ["z"], name="neg")]
    model = make_model(nodes, [tensor("x", [4, 4])], [tensor("z", [4, 4])])
    s = DebugSession(model, {"x": big}, break_on=["nan", "inf"])
    s.start()
    assert s.continue_().reason is StopReason.END


def test_unknown_types_fall_back_then_watch():
    # shape inference cannot type a custom-domain free graph output: the first continue learns types node by node
    nodes = [helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.FLOAT), helper.make_node("Log", ["c"], ["y"], name="log"),
             helper.make_node("Neg", ["y"], ["z"], name="neg")]
    model = make_model(nodes, [tensor("x", [3], TensorProto.INT64)], [tensor("z", None)])
    model.graph.ClearField("value_info")
    s = DebugSession(model, {"x": np.array([1, 0, 2], np.int64)}, break_on=["inf"])
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "log" and stop.details["neginf"] == 1


def test_inf_after_an_earlier_nan_is_found_with_the_inf_filter_alone():
    nodes = [
        helper.make_node("Sqrt", ["x"], ["s"], name="sqrt"),  # NaN for negative x: not what the inf filter wants
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Div", ["r", "zero"], ["d"], name="div"),  # r / 0: Inf (and NaN for 0/0)
        helper.make_node("Tanh", ["d"], ["y"], name="tanh"),
    ]
    model = make_model(nodes, [tensor("x", [4])], [tensor("y", [4])], [init("zero", np.zeros(4, np.float32))])
    x = np.array([-1.0, 4.0, 9.0, 1.0], np.float32)
    for fast in (True, False):
        s = DebugSession(model, {"x": x}, break_on=["inf"], fast=fast)
        s.start()
        stop = s.continue_()
        assert stop.reason is StopReason.INF and stop.node.id == "div", (fast, stop.message)


def test_check_first_stops_at_a_breakpoint_on_the_first_node():
    s = DebugSession(long_chain(3, 8), break_on=[])
    s.set_breakpoints(["mm0"])
    s.start()
    assert s.continue_(check_first=True).node.id == "mm0"
    assert s.continue_().reason is StopReason.END


def test_a_long_run_is_split_so_a_pause_lands_part_way():
    """Without optimizations a long run is cut into parts, so that a pause keeps what the finished ones computed (at an
    optimization level it runs whole: see test_watched_parts)."""
    import threading

    n = 300
    nodes = [helper.make_node("MatMul", [f"m{i}", "w"], [f"m{i + 1}"], name=f"mm{i}") for i in range(n)]
    model = make_model(nodes, [tensor("m0", [256, 256])], [tensor(f"m{n}", [256, 256])], [init("w", np.eye(256, dtype=np.float32))])
    s = DebugSession(model, {"m0": np.ones((256, 256), np.float32)}, opt_level="none")
    s.start()
    s.runs.segment_seconds[((), 0, n)] = 10.0  # as if the last run of it (main graph, 0..n) took 10 s: it is split in 8
    parts: list[int] = []
    started = threading.Event()

    def progress(done, total):
        parts.append(done)
        if done > 0:
            started.set()

    s.on_progress = progress
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("stop", s.continue_()))
    t.start()
    assert started.wait(30)
    s.pause()
    t.join(60)
    stop = result["stop"]
    assert stop.reason is StopReason.PAUSE and 0 < stop.node.order < n, stop
    assert s.has_value(f"m{stop.node.order}")  # the finished parts are kept
    assert s.continue_().reason is StopReason.END
    assert_same(s.value(f"m{n}"), np.ones((256, 256), np.float32), "out")


def test_a_set_value_survives_eviction():
    size = 256
    model = long_chain(40, size)
    x = R.standard_normal((size, size)).astype(np.float32)
    s = DebugSession(model, {"v0": x}, memory_budget_mb=1)
    s.start()
    s.run_to("mm30")
    s.set_value("u5", 0.5)  # not kept after the segment: read, then set
    for name in ("v1", "u10", "v20", "u25", "v29"):  # reads that fill the cache and evict
        s.value(name)
    assert s.store.evictions > 0
    assert float(s.value("u5").min()) == 0.5 == float(s.value("u5").max())
    s.continue_()
    s2 = DebugSession(model, {"v0": x})
    s2.start()
    s2.run_to("tanh5")
    s2.set_value("u5", 0.5)
    s2.continue_()
    assert_same(s.value("v40"), s2.value("v40"), "v40")


def test_a_session_that_is_never_paused_runs_a_long_segment_in_one_call():
    n = 40
    nodes = [helper.make_node("MatMul", [f"m{i}", "w"], [f"m{i + 1}"], name=f"mm{i}") for i in range(n)]
    model = make_model(nodes, [tensor("m0", [64, 64])], [tensor(f"m{n}", [64, 64])], [init("w", np.eye(64, dtype=np.float32))])
    s = DebugSession(model, {"m0": np.ones((64, 64), np.float32)}, pausable=False)
    s.start()
    s.runs.segment_seconds[((), 0, n)] = 10.0  # as if the last run took 10 s: a pausable session would split it in 8
    before = s.ort_calls
    assert s.continue_().reason is StopReason.END
    assert s.ort_calls - before == 1
    assert_same(s.value(f"m{n}"), np.ones((64, 64), np.float32), "out")
