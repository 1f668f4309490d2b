"""A real-size language model: a Llama-style decoder of 0.52 B parameters, graph-dap beside plain onnxruntime.

    python benchmarks/bench_llm.py --torch-python /path/to/venv/bin/python [--models DIR] [--repeat 3]

The models are exported by this script (not committed; into ``--models``, default
``/tmp/graph-dap-llm``, about 4.2 GB for the two) with ``torch.onnx.export(..., dynamo=True)`` from a
random-initialized ``transformers`` ``LlamaConfig`` (vocabulary 32000, hidden 1024, MLP 4096, 30 layers,
16 query and 4 key/value heads): ``llama.onnx`` (a prompt of 16 tokens, no cache) and ``llama_past.onnx``
(one decode step after 16 cached tokens), each with its weights in external data. The exporting
interpreter needs ``torch==2.13.0``, ``onnxscript`` and ``transformers`` (``--torch-python``; graph-dap's
own environment does not). A third model, ``planted.onnx``, is ``llama.onnx`` with a NaN in the
``gate_proj`` weight of the layer at half depth: its other weights are read from ``llama.onnx.data``.

Each measurement runs in a fresh process, one at a time (a 0.5 B fp32 model takes 2.1 GB), and
reports its peak RSS:

- plain: ``InferenceSession(path)`` (level ``all``), creation, then the median of ``--repeat`` runs;
- run: graph-dap's ``run`` (a ``DebugSession`` without breaks: the whole model in one session), the
  median of ``--repeat`` continues after ``restart`` (the first, which builds the session, apart);
- watched: the same with ``--break-on nan,inf`` (the in-graph watch), and with ``nan`` alone;
- planted: ``--break-on nan,inf`` on ``planted.onnx``, from the start to the stop at the exact node
  (the ``MatMul`` of that ``gate_proj``), the median of ``--repeat``, beside plain runs of it;
- DAP: from spawning the adapter to the first stop (a function breakpoint ``module:model.layers.15``,
  the nan and inf filters on), then each scope of that stop opened as VS Code opens it (``variables``
  of the first page: the first scope's with the scopes, the others after ``pause``), again at the same stop, and
  again after a ``next``; a page that comes shape only
  (weights not summarized yet) is timed to its ``invalidated`` event, and asked again (scopes, variables);
- dump: ``dump --values module:model.layers.15`` (node by node), its time and size.

Targets (issue 31): watched at most 1.1x plain, the planted NaN found exactly in at most 1.3x plain,
each scope at most 100 ms, peak RSS at most 1.1x plain's. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROMPT = 16
HALF = 15  # the layer at half depth
CONFIG = {
    "vocab_size": 32000,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 30,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
}
_EXPORT = """
import sys
sys.path.insert(0, {data!r})
from pathlib import Path
from make_llm_models import export_llama
export_llama({config!r}, Path({path!r}), with_past={past!r})
"""


def export(python: str, folder: Path) -> None:
    """Export the two models with ``python`` (torch's interpreter), unless they are there already."""
    for name, past in (("llama.onnx", False), ("llama_past.onnx", True)):
        if not (folder / name).exists():
            code = _EXPORT.format(data=str(ROOT / "tests" / "data"), config=CONFIG, path=str(folder / name), past=past)
            t = time.perf_counter()
            subprocess.run([python, "-c", code], check=True, capture_output=True)
            print(f"exported {name} in {time.perf_counter() - t:.0f} s", file=sys.stderr)


def plant(folder: Path) -> str:
    """``planted.onnx``: llama.onnx with a NaN in layer HALF's gate_proj weight (in ``planted.data``); the node that reads it."""
    import onnx

    sys.path.insert(0, str(ROOT))
    from graph_dap.runtime import load_graph
    from graph_dap.runtime.selection import module_paths

    graph = load_graph(folder / "llama.onnx")
    node = next(n for n in graph.nodes if f"model.layers.{HALF}.mlp.gate_proj" in module_paths(graph, n) and n.op_type == "MatMul")
    weight = next(i for i in node.inputs if i in graph.initializer_names)
    model = onnx.load(str(folder / "llama.onnx"), load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.name == weight)
    value = np.array(graph.weights.array(tensor))
    value.reshape(-1)[value.size // 3] = np.nan
    (folder / "planted.data").write_bytes(value.astype(np.float32).tobytes())
    del tensor.external_data[:]
    for key, v in (("location", "planted.data"), ("offset", "0"), ("length", str(value.nbytes))):
        tensor.external_data.add(key=key, value=v)
    onnx.save_model(model, str(folder / "planted.onnx"))
    return node.id


def feeds_of(path: str) -> dict[str, np.ndarray]:
    """A prompt of PROMPT tokens (no cache), or one decode step after PROMPT cached tokens."""
    rng = np.random.default_rng(0)
    if "past" not in Path(path).name:
        return {"input_ids": rng.integers(0, CONFIG["vocab_size"], (1, PROMPT)), "attention_mask": np.ones((1, PROMPT), np.int64)}
    heads, size = CONFIG["num_key_value_heads"], CONFIG["hidden_size"] // CONFIG["num_attention_heads"]
    feeds: dict[str, np.ndarray] = {"input_ids": rng.integers(0, CONFIG["vocab_size"], (1, 1)), "attention_mask": np.ones((1, PROMPT + 1), np.int64)}
    for i in range(CONFIG["num_hidden_layers"]):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = rng.standard_normal((1, heads, PROMPT, size)).astype(np.float32)
    return feeds


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_plain(path: str, repeat: int) -> dict[str, Any]:
    import onnxruntime as ort

    feeds = feeds_of(path)
    t = time.perf_counter()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    created = time.perf_counter() - t
    runs = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        out = sess.run(None, feeds)
        runs.append(time.perf_counter() - t)
    return {"create": created, "first": runs[0], "run": statistics.median(runs[1:]), "peak_mb": _peak_mb(), "nan": bool(np.isnan(out[0]).any())}


def child_graph_dap(path: str, repeat: int, filters: str, expect: str = "") -> dict[str, Any]:
    """A DebugSession's continue from the start: the first, then the median of ``repeat`` after restart."""
    from graph_dap.runtime import DebugSession, StopReason

    feeds = feeds_of(path)
    t = time.perf_counter()
    s = DebugSession(path, feeds, break_on=[f for f in filters.split(",") if f])
    s.start()
    launch = time.perf_counter() - t
    times, stop = [], None
    for k in range(repeat + 1):
        if k:
            s.restart()
        t = time.perf_counter()
        stop = s.continue_()
        times.append(time.perf_counter() - t)
    assert stop is not None
    where = stop.node.id if stop.node is not None else None
    if expect:
        assert stop.reason is StopReason.NAN and where == expect, (stop.reason, where, stop.message)
    else:
        assert stop.reason is StopReason.END, stop.message
    return {
        "launch": launch, "first": times[0], "run": statistics.median(times[1:]), "peak_mb": _peak_mb(), "stop": where,
        "level": s.executor.level_report(), "message": stop.message[:300],
    }  # fmt: skip


def child_side(path: str, repeat: int, filters: str, expect: str = "") -> dict[str, Any]:
    """Plain runs and graph-dap's continues (after the first of each) alternated in one process: their medians and ratio
    (the machine is shared: its load moves between processes run one after another)."""
    import onnxruntime as ort

    from graph_dap.runtime import DebugSession

    feeds = feeds_of(path)
    plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    s = DebugSession(path, feeds, break_on=[f for f in filters.split(",") if f])
    s.start()
    plain.run(None, feeds)
    stop = s.continue_()
    mine, theirs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        plain.run(None, feeds)
        theirs.append(time.perf_counter() - t)
        s.restart()
        t = time.perf_counter()
        stop = s.continue_()
        mine.append(time.perf_counter() - t)
    assert (stop.node.id if stop.node is not None else "") == expect, stop.message
    pairs = [m / t for m, t in zip(mine, theirs)]  # (each pair ran back to back: the load they met was about the same)
    return {"plain": statistics.median(theirs), "graph_dap": statistics.median(mine), "ratio": statistics.median(pairs), "pairs": len(pairs)}


def child_dap(path: str, pause: float = 0.0, told: bool = True) -> dict[str, Any]:
    """From spawning the adapter to the first stop (layer HALF entered, nan and inf on), then each scope opened
    (those after the first ``pause`` seconds later: a person reading the stop first; ``told``: the client takes the
    ``invalidated`` event, as VS Code does)."""
    sys.path.insert(0, str(ROOT / "tests"))
    os.environ.setdefault("DAP_TEST_TIMEOUT", "900")  # (the client's own wait for a response: a launch reads 2 GB)
    from dap_client import DapClient
    from processes import children

    inputs = Path(tempfile.mkdtemp(prefix="graph-dap-llm-")) / "feeds.npz"
    np.savez(inputs, **feeds_of(path))
    t = time.perf_counter()
    client = DapClient.stdio()
    client.checks_schema = False
    client.initialize(supportsInvalidatedEvent=told)
    client.launch(path, inputs=str(inputs), breakpoints=[f"module:model.layers.{HALF}"], exceptions=["nan", "inf"])
    client.wait_for_stop(timeout=900)
    first_stop = time.perf_counter() - t

    def open_scopes() -> dict[str, float]:
        out = {}
        t0 = time.perf_counter()
        frames = client.request("stackTrace", threadId=1, timeout=600)["stackFrames"]
        out["stackTrace"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        scopes = client.request("scopes", frameId=frames[0]["id"], timeout=600)["scopes"]
        out["scopes"] = time.perf_counter() - t0
        for i, scope in enumerate(scopes):
            if i == 1:
                time.sleep(pause)  # (VS Code shows the first scope's variables with the scopes)
            paged = scope.get("indexedVariables", 0) > 0
            t0 = time.perf_counter()
            args = {"variablesReference": scope["variablesReference"], **({"filter": "indexed", "start": 0, "count": 100} if paged else {})}
            got = client.request("variables", **args, timeout=600)["variables"]
            out[scope["name"]] = time.perf_counter() - t0
            while any(v["value"].endswith("being computed") for v in got):  # without statistics: told to ask again
                client.wait_for_event("invalidated", timeout=600)  # (this page's, or another's: then asked again too)
                out[f"{scope['name']} invalidated"] = time.perf_counter() - t0
                t1 = time.perf_counter()
                again = client.request("scopes", frameId=frames[0]["id"], timeout=600)["scopes"]
                ref = next(s["variablesReference"] for s in again if s["name"] == scope["name"])
                got = client.request("variables", **{**args, "variablesReference": ref}, timeout=600)["variables"]
                out[f"{scope['name']} asked again"] = time.perf_counter() - t1
        return out

    first = open_scopes()
    again = open_scopes()
    client.request("next", threadId=1, timeout=600)
    client.wait_for_stop(timeout=600)
    after_step = open_scopes()
    peak = max((_peak_of(pid) for pid in children(client.process.pid)), default=float("nan"))  # the runtime worker's
    client.disconnect()
    return {"first_stop": first_stop, "scopes": first, "again": again, "after_step": after_step, "worker_peak_mb": peak}


def _peak_of(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return float("nan")


def child_dump(path: str) -> dict[str, Any]:
    from graph_dap.runtime.tools.dump import dump_model

    with tempfile.TemporaryDirectory(prefix="graph-dap-llm-dump-") as tmp:
        t = time.perf_counter()
        result = dump_model(path, Path(tmp) / "layer.npz", feeds_of(path), values=[f"module:model.layers.{HALF}"])
        seconds = time.perf_counter() - t
    return {"dump": seconds, "values": result.values, "bytes": result.bytes, "peak_mb": _peak_mb()}


CHILDREN = {"plain": child_plain, "graph_dap": child_graph_dap, "side": child_side, "dap": child_dap, "dump": child_dump}


def _in_child(kind: str, *args: Any) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, json.dumps(list(args))]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"bench_llm: the {kind} measurement of {args[0]} failed:\n{done.stderr[-3000:]}")
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps({"kind": kind, "args": list(args), "result": result}), file=sys.stderr, flush=True)  # (kept if a later one fails)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-python", help="an interpreter with torch==2.13.0, onnxscript and transformers (to export)")
    ap.add_argument("--models", type=Path, default=Path(tempfile.gettempdir()) / "graph-dap-llm")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of: plain, run, watched, side, planted, dap, dump")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child[0]](*json.loads(a.child[1]))))
        return 0
    a.models.mkdir(parents=True, exist_ok=True)
    missing = [n for n in ("llama.onnx", "llama_past.onnx") if not (a.models / n).exists()]
    if missing and not a.torch_python:
        ap.error(f"{', '.join(missing)} not in {a.models}: give --torch-python to export them")
    if missing:
        export(a.torch_python, a.models)
    only = set(a.only.split(",")) if a.only else {"plain", "run", "watched", "side", "planted", "dap", "dump"}
    results: dict[str, Any] = {}
    for name in ("llama.onnx", "llama_past.onnx"):
        path = str(a.models / name)
        r: dict[str, Any] = {}
        if "plain" in only:
            r["plain"] = _in_child("plain", path, a.repeat)
        if "run" in only:
            r["run"] = _in_child("graph_dap", path, a.repeat, "")
        if "watched" in only:
            r["nan"] = _in_child("graph_dap", path, a.repeat, "nan")
            r["nan_inf"] = _in_child("graph_dap", path, a.repeat, "nan,inf")
        if "side" in only:
            for filters in ("", "nan", "nan,inf"):
                r[f"side_{filters or 'run'}"] = _in_child("side", path, 3 * a.repeat, filters)
        if "dap" in only:
            r["dap"] = _in_child("dap", path)
            r["dap_read"] = _in_child("dap", path, 3.0)
            r["dap_untold"] = _in_child("dap", path, 0.0, False)
        if "dump" in only:
            r["dump"] = _in_child("dump", path)
        results[name] = r
        print(json.dumps({name: r}), file=sys.stderr)
    if "planted" in only:
        node = plant(a.models)
        path = str(a.models / "planted.onnx")
        results["planted"] = {
            "node": node,
            "plain": _in_child("plain", path, a.repeat),
            "found": _in_child("graph_dap", path, a.repeat, "nan,inf", node),
            "side": _in_child("side", path, 3 * a.repeat, "nan,inf", node),
        }
        print(json.dumps({"planted": results["planted"]}), file=sys.stderr)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
