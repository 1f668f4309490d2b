"""DAP inside control flow: frames per enclosing level, scopes per level, stepping in, over, out and back
through Loop iterations, a breakpoint on an inner node, setVariable inside a body, a NaN inside an iteration.

Every message is held to the DAP schema by the project's client; values are checked against onnxruntime's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cf_models import loop_model, unrolled_loop
from dap_client import DapClient
from onnx import helper

from graph_dap.runtime.engine.options import session_options

FEEDS = {"h0": np.full((1, 4), 0.1, np.float32), "x": np.array([[0.3, -0.2, 0.5, 0.1]], np.float32)}


def _ort(model: onnx.ModelProto, feeds: dict) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


@pytest.fixture
def loop(tmp_path: Path) -> tuple[Path, Path, onnx.ModelProto]:
    model = loop_model(trip=5)
    path = tmp_path / "loop.onnx"
    onnx.save(model, str(path))
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **FEEDS)
    return path, inputs, model


def _names(dap: DapClient) -> list[str]:
    return [f["name"] for f in dap.stack_trace()]


def test_a_function_breakpoint_on_an_inner_node_and_the_frames_of_every_level(dap: DapClient, loop) -> None:
    path, inputs, model = loop
    dap.start(str(path), inputs=str(inputs), breakpoints=["tanh"])
    dap.wait_for_stop("function breakpoint")
    frames = dap.stack_trace()
    assert [f["name"] for f in frames] == ["tanh (Tanh)", "loop (Loop) body, iteration 0"]
    listing = dap.source_text(frames[0]["source"]).splitlines()
    assert listing[frames[0]["line"] - 1].rstrip().endswith("# tanh")
    assert listing[frames[1]["line"] - 1].rstrip().endswith("# loop")
    # each frame has the scopes of its own level
    inner = dap.variables(dap.scopes(frames[0]["id"])["Values"]["variablesReference"])
    outer = dap.variables(dap.scopes(frames[1]["id"])["Values"]["variablesReference"])
    assert {"i", "h_in", "mm", "pre"} <= set(inner) and "h0" not in inner
    assert {"h0", "x"} <= set(outer) and "pre" not in outer
    flat = _ort(unrolled_loop(model, 5), FEEDS)
    assert inner["pre"]["value"].startswith(f"float32[1,4] min={flat['pre@0'].min():.4g}")
    inputs_scope = dap.variables(dap.scopes(frames[0]["id"])["Inputs"]["variablesReference"])
    assert list(inputs_scope) == ["pre"]


def test_a_line_breakpoint_on_an_inner_line_with_a_condition_on_iteration(dap: DapClient, loop) -> None:
    path, inputs, _ = loop
    dap.initialize()
    seq = dap.send("launch", {"model": str(path), "inputs": str(inputs), "stopOnEntry": True})
    assert dap.response(seq)["success"]
    dap.wait_for_event("initialized")
    dap.request("configurationDone")
    dap.wait_for_stop("entry")
    source = dap.listing_source()
    text = dap.source_text(source).splitlines()
    line = next(k + 1 for k, t in enumerate(text) if t.rstrip().endswith("# mm"))
    got = dap.request("setBreakpoints", source=source, breakpoints=[{"line": line, "condition": "iteration == 3"}])
    assert got["breakpoints"][0]["verified"]
    dap.request("continue", threadId=1)
    dap.wait_for_stop("breakpoint")
    assert _names(dap) == ["mm (MatMul)", "loop (Loop) body, iteration 3"]
    assert dap.evaluate("iteration")["result"] == "3"


def test_next_across_an_iteration_boundary_then_step_in_step_out_and_back(dap: DapClient, loop) -> None:
    path, inputs, model = loop
    dap.start(str(path), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    assert _names(dap) == ["loop (Loop)"]
    dap.step("stepIn")
    assert _names(dap) == ["cast_i (Cast)", "loop (Loop) body, iteration 0"]
    for _ in range(6):  # cast_i, mm, xi, pre, tanh, cond_same: the body's nodes up to its last
        dap.step("next")
    assert _names(dap)[0] == "h_scan (Identity)"
    dap.step("next")
    assert _names(dap) == ["cast_i (Cast)", "loop (Loop) body, iteration 1"]
    dap.step("stepBack")
    assert _names(dap) == ["h_scan (Identity)", "loop (Loop) body, iteration 0"]
    dap.step("stepOut")
    assert _names(dap) == ["relu (Relu)"]
    hs = dap.variables(dap.scopes()["Values"]["variablesReference"])["hs"]
    assert hs["value"].startswith("float32[5,1,4]")
    dap.request("continue", threadId=1)
    dap.wait_for_end()
    assert f"y: float32[1,4] min={_ort(model, FEEDS)['y'].min():.4g}" in dap.output()


def test_set_variable_inside_a_body_flows_on_to_the_loops_outputs(dap: DapClient, loop) -> None:
    path, inputs, model = loop
    dap.start(str(path), inputs=str(inputs), breakpoints=["tanh"])
    dap.wait_for_stop("function breakpoint")
    frame = dap.top_frame()
    values = dap.scopes(frame["id"])["Values"]["variablesReference"]
    dap.request("setVariable", variablesReference=values, name="pre", value="zeros_like(pre)")
    dap.request("setFunctionBreakpoints", breakpoints=[])
    dap.request("continue", threadId=1)
    dap.wait_for_end()
    flat = unrolled_loop(model, 5)
    flat.graph.node.remove(next(n for n in flat.graph.node if list(n.output) == ["pre@0"]))
    flat.graph.input.append(helper.make_tensor_value_info("pre@0", onnx.TensorProto.FLOAT, [1, 4]))
    expected = _ort(flat, {**FEEDS, "pre@0": np.zeros((1, 4), np.float32)})
    assert f"y: float32[1,4] min={expected['y'].min():.4g} max={expected['y'].max():.4g}" in dap.output()


def test_a_nan_filter_stop_inside_a_loop_iteration(dap: DapClient, tmp_path: Path) -> None:
    model = loop_model(trip=6)
    body = next(a.g for a in next(n for n in model.graph.node if n.op_type == "Loop").attribute if a.name == "body")
    body.node.extend(
        [
            helper.make_node("Constant", [], ["c"], value_float=2.5, name="c"),
            helper.make_node("Sub", ["i_f", "c"], ["shift"], name="shift"),
            helper.make_node("Log", ["shift"], ["lg"], name="lg"),  # NaN for i < 2.5, -inf never (i is an integer)
        ]
    )
    path = tmp_path / "nan_loop.onnx"
    onnx.save(model, str(path))
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **FEEDS)
    dap.start(str(path), inputs=str(inputs), exceptions=["nan"])
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "NaN"
    assert _names(dap) == ["lg (Log)", "loop (Loop) body, iteration 0"]
    info = dap.request("exceptionInfo", threadId=1)
    assert "in: loop > body (iteration 0)" in info["details"]["stackTrace"]
    dap.request("continue", threadId=1)
    dap.wait_for_stop("exception")
    assert _names(dap)[1] == "loop (Loop) body, iteration 1"


def test_goto_targets_stay_within_the_current_level(dap: DapClient, loop) -> None:
    path, inputs, _ = loop
    dap.start(str(path), inputs=str(inputs), breakpoints=["pre"])  # the value's producer
    dap.wait_for_stop("function breakpoint")
    frame = dap.top_frame()
    text = dap.source_text(frame["source"]).splitlines()
    mm_line = next(k + 1 for k, t in enumerate(text) if t.rstrip().endswith("# mm"))
    relu_line = next(k + 1 for k, t in enumerate(text) if t.rstrip().endswith("# relu"))
    targets = dap.request("gotoTargets", source=frame["source"], line=mm_line)["targets"]
    assert [t["label"] for t in targets] == ["mm (MatMul)"]
    assert dap.request("gotoTargets", source=frame["source"], line=relu_line)["targets"] == []
    dap.request("goto", threadId=1, targetId=targets[0]["id"])
    dap.wait_for_stop("goto")
    assert _names(dap) == ["mm (MatMul)", "loop (Loop) body, iteration 0"]
