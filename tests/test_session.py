"""The stepping session: exact values, stepping, breakpoints, filters, set_value, pause."""

from __future__ import annotations

import threading

import numpy as np
import onnx
import pytest
from models import as_shown, assert_same, chain_feeds, chain_model, init, make_model, ort_values, tensor
from onnx import TensorProto, helper

from graph_dap.errors import ExpressionError
from graph_dap.runtime import BreakpointSpec, DebugSession, GraphDapError, StopReason, ValueNotFoundError

X = chain_feeds()["x"]


def chain_session(**kw) -> DebugSession:
    return DebugSession(chain_model(), {"x": X}, **kw)


def control_flow_model() -> onnx.ModelProto:
    """If and Loop whose bodies read outer-scope values, and a com.microsoft op."""
    then_g = helper.make_graph([helper.make_node("Add", ["a", "k"], ["t_out"])], "then", [], [tensor("t_out", [3])])
    else_g = helper.make_graph([helper.make_node("Mul", ["a", "k"], ["e_out"])], "else", [], [tensor("e_out", [3])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [tensor("i", [], TensorProto.INT64), tensor("c_in", [], TensorProto.BOOL), tensor("acc_in", [3])],
        [tensor("c_out", [], TensorProto.BOOL), tensor("acc_out", [3])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("ReduceSum", ["x"], ["sx"], name="sum", keepdims=0),
        helper.make_node("Greater", ["sx", "zero"], ["cond"], name="positive"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
        helper.make_node("Mul", ["y", "two"], ["step"], name="mk_step"),
        helper.make_node("Loop", ["n", "t", "y"], ["looped"], name="loop", body=body),
        helper.make_node("Gelu", ["looped"], ["z"], name="gelu", domain="com.microsoft"),
    ]
    inits = [
        init("k", np.array([2.0, 3.0, 4.0], np.float32)),
        init("zero", np.array(0.0, np.float32)),
        init("two", np.array(2.0, np.float32)),
        init("n", np.array(4, np.int64)),
        init("t", np.array(True)),
    ]
    return make_model(nodes, [tensor("x", [3])], [tensor("z", [3])], inits, extra_opsets=[("com.microsoft", 1)])


def run_to_end(session: DebugSession):
    session.start()
    stop = session.continue_()
    assert stop.reason is StopReason.END, stop
    return stop


@pytest.mark.parametrize("x", [np.array([1.0, -2.0, 3.0], np.float32), np.array([-1.0, -2.0, 0.5], np.float32)])
def test_control_flow_and_contrib_values_equal_onnxruntime(x):
    model = control_flow_model()
    s = DebugSession(model, {"x": x})
    run_to_end(s)
    for name, value in ort_values(model, {"x": x}).items():
        assert_same(s.value(name), value, name)


@pytest.mark.parametrize("level", ["all", "none"])
def test_every_value_equals_onnxruntime_exactly(level):
    """Every value as the user's own run at the level computes it where the run kept it, else as the original node
    makes it of what the stop shows (and said so)."""
    s = chain_session(opt_level=level)
    run_to_end(s)
    model = chain_model()
    shown = {name: s.value(name) for name in ort_values(model, {"x": X})}
    for name, want in as_shown(s, model, {"x": X}, list(shown), level).items():
        assert_same(shown[name], want, name)
    assert not s.note("y")  # an output: the run's
    assert s.note("r") == ("" if level == "none" else "recomputed with the original nodes")  # (the optimized graph has an 'r')


def test_step_step_back_goto_run_to_restart():
    s = chain_session()
    entry = s.start()
    assert entry.reason is StopReason.ENTRY and entry.node.id == "conv"
    stop = s.step()
    assert stop.reason is StopReason.STEP and stop.node.id == "relu"
    assert s.last_node.id == "conv" and s.has_value("c")
    s.step()
    assert s.current.id == "add"
    back = s.step_back()
    assert back.node.id == "relu" and not s.has_value("r") and s.last_node.id == "conv"
    with pytest.raises(ValueNotFoundError, match=r"not computed yet: node relu \(Relu\) makes it, the next node"):
        s.value("r")
    with pytest.raises(ExpressionError, match=r"value 'm' is not computed yet: node mul \(Mul\) makes it, 2 nodes ahead"):
        s.evaluate("m.max() + 1")  # an expression says where a value it reads is made, as a plain read does
    # goto forward: the target's inputs are computed, skipped nodes are not run as steps
    stop = s.goto("sigmoid")
    assert stop.reason is StopReason.GOTO and s.current.id == "sigmoid" and s.has_value("m")
    s.step_back()
    assert s.current.id == "relu" and not s.has_value("m")
    stop = s.run_to("mul")
    assert stop.node.id == "mul" and s.has_value("a")
    with pytest.raises(GraphDapError, match="already ran"):
        s.run_to("conv")
    stop = s.restart()
    assert stop.reason is StopReason.ENTRY and s.current.id == "conv" and not s.has_value("c")
    assert s.continue_().reason is StopReason.END


def test_breakpoint_kinds():
    s = chain_session()
    bps = s.set_breakpoints(["mul", "r", "op:Sigmoid", "si*", "nothing_like_this", "x"])
    assert [bp.verified for bp in bps] == [True, True, True, True, False, False]
    assert bps[1].node_ids == ("relu",)  # a value name stops at its producer
    assert bps[3].node_ids == ("sigmoid", "side")
    assert "graph input" in bps[5].message
    s.start()
    stops = []
    while (stop := s.continue_()).reason is not StopReason.END:
        stops.append((stop.reason, stop.node.id))
    assert stops == [(StopReason.BREAKPOINT, n) for n in ["relu", "mul", "sigmoid", "side"]]


def test_node_id_wins_over_value_name():
    nodes = [helper.make_node("Neg", ["x"], ["b"], name="a"), helper.make_node("Neg", ["b"], ["a"], name="b")]
    s = DebugSession(make_model(nodes, [tensor("x", [2])], [tensor("a", [2])]))
    (bp,) = s.set_breakpoints(["b"])
    assert bp.node_ids == ("b",)


def test_conditions_on_inputs_and_outputs_and_hit_counts():
    nodes = [helper.make_node("Add", [f"v{i}", "one"], [f"v{i + 1}"], name=f"add{i}") for i in range(6)]
    model = make_model(nodes, [tensor("v0", [2])], [tensor("v6", [2])], [init("one", np.ones(2, np.float32))])
    s = DebugSession(model, {"v0": np.zeros(2, np.float32)})
    s.set_breakpoints([BreakpointSpec("op:Add", condition="v3.max() == 3")])
    s.start()
    stop = s.continue_()
    # v3 is the output of add2 (seen by a look-ahead) and then known at every later node
    assert stop.node.id == "add2" and s.current.id == "add2" and not s.has_value("v3")
    assert [s.continue_().node.id for _ in range(3)] == ["add3", "add4", "add5"]
    assert s.continue_().reason is StopReason.END
    assert s.executions["add2"] == 1  # the look-ahead for an output condition is not counted as a run

    s = DebugSession(model, {"v0": np.zeros(2, np.float32)})
    s.set_breakpoints([BreakpointSpec("op:Add", hit_condition="%2")])
    s.start()
    got = []
    while (stop := s.continue_()).reason is not StopReason.END:
        got.append(stop.node.id)
    assert got == ["add2", "add4"]  # the 2nd and 4th hits (add0 is where continue starts)


def test_logpoint_logs_and_does_not_stop():
    lines: list[str] = []
    s = chain_session(on_log=lines.append)
    s.set_breakpoints([BreakpointSpec("mul", log_message="a max is {a.max()}")])
    run_to_end(s)
    expected = ort_values(chain_model(), {"x": X})["a"].max()
    assert lines == [f"a max is {expected}"] or lines[0].startswith("a max is ")
    assert float(lines[0].split()[-1]) == pytest.approx(float(expected), rel=1e-6)
    assert s.logs == lines


def test_bad_condition_and_hit_condition_are_unverified():
    s = chain_session()
    bps = s.set_breakpoints([BreakpointSpec("mul", condition="__import__('os')"), BreakpointSpec("mul", hit_condition="sometimes")])
    assert not bps[0].verified and not bps[1].verified
    assert "hit condition 'sometimes'" in bps[1].message


def nan_model(op_value: float):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Sub", ["r", "c"], ["d"], name="sub"),
        helper.make_node("Log", ["d"], ["l"], name="log"),  # NaN where d < 0, -inf where d == 0
        helper.make_node("Clip", ["l", "lo", "hi"], ["y"], name="clip"),  # maps -inf to a finite value
    ]
    inits = [init("c", np.array(op_value, np.float32)), init("lo", np.array(-5, np.float32)), init("hi", np.array(5, np.float32))]
    return make_model(nodes, [tensor("x", [4])], [tensor("y", [4])], inits)


def test_nan_and_inf_filters_stop_at_the_producer():
    x = np.array([1.0, 2.0, 3.0, 0.5], np.float32)
    s = DebugSession(nan_model(1.0), {"x": x}, break_on=["nan"])  # d = [0, 1, 2, -0.5] -> l = [-inf, 0, .69, nan]
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node.id == "log" and stop.value == "l"
    assert stop.details["count"] == 1 and stop.details["first_index"] == [3] and stop.details["input_had_it"] is False
    assert s.current.id == "clip" and s.last_node.id == "log"
    s = DebugSession(nan_model(0.5), {"x": x}, break_on=["inf"])  # d = [.5, 1.5, 2.5, 0] -> -inf at 3
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "log" and stop.details["first_index"] == [3]
    s = DebugSession(nan_model(0.5), {"x": x}, break_on=["inf"], inf_exclude=["op:Log"])
    s.start()
    assert s.continue_().reason is StopReason.END
    s = DebugSession(nan_model(0.5), {"x": x})  # no filters: Clip hides the -inf at the output
    run_to_end(s)
    assert np.isfinite(s.outputs()["y"]).all()


def test_input_that_already_holds_nan_is_reported():
    x = np.array([np.nan, 2.0, 3.0, 4.0], np.float32)
    s = DebugSession(nan_model(0.0), {"x": x}, break_on=["nan"])
    s.start()
    stop = s.continue_()
    assert stop.node.id == "relu" and stop.details["input_had_it"] is True and stop.details["inputs_with_it"] == ["x"]


def test_node_error_stop_carries_node_inputs_and_ort_message():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Reshape", ["r", "shape"], ["y"], name="bad_reshape")]
    model = make_model(nodes, [tensor("x", [6])], [tensor("y", None)], [init("shape", np.array([4, 4], np.int64))])
    s = DebugSession(model, {"x": np.ones(6, np.float32)}, break_on=["error"])
    s.start()
    stop = s.continue_()
    assert stop.reason is StopReason.ERROR and stop.node.id == "bad_reshape"
    assert "bad_reshape (Reshape)" in stop.message and stop.details["ort_message"]
    assert stop.details["inputs"]["r"].startswith("float32[6]")
    assert s.current.id == "bad_reshape"


def test_set_value_recomputes_exactly_the_dependents():
    s = chain_session()
    run_to_end(s)
    stale = s.set_value("r", 0)  # may recompute r itself (to check its type) when it was not kept
    assert set(stale) == {"a", "m", "y"} and s.is_stale("m")
    before = dict(s.executions)
    stop = s.continue_()
    assert stop.reason is StopReason.END
    ran = {k: s.executions[k] - before.get(k, 0) for k in s.executions}
    assert {k for k, v in ran.items() if v} == {"add", "mul", "sigmoid"}
    assert all(v <= 1 for v in ran.values())
    assert not s.is_stale("m")
    model = chain_model()
    # ground truth: the model with r forced to zero, i.e. y = sigmoid((0 + b) * s)
    b = onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "b"))
    expected = ort_values(make_model([helper.make_node("Mul", ["bb", "s"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])],
                                     [tensor("bb", [1, 4, 8, 8])], [tensor("y", None)], [init("s", np.array([1.5], np.float32))]),
                          {"bb": np.broadcast_to(b, (1, 4, 8, 8)).astype(np.float32).copy()})
    assert_same(s.value("y"), expected["y"], "y")


