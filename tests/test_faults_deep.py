"""Faults and errors at any depth of control flow, and the stops after the first fault (issue 28 items 2, 3, 5).

- A NaN made two levels of If deep stops at the node inside that makes it, on both engines (the fast engine ran
  the inner If whole inside the outer branch and named the inner If).
- onnxruntime failing in a node two levels deep stops at that node, its path given, its message onnxruntime's
  for that node alone, and onnxruntime logs nothing to stderr (it printed the error at every level, each retry).
- After a NaN stop, a continue stops at the next node that makes a new NaN from finite inputs, not at every node
  that carries the first one on; ``fault_stops="every"`` (launch ``faultStops``) is the old behaviour.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cf_models import if_model
from dap_client import DapClient
from models import make_model, ort_values, tensor
from onnx import TensorProto, helper, numpy_helper

from graph_dap.cli import main as cli_main
from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.stops import PathStep


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "nodes"])
def test_a_nan_made_two_levels_of_if_deep_stops_at_the_node_that_makes_it(fast: bool) -> None:
    model = if_model(nested=True)  # then: t_out = relu(x*w) + b; inner then (max(x) > 2): sqrt(t_out)
    x = np.linspace(0.5, 3.0, 6, dtype=np.float32).reshape(2, 3)
    s = DebugSession(model, {"x": x}, break_on=["nan"], fast=fast)
    s.start()
    b = np.full((2, 3), -5.0, np.float32)  # t_out < 0 where relu is small: the inner Sqrt makes NaN from finite inputs
    s.set_value("b", b)
    stop = s.continue_()
    assert stop.reason is StopReason.NAN and stop.node is not None and stop.node.id == "n_sqrt", stop.message
    assert stop.path == (PathStep("the_if", "then_branch"), PathStep("inner_if", "then_branch"))
    assert "none of its inputs held any" in stop.message
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.name == "b":
            t.CopyFrom(numpy_helper.from_array(b, "b"))
    from inline import inline_ifs

    truth = ort_values(inline_ifs(m, {"x": x}), {"x": x})
    np.testing.assert_array_equal(s.value("n_sqrt"), truth["n_sqrt"])


def _failing_inside() -> onnx.ModelProto:
    """``outer_if`` (else) -> ``inner_if`` (else) -> a reflect Pad wider than its input: onnxruntime fails two levels deep."""
    f = TensorProto.FLOAT
    pads = numpy_helper.from_array(np.array([0, 5, 0, 5], np.int64), "pads")
    inner_else = helper.make_graph(
        [helper.make_node("Pad", ["e_in", "pads"], ["e_pad"], mode="reflect", name="bad_pad")], "ie", [], [tensor("e_pad", None)], [pads]
    )
    inner_then = helper.make_graph([helper.make_node("Identity", ["e_in"], ["t_id"], name="t_id")], "it", [], [tensor("t_id", None)])
    outer_else = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["e_in"], name="e_relu"),
            helper.make_node("If", ["c2"], ["e_out"], then_branch=inner_then, else_branch=inner_else, name="inner_if"),
        ],
        "oe",
        [],
        [tensor("e_out", None)],
    )
    outer_then = helper.make_graph([helper.make_node("Neg", ["x"], ["t_neg"], name="t_neg")], "ot", [], [tensor("t_neg", None)])
    nodes = [
        helper.make_node("If", ["c1"], ["y"], then_branch=outer_then, else_branch=outer_else, name="outer_if"),
        helper.make_node("Abs", ["y"], ["z"], name="abs"),
    ]
    conds = [helper.make_tensor_value_info(c, TensorProto.BOOL, []) for c in ("c1", "c2")]
    return make_model(nodes, [helper.make_tensor_value_info("x", f, [2, 3]), *conds], [tensor("z", None)])


_FEEDS = {"x": np.ones((2, 3), np.float32), "c1": np.array(False), "c2": np.array(False)}


def test_an_error_two_levels_deep_stops_at_the_failing_node_and_is_said_once(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    model = _failing_inside()
    for fast in (True, False):
        s = DebugSession(model, _FEEDS, break_on=["error"], fast=fast)
        s.start()
        stop = s.continue_()
        assert stop.reason is StopReason.ERROR and stop.node is not None and stop.node.id == "bad_pad", stop.message
        assert [(p.node, p.attribute) for p in stop.path] == [("outer_if", "else_branch"), ("inner_if", "else_branch")]
        assert stop.message.startswith("node bad_pad (Pad) failed in onnxruntime: ") and "outer_if" not in stop.message
        assert "pre-pad (5) exceeds maximum allowed (2)" in stop.message
    path = tmp_path / "err.onnx"
    onnx.save(model, str(path))
    np.savez(tmp_path / "in.npz", **_FEEDS)
    capfd.readouterr()
    assert cli_main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--break-on", "error"]) == 1
    out, err = capfd.readouterr()
    assert "stopped (node error) at bad_pad (Pad)\n  in:    outer_if > else_branch > inner_if > else_branch > bad_pad" in out
    assert out.count("pre-pad (5)") == 1 and "[E:onnxruntime" not in err and "pre-pad" not in err  # said once, on stdout


def _carrying_model() -> onnx.ModelProto:
    """sqrt(x) makes NaN (x < 0); mul and add carry it; log(-y) makes a new one from finite inputs; add2, tanh carry both."""
    nodes = [
        helper.make_node("Sqrt", ["x"], ["a"], name="sqrt"),
        helper.make_node("Mul", ["a", "a"], ["b"], name="mul"),
        helper.make_node("Add", ["b", "x"], ["c"], name="add"),
        helper.make_node("Neg", ["y"], ["ny"], name="neg"),
        helper.make_node("Log", ["ny"], ["d"], name="log"),
        helper.make_node("Add", ["c", "d"], ["e"], name="add2"),
        helper.make_node("Tanh", ["e"], ["f"], name="tanh"),
    ]
    return make_model(nodes, [tensor("x", [4]), tensor("y", [4])], [tensor("f", [4])])


_CARRY_FEEDS = {"x": np.array([1, -1, 2, 3], np.float32), "y": np.array([1, 2, 3, 4], np.float32)}


def _stops(s: DebugSession) -> list[str]:
    s.start()
    seen = []
    while (stop := s.continue_()).node is not None:
        assert stop.reason is StopReason.NAN
        seen.append(stop.node.id)
    return seen


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "nodes"])
def test_after_a_nan_stop_the_next_is_where_a_new_nan_is_made(fast: bool) -> None:
    model = _carrying_model()
    assert _stops(DebugSession(model, _CARRY_FEEDS, break_on=["nan"], fast=fast)) == ["sqrt", "log"]
    every = DebugSession(model, _CARRY_FEEDS, break_on=["nan"], fast=fast, fault_stops="every")
    assert _stops(every) == ["sqrt", "mul", "add", "log", "add2", "tanh"]  # the old behaviour
    s = DebugSession(model, _CARRY_FEEDS, break_on=["nan"], fast=fast)
    assert _stops(s) == ["sqrt", "log"]
    s.restart()  # a new run: its first NaN stops it again
    assert s.continue_().node.id == "sqrt"  # type: ignore[union-attr]


def test_the_adapter_stops_once_per_new_nan_and_faultstops_every_at_each(dap: DapClient, tmp_path: Path) -> None:
    path = tmp_path / "carry.onnx"
    onnx.save(_carrying_model(), str(path))
    np.savez(tmp_path / "in.npz", **_CARRY_FEEDS)
    for fault_stops, frames in (("new", ["sqrt (Sqrt)", "log (Log)"]), ("every", ["sqrt (Sqrt)", "mul (Mul)", "add (Add)", "log (Log)", "add2 (Add)", "tanh (Tanh)"])):
        launch = {"inputs": str(tmp_path / "in.npz"), "faultStops": fault_stops}
        if fault_stops == "new":
            dap.start(str(path), exceptions=["nan"], **launch)
        else:
            dap.request("restart", {"arguments": {"model": str(path), **launch}})
        seen = []
        for _ in frames:
            body = dap.wait_for_stop("exception")
            seen.append(dap.top_frame()["name"])
            assert "NaN" in body.get("text", "") or "NaN" in body.get("description", "")
            dap.request("continue", threadId=1)
        dap.wait_for_end()
        assert [s.split(" ", 1)[0] for s in seen] == [f.split(" ", 1)[0] for f in frames]
    with pytest.raises(Exception, match="faultStops must be 'new'"):
        dap.request("restart", {"arguments": {"model": str(path), "faultStops": "sometimes"}})
