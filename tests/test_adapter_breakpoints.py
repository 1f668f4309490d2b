"""Breakpoints: on listing lines, by function spec, on data, with conditions, hit counts and logpoints; exceptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from dap_client import DapClient
from models import error_model, inf_model, nan_model, reference


def _listing_lines(dap: DapClient) -> dict[str, int]:
    """Node id -> 1-based line, read from the listing the adapter serves."""
    text = dap.source_text(dap.listing_source())
    out = {}
    for i, line in enumerate(text.splitlines(), 1):
        if "  # " in line and " = " in line:
            out[line.rsplit("  # ", 1)[1].split()[0]] = i
    return out


def test_line_breakpoints_map_to_nodes(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    lines = _listing_lines(dap)
    source = dap.listing_source()
    got = dap.request(
        "setBreakpoints",
        source=source,
        breakpoints=[{"line": lines["add"]}, {"line": 2}, {"line": 10_000}],
    )["breakpoints"]
    assert got[0]["verified"] and got[0]["line"] == lines["add"]
    assert got[1]["verified"] and got[1]["line"] == lines["conv"]  # a header line: moved to the first node
    assert not got[2]["verified"] and "no node on or after line 10000" in got[2]["message"]
    dap.request("continue", threadId=1)
    stop = dap.wait_for_stop("breakpoint")
    assert stop["hitBreakpointIds"] == [got[0]["id"]]
    assert dap.top_frame()["line"] == lines["add"]
    # the same file by path works too
    by_path = dap.request("setBreakpoints", source={"path": source["path"]}, breakpoints=[{"line": lines["mul"]}])
    assert by_path["breakpoints"][0]["verified"]
    other = dap.request("setBreakpoints", source={"path": "/elsewhere/file.py"}, breakpoints=[{"line": 3}])
    assert not other["breakpoints"][0]["verified"]


def test_a_breakpoint_on_the_first_node_stops_a_launch(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), breakpoints=["conv"])
    dap.wait_for_stop("function breakpoint")
    assert dap.top_frame()["name"] == "conv (Conv)"


def test_function_breakpoint_specs(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    got = dap.request(
        "setFunctionBreakpoints",
        breakpoints=[{"name": "op:Relu"}, {"name": "a"}, {"name": "mu*"}, {"name": "nothing_like_this"}],
    )["breakpoints"]
    assert [b["verified"] for b in got] == [True, True, True, False]
    assert "no node, value or op type matches" in got[3]["message"]
    expected = [("relu (Relu)", got[0]["id"]), ("add (Add)", got[1]["id"]), ("mul (Mul)", got[2]["id"])]
    for name, bp_id in expected:
        dap.request("continue", threadId=1)
        stop = dap.wait_for_stop("function breakpoint")
        assert stop["hitBreakpointIds"] == [bp_id]
        assert dap.top_frame()["name"] == name
    dap.request("continue", threadId=1)
    dap.wait_for_end()


def test_conditions_hit_counts_and_logpoints(dap: DapClient, tmp_path: Path) -> None:
    from models import wide_model

    model, inputs, feeds = wide_model(tmp_path, count=12, rows=4)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    lines = _listing_lines(dap)
    source = dap.listing_source()
    log = dap.request(
        "setBreakpoints", source=source, breakpoints=[{"line": lines["neg2"], "logMessage": "v1 max is {v1.max()}"}]
    )["breakpoints"][0]
    assert log["verified"]
    fb = dap.request(
        "setFunctionBreakpoints",
        breakpoints=[{"name": "op:Neg", "hitCondition": ">=6", "condition": "x.sum() > 0"}],
    )["breakpoints"][0]
    assert fb["verified"]
    dap.request("continue", threadId=1)
    stop = dap.wait_for_stop("function breakpoint")
    assert dap.top_frame()["name"] == "neg6 (Neg)"  # 7th Neg: the first continue steps off neg0
    assert stop["hitBreakpointIds"] == [fb["id"]]
    out = dap.wait_for_event("output", where=lambda b: "v1 max" in b["output"])
    assert out["output"].startswith("v1 max is ") and out["category"] == "console"
    assert float(out["output"].split()[-1]) == float(feeds["x"].max())  # v1 = -(-x)
    bad = dap.request("setFunctionBreakpoints", breakpoints=[{"name": "neg8", "hitCondition": "lots"}])
    assert not bad["breakpoints"][0]["verified"] and "hit condition" in bad["breakpoints"][0]["message"]


def test_data_breakpoints_on_write_and_read(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    values = dap.scopes()["Values"]["variablesReference"]
    info = dap.request("dataBreakpointInfo", variablesReference=values, name="x")
    assert info["dataId"] == "x" and set(info["accessTypes"]) >= {"read", "write"}
    got = dap.request("setDataBreakpoints", breakpoints=[{"dataId": "x", "accessType": "write"}])["breakpoints"][0]
    assert not got["verified"] and "graph input" in got["message"]
    info = dap.request("dataBreakpointInfo", name="r")  # by expression, as from the watch view
    assert info["dataId"] == "r"
    got = dap.request(
        "setDataBreakpoints",
        breakpoints=[
            {"dataId": "r", "accessType": "write"},
            {"dataId": "c", "accessType": "read"},
            {"dataId": "r", "accessType": "read"},
        ],
    )["breakpoints"]
    assert all(b["verified"] for b in got)
    # relu reads c: the read breakpoint stops before it
    dap.request("continue", threadId=1)
    stop = dap.wait_for_stop("data breakpoint")
    assert stop["hitBreakpointIds"] == [got[1]["id"]] and dap.top_frame()["name"] == "relu (Relu)"
    # r written (relu ran), and add reads r: both at one stop
    dap.request("continue", threadId=1)
    stop = dap.wait_for_stop("data breakpoint")
    assert set(stop["hitBreakpointIds"]) == {got[0]["id"], got[2]["id"]} and dap.top_frame()["name"] == "add (Add)"
    assert "r" in dap.scope_variables("Last outputs")
    dap.request("continue", threadId=1)
    dap.wait_for_end()


def test_nan_filter_stops_where_nan_appears(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = nan_model(tmp_path)
    ref = reference(model, feeds)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=["nan"])
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "NaN"
    assert dap.top_frame()["name"] == "log1 (Log)"
    info = dap.request("exceptionInfo", threadId=1)
    count = int(np.isnan(ref["logged"]).sum())
    first = [int(i) for i in np.argwhere(np.isnan(ref["logged"]))[0]]
    assert info["exceptionId"] == "nan" and info["breakMode"] == "always"
    assert f"{count} NaN in 'logged'" in info["description"] and str(first) in info["description"]
    assert "none of its inputs held any" in info["description"]
    assert info["details"]["evaluateName"] == "logged"
    logged = dap.scope_variables("Last outputs")["logged"]["value"]  # recomputed with the original Log, from the run's values
    assert f"nan={count}" in logged and logged.endswith("(recomputed with the original nodes)")
    dap.request("continue", threadId=1)
    dap.wait_for_end()  # Relu only passes the NaN on: no new NaN is made after Log
    # faultStops "every": each node holding the NaN stops the run, saying its input already held it
    dap.request("restart", {"arguments": {"model": str(model), "inputs": str(inputs), "faultStops": "every"}})
    dap.wait_for_stop("exception")
    assert dap.top_frame()["name"] == "log1 (Log)"
    dap.request("continue", threadId=1)
    dap.wait_for_stop("exception")
    info = dap.request("exceptionInfo", threadId=1)
    assert dap.top_frame()["name"] == "relu1 (Relu)" and "input logged already held NaN" in info["description"]
    dap.request("setExceptionBreakpoints", filters=[])
    dap.request("continue", threadId=1)
    dap.wait_for_end()


def test_inf_filter_with_exclusions(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = inf_model(tmp_path)
    ref = reference(model, feeds)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=["inf"])
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "Inf" and dap.top_frame()["name"] == "div1 (Div)"
    info = dap.request("exceptionInfo", threadId=1)
    count = int(np.isinf(ref["ratio"]).sum())
    assert info["exceptionId"] == "inf" and f"{count} Inf in 'ratio'" in info["description"]
    assert f"posinf: {int(np.isposinf(ref['ratio']).sum())}" in info["details"]["stackTrace"]
    # Excluding the node that makes Inf (say, a mask on purpose): the next node that holds it stops.
    dap.request("restart", {"arguments": {"model": str(model), "inputs": str(inputs)}})
    dap.wait_for_stop("exception")
    got = dap.request("setExceptionBreakpoints", filters=[], filterOptions=[{"filterId": "inf", "condition": "op:Div"}])
    assert got["breakpoints"] == [{"verified": True}]
    dap.request("restart", {"arguments": {"model": str(model), "inputs": str(inputs)}})
    dap.wait_for_stop("exception")
    assert dap.top_frame()["name"] == "add1 (Add)"
    assert "input ratio already held Inf" in dap.request("exceptionInfo", threadId=1)["description"]
    dap.request("setExceptionBreakpoints", filters=[], filterOptions=[{"filterId": "inf", "condition": "op:Div, add*"}])
    dap.request("continue", threadId=1)
    dap.wait_for_end()


def test_inf_filter_after_an_earlier_nan(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = nan_model(tmp_path)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=["inf"])
    dap.wait_for_stop("exception", timeout=10)
    assert dap.top_frame()["name"] == "div1 (Div)"


def test_error_filter_is_on_by_default(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = error_model(tmp_path)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs))
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "NodeExecutionError"
    info = dap.request("exceptionInfo", threadId=1)
    assert info["exceptionId"] == "error" and "reshape1 (Reshape)" in info["description"]
    assert dap.top_frame()["name"] == "reshape1 (Reshape)"
    assert list(dap.scope_variables("Inputs")) == ["r", "shape"]


def test_without_the_error_filter_a_failing_node_ends_the_run(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = error_model(tmp_path)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=[])
    exited = dap.wait_for_event("exited")
    assert exited["exitCode"] == 1
    dap.wait_for_end()
    assert "reshape1" in dap.output()
