"""DAP and the model's Python source: frames under the node, their Module scope, breakpoints on .py lines,
pathMappings and the tail search, models without stack traces.

The models are tests/data/source's exports (their stack traces name a made-up exporting machine's
paths); every message is held to the DAP schema; values are checked against onnxruntime's own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from dap_client import DapClient
from source_models import INPUT, REMOTE_ROOT, SOURCE, TORCHSCRIPT, line_of, project

from graph_dap.runtime.engine.options import session_options


def _ort(model_path: Path, names: list[str]) -> dict[str, np.ndarray]:
    model = onnx.load(str(model_path))
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    sess = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, {"x": np.load(INPUT)})))


def _launch(dap: DapClient, model: Path, cwd: Path, source: Path, lines: list[dict], **launch) -> list[dict]:
    """initialize, launch, breakpoints on ``source``'s lines, configurationDone: the breakpoints' answers."""
    dap.initialize()
    seq = dap.send("launch", {"model": str(model), "inputs": str(INPUT), "cwd": str(cwd), **launch})
    assert dap.response(seq)["success"]
    dap.wait_for_event("initialized")
    got = dap.request("setBreakpoints", source={"name": source.name, "path": str(source)}, breakpoints=lines)["breakpoints"]
    dap.request("configurationDone")
    return got


def test_a_py_breakpoint_binds_stops_and_the_python_frames_are_under_the_node(dap: DapClient, tmp_path: Path) -> None:
    model, _, src = project(tmp_path)  # the source is found under the model's folder by its path's tail
    softmax = line_of("att = F.softmax(att, dim=-1)")
    (bp,) = _launch(dap, model, tmp_path, src, [{"line": softmax}])
    assert bp["verified"] and bp["line"] == softmax and bp["source"]["path"] == str(src)
    assert bp["message"] == f"2 nodes from tinymodel.py:{softmax} (first: node_softmax), 2 executions of the line"
    dap.wait_for_stop("source breakpoint")
    frames = dap.stack_trace()
    # a frame in one of repeated blocks names it: the line runs once per block
    assert [f["name"] for f in frames] == ["node_softmax (Softmax)", "Attention.forward  [blocks.0.attn]", "Block.forward  [blocks.0]", "TinyModel.forward"]
    assert [(f.get("source", {}).get("path"), f["line"]) for f in frames[1:]] == [
        (str(src), softmax), (str(src), line_of("return x + self.attn(h)")), (str(src), line_of("x = block(x)"))
    ]  # fmt: skip
    assert frames[0]["source"]["path"].endswith(".onnxtxt") and "presentationHint" not in frames[1]
    # stopped by the .py breakpoint: the listing's frame is de-emphasized, so that the client shows model.py's line
    assert frames[0]["source"]["presentationHint"] == "deemphasize" and "presentationHint" not in frames[1]["source"]
    assert len({f["id"] for f in frames}) == len(frames)
    # the Python frame's Module scope: the module, its class, the line, the nodes it made with their values
    scopes = dap.scopes(frames[2]["id"])
    assert list(scopes)[0] == "Module" and "Values" in scopes and "Inputs" not in scopes
    module = dap.variables(scopes["Module"]["variablesReference"])
    assert module["module"]["value"] == "blocks.0" and module["class"]["value"] == "tinymodel.Block"
    assert module["line"]["value"] == f"tinymodel.py:{line_of('return x + self.attn(h)')}  return x + self.attn(h)"
    made = [k for k in module if k.startswith("node_")]
    assert made[0] == "node_MatMul_1 (MatMul)" and made[-1] == "node_add (Add)" and len(made) == 10
    want = _ort(model, ["mul"])["mul"]
    assert module["node_mul (Mul)"]["value"].startswith(f"mul: float32[1,8,8] min={want.min():.4g} max={want.max():.4g}")
    assert "not computed yet" in module["node_add (Add)"]["value"]
    outputs = dap.variables(module["node_mul (Mul)"]["variablesReference"])
    assert list(outputs) == ["mul"]
    got = dap.request("evaluate", expression="mul.max()", frameId=frames[1]["id"], context="repl")
    assert got["result"] == f"{want.max():.7g}"
    dap.request("continue", threadId=1)
    dap.wait_for_stop("source breakpoint")
    assert dap.top_frame()["name"] == "node_softmax_1 (Softmax)"  # the line's second execution: block 1


def test_a_breakpoint_on_an_outer_line_shows_that_line_first(dap: DapClient, tmp_path: Path) -> None:
    model, _, src = project(tmp_path)
    loop = line_of("x = block(x)")
    (bp,) = _launch(dap, model, tmp_path, src, [{"line": loop}])
    assert bp["message"] == f"22 nodes from tinymodel.py:{loop} (first: node_layer_norm), 2 executions of the line"
    dap.wait_for_stop("source breakpoint")
    frames = dap.stack_trace()
    assert [f["name"].split("  ")[0] for f in frames] == ["node_layer_norm (LayerNormalization)", "LayerNorm.forward", "Block.forward", "TinyModel.forward"]
    assert frames[2]["source"]["presentationHint"] == "deemphasize" and frames[3]["line"] == loop
    assert "presentationHint" not in frames[3]["source"]  # the breakpoint's own line: the first a client shows


def test_torch_frames_are_subtle_and_files_not_found_say_so(dap: DapClient, tmp_path: Path) -> None:
    model, _, src = project(tmp_path)
    qkv = line_of("self.qkv(x).chunk")
    (bp,) = _launch(dap, model, tmp_path, src, [{"line": qkv, "hitCondition": "2"}])
    assert bp["verified"]
    dap.wait_for_stop("source breakpoint")
    frames = dap.stack_trace()
    assert frames[0]["name"] == "node_MatMul_10 (MatMul)"  # the second execution of the line: block 1's qkv
    torch_frame = frames[1]
    assert torch_frame["name"] == "Linear.forward  [blocks.1.attn.qkv]  linear.py:134 (not found on this machine)"
    assert torch_frame["presentationHint"] == "subtle" and "source" not in torch_frame and torch_frame["line"] == 134
    assert frames[2]["name"] == "Attention.forward  [blocks.1.attn]" and frames[2]["source"]["path"] == str(src)
    module = dap.variables(dap.scopes(torch_frame["id"])["Module"]["variablesReference"])
    assert module["module"]["value"] == "blocks.1.attn.qkv" and module["class"]["value"] == "torch.nn.modules.linear.Linear"
    assert module["file"]["value"].endswith("torch/nn/modules/linear.py (not found on this machine)")


def test_path_mappings_find_the_source_elsewhere_and_without_them_it_is_not_found(dap: DapClient, tmp_path: Path) -> None:
    model, _, _ = project(tmp_path)
    elsewhere = tmp_path / "checkout" / "pkg"
    elsewhere.mkdir(parents=True)
    shutil.copy(SOURCE, elsewhere / SOURCE.name)
    (tmp_path / "project" / "src" / SOURCE.name).unlink()  # nothing under the model's folder or the workspace
    ws = tmp_path / "ws"
    ws.mkdir()
    softmax = line_of("att = F.softmax(att, dim=-1)")
    mapping = [{"localRoot": str(elsewhere), "remoteRoot": REMOTE_ROOT}]
    (bp,) = _launch(dap, model, ws, elsewhere / SOURCE.name, [{"line": softmax}], pathMappings=mapping)
    assert bp["verified"]
    dap.wait_for_stop("source breakpoint")
    assert dap.stack_trace()[1]["source"]["path"] == str(elsewhere / SOURCE.name)
    other = DapClient.stdio()
    try:
        (bp,) = _launch(other, model, ws, elsewhere / SOURCE.name, [{"line": softmax}], stopOnEntry=True)
        assert not bp["verified"]
        assert bp["message"] == "no node of this model comes from tinymodel.py: its stack traces name tinymodel.py (set pathMappings if they were moved)"
        other.wait_for_stop("entry")
        frames = other.stack_trace()
        assert frames[0]["name"] == "node_layer_norm (LayerNormalization)"
        assert frames[2]["name"] == f"Block.forward  [blocks.0]  tinymodel.py:{line_of('h = self.ln(x)')} (not found on this machine)"
        assert "source" not in frames[2] and frames[2]["line"] == line_of("h = self.ln(x)")
    finally:
        other.disconnect()


def test_lines_without_nodes_and_files_outside_the_model_are_unverified_with_a_reason(dap: DapClient, tmp_path: Path) -> None:
    model, _, src = project(tmp_path)
    stray = tmp_path / "project" / "other.py"
    stray.write_text("x = 1\n")
    dap.initialize()
    seq = dap.send("launch", {"model": str(model), "cwd": str(tmp_path), "stopOnEntry": True})
    assert dap.response(seq)["success"]
    dap.wait_for_event("initialized")
    empty, used = dap.request("setBreakpoints", source={"path": str(src)}, breakpoints=[{"line": line_of("class Block")}, {"line": 42}])["breakpoints"]
    assert not empty["verified"] and empty["message"].startswith(f"no node comes from line {line_of('class Block')} of tinymodel.py; lines that did: 16, ")
    assert used["verified"] and used["message"].startswith("2 nodes from tinymodel.py:42 (first: node_MatMul_14)")
    (outside,) = dap.request("setBreakpoints", source={"path": str(stray)}, breakpoints=[{"line": 1}])["breakpoints"]
    assert not outside["verified"] and outside["message"].startswith("no node of this model comes from other.py")
    dap.request("configurationDone")
    dap.wait_for_stop("entry")


def test_a_torchscript_model_shows_module_frames_without_sources(dap: DapClient, tmp_path: Path) -> None:
    model, _, src = project(tmp_path, TORCHSCRIPT)
    dap.start(str(model), inputs=str(INPUT), cwd=str(tmp_path), breakpoints=["/blocks.0/attn/Softmax"])
    dap.wait_for_stop("function breakpoint")
    frames = dap.stack_trace()
    assert [f["name"] for f in frames] == ["/blocks.0/attn/Softmax (Softmax)", "blocks.0.attn", "blocks.0"]
    assert all("source" not in f and f["line"] == 0 for f in frames[1:])
    module = dap.variables(dap.scopes(frames[1]["id"])["Module"]["variablesReference"])
    assert module["module"]["value"] == "blocks.0.attn" and module["class"]["value"] == "unknown"
    made = [k for k in module if k.startswith("/blocks.0/attn/")]
    assert made[0] == "/blocks.0/attn/qkv/MatMul (MatMul)" and made[-1] == "/blocks.0/attn/proj/Add (Add)"
    (bp,) = dap.request("setBreakpoints", source={"path": str(src)}, breakpoints=[{"line": 18}])["breakpoints"]
    assert not bp["verified"] and "carries no Python stack traces" in bp["message"]


def test_a_node_inside_a_loop_body_has_its_python_frames_then_the_loops_frame(dap: DapClient, tmp_path: Path) -> None:
    from cf_models import loop_model, unrolled_loop

    source = tmp_path / "rnn.py"
    source.write_text("class Cell:\n    def forward(self, h, x):\n        return torch.tanh(h @ self.w + x)\n\n\nh = cell(h, x)\n")
    model = loop_model(trip=3)
    tanh = next(n for n in model.graph.node[2].attribute[0].g.node if n.name == "tanh")
    trace = f'File "{source}", line 6, in <module>\n    h = cell(h, x)\nFile "{source}", line 3, in forward\n    return torch.tanh(h @ self.w + x)\n'
    tanh.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=trace)
    path = tmp_path / "rnn.onnx"
    onnx.save(model, str(path))
    feeds = {"h0": np.full((1, 4), 0.1, np.float32), "x": np.array([[0.3, -0.2, 0.5, 0.1]], np.float32)}
    np.savez(tmp_path / "in.npz", **feeds)
    dap.initialize()
    seq = dap.send("launch", {"model": str(path), "inputs": str(tmp_path / "in.npz"), "cwd": str(tmp_path)})
    assert dap.response(seq)["success"]
    dap.wait_for_event("initialized")
    (bp,) = dap.request("setBreakpoints", source={"path": str(source)}, breakpoints=[{"line": 3, "hitCondition": "2"}])["breakpoints"]
    assert bp["verified"] and bp["message"].startswith("1 node from rnn.py:3 (first: tanh)"), bp
    dap.request("configurationDone")
    dap.wait_for_stop("source breakpoint")
    frames = dap.stack_trace()
    # the node, its Python frames (innermost first), then the enclosing Loop's frame: the line's second hit is iteration 1
    assert [f["name"] for f in frames] == ["tanh (Tanh)", "forward", "<module>", "loop (Loop) body, iteration 1"]
    assert [(f.get("source", {}).get("path"), f["line"]) for f in frames[1:3]] == [(str(source), 3), (str(source), 6)]
    assert frames[3]["source"]["path"] == frames[0]["source"]["path"]  # the Loop's frame is in the listing
    flat = unrolled_loop(model, 3)  # onnxruntime's value of pre in iteration 1
    flat.graph.output.extend([onnx.ValueInfoProto(name="pre@1")])
    sess = ort.InferenceSession(flat.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    (want,) = sess.run(["pre@1"], feeds)
    got = dap.request("evaluate", expression="pre.max()", frameId=frames[0]["id"], context="repl")["result"]
    assert float(got) == pytest.approx(float(want.max()), rel=1e-6)