def test_set_value_on_an_initializer_and_errors():
    s = chain_session()
    s.start()
    s.step()
    s.set_value("w", np.zeros((4, 2, 3, 3), np.float32))
    assert s.is_stale("c")
    s.step()
    assert s.executions["conv"] == 2 and float(np.abs(s.value("c")).max()) == 0.0
    with pytest.raises(GraphDapError, match=r"value 'w' is float32\[4,2,3,3\], got float64\[4,2,3,3\]"):
        s.set_value("w", np.zeros((4, 2, 3, 3)))
    with pytest.raises(GraphDapError, match="got float32"):
        s.set_value("w", np.zeros((2, 2), np.float32))
    with pytest.raises(ValueNotFoundError, match="not computed yet"):
        s.set_value("y", 0)


def test_constants_are_computed_once_and_skipped_unless_asked():
    k = onnx.numpy_helper.from_array(np.full(2, 3, np.float32))
    nodes = [
        helper.make_node("Constant", [], ["k"], name="const", value=k),
        helper.make_node("Mul", ["k", "k"], ["k2"], name="fold"),
        helper.make_node("Add", ["x", "k2"], ["y"], name="live"),
    ]
    model = make_model(nodes, [tensor("x", [2])], [tensor("y", [2])])
    s = DebugSession(model, {"x": np.ones(2, np.float32)})
    assert s.start().node.id == "live" and s.value("k2").tolist() == [9, 9]
    s.set_breakpoints(["fold"])
    assert "constant" in s.breakpoints[0].message
    s2 = DebugSession(model, {"x": np.ones(2, np.float32)}, skip_constants=False)
    assert s2.start().node.id == "const"
    assert s2.step().node.id == "fold"


