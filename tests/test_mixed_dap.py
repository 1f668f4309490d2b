"""Mixed mode over DAP: one session on a Python program (debugpy) and the graphs its ``run`` calls run.

The program (``tests/programs/infer_loop.py``) loads two models and calls ``run`` in a loop. Every message
in both directions is held to the DAP schema by the project's client; the values the program prints are
checked against onnxruntime's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dap_client import DapClient
from mixed_program import PROGRAM, call_inputs, loop_models, printed, program_line

STOP = 90.0  # seconds a stop may take: each debugged call starts a graph session on a fresh worker


@pytest.fixture
def models(tmp_path: Path) -> tuple[Path, Path]:
    return loop_models(tmp_path)


def launch_program(
    dap: DapClient,
    models: tuple[Path, Path],
    calls: int = 8,
    lines: list[int] | None = None,
    functions: list[dict[str, Any]] | None = None,
    exceptions: list[str] | None = None,
    **extra: Any,
) -> None:
    """initialize, launch the program, set the breakpoints once ``initialized`` comes, configurationDone."""
    dap.initialize()
    args = {"program": str(PROGRAM), "args": [str(models[0]), str(models[1]), str(calls)], **extra}
    dap.request("launch", args, timeout=STOP)
    dap.wait_for_event("initialized", timeout=STOP)
    if lines is not None:
        body = dap.request("setBreakpoints", source={"path": str(PROGRAM)}, breakpoints=[{"line": n} for n in lines])
        assert all(b["verified"] for b in body["breakpoints"]), body
    if functions is not None:
        dap.request("setFunctionBreakpoints", breakpoints=functions)
    dap.request("setExceptionBreakpoints", filters=exceptions or [])
    dap.request("configurationDone")


def graph_stop(dap: DapClient, reason: str) -> dict[str, Any]:
    """The next graph stop of ``reason`` (the Python thread's park comes before it, as a ``pause``)."""
    return dap.wait_for_event("stopped", timeout=STOP, where=lambda body: body["reason"] == reason)


def threads(dap: DapClient) -> dict[str, int]:
    return {t["name"]: t["id"] for t in dap.request("threads")["threads"]}


def frames(dap: DapClient, thread: int) -> list[dict[str, Any]]:
    return dap.request("stackTrace", threadId=thread)["stackFrames"]


def wait_printed(dap: DapClient, text: str) -> None:
    dap.wait_for_event("output", timeout=STOP, where=lambda body: text in body.get("output", ""))


def test_a_python_breakpoint_before_the_loop_stops_there_with_its_variables_and_steps(dap, models):
    line = program_line("total = 0.0")
    launch_program(dap, models, lines=[line])
    stop = dap.wait_for_stop("breakpoint", timeout=STOP)
    top = frames(dap, stop["threadId"])[0]
    assert (top["name"], top["line"], top["source"]["path"]) == ("main", line, str(PROGRAM))
    assert dap.request("evaluate", expression="scale_path", frameId=top["id"], context="repl")["result"] == repr(str(models[0]))
    dap.request("next", threadId=stop["threadId"])
    dap.wait_for_stop("step", timeout=STOP)
    assert frames(dap, stop["threadId"])[0]["line"] == line + 1
    dap.request("continue", threadId=stop["threadId"])
    wait_printed(dap, "total:")
    dap.wait_for_end(timeout=STOP)


def test_a_graph_breakpoint_stops_in_call_3_with_the_python_caller_stopped_in_run(dap, models):
    launch_program(dap, models, functions=[{"name": "plus1", "condition": "x[0, 0] == 3"}])
    stop = graph_stop(dap, "function breakpoint")
    named = threads(dap)
    graph = named["graph: scale.onnx, run #3"]
    assert stop["threadId"] == graph and stop["allThreadsStopped"] is False
    python = named["MainThread"]
    parked = next(e.get("body", {}) for e in dap.events if e["event"] == "stopped" and e["body"]["threadId"] == python)
    assert parked["reason"] == "pause" and "InferenceSession.run" in parked["description"]
    # the Python thread is stopped at the caller's line, in its own frame; the graph thread at the node
    caller = frames(dap, python)[0]
    assert caller["line"] == program_line("scale.run(") and caller["source"]["path"] == str(PROGRAM)
    assert dap.request("evaluate", expression="i", frameId=caller["id"], context="repl")["result"] == "3"
    node = frames(dap, graph)[0]
    assert node["name"] == "plus1 (Add)" and node["source"]["path"].endswith("scale.onnxtxt")
    assert float(dap.request("evaluate", expression="x[0, 0]", frameId=node["id"], context="repl")["result"]) == 3.0
    assert "call 2:" in dap.output() and "call 3:" not in dap.output()
    # step in the graph: the run ends (plus1 was the last node), the outputs go back, the program goes on
    dap.request("next", threadId=graph)
    wait_printed(dap, f"call 3: {printed(*models, call_inputs(3))}")
    wait_printed(dap, "total:")
    assert "graph: scale.onnx, run #3" not in threads(dap)


def test_set_variable_on_the_graph_changes_what_the_program_prints(dap, models):
    launch_program(dap, models, functions=[{"name": "double", "condition": "x[0, 0] == 3"}])
    stop = graph_stop(dap, "function breakpoint")
    node = frames(dap, stop["threadId"])[0]
    scopes = {s["name"]: s for s in dap.request("scopes", frameId=node["id"])["scopes"]}
    body = dap.request("setVariable", variablesReference=scopes["Inputs"]["variablesReference"], name="x", value="0")
    assert "float32[2,4]" in body["value"]
    dap.request("continue", threadId=stop["threadId"])
    expected = printed(*models, call_inputs(3) * 0)
    assert expected != printed(*models, call_inputs(3))
    wait_printed(dap, f"call 3: {expected}")
    wait_printed(dap, f"call 4: {printed(*models, call_inputs(4))}")


def test_the_nan_filter_stops_at_the_first_call_whose_graph_makes_nan(dap, models):
    launch_program(dap, models, exceptions=["nan"])
    stop = graph_stop(dap, "exception")
    assert stop["threadId"] == threads(dap)["graph: root.onnx, run #7"]
    info = dap.request("exceptionInfo", threadId=stop["threadId"])
    assert info["exceptionId"] == "nan" and "sqrt1" in info["description"]
    caller = frames(dap, threads(dap)["MainThread"])[0]
    assert caller["line"] == program_line("root.run(")
    assert dap.request("evaluate", expression="i", frameId=caller["id"], context="repl")["result"] == "7"
    assert "call 6:" in dap.output() and "call 7:" not in dap.output()
    dap.request("continue", threadId=stop["threadId"])  # halve only carries sqrt1's NaN on: no new fault, no stop
    wait_printed(dap, "call 7: nan")


def test_nan_exclude_in_a_program_launch_leaves_that_nodes_nan_alone_in_the_programs_runs(dap, models):
    """The launch argument ``nanExclude`` of a model launch works in a program launch too: the host's watch of
    ROOT's runs lets the NaN of call 7 through (sqrt1 makes it, halve carries it to the output): no stop, the
    program prints it."""
    launch_program(dap, models, exceptions=["nan"], nanExclude=["sqrt1", "halve"])
    wait_printed(dap, "total: nan")
    assert "call 7: nan" in dap.output()
    assert not [e for e in dap.events_named("stopped") if e["body"]["reason"] == "exception"]


def test_a_call_a_breakpoint_skips_is_watched_and_nan_exclude_reaches_its_graph_session(dap, models):
    """ROOT has a breakpoint for call 8 only: call 7 runs without a graph session, yet watched (the nan filter is on),
    and its NaN is debugged with the launch's ``nanExclude``: sqrt1's NaN is left alone, and halve, which carries it on
    to the output, stops and says what the watch left alone. Call 8 then stops at its breakpoint."""
    launch_program(dap, models, functions=[{"name": "halve", "condition": "call == 8"}], exceptions=["nan"], nanExclude=["sqrt1"])
    stop = graph_stop(dap, "exception")
    assert stop["threadId"] == threads(dap)["graph: root.onnx, run #7"]
    info = dap.request("exceptionInfo", threadId=stop["threadId"])
    assert info["exceptionId"] == "nan" and "halve (Mul) produced" in info["description"]
    assert "not watched: the NaN of sqrt1 (--nan-exclude)" in info["description"]
    dap.request("continue", threadId=stop["threadId"])
    wait_printed(dap, "call 7: nan")
    stop = graph_stop(dap, "function breakpoint")
    assert stop["threadId"] == threads(dap)["graph: root.onnx, run #8"]
    assert frames(dap, stop["threadId"])[0]["name"] == "halve (Mul)"
    dap.request("continue", threadId=stop["threadId"])
    wait_printed(dap, "total: nan")


def test_the_programs_other_threads_run_on_while_a_graph_is_stopped(dap, models):
    dap.initialize()
    misbehaving = str(PROGRAM.parent / "misbehaving.py")
    dap.request("launch", {"program": misbehaving, "args": ["heartbeat", str(models[1])]}, timeout=STOP)
    dap.wait_for_event("initialized", timeout=STOP)
    dap.request("setExceptionBreakpoints", filters=["nan"])
    dap.request("configurationDone")
    stop = graph_stop(dap, "exception")
    named = threads(dap)
    assert set(named) == {"MainThread", "heartbeat", "graph: root.onnx, run #1"}
    beats = [int(line.split()[1]) for line in dap.output().splitlines() if line.startswith("beat ")]
    wait_printed(dap, f"beat {max(beats) + 5}")  # the heartbeat thread goes on while the graph is stopped
    assert "graph: root.onnx, run #1" in threads(dap) and "done" not in dap.output()
    dap.request("continue", threadId=stop["threadId"])  # (halve only carries sqrt1's NaN on: no new fault, no stop)
    wait_printed(dap, f"done: {run_root(models[1])}")


def test_a_node_error_stops_in_the_graph_and_the_program_then_gets_onnxruntimes_error(dap, tmp_path):
    import subprocess
    import sys

    from models import error_model
    from processes import ROOT

    broken, _, _ = error_model(tmp_path)
    program = str(PROGRAM.parent / "misbehaving.py")
    plain = subprocess.run([sys.executable, program, "broken", str(broken)], capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
    assert "the program got" in plain.stdout
    dap.initialize()
    dap.request("launch", {"program": program, "args": ["broken", str(broken)]}, timeout=STOP)
    dap.wait_for_event("initialized", timeout=STOP)
    dap.request("setExceptionBreakpoints", filters=["error"])
    dap.request("configurationDone")
    stop = graph_stop(dap, "exception")
    assert stop["text"] == "NodeExecutionError" and "reshape1" in stop["description"]
    assert frames(dap, stop["threadId"])[0]["name"] == "reshape1 (Reshape)"
    dap.request("continue", threadId=stop["threadId"])
    wait_printed(dap, plain.stdout.strip())
    dap.wait_for_end(timeout=STOP)


def run_root(root: Path) -> str:
    """What the heartbeat program prints at the end (the NaN input through ROOT, in onnxruntime)."""
    import numpy as np
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    y = np.full((2, 4), 1.0, np.float32)
    y[0, 0] = -9.0
    (z,) = ort.InferenceSession(str(root), session_options("none"), providers=["CPUExecutionProvider"]).run(None, {"y": y})
    return f"{float(z.sum()):.4f}"


def test_python_exceptions_are_debugpys_and_its_filters_are_listed(models):
    dap = DapClient.stdio(env={"GRAPH_DAP_PROGRAM": "1"})
    try:
        filters = [f["filter"] for f in dap.initialize()["exceptionBreakpointFilters"]]
        assert filters[:4] == ["nan", "inf", "error", "mismatch"] and {"raised", "uncaught"} <= set(filters)
        dap.request("launch", {"program": str(PROGRAM.parent / "misbehaving.py"), "args": ["crash", str(models[1])]}, timeout=STOP)
        announced = dap.wait_for_event("capabilities")["capabilities"]
        assert {"raised", "uncaught", "userUnhandled"} <= {f["filter"] for f in announced["exceptionBreakpointFilters"]}
        dap.wait_for_event("initialized", timeout=STOP)
        body = dap.request("setExceptionBreakpoints", filters=["uncaught", "nan"])
        assert [b["verified"] for b in body["breakpoints"]] == [True, True]
        dap.request("configurationDone")
        stop = dap.wait_for_stop("exception", timeout=STOP)
        info = dap.request("exceptionInfo", threadId=stop["threadId"])
        assert "the program crashed on purpose" in info["description"]
        assert threads(dap) == {"MainThread": stop["threadId"]}
    finally:
        dap.disconnect()
    assert "Traceback" not in dap.stderr_text()


def test_disconnect_ends_the_program(models):
    dap = DapClient.stdio()
    launch_program(dap, models, lines=[program_line("total = 0.0")])
    dap.wait_for_stop("breakpoint", timeout=STOP)
    pid = dap.wait_for_event("process")["systemProcessId"]
    assert _alive(pid)
    dap.disconnect()  # terminateDebuggee
    assert not _alive(pid)
    assert "Traceback" not in dap.stderr_text()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie has ended
    except OSError:
        return True


def test_a_module_launch_stops_every_run_a_listing_breakpoint_waits_for_its_model_and_steps_back(dap, models):
    from graph_dap.runtime.listing import render_listing
    from graph_dap.runtime.loading import load_graph

    listing = models[1].with_suffix(".onnxtxt")  # written when the program creates root.onnx's session
    halve = render_listing(load_graph(models[1])).line_of("halve")
    dap.initialize()
    launch = {"module": PROGRAM.stem, "args": [str(models[0]), str(models[1]), "1"], "env": {"PYTHONPATH": str(PROGRAM.parent)},
              "stopOnSessionRun": True}  # fmt: skip
    dap.request("launch", launch, timeout=STOP)
    dap.wait_for_event("initialized", timeout=STOP)
    (bp,) = dap.request("setBreakpoints", source={"path": str(listing)}, breakpoints=[{"line": halve}])["breakpoints"]
    assert not bp["verified"] and bp["message"] == "the program has not loaded this listing's model yet"
    dap.request("setExceptionBreakpoints", filters=[])
    dap.request("configurationDone")
    stop = graph_stop(dap, "entry")  # stopOnSessionRun: each run stops at its first node
    assert stop["threadId"] == threads(dap)["graph: scale.onnx, run #1"]
    assert frames(dap, stop["threadId"])[0]["name"] == "double (Mul)"
    changed = dap.wait_for_event("breakpoint", timeout=STOP, where=lambda b: b["breakpoint"]["id"] == bp["id"])["breakpoint"]
    assert changed["verified"] and changed["line"] == halve and changed["source"]["path"] == str(listing)
    assert listing.is_file()
    dap.request("continue", threadId=stop["threadId"])
    stop = graph_stop(dap, "entry")
    assert stop["threadId"] == threads(dap)["graph: root.onnx, run #1"]
    dap.request("continue", threadId=stop["threadId"])
    hit = graph_stop(dap, "breakpoint")
    assert hit["threadId"] == stop["threadId"] and hit["hitBreakpointIds"] == [bp["id"]]
    node = frames(dap, hit["threadId"])[0]
    assert node["name"] == "halve (Mul)" and node["line"] == halve and node["source"]["path"] == str(listing)
    assert "call 1:" not in dap.output()
    dap.request("stepBack", threadId=hit["threadId"])  # back before sqrt1, as in a model session
    assert graph_stop(dap, "step")["threadId"] == hit["threadId"]
    assert frames(dap, hit["threadId"])[0]["name"] == "sqrt1 (Sqrt)"
    dap.request("continue", threadId=hit["threadId"])  # halve's breakpoint again
    assert graph_stop(dap, "breakpoint")["hitBreakpointIds"] == [bp["id"]]
    dap.request("continue", threadId=hit["threadId"])
    wait_printed(dap, f"call 1: {printed(*models, call_inputs(1))}")
    dap.wait_for_end(timeout=STOP)


def test_a_program_launch_refuses_bad_arguments_in_one_line(dap, models):
    dap.initialize()
    for args, message in (
        ({"program": str(PROGRAM), "module": "infer_loop"}, "give either 'program' (a script) or 'module' (a module name), not both"),
        ({"program": str(models[0].parent / "nope.py")}, f"program not found: {models[0].parent / 'nope.py'}"),
        ({"program": str(PROGRAM), "tolerance": {"atol": 1e-3}}, "'tolerance' needs a 'reference' to compare with"),
        ({"program": str(PROGRAM), "memoryBudgetMB": 0}, "memoryBudgetMB must be positive"),
    ):
        seq = dap.send("launch", args)
        response = dap.response(seq)
        assert not response["success"] and response["message"] == message, response


def test_with_a_reference_the_mismatch_filter_stops_where_a_run_first_differs(dap, models):
    import onnx
    from onnx import numpy_helper

    other = onnx.load(str(models[1]))  # root.onnx with halve's 0.5 made 0.6: only halve's output differs
    half = next(t for t in other.graph.initializer if t.name == "half")
    half.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(half) * 0 + 0.6, "half"))
    reference = models[1].with_name("other.onnx")
    onnx.save(other, str(reference))
    dap.initialize()
    misbehaving = str(PROGRAM.parent / "misbehaving.py")  # "exit": one call, then exit status 3
    launch = {"program": misbehaving, "args": ["exit", str(models[1])], "reference": f"model:{reference}", "tolerance": {"atol": 1e-4}}
    dap.request("launch", launch, timeout=STOP)
    dap.wait_for_event("initialized", timeout=STOP)
    dap.request("setExceptionBreakpoints", filters=["mismatch"])
    dap.request("configurationDone")
    stop = graph_stop(dap, "exception")
    assert stop["threadId"] == threads(dap)["graph: root.onnx, run #1"]
    info = dap.request("exceptionInfo", threadId=stop["threadId"])
    assert info["exceptionId"] == "mismatch" and "halve" in info["description"], info
    assert frames(dap, stop["threadId"])[0]["name"] == "halve (Mul)"
    dap.request("continue", threadId=stop["threadId"])
    y = np.full((2, 4), 1.0, np.float32)
    wait_printed(dap, f"call 1: {_root_sum(models[1], y)}")  # the program gets its own model's outputs
    assert dap.wait_for_event("exited", timeout=STOP)["exitCode"] == 3


def _root_sum(root: Path, y: Any) -> str:
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    (z,) = ort.InferenceSession(str(root), session_options("none"), providers=["CPUExecutionProvider"]).run(None, {"y": y})
    return f"{float(z.sum()):.4f}"


def test_cancel_requests_are_answered_and_the_session_goes_on(dap, models):
    """VS Code cancels the stackTrace and variables it sent when the user continues: the session must go on answering."""
    launch_program(dap, models, calls=3, lines=[program_line("total = 0.0")], stopOnSessionRun=True)
    stop = dap.wait_for_stop("breakpoint", timeout=STOP)
    t = stop["threadId"]
    dap.send("continue", {"threadId": t})
    pending = [dap.send("stackTrace", {"threadId": t, "startFrame": 1, "levels": 19}), dap.send("variables", {"variablesReference": 1})]
    cancels = [dap.send("cancel", {"requestId": seq}) for seq in pending]
    for seq in cancels:
        assert dap.response(seq)["success"]
    graph_stop(dap, "entry")
    assert any(name.startswith("graph: scale.onnx") for name in threads(dap))
