"""Comparing a debugged run with a reference (issue 6): the mismatch filter, graphDap/compareTable, iterations, graphDap/profile."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dap_client import DapClient, DapError
from models import chain_files, reference
from processes import ROOT

TABLE_KEYS = {
    "rows", "first_divergence", "compared", "failed", "matched", "unmatched_run", "unmatched_reference",
    "input_mismatches", "run", "reference", "tolerance", "metric_names", "notes",
}  # fmt: skip
NODES = ["conv", "relu", "add", "mul", "sigmoid", "side"]  # chain_model's nodes, in run order


def _variant(model: Path, name: str, initializer: str, change: Any) -> Path:
    """A copy of ``model`` with one initializer changed: the reference that diverges from it."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(model)
    for t in proto.graph.initializer:
        if t.name == initializer:
            t.CopyFrom(numpy_helper.from_array(change(numpy_helper.to_array(t).copy()), initializer))
    path = model.with_name(name)
    onnx.save(proto, path)
    return path


@pytest.fixture
def diverging(tmp_path: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """chain.onnx and other.onnx, whose Conv weight differs in one output channel: values of both from onnxruntime."""
    model, inputs, feeds = chain_files(tmp_path)

    def shifted(w: np.ndarray) -> np.ndarray:
        w[1] += 0.01
        return w

    other = _variant(model, "other.onnx", "w", shifted)
    return model, inputs, reference(model, feeds), reference(other, feeds)


def _graph_dap(*args: Any) -> subprocess.CompletedProcess[str]:
    """The CLI, as a user runs it (in its own process: the tests' onnxruntime stays untouched)."""
    done = subprocess.run(
        [sys.executable, "-m", "graph_dap", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def _table(dap: DapClient) -> dict[str, Any]:
    body = dap.request("graphDap/compareTable", {})
    assert set(body) == TABLE_KEYS, set(body) ^ TABLE_KEYS
    return body


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())


def test_the_mismatch_filter_stops_where_the_difference_starts(
    dap: DapClient, diverging: tuple[Path, Path, dict[str, Any], dict[str, Any]]
) -> None:
    model, inputs, ours, theirs = diverging
    caps = dap.initialize()
    mismatch = next(f for f in caps["exceptionBreakpointFilters"] if f["filter"] == "mismatch")
    assert mismatch["label"] == "Mismatch with reference" and mismatch["default"] is False
    assert "node by node" in mismatch["description"]
    dap.launch(str(model), inputs=str(inputs), reference="model:other.onnx", cwd=str(model.parent), exceptions=["mismatch"])
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "Mismatch" and "conv (Conv)" in stop["description"] and "'c'" in stop["description"]
    assert dap.top_frame()["name"] == "conv (Conv)"
    info = dap.request("exceptionInfo", threadId=1)
    assert info["exceptionId"] == "mismatch" and info["breakMode"] == "always"
    assert "max_abs=" in info["description"] and "cosine=" in info["description"]
    assert info["details"]["evaluateName"] == "c" and "tolerance:" in info["details"]["stackTrace"]
    row = next(r for r in _table(dap)["rows"] if r["value"] == "c")
    assert row["origin"] and not row["pass"]
    assert row["metrics"]["max_abs"] == pytest.approx(_max_abs(ours["c"], theirs["c"]), rel=1e-6)
    # what follows only carries the difference: no other stop
    dap.request("continue", threadId=1)
    dap.wait_for_end()
    assert [s["reason"] for s in dap.events_named("stopped")] == ["exception"]
    assert "first divergence: conv (Conv), value 'c': max_abs=" in dap.output()


def test_restart_compares_again(dap: DapClient, diverging: tuple[Path, Path, dict[str, Any], dict[str, Any]]) -> None:
    model, inputs, _, _ = diverging
    dap.start(str(model), inputs=str(inputs), reference=str(model.with_name("other.onnx")), exceptions=["mismatch"])
    dap.wait_for_stop("exception")
    dap.request("continue", threadId=1)
    dap.wait_for_end()
    assert _table(dap)["compared"] == 6
    dap.request("restart")
    stop = dap.wait_for_stop("exception")
    assert "first divergence at conv (Conv)" in stop["description"]
    assert [r["value"] for r in _table(dap)["rows"]] == ["c"]  # forgotten at the restart, compared anew


def test_breakpoints_and_steps_while_comparing(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = chain_files(tmp_path)
    other = _variant(model, "other.onnx", "s", lambda s: s * np.float32(1.001))
    ours, theirs = reference(model, feeds), reference(other, feeds)
    dap.start(str(model), inputs=str(inputs), reference=f"model:{other}", exceptions=["mismatch"], breakpoints=["relu"])
    dap.wait_for_stop("function breakpoint")
    assert dap.top_frame()["name"] == "relu (Relu)"
    dap.step()
    dap.step()  # relu and add ran, within tolerance
    assert dap.top_frame()["name"] == "mul (Mul)"
    dap.request("next", threadId=1)  # mul diverges: the step ends on it
    stop = dap.wait_for_stop("exception")
    assert "mul (Mul)" in stop["description"] and dap.top_frame()["name"] == "mul (Mul)"
    table = _table(dap)
    assert [r["node"]["name"] for r in table["rows"]] == NODES[:4]
    assert [r["pass"] for r in table["rows"]] == [True, True, True, False]
    assert table["first_divergence"]["node"]["name"] == "mul"
    assert table["rows"][3]["metrics"]["max_abs"] == pytest.approx(_max_abs(ours["m"], theirs["m"]), rel=1e-6)


def test_the_table_is_the_json_of_graph_dap_compare(
    dap: DapClient, diverging: tuple[Path, Path, dict[str, Any], dict[str, Any]]
) -> None:
    model, inputs, _, _ = diverging
    other = model.with_name("other.onnx")
    dap.start(str(model), inputs=str(inputs), reference=f"model:{other}", tolerance={"atol": 1e-3, "rtol": 0})
    dap.wait_for_end()  # the filter is off: the run goes to the end, compared all the way
    table = _table(dap)
    done = _graph_dap("compare", model, "--inputs", inputs, "--against-model", other, "--atol", "1e-3", "--rtol", "0", "--json")
    assert done.returncode == 1, done.stderr  # a value differs
    assert table == json.loads(done.stdout)
    assert "compared 6 values" in dap.output()


def test_a_dump_reference_gives_its_inputs_and_a_tolerance_list(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    _graph_dap("dump", model, "--inputs", inputs, "--out", tmp_path / "run.npz")
    dap.start(str(model), reference="run.npz", cwd=str(tmp_path), tolerance=["max_abs>0"], exceptions=["mismatch"])
    dap.wait_for_end()
    assert not dap.events_named("stopped")
    table = _table(dap)
    assert table["compared"] == 6 and table["failed"] == 0 and table["first_divergence"] is None
    assert table["tolerance"]["fail_if"] == ["max_abs>0"]
    assert any(n.startswith("inputs: the dump's (x)") for n in table["notes"])


def test_mismatch_and_compare_table_need_a_reference(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    dap.initialize()
    dap.send("launch", {"model": str(model), "inputs": str(inputs), "stopOnEntry": True})
    dap.wait_for_event("initialized")
    got = dap.request("setExceptionBreakpoints", filters=["mismatch", "nan"])["breakpoints"]
    assert not got[0]["verified"] and "needs a reference" in got[0]["message"] and got[1]["verified"]
    dap.request("configurationDone")
    dap.wait_for_stop("entry")
    with pytest.raises(DapError, match="no reference to compare with"):
        dap.request("graphDap/compareTable", {})


@pytest.mark.parametrize(
    "args, words",
    [
        ({"reference": "nonsense"}, "reference 'nonsense' is not understood"),
        ({"reference": "provider:NoSuchExecutionProvider"}, "NoSuchExecutionProvider"),
        ({"reference": "opt_level:all", "tolerance": ["cosine<<1"]}, "fail condition 'cosine<<1' is not understood"),
        ({"tolerance": {"atol": 1}}, "'tolerance' needs a 'reference'"),
        ({"reference": 3}, "'arguments.reference' must be a string"),
    ],
)
def test_a_bad_reference_fails_the_launch(dap: DapClient, tmp_path: Path, args: dict[str, Any], words: str) -> None:
    model, inputs, _ = chain_files(tmp_path)
    dap.initialize()
    with pytest.raises(DapError, match=words):
        dap.launch(str(model), inputs=str(inputs), **args)


def test_no_debug_with_iterations_runs_the_model_n_times(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = chain_files(tmp_path)
    y = reference(model, feeds)["y"]
    dap.start(str(model), inputs=str(inputs), noDebug=True, iterations=3)
    exited = dap.wait_for_event("exited")
    assert exited["exitCode"] == 0
    text = dap.output()
    assert "ran 3 of 3 times: median " in text and "outputs identical in every run" in text
    assert f"y: float32[1,4,8,8] min={float(y.min()):.4g} max={float(y.max()):.4g}" in text


def test_profile_while_stopped(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True, iterations=2)
    dap.wait_for_stop("entry")
    body = dap.request("graphDap/profile", {})
    assert body["repeat"] == 2 and body["warmup"] == 1 and body["opt_level"] == "none"
    assert body["providers"] == ["CPUExecutionProvider"]
    timed = {n["name"] for n in body["nodes"]} | {n["name"] for n in body["not_timed"]}
    assert timed == set(NODES)
    assert all(n["time_ms"] >= 0 and n["op_type"] for n in body["nodes"])
    assert dap.request("graphDap/profile", {"iterations": 1})["repeat"] == 1
    assert dap.top_frame()["name"] == "conv (Conv)"  # the debug session is where it was


def test_pause_while_comparing_node_by_node(dap: DapClient, tmp_path: Path) -> None:
    from models import running_model

    model = running_model(tmp_path)
    dap.start(str(model), stopOnEntry=True, reference="provider:CPUExecutionProvider", exceptions=["mismatch"])
    dap.wait_for_stop("entry")
    dap.request("continue", threadId=1)
    dap.wait_for_event("progressUpdate", where=lambda b: "nodes" in b.get("message", ""))  # node by node, reported
    dap.request("pause", threadId=1)
    dap.wait_for_stop("pause")
    kind, pair = re.match(r"(matmul|tanh)(\d+) ", dap.top_frame()["name"]).groups()  # type: ignore[union-attr]
    table = _table(dap)
    assert table["compared"] > 0 and table["failed"] == 0  # the same provider: every value identical so far
    next_index = 2 * int(pair) + (kind == "tanh")  # long_model's nodes: matmul0, tanh0, matmul1, ...
    assert table["rows"][-1]["node"]["index"] == next_index - 1  # compared up to the node before the pause