@pytest.mark.parametrize("fast", [True, False])
def test_pause_from_another_thread(fast):
    n = 400
    nodes = [helper.make_node("MatMul", [f"m{i}", "w"], [f"m{i + 1}"], name=f"mm{i}") for i in range(n)]
    w = (np.eye(256, dtype=np.float32) * 0.999)
    model = make_model(nodes, [tensor("m0", [256, 256])], [tensor(f"m{n}", [256, 256])], [init("w", w)])
    s = DebugSession(model, {"m0": np.ones((256, 256), np.float32)}, fast=fast)
    s.start()
    started = threading.Event()
    s.on_progress = lambda done, total: started.set()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("stop", s.continue_()))
    t.start()
    assert started.wait(10)
    s.pause()
    t.join(30)
    assert not t.is_alive()
    stop = result["stop"]
    assert stop.reason is StopReason.PAUSE and stop.node.order < n
    if not fast:
        assert stop.node.order > 0  # node by node, it stops between nodes
    # a segment is aborted by onnxruntime's terminate flag and resumes from its start
    assert s.continue_().reason is StopReason.END


def test_scan_with_outer_scope_value_equals_onnxruntime():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["sum"]), helper.make_node("Mul", ["sum", "gain"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_row"])],
        "scan_body",
        [tensor("s_in", [3]), tensor("row", [3])],
        [tensor("s_out", [3]), tensor("y_row", [3])],
    )
    nodes = [
        helper.make_node("Relu", ["g"], ["gain"], name="gain"),
        helper.make_node("Scan", ["init", "x"], ["final", "ys"], name="scan", body=body, num_scan_inputs=1),
    ]
    model = make_model(nodes, [tensor("x", [4, 3]), tensor("g", [3])], [tensor("final", [3]), tensor("ys", [4, 3])],
                       [init("init", np.zeros(3, np.float32))])
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "g": np.array([0.5, -1.0, 2.0], np.float32)}
    for fast in (True, False):
        s = DebugSession(model, feeds, fast=fast)
        assert s.graph.node("scan").implicit_inputs == ("gain",)
        run_to_end(s)
        for name, value in ort_values(model, feeds).items():
            assert_same(s.value(name), value, name)


def test_constant_node_weights_match_the_whole_model_exactly():
    # onnxruntime turns Constant nodes into initializers and pre-packs them for MatMul
    r = np.random.default_rng(9)
    w = r.standard_normal((256, 256)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["w"], name="w", value=onnx.numpy_helper.from_array(w)),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Tanh", ["y"], ["z"], name="tanh")]
    model = make_model(nodes, [tensor("x", [256, 256])], [tensor("z", [256, 256])])
    x = r.standard_normal((256, 256)).astype(np.float32)
    truth = ort_values(model, {"x": x})
    for fast in (True, False):
        s = DebugSession(model, {"x": x}, fast=fast)
        s.start()
        s.step()
        assert_same(s.value("y"), truth["y"], "y")
        s.continue_()
        assert_same(s.value("z"), truth["z"], "z")
