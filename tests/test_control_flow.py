"""Inside control flow: frames per If branch, Loop/Scan iteration and function call; stepping, breakpoints,
NaN/Inf watch and values inside bodies, each value checked against onnxruntime's own.

Every value shown inside a body is compared with the same value of an equivalent model without
the control flow (the taken branch inlined, the loop unrolled), computed by onnxruntime with every
tensor as a graph output; the original model's outputs, by onnxruntime, are a second check.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest
from cf_models import const, function_model, if_model, loop_model, scan_model, sequence_model, unrolled_loop, vi
from onnx import TensorProto, helper

from graph_dap.runtime import BreakpointSpec, DebugSession, StopReason
from graph_dap.runtime.engine.options import session_options
from graph_dap.runtime.stops import PathStep

ENGINES = [pytest.param(True, id="fast"), pytest.param(False, id="slow")]


def ort_outputs(model: onnx.ModelProto, feeds: dict) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def exact(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    assert np.array_equal(a, b, equal_nan=True), f"{what}: values differ"


LOOP_FEEDS = {"h0": np.full((1, 4), 0.1, np.float32), "x": np.array([[0.3, -0.2, 0.5, 0.1]], np.float32)}


# -- ids, paths, listing ------------------------------------------------------------------


def test_inner_nodes_have_ids_and_paths():
    s = DebugSession(if_model(nested=True), {"x": np.ones((2, 3), np.float32)})
    g = s.graph
    assert g.node("t_relu").path[-1].node == "the_if" and g.node("t_relu").path[-1].attribute == "then_branch"
    assert g.node("n_sqrt").path == (g.node("t_relu").path[0], g.node("n_sqrt").path[1])
    assert [st.node for st in g.node("n_sqrt").path] == ["the_if", "inner_if"]
    # unnamed inner nodes: {enclosing id}/{attribute}/{op_type}_{index}
    inner_const = next(n for n in g.scope_of(g.node("t_relu")).nodes if n.op_type == "Constant")
    assert inner_const.id == "the_if/then_branch/Constant_4"
    f = DebugSession(function_model(), {"x": np.ones(4, np.float32)}).graph
    assert f.has_node("first_call/ScaleAdd/Mul_2") and f.has_node("second_call/ScaleAdd/Mul_2")  # a name used twice


def test_the_listing_has_a_line_per_inner_node():
    from graph_dap.runtime import render_listing

    g = DebugSession(loop_model(), LOOP_FEEDS).graph
    listing = render_listing(g)
    for node in g.all_nodes():
        line = listing.text.splitlines()[listing.line_of(node.id) - 1]
        assert line.rstrip().endswith(f"# {node.id}") or f"# {node.id}  (constant)" in line


# -- If -------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", ENGINES)
def test_a_breakpoint_in_the_taken_branch_stops_there_with_its_frame(fast):
    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, -0.5]], np.float32)
    s = DebugSession(if_model(), {"x": x}, fast=fast)
    s.set_breakpoints(["t_relu", "e_neg"])
    stop = s.continue_()
    assert stop.reason is StopReason.BREAKPOINT and stop.node.id == "t_relu"
    assert stop.path == (PathStep("the_if", "then_branch", None),)
    w = onnx.numpy_helper.to_array(if_model().graph.initializer[0])
    exact(s.value("t_mul"), (x * w).astype(np.float32), "t_mul")
    assert s.value("w").shape == (2, 3)  # an outer value seen from the branch
    assert s.continue_().reason is StopReason.END
    exact(s.value("z"), ort_outputs(if_model(), {"x": x})["z"], "z")


@pytest.mark.parametrize("fast", ENGINES)
def test_the_else_branch_when_the_condition_is_false(fast):
    x = -np.ones((2, 3), np.float32)
    s = DebugSession(if_model(), {"x": x}, fast=fast)
    s.set_breakpoints(["t_relu", "e_neg"])
    stop = s.continue_()
    assert stop.node.id == "e_neg" and stop.path[0].attribute == "else_branch"
    exact(s.value("e_add"), x + np.float32(0.5), "e_add")


def test_step_in_enters_the_branch_the_condition_takes_and_step_out_leaves_it():
    x = np.ones((2, 3), np.float32)
    s = DebugSession(if_model(nested=True), {"x": x})
    s.set_breakpoints(["the_if"])
    assert s.continue_(check_first=True).node.id == "the_if"
    stop = s.step_in()
    assert stop.reason is StopReason.STEP and stop.node.id == "t_mul" and len(s.frames) == 2
    s.set_breakpoints(["inner_if"])
    assert s.continue_().node.id == "inner_if"
    stop = s.step_in()  # x.max() = 1 <= 2: the inner else branch
    assert stop.node.id == "n_neg" and [p.node for p in stop.path] == ["the_if", "inner_if"]
    stop = s.step_out()  # inner_if was the branch's last node: out of both levels
    assert stop.reason is StopReason.STEP and stop.node.id == "square" and stop.path == () and len(s.frames) == 1
    assert s.continue_().reason is StopReason.END
    exact(s.value("z"), ort_outputs(if_model(nested=True), {"x": x})["z"], "z")


def test_next_over_a_control_flow_node_runs_it_whole():
    s = DebugSession(if_model(), {"x": np.ones((2, 3), np.float32)})
    s.set_breakpoints(["the_if"])
    s.continue_(check_first=True)
    stop = s.step()
    assert stop.node.id == "square" and len(s.frames) == 1


# -- Loop -----------------------------------------------------------------------------


@pytest.mark.parametrize("fast", ENGINES)
def test_every_value_inside_every_iteration_equals_the_unrolled_model(fast):
    m = loop_model(trip=5)
    flat = ort_outputs(unrolled_loop(m, 5), LOOP_FEEDS)
    s = DebugSession(m, LOOP_FEEDS, fast=fast)
    s.set_breakpoints(["h_scan"])  # the body's last node: every other value of the iteration is computed
    body = s.graph.subscope(s.graph.node("loop"), "body")
    for k in range(5):
        stop = s.continue_()
        assert stop.node.id == "h_scan" and stop.path == (PathStep("loop", "body", k),)
        for name in ["i", "h_in"] + [o for n in body.nodes if n.id != "h_scan" for o in n.outputs]:
            if name == "h_in":
                exact(s.value(name), LOOP_FEEDS["h0"] if k == 0 else flat[f"h_out@{k - 1}"], f"h_in@{k}")
            elif name == "i":
                exact(s.value(name), np.array(k, np.int64), "i")
            else:
                exact(s.value(name), flat[f"{name}@{k}"], f"{name}@{k}")
    original = ort_outputs(m, LOOP_FEEDS)
    assert s.continue_().reason is StopReason.END
    exact(s.value("y"), original["y"], "y")
    exact(s.value("hs"), original["hs"], "hs")
    exact(s.value("y"), flat["y"], "y (unrolled)")


@pytest.mark.parametrize("fast", ENGINES)
def test_a_condition_on_iteration_stops_in_that_iteration(fast):
    m = loop_model(trip=6)
    flat = ort_outputs(unrolled_loop(m, 6), LOOP_FEEDS)
    s = DebugSession(m, LOOP_FEEDS, fast=fast)
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 3")])
    stop = s.continue_()
    assert stop.node.id == "tanh" and s.iteration == 3 and stop.path[0].iteration == 3
    exact(s.value("pre"), flat["pre@3"], "pre@3")
    assert int(s.evaluate("iteration")) == 3
    assert s.continue_().reason is StopReason.END


def test_the_iterations_before_a_conditions_first_run_whole_in_one_call():
    """A breakpoint whose condition reads ``iteration`` alone: the iterations before the first it can stop
    at run in one onnxruntime call (the Loop cut to that many), values as exact as iteration by iteration."""
    m = loop_model(trip=6)
    flat = ort_outputs(unrolled_loop(m, 6), LOOP_FEEDS)
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 4")])
    s.start()
    calls = s.ort_calls
    stop = s.continue_()
    assert stop.node.id == "tanh" and s.iteration == 4 and s.ort_calls - calls <= 3
    exact(s.value("h_in"), flat["h_out@3"], "h_in@4")
    for name in ("mm", "pre"):
        exact(s.value(name), flat[f"{name}@4"], f"{name}@4")
    while s.iteration == 4:
        s.step_back()  # into iteration 3, which ran whole: what it started from is computed again
    assert s.iteration == 3 and s.current.id == "h_scan"
    exact(s.value("h_in"), flat["h_out@2"], "h_in@3")
    exact(s.value("h_out"), flat["h_out@3"], "h_out@3")
    assert s.continue_().reason is StopReason.BREAKPOINT and s.iteration == 4
    assert s.continue_().reason is StopReason.END
    original = ort_outputs(m, LOOP_FEEDS)
    exact(s.value("hs"), original["hs"], "hs")
    exact(s.value("y"), original["y"], "y")
    # with a hit count: the second iteration at which the condition holds
    s.set_breakpoints([BreakpointSpec("mm", condition="iteration >= 2", hit_condition="2")])
    s.restart()
    assert s.continue_().reason is StopReason.BREAKPOINT and s.iteration == 3


def test_a_loop_that_ends_before_a_conditions_first_iteration_runs_to_its_end():
    m = loop_model(trip=20, exit_at=1.0, scan=True)
    original = ort_outputs(m, LOOP_FEEDS)
    assert len(original["hs"]) < 15
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 15"), BreakpointSpec("relu")])
    stop = s.continue_(check_first=True)
    assert stop.node.id == "relu" and stop.path == ()
    exact(s.value("hs"), original["hs"], "hs")
    exact(s.value("h_final"), np.asarray(original["hs"])[-1], "h_final")
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 2")])  # one it reaches
    s.restart()
    assert s.continue_().reason is StopReason.BREAKPOINT and s.iteration == 2
    exact(s.value("h_in"), ort_outputs(unrolled_loop(m, 3), LOOP_FEEDS)["h_out@1"], "h_in@2")


def test_a_hit_count_counts_the_node_in_every_iteration():
    s = DebugSession(loop_model(trip=6), LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("mm", hit_condition="5")])
    assert s.continue_().path[0].iteration == 4


def test_next_after_the_last_node_of_a_body_goes_to_the_next_iteration_then_out():
    s = DebugSession(loop_model(trip=3), LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("h_scan", condition="iteration == 1")])
    stop = s.continue_()
    assert stop.node.id == "h_scan" and s.iteration == 1
    stop = s.step()
    assert stop.node.id == "cast_i" and s.iteration == 2
    s.set_breakpoints([BreakpointSpec("h_scan", condition="iteration == 2")])
    s.continue_()
    stop = s.step()  # the last node of the last iteration: out of the loop
    assert stop.node.id == "relu" and stop.path == () and len(s.frames) == 1
    exact(s.value("hs"), ort_outputs(loop_model(trip=3), LOOP_FEEDS)["hs"], "hs")


def test_step_out_finishes_all_iterations():
    m = loop_model(trip=4)
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints(["mm"])
    assert s.continue_().path[0].iteration == 0
    stop = s.step_out()  # a breakpoint inside still stops, as in any debugger
    assert stop.reason is StopReason.BREAKPOINT and stop.node.id == "mm" and stop.path[0].iteration == 1
    s.set_breakpoints([])
    stop = s.step_out()
    assert stop.node.id == "relu" and stop.path == ()
    original = ort_outputs(m, LOOP_FEEDS)
    exact(s.value("h_final"), np.asarray(original["hs"])[-1], "h_final")
    assert s.continue_().reason is StopReason.END
    exact(s.value("y"), original["y"], "y")


def test_step_back_across_an_iteration_boundary_and_out_of_the_body():
    m = loop_model(trip=3)
    flat = ort_outputs(unrolled_loop(m, 3), LOOP_FEEDS)
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("cast_i", condition="iteration == 1")])
    assert s.continue_().path[0].iteration == 1
    stop = s.step_back()  # into iteration 0, before its last node
    assert stop.node.id == "h_scan" and s.iteration == 0
    exact(s.value("h_out"), flat["h_out@0"], "h_out@0")
    assert not s.has_value("h_scan")
    while len(s.frames) > 1:
        stop = s.step_back()
    assert stop.node.id == "loop" and not s.has_value("h_final")
    assert s.continue_().reason is StopReason.BREAKPOINT and s.iteration == 1  # the breakpoint again


def test_goto_the_start_of_the_iteration():
    s = DebugSession(loop_model(trip=3), LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 2")])
    s.continue_()
    stop = s.goto("cast_i")
    assert stop.reason is StopReason.GOTO and stop.node.id == "cast_i" and s.iteration == 2
    with pytest.raises(Exception, match="goto moves within the current level"):
        s.goto("relu")


@pytest.mark.parametrize("fast", ENGINES)
def test_an_early_exit_through_the_condition(fast):
    m = loop_model(trip=20, exit_at=1.0, scan=True)
    original = ort_outputs(m, LOOP_FEEDS)
    s = DebugSession(m, LOOP_FEEDS, fast=fast)
    s.set_breakpoints(["keep_going"])
    iterations = 0
    while s.continue_(check_first=iterations == 0).reason is StopReason.BREAKPOINT:
        iterations += 1
    assert iterations == len(original["hs"]) < 20
    exact(s.value("y"), original["y"], "y")
    exact(s.value("hs"), original["hs"], "hs")


def test_setting_a_value_inside_the_body_recomputes_its_dependents_and_what_the_loop_feeds():
    m = loop_model(trip=4)
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("tanh", condition="iteration == 2")])
    s.continue_()
    zeros = np.zeros((1, 4), np.float32)
    stale = s.set_value("pre", zeros)
    assert stale == [] or "h_out" not in stale  # tanh has not run yet: nothing computed from pre
    s.set_breakpoints([])
    assert s.continue_().reason is StopReason.END
    flat = unrolled_loop(m, 4)
    # the same with pre@2 given: its producer removed, the value fed
    flat.graph.node.remove(next(n for n in flat.graph.node if list(n.output) == ["pre@2"]))
    flat.graph.input.append(helper.make_tensor_value_info("pre@2", TensorProto.FLOAT, [1, 4]))
    expected = ort_outputs(flat, {**LOOP_FEEDS, "pre@2": zeros})
    exact(s.value("y"), expected["y"], "y")
    exact(s.value("hs"), expected["hs"], "hs")


def test_setting_a_value_computed_in_this_iteration_makes_its_dependents_stale():
    m = loop_model(trip=3)
    s = DebugSession(m, LOOP_FEEDS)
    s.set_breakpoints([BreakpointSpec("h_scan", condition="iteration == 0")])
    s.continue_()
    stale = s.set_value("pre", np.zeros((1, 4), np.float32))
    assert stale == ["h_out"] and s.is_stale("h_out")
    assert s.step().node.id == "cast_i" and s.iteration == 1
    exact(s.value("h_in"), np.zeros((1, 4), np.float32), "h_in of iteration 1 = tanh(0)")


# -- Scan and the NaN/Inf watch inside bodies ------------------------------------------


@pytest.mark.parametrize("fast", ENGINES)
def test_a_nan_inside_a_scan_iteration_stops_there_though_the_outputs_are_clean(fast):
    rows = np.abs(np.random.default_rng(0).standard_normal((5, 3))).astype(np.float32) + 0.5
    rows[3, 1] = -1.0  # log(-1) = NaN in iteration 3
    body = scan_model().graph.node[0]
    m = scan_model()
    # clean the NaN out before it reaches the scan's outputs
    g = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    g.node.insert(1, helper.make_node("IsNaN", ["lg"], ["lg_nan"], name="isnan"))
    g.node.insert(2, helper.make_node("Constant", [], ["zero"], value_float=0.0, name="zero"))
    g.node.insert(3, helper.make_node("Where", ["lg_nan", "zero", "lg"], ["lg_clean"], name="clean"))
    g.node[4].input[1] = "lg_clean"
    del body
    feeds = {"acc0": np.zeros(3, np.float32), "rows": rows}
    original = ort_outputs(m, feeds)
    assert np.isfinite(original["accs"]).all()
    s = DebugSession(m, feeds, fast=fast, break_on=["nan"])
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node.id == "log_row"
    assert stop.path == (PathStep("scan", "body", 3),) and stop.value == "lg"
    assert stop.details["count"] == 1
    exact(s.value("row"), rows[3], "row")
    assert s.continue_().reason is StopReason.END
    exact(s.value("accs"), original["accs"], "accs")


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_outputs_equal_onnxruntimes_in_both_directions(reverse):
    rows = (np.arange(15, dtype=np.float32).reshape(5, 3) + 1.0) / 7
    m = scan_model(reverse=reverse)
    feeds = {"acc0": np.ones(3, np.float32), "rows": rows}
    s = DebugSession(m, feeds)
    s.set_breakpoints(["acc"])
    seen = []
    while s.continue_(check_first=not seen).reason is StopReason.BREAKPOINT:
        seen.append(s.value("row").copy())
    exact(np.stack(seen), rows[::-1] if reverse else rows, "rows in iteration order")
    original = ort_outputs(m, feeds)
    exact(s.value("accs"), original["accs"], "accs")
    exact(s.value("acc_final"), original["acc_final"], "acc_final")


# -- functions and sequences ------------------------------------------------------------


def test_a_function_called_twice_has_a_frame_per_call():
    x = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
    s = DebugSession(function_model(), {"x": x})
    s.set_breakpoints(["second_call/ScaleAdd/Add_3"])
    stop = s.continue_()
    assert stop.path == (PathStep("second_call", "ScaleAdd", None),)
    u = x * np.float32(2.0) + np.arange(4, dtype=np.float32)
    exact(s.value("X"), u, "X")  # the function's formal input, bound to u
    exact(s.value("XS"), u * np.float32(-3.0), "XS")  # the call's own factor
    assert s.continue_().reason is StopReason.END
    exact(s.value("y"), ort_outputs(function_model(), {"x": x})["y"], "y")


def test_sequences_inside_a_loop_are_lists():
    x = np.array([1.0, 2.0], np.float32)
    s = DebugSession(sequence_model(), {"x": x})
    s.set_breakpoints([BreakpointSpec("insert", condition="iteration == 2")])
    s.continue_()
    seq = s.value("seq_in")
    assert isinstance(seq, list) and len(seq) == 2
    exact(seq[1], x, "row of iteration 1")
    assert s.continue_().reason is StopReason.END
    exact(s.value("y"), ort_outputs(sequence_model(), {"x": x})["y"], "y")


def test_the_watch_goes_inside_bodies_without_stepping_through_them():
    m = loop_model(trip=6)
    s = DebugSession(m, LOOP_FEEDS, break_on=["nan", "inf"])
    s.start()
    calls = s.ort_calls
    assert s.continue_().reason is StopReason.END
    assert s.ort_calls - calls == 1  # one segment: the Loop runs whole, its body's sums come out as a flag
    exact(s.value("hs"), ort_outputs(m, LOOP_FEEDS)["hs"], "hs")


def _matmul_act_chain(layers: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    nodes, weights, prev = [], [], "x"
    for k in range(layers):
        weights.append(onnx.numpy_helper.from_array(np.eye(3, dtype=np.float32), f"w{k}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"], name=f"mm{k}"))
        nodes.append(helper.make_node("LeakyRelu", [f"m{k}"], [f"a{k}"], name=f"act{k}"))
        prev = f"a{k}"
    return nodes, weights


def test_the_watch_inside_a_branch_prunes_as_in_the_main_graph():
    """A branch's tensors read by MatMuls of outer-scope weights need no sum of their own (their
    shapes are the enclosing graph's); LeakyRelu carries NaN and Inf on: the branch's output alone is summed."""
    from graph_dap.runtime.engine.faults import FaultFilter
    from graph_dap.runtime.engine.instrument import instrument
    from graph_dap.runtime.engine.watch import watch_plan
    from graph_dap.runtime.loading import load_graph

    chain, weights = _matmul_act_chain(3)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    flat = load_graph(helper.make_model(helper.make_graph(chain, "flat", [x_info], [vi("a2", [2, 3])], weights)))
    dtypes = {o: "float32" for n in flat.nodes for o in n.outputs}
    expected = watch_plan(flat, flat.nodes, dtypes, lambda n: False).watched
    assert expected == ["a2"]

    branch = helper.make_graph(chain, "then", [], [vi("a2", [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"], name="neg")], "else", [], [vi("n", [2, 3])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        const("zero", 0.0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="c"),
        helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other, name="the_if"),
    ]
    m = helper.make_model(helper.make_graph(nodes, "g", [x_info], [vi("y", [2, 3])], weights), opset_imports=[helper.make_opsetid("", 17)])
    g = load_graph(m)
    made = instrument(g, g.node("the_if"), FaultFilter(nan=True, inf=True))
    then = next(a.g for a in made.protos[0].attribute if a.name == "then_branch")
    assert sorted(n.input[0] for n in then.node if n.op_type == "ReduceSum" and n.input[0] in dtypes) == sorted(expected)
    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]], np.float32)
    s = DebugSession(m, {"x": x}, break_on=["nan", "inf"])
    assert s.continue_().reason is StopReason.END
    exact(s.value("y"), ort_outputs(m, {"x": x})["y"], "y")


@pytest.mark.parametrize("fast", ENGINES)
def test_a_nan_in_one_loop_iteration_is_found_at_its_node_and_iteration(fast):
    m = loop_model(trip=6)
    g = next(a.g for a in next(n for n in m.graph.node if n.op_type == "Loop").attribute if a.name == "body")
    # sqrt(i - 3.5) is NaN for i < 4; a Max with 0 afterwards would hide it, here it just feeds a clean Where
    g.node.extend(
        [
            helper.make_node("Constant", [], ["c35"], value_float=3.5, name="c35"),
            helper.make_node("Sub", ["i_f", "c35"], ["shift"], name="shift"),
            helper.make_node("Sqrt", ["shift"], ["root"], name="root"),
            helper.make_node("IsNaN", ["root"], ["bad"], name="bad"),
        ]
    )
    s = DebugSession(m, LOOP_FEEDS, fast=fast, break_on=["nan"])
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node.id == "root" and stop.path == (PathStep("loop", "body", 0),)
    assert "root (Sqrt) produced 1 NaN in 'root'" in stop.message
    assert s.continue_().path[0].iteration == 1  # the next iteration holds one too
