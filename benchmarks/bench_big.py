"""A model over protobuf's 2 GB: graph-dap beside a plain onnxruntime session of the same model.

    python benchmarks/bench_big.py [--size-gb 2.5] [--out DIR] [--keep]

(about 4 minutes at 2.5 GB on 2 cores; ``--keep`` with ``--out`` reuses a model generated before)

Generates (not committed: in a temporary folder, or ``--out``) a decoder-style model, float32
weights in one external data file (token embedding tied to the output projection, causal
single-head attention, an MLP, LayerNorms, residuals), then measures, each in a fresh process:

- plain: ``InferenceSession(path)`` (creation), its first ``run`` and a second one, the peak RSS;
- graph-dap, through its runtime API: launch to stopped on entry (``DebugSession(path)`` and
  ``start()``), a continue to the end with the nan and inf filters on (the first, which builds
  its sessions, then the faster of two more after ``restart``), a breakpoint at 90% of the run (the first
  continue to it, building its sessions), and the peak RSS of the whole process;
- graph-dap over DAP (the project's client, schema checks off): from spawning the adapter to
  stopped on entry, and the first continue with nan+inf to ``terminated``;
- a dump of every value node by node, and a compare of a run against it (every value equal).

Targets (issue 15): peak RSS at most 1.25x plain, continue at most 1.15x plain, launch at most
2x plain session creation. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
T = 16  # tokens
ALIGN = 4096  # external data offsets, so that onnxruntime can map each tensor


def generate(folder: Path, size_gb: float, dim: int = 2048, vocab: int = 32000) -> Path:
    """Write ``decoder.onnx`` and ``decoder.onnx.data`` (about ``size_gb`` GB of float32 weights) into ``folder``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    per_layer = 12 * dim * dim * 4  # q, k, v, o: 4 d^2; MLP: 8 d^2
    layers = max(1, round((size_gb * 1e9 - vocab * dim * 4) / per_layer))
    rng = np.random.default_rng(0)
    data = folder / "decoder.onnx.data"
    inits: list[onnx.TensorProto] = []
    with open(data, "wb") as f:

        def weight(name: str, *shape: int, scale: float | None = None, fill: float | None = None) -> str:
            offset = f.tell()
            pad = -offset % ALIGN
            f.write(b"\0" * pad)
            offset += pad
            rows = shape[0]
            step = max(1, (32 << 20) // (4 * math.prod(shape[1:]) or 1))
            for start in range(0, rows, step):
                n = min(step, rows - start)
                part = np.full((n, *shape[1:]), fill, np.float32) if fill is not None else rng.standard_normal((n, *shape[1:]), np.float32)
                if fill is None:
                    part *= np.float32(scale if scale is not None else 1 / math.sqrt(shape[0]))
                f.write(part.tobytes())
            t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape), data_location=TensorProto.EXTERNAL)
            for k, v in (("location", data.name), ("offset", str(offset)), ("length", str(4 * math.prod(shape)))):
                t.external_data.add(key=k, value=v)
            inits.append(t)
            return name

        nodes = [helper.make_node("Gather", [weight("emb", vocab, dim, scale=0.02), "tokens"], ["h_in"], name="embed")]
        mask = np.triu(np.full((T, T), -1e9, np.float32), 1)
        inits.append(numpy_helper.from_array(mask, "mask"))
        inits.append(numpy_helper.from_array(np.array(1 / math.sqrt(dim), np.float32), "inv_sqrt_d"))
        h = "h_in"

        def mm(x: str, w: str, out: str, name: str) -> str:
            nodes.append(helper.make_node("MatMul", [x, w], [out], name=name))
            return out

        for i in range(layers):
            p = f"l{i}."

            q = mm(h, weight(p + "wq", dim, dim), p + "q", p + "q")
            k = mm(h, weight(p + "wk", dim, dim), p + "k", p + "k")
            v = mm(h, weight(p + "wv", dim, dim), p + "v", p + "v")
            nodes += [
                helper.make_node("Transpose", [k], [p + "kt"], name=p + "kt", perm=[1, 0]),
                helper.make_node("MatMul", [q, p + "kt"], [p + "s"], name=p + "scores"),
                helper.make_node("Mul", [p + "s", "inv_sqrt_d"], [p + "ss"], name=p + "scale"),
                helper.make_node("Add", [p + "ss", "mask"], [p + "sm"], name=p + "mask"),
                helper.make_node("Softmax", [p + "sm"], [p + "a"], name=p + "softmax", axis=-1),
                helper.make_node("MatMul", [p + "a", v], [p + "av"], name=p + "attend"),
            ]
            o = mm(p + "av", weight(p + "wo", dim, dim), p + "o", p + "o")
            nodes.append(helper.make_node("Add", [h, o], [p + "r1"], name=p + "res1"))
            g1, b1 = weight(p + "ln1.g", dim, fill=1.0), weight(p + "ln1.b", dim, fill=0.0)
            nodes.append(helper.make_node("LayerNormalization", [p + "r1", g1, b1], [p + "n1"], name=p + "ln1", axis=-1))
            up = mm(p + "n1", weight(p + "w1", dim, 4 * dim), p + "up", p + "up")
            nodes += [
                helper.make_node("Sigmoid", [up], [p + "sig"], name=p + "sig"),
                helper.make_node("Mul", [up, p + "sig"], [p + "act"], name=p + "silu"),
            ]
            down = mm(p + "act", weight(p + "w2", 4 * dim, dim), p + "down", p + "down")
            nodes.append(helper.make_node("Add", [p + "n1", down], [p + "r2"], name=p + "res2"))
            g2, b2 = weight(p + "ln2.g", dim, fill=1.0), weight(p + "ln2.b", dim, fill=0.0)
            nodes.append(helper.make_node("LayerNormalization", [p + "r2", g2, b2], [p + "n2"], name=p + "ln2", axis=-1))
            h = p + "n2"
        nodes.append(helper.make_node("Gemm", [h, "emb"], ["logits"], name="lm_head", transB=1))  # tied to the embedding
    graph = helper.make_graph(
        nodes,
        "decoder",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, [T])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [T, vocab])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "decoder.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_plain(path: str) -> dict[str, Any]:
    import onnxruntime as ort

    feeds = {"tokens": np.arange(T, dtype=np.int64) * 7 % 32000}
    t = time.perf_counter()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    created = time.perf_counter() - t
    t = time.perf_counter()
    sess.run(None, feeds)
    first = time.perf_counter() - t
    runs = []
    for _ in range(2):
        t = time.perf_counter()
        sess.run(None, feeds)
        runs.append(time.perf_counter() - t)
    return {"create": created, "first_run": first, "run": min(runs), "peak_mb": _peak_mb()}


