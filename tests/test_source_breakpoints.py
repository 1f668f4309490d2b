"""Breakpoints on lines of the model's Python source: in the runtime and from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from source_models import DYNAMO, INPUT, TORCHSCRIPT, line_of

from graph_dap.runtime import BreakpointSpec, DebugSession, StopReason
from graph_dap.runtime.engine.options import session_options


def _ort_values(names: list[str]) -> dict[str, np.ndarray]:
    """onnxruntime's own values of some intermediate tensors of the dynamo model."""
    model = onnx.load(str(DYNAMO))
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    sess = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, {"x": np.load(INPUT)})))


def test_a_line_breakpoint_stops_at_the_first_node_of_each_execution_of_the_line() -> None:
    s = DebugSession(DYNAMO, {"x": np.load(INPUT)})
    line = line_of("return x + self.attn(h)")
    (bp,) = s.set_breakpoints([f"tinymodel.py:{line}"])
    assert bp.verified and bp.node_ids == ("node_MatMul_1", "node_MatMul_10")
    assert bp.message == f"20 nodes from tinymodel.py:{line} (first: node_MatMul_1), 2 executions of the line"
    stop = s.continue_(check_first=True)
    assert stop.reason is StopReason.BREAKPOINT and stop.node.id == "node_MatMul_1"
    np.testing.assert_array_equal(s.value("layer_norm"), _ort_values(["layer_norm"])["layer_norm"])
    stop = s.continue_()  # the rest of block 0's line is the same execution: no stop before block 1's
    assert stop.node.id == "node_MatMul_10"
    assert s.continue_().reason is StopReason.END


def test_a_hit_count_counts_executions_of_the_line_not_nodes() -> None:
    s = DebugSession(DYNAMO, {"x": np.load(INPUT)})
    s.set_breakpoints([BreakpointSpec(f"tinymodel.py:{line_of('x = block(x)')}", hit_condition="2")])
    stop = s.continue_(check_first=True)
    assert stop.node.id == "node_layer_norm_1"  # the second block's LayerNorm: the line's second execution
    np.testing.assert_array_equal(s.value("add"), _ort_values(["add"])["add"])


def test_lines_without_nodes_and_models_without_stack_traces_are_unverified_with_a_reason() -> None:
    s = DebugSession(DYNAMO)
    none, other = s.set_breakpoints([f"tinymodel.py:{line_of('class Block')}", "model.py:3"])
    assert not none.verified and none.message.startswith(f"no node comes from line {line_of('class Block')} of tinymodel.py; lines that did: ")
    assert not other.verified and other.message == "no node of this model comes from model.py (its stack traces name tinymodel.py)"
    (ts,) = DebugSession(TORCHSCRIPT).set_breakpoints(["tinymodel.py:18"])
    assert not ts.verified and "carries no Python stack traces" in ts.message


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graph_dap.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_break_on_a_python_line() -> None:
    line = line_of("att = F.softmax(att, dim=-1)")
    r = _cli("run", str(DYNAMO), "--inputs", str(INPUT), "--break", f"tinymodel.py:{line}", "--json")
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["node"]["id"] == "node_softmax"
    assert report["source"] == [{"path": "/home/exporter/tinymodel/tinymodel.py", "line": line, "function": "forward"}]
    assert report["module"] == "blocks.0.attn"
    # the node carries them too, as compare's rows and profile's nodes do
    assert report["node"]["source"] == report["source"] and report["node"]["module"] == "blocks.0.attn"
    mul = _ort_values(["mul"])["mul"]
    assert report["summaries"]["mul"]["max"] == float(mul.max())
    text = _cli("run", str(DYNAMO), "--inputs", str(INPUT), "--break", f"tinymodel.py:{line}").stdout
    assert f"  source: tinymodel.py:{line} in Attention.forward: att = F.softmax(att, dim=-1)" in text
    assert "  module: blocks.0.attn: Attention" in text
    bad = _cli("run", str(DYNAMO), "--break", "tinymodel.py:1")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("graph-dap: --break tinymodel.py:1: no node comes from line 1 of tinymodel.py")
