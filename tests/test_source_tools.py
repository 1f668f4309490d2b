"""compare and profile in the model's own terms: source lines and modules in the reports, --by module, --by line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from source_models import DYNAMO, INPUT, REMOTE, TORCHSCRIPT, line_of

from graph_dap.runtime.tools.compare import Reference, compare_model
from graph_dap.runtime.tools.profile import profile_model


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graph_dap.cli", *map(str, args)], capture_output=True, text=True, timeout=180)


def _converted(folder: Path) -> Path:
    """The dynamo model with block 1's output projection off by 1% (as a lossy conversion might leave it)."""
    model = onnx.load(str(DYNAMO))
    node = next(n for n in model.graph.node if n.name == "node_MatMul_12")
    init = next(t for t in model.graph.initializer if t.name == node.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(1.01), init.name))
    path = folder / "converted.onnx"
    onnx.save(model, str(path))
    return path


def test_compare_names_the_first_divergence_by_source_line_and_aggregates_per_module(tmp_path: Path) -> None:
    other = _converted(tmp_path)
    result = compare_model(DYNAMO, Reference("model", str(other)), str(INPUT))
    report = result.to_dict()
    first = report["first_divergence"]
    assert first["node"]["id"] == "node_MatMul_12"
    assert first["source"] == [{"path": REMOTE, "line": line_of("return self.proj(torch.matmul(att, v))"), "function": "forward"}]
    assert first["module"] == "blocks.1.attn.proj"
    row = next(r for r in report["rows"] if r["value"] == "softmax")
    assert row["source"][0]["line"] == line_of("F.softmax") and row["module"] == "blocks.0.attn" and row["pass"]
    modules = {m["module"]: m for m in result.comparison.by_module()}
    assert modules["blocks.0.attn"]["failed"] == 0 and modules["blocks.1.attn.proj"]["failed"] == 2
    assert modules["blocks.1.attn.proj"]["first_failure"]["node"]["id"] == "node_MatMul_12"
    worst = max(r["metrics"]["max_abs"] for r in report["rows"] if r["module"] == "blocks.1.attn.proj")
    assert modules["blocks.1.attn.proj"]["metrics"]["max_abs"] == worst
    r = _cli("compare", DYNAMO, "--inputs", INPUT, "--against-model", other, "--by", "module")
    assert r.returncode == 1, r.stderr
    table = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.startswith(("blocks.", "head", "(no module)"))}
    assert table["blocks.1.attn.proj"][1:3] == ["2", "2"] and table["blocks.0.attn"][2] == "0"
    assert f"  from: {REMOTE}:{line_of('return self.proj(torch.matmul(att, v))')} in forward, module blocks.1.attn.proj" in r.stdout
    j = json.loads(_cli("compare", DYNAMO, "--inputs", INPUT, "--against-model", other, "--by", "module", "--json").stdout)
    assert [m["module"] for m in j["by_module"]][:2] == ["blocks.0.ln", "blocks.0.attn.qkv"]
    rows = _cli("compare", DYNAMO, "--inputs", INPUT, "--against-model", other).stdout.splitlines()
    header = next(line.split() for line in rows if line.startswith("index"))
    assert header[-2:] == ["source", "result"]  # every row: the node's line and module
    row = next(line for line in rows if " node_MatMul_12 " in line)
    assert f"  tinymodel.py:{line_of('return self.proj(torch.matmul(att, v))')} blocks.1.attn.proj " in row
    assert row.endswith("FAIL (origin)")


def test_profile_by_line_and_by_module_add_up_to_the_node_times() -> None:
    prof = profile_model(DYNAMO, str(INPUT), repeat=2)
    lines = prof.by_line()
    assert abs(sum(t.time_ms for t in lines) - prof.total_ms) < 1e-9
    softmax = next(t for t in lines if t.line == line_of("F.softmax"))
    want = sum(n.time_ms for n in prof.nodes if n.name in ("node_softmax", "node_softmax_1"))
    assert softmax.nodes == 2 and abs(softmax.time_ms - want) < 1e-9 and softmax.function == "Attention.forward"
    modules = {t.key: t for t in prof.by_module()}
    qkv = sum(n.time_ms for n in prof.nodes if n.name in ("node_MatMul_1", "node_linear"))
    assert abs(modules["blocks.0.attn.qkv"].time_ms - qkv) < 1e-9
    d = prof.to_dict()
    node = next(n for n in d["nodes"] if n["name"] == "node_softmax")
    assert node["module"] == "blocks.0.attn" and node["source"][0]["line"] == line_of("F.softmax")
    trace = prof.chrome_trace()["traceEvents"]
    names = {e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert {"blocks.0.attn", "blocks.1.attn.qkv", "head"} <= names
    soft = next(e for e in trace if e["name"] == "node_softmax")
    assert soft["cat"] == "blocks.0.attn" and soft["args"]["source"] == [f"{REMOTE}:{line_of('F.softmax')}"]


def test_a_fused_nodes_time_is_split_over_its_original_nodes_lines() -> None:
    prof = profile_model(DYNAMO, str(INPUT), repeat=2, opt_level="all")
    assert prof.fused is not None
    lines = {t.key: t for t in prof.by_line()}
    assert abs(sum(t.time_ms for t in lines.values()) - prof.total_ms) < 1e-9
    fused = [n for n in prof.nodes if len(n.origin) > 1]
    assert fused  # onnxruntime fused something (MatMul+Add into Gemm/FusedMatMul, ...)
    n = fused[0]
    sources = prof.sources
    assert sources is not None
    want: dict[tuple[str, int], dict] = {}
    for o in n.origin:
        s = sources.of(o)
        if s is not None and s.user_frame is not None:
            want.setdefault((s.user_frame.path, s.user_frame.line), s.user_frame.to_dict())
    entry = next(e for e in prof.to_dict()["nodes"] if e["name"] == n.name)
    assert entry["source"] == list(want.values()) and len(want) >= 1


def test_profile_cli_by_line_and_a_model_without_stack_traces() -> None:
    r = _cli("profile", DYNAMO, "--inputs", INPUT, "--by", "line", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert f"tinymodel.py:{line_of('F.softmax')}" in r.stdout and "Attention.forward: att = F.softmax(att, dim=-1)" in r.stdout
    ts = _cli("profile", TORCHSCRIPT, "--by", "line", "--repeat", "1")
    assert "no node of this model says which line it came from" in ts.stdout
    by_module = _cli("profile", TORCHSCRIPT, "--by", "module", "--repeat", "1").stdout
    assert "blocks.0.attn" in by_module  # module scopes from the node names