def child_graph_dap(path: str) -> dict[str, Any]:
    from graph_dap.runtime import DebugSession, StopReason

    feeds = {"tokens": np.arange(T, dtype=np.int64) * 7 % 32000}
    t = time.perf_counter()
    s = DebugSession(path, feeds, break_on=["nan", "inf"])
    stop = s.start()
    launch = time.perf_counter() - t
    assert stop.reason is StopReason.ENTRY, stop
    t = time.perf_counter()
    stop = s.continue_()
    first = time.perf_counter() - t
    assert stop.reason is StopReason.END, stop.message
    warm = []
    for _ in range(2):
        s.restart()
        t = time.perf_counter()
        stop = s.continue_()
        warm.append(time.perf_counter() - t)
        assert stop.reason is StopReason.END, stop.message
    target = s.sequence[int(0.9 * (len(s.sequence) - 1))]
    s.restart()
    s.set_breakpoints([target.id])
    t = time.perf_counter()
    stop = s.continue_()
    bp = time.perf_counter() - t
    assert stop.reason is StopReason.BREAKPOINT and stop.node is not None and stop.node.id == target.id, stop
    t = time.perf_counter()
    stepped = 0
    while stepped < 3 and s.current is not None:
        assert s.step().reason in (StopReason.STEP, StopReason.END)
        stepped += 1
    steps = (time.perf_counter() - t) / max(1, stepped)
    return {"launch": launch, "first_continue": first, "continue": min(warm), "bp90": bp, "step": steps, "peak_mb": _peak_mb(), "nodes": len(s.sequence)}


def child_dump(path: str) -> dict[str, Any]:
    """A dump of every value node by node, then a compare of a run against it (every value must match)."""
    from graph_dap.runtime.tools.compare import compare_model
    from graph_dap.runtime.tools.dump import dump_model

    feeds = {"tokens": np.arange(T, dtype=np.int64) * 7 % 32000}
    with tempfile.TemporaryDirectory(prefix="graph-dap-big-dump-") as tmp:
        t = time.perf_counter()
        dumped = dump_model(path, Path(tmp) / "run.npz", feeds)
        dump = time.perf_counter() - t
        t = time.perf_counter()
        result = compare_model(path, f"dump:{Path(tmp) / 'run.npz'}").to_dict()
        compare = time.perf_counter() - t
    assert result["failed"] == 0 and result["compared"] == dumped.values - 1, result["first_divergence"]
    return {"dump": dump, "compare": compare, "values": dumped.values, "peak_mb": _peak_mb()}


