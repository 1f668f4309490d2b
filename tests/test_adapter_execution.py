"""Running: step, step back, reverse continue, goto, restart, pause mid-continue, progress, the end, noDebug, terminate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from dap_client import DapClient, DapError
from models import chain_files, running_model


def _running(progress: dict[str, Any]) -> bool:
    return progress["title"] == "Running the model"


def _frame(dap: DapClient) -> str:
    return dap.top_frame()["name"]


def test_next_runs_one_node_and_step_back_undoes_it(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    assert _frame(dap) == "conv (Conv)"
    dap.step("next")
    assert _frame(dap) == "relu (Relu)"
    dap.step("stepIn")  # no subgraph: the same as next
    assert _frame(dap) == "add (Add)"
    relu = dap.scope_variables("Last outputs")["r"]
    assert relu["value"].startswith(f"float32[1,4,8,8] min=0 max={float(ref['r'].max()):.4g}")
    dap.step("stepBack")
    assert _frame(dap) == "relu (Relu)"
    assert "r" not in dap.scope_variables("Values")
    assert list(dap.scope_variables("Last outputs")) == ["c"]


def test_reverse_continue_goes_back_to_a_breakpoint(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), breakpoints=["relu", "mul"])
    dap.wait_for_stop("function breakpoint")
    assert _frame(dap) == "relu (Relu)"
    dap.request("continue", threadId=1)
    dap.wait_for_stop("function breakpoint")
    assert _frame(dap) == "mul (Mul)"
    dap.request("reverseContinue", threadId=1)
    dap.wait_for_stop("breakpoint")
    assert _frame(dap) == "relu (Relu)"


def test_goto_targets_and_goto(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    frame = dap.top_frame()
    targets = dap.request("gotoTargets", source=frame["source"], line=frame["line"] + 3)["targets"]
    assert [t["label"] for t in targets] == ["mul (Mul)"] and targets[0]["line"] == frame["line"] + 3
    dap.request("goto", threadId=1, targetId=targets[0]["id"])
    dap.wait_for_stop("goto")
    assert _frame(dap) == "mul (Mul)"
    total = float(dap.evaluate("a.sum()")["result"])  # goto computed the inputs it lacked
    assert total == pytest.approx(float(ref["a"].sum()), rel=1e-5)
    with pytest.raises(DapError, match="unknown goto target"):
        dap.request("goto", threadId=1, targetId=12345)


def test_restart_keeps_breakpoints(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), breakpoints=["add"])
    dap.wait_for_stop("function breakpoint")
    dap.step()
    assert _frame(dap) == "mul (Mul)"
    dap.request("restart", {"arguments": {"model": str(model), "inputs": str(inputs)}})
    dap.wait_for_stop("function breakpoint")
    assert _frame(dap) == "add (Add)"
    assert "a" not in dap.scope_variables("Values")


def test_step_out_and_continue_run_to_the_end(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.request("stepOut", threadId=1)
    exited = dap.wait_for_event("exited")
    dap.wait_for_end()
    assert exited["exitCode"] == 0
    text = dap.output()
    assert "outputs (as the run computed them, at optimization level all):" in text
    assert f"y: float32[1,4,8,8] min={float(ref['y'].min()):.4g}" in text


def test_no_debug_runs_at_full_speed_and_prints_the_outputs(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), noDebug=True, breakpoints=["relu"])
    dap.wait_for_end()
    assert not dap.events_named("stopped")
    assert f"y: float32[1,4,8,8] min={float(ref['y'].min()):.4g} max={float(ref['y'].max()):.4g}" in dap.output()


def test_terminate_ends_the_session(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.request("terminate")
    dap.wait_for_end()
    with pytest.raises(DapError, match="not stopped"):
        dap.request("next", threadId=1)


def test_launch_errors_say_what_is_wrong(dap: DapClient, tmp_path: Path) -> None:
    import numpy as np

    dap.initialize()
    with pytest.raises(DapError, match="model not found: .*missing.onnx"):
        dap.launch(str(tmp_path / "missing.onnx"))
    model, _, _ = chain_files(tmp_path)
    np.savez(tmp_path / "bad.npz", x=np.zeros(2, np.int64))
    with pytest.raises(DapError, match=r"input 'x' expects float32\[1,2,8,8\], got int64\[2\]"):
        dap.launch(str(model), inputs=str(tmp_path / "bad.npz"))
    with pytest.raises(DapError, match="dims: 'batch' must be an integer"):
        dap.launch(str(model), dims={"batch": "one"})


def test_pause_during_a_long_continue(dap: DapClient, tmp_path: Path) -> None:
    model = running_model(tmp_path)  # a continue of seconds: the pause below comes half a second in
    dap.start(str(model), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.request("continue", threadId=1)
    progress = dap.wait_for_event("progressStart", where=_running)  # the run has gone on for a while
    assert progress["title"] == "Running the model" and progress["cancellable"] is True
    update = dap.wait_for_event("progressUpdate")
    assert update["progressId"] == progress["progressId"] and "running for" in update["message"]
    assert dap.request("threads")["threads"]  # answered while the model computes
    dap.request("pause", threadId=1)
    stop = dap.wait_for_stop("pause")
    assert stop["threadId"] == 1
    assert [e for e in dap.events_named("progressEnd") if e["progressId"] == progress["progressId"]]
    assert not dap.events_named("terminated")  # it stopped before the end
    paused = re.match(r"(matmul|tanh)(\d+) ", _frame(dap))
    assert paused, _frame(dap)
    # and it goes on from there: to the next pair's Tanh (the end would only take seconds more)
    after = f"tanh{int(paused.group(2)) + 1}"
    dap.request("setFunctionBreakpoints", breakpoints=[{"name": after}])
    dap.request("continue", threadId=1)
    dap.wait_for_stop("function breakpoint", timeout=120)
    assert _frame(dap) == f"{after} (Tanh)"


def test_breakpoints_set_while_running_take_effect(dap: DapClient, tmp_path: Path) -> None:
    model = running_model(tmp_path)
    dap.start(str(model), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.request("continue", threadId=1)
    dap.wait_for_event("progressStart", where=_running)
    # Half a second in, the run is some 25 pairs along at most (about 20 ms each): the 100th is seconds away.
    got = dap.request("setFunctionBreakpoints", breakpoints=[{"name": "tanh100"}])["breakpoints"]
    assert got[0]["verified"]
    stop = dap.wait_for_stop("function breakpoint", timeout=120)
    assert stop["hitBreakpointIds"] == [got[0]["id"]]
    assert _frame(dap) == "tanh100 (Tanh)"
    assert not [e for e in dap.events_named("stopped") if e["reason"] == "pause"]