def child_dap(path: str) -> dict[str, Any]:
    """Over DAP, from spawning the adapter: launch to stopped on entry, then continue with nan+inf to the end."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dap_client import DapClient

    inputs = Path(tempfile.mkdtemp(prefix="graph-dap-big-inputs-")) / "tokens.npz"
    np.savez(inputs, tokens=np.arange(T, dtype=np.int64) * 7 % 32000)
    t = time.perf_counter()
    client = DapClient.stdio()
    client.checks_schema = False
    client.initialize()
    client.launch(path, inputs=str(inputs), stopOnEntry=True, exceptions=["nan", "inf"])
    client.wait_for_stop("entry", timeout=600)
    launch = time.perf_counter() - t
    t = time.perf_counter()
    client.request("continue", threadId=1)
    client.wait_for_end(timeout=600)
    to_end = time.perf_counter() - t
    client.disconnect()
    return {"launch": launch, "continue": to_end}


def _in_child(kind: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path)], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-gb", type=float, default=2.5, help="float32 weights to generate, in GB (default 2.5)")
    ap.add_argument("--out", type=Path, help="folder for the generated model (default: a temporary one, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the generated model in --out")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, path = a.child
        child = {"plain": child_plain, "graph-dap": child_graph_dap, "dap": child_dap, "dump": child_dump}[kind]
        print(json.dumps(child(path)))
        return 0
    tmp = None
    if a.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="graph-dap-big-")
        folder = Path(tmp.name)
    else:
        folder = a.out
        folder.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        path = folder / "decoder.onnx"
        if not (a.keep and path.exists()):
            path = generate(folder, a.size_gb)
        size = (folder / "decoder.onnx.data").stat().st_size
        print(f"model: {path} ({size / 1e9:.2f} GB of external data, generated in {time.perf_counter() - t:.0f} s)", flush=True)
        plain = _in_child("plain", path)
        ours = _in_child("graph-dap", path)
        dap = _in_child("dap", path)
        tools = _in_child("dump", path)
        rows = [
            ("launch to stopped on entry (s)", ours["launch"], plain["create"], "session creation", 2.0),
            ("the same over DAP, from spawning the adapter (s)", dap["launch"], plain["create"], "session creation", 2.0),
            ("continue nan+inf over DAP, first, to terminated (s)", dap["continue"], plain["create"] + plain["first_run"], "create + first run", None),
            ("continue nan+inf, first (s)", ours["first_continue"], plain["create"] + plain["first_run"], "create + first run", None),
            ("continue nan+inf, warm (s)", ours["continue"], plain["run"], "run", 1.15),
            ("breakpoint at 90%, first (s)", ours["bp90"], plain["run"], "run", None),
            ("a step after it, each building its one-node session (s)", ours["step"], plain["run"] / ours["nodes"], "run / nodes", None),
            ("peak RSS (MB)", ours["peak_mb"], plain["peak_mb"], "peak RSS", 1.25),
            (f"dump of {tools['values']} values, node by node (s)", tools["dump"], plain["create"] + plain["first_run"], "create + first run", None),
            ("compare of a run against the dump, node by node (s)", tools["compare"], plain["create"] + plain["first_run"], "create + first run", None),
            ("peak RSS of the dump and the compare (MB)", tools["peak_mb"], plain["peak_mb"], "peak RSS", None),
        ]
        print(f"\n{ours['nodes']} nodes, {size / 1e9:.2f} GB of float32 weights in external data; one process each\n")
        print("| measure | graph-dap | plain onnxruntime | ratio | target |")
        print("|---|---|---|---|---|")
        for label, mine, theirs, what, target in rows:
            ratio = mine / theirs if theirs else float("nan")
            verdict = "" if target is None else f"<= {target}x: {'met' if ratio <= target else 'missed'}"
            print(f"| {label} | {mine:.2f} | {theirs:.2f} ({what}) | {ratio:.2f}x | {verdict} |")
    finally:
        if tmp is not None and not a.keep:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
