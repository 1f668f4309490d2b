"""A stop shows the user's own run: is the watched run the plain run, and what does it cost as a whole process?

    python benchmarks/bench_user_run.py [--models det640,resnet640,mobile640,resnet50,qdq_det640,paddle_det] [--repeat 5]

For each model, side by side in one run:
- whether ``graph-dap``'s watched run (nan, inf) gives the outputs of a plain ``InferenceSession`` at
  ORT_ENABLE_ALL bit for bit, and the nodes of onnxruntime's optimized graph with the watch (the segment's own
  nodes, then the watch's) and without it;
- a NaN planted in the first weight read at 50% depth, found at its node (median ratio to the plain run);
- whole processes, medians of ``--repeat``: a plain script that imports onnxruntime and numpy, creates the session
  and runs once; ``graph-dap run MODEL --inputs X --break-on nan,inf --json``; Polygraphy's plain
  ``run --onnxrt`` in an environment of its own without torch (``--polygraphy PATH``: its ``polygraphy``, else the
  one in ``~/.cache/graph-dap-bench/polygraphy``, made on first use with pip: polygraphy, onnxruntime, numpy, onnx).

``qdq_det640`` is det640 quantized here by onnxruntime's ``quantize_static`` (QDQ, per channel); ``paddle_det``
the PaddleOCR text detector (PP-OCRv4) from the ``rapidocr-onnxruntime`` wheel on PyPI (``pip download``, once).
The table is printed and written to ``benchmarks/results/user_run.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

import run as engine_bench  # noqa: E402

DEFAULT = ["det640", "resnet640", "mobile640", "resnet50", "qdq_det640", "paddle_det"]
POLYGRAPHY_ENV = Path.home() / ".cache" / "graph-dap-bench" / "polygraphy"
_PLAIN_SCRIPT = (
    "import sys, numpy as np, onnxruntime as ort\n"
    "x = dict(np.load(sys.argv[2]))\n"
    "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']).run(None, x)\n"
)


def model_path(name: str) -> Path:
    """The model on disk: the engine benchmark's, quantized here, or the PaddleOCR detector from its wheel."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    if name == "qdq_det640":
        return quantized(engine_bench.model_path("det640"), RESULTS / "qdq_det640.onnx")  # type: ignore[arg-type]
    if name == "paddle_det":
        return paddle_det()
    path = engine_bench.model_path(name)
    if path is None:
        raise SystemExit(f"unknown model '{name}'")
    return path


def quantized(float_path: Path, out: Path) -> Path:
    if out.exists():
        return out
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    feeds = engine_bench.inputs_for(float_path)
    rng = np.random.default_rng(0)
    samples = [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()} for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as tmp:  # (onnxruntime's recommended pre-processing: BatchNormalization folded)
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(str(float_path), str(prepared))
        quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return out


def paddle_det() -> Path:
    out = RESULTS / "paddle_det.onnx"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "rapidocr-onnxruntime==1.4.4", "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            out.write_bytes(z.read("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"))
    return out


def paddle_rec() -> Path:
    """The PaddleOCR text recognizer (PP-OCRv4) from the same wheel: the DAP round trip's real model."""
    out = RESULTS / "paddle_rec.onnx"
    if not out.exists():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "rapidocr-onnxruntime==1.4.4", "-d", tmp], check=True)
            with zipfile.ZipFile(next(Path(tmp).glob("*.whl"))) as z:
                out.write_bytes(z.read("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"))
    return out


def dap_round_trips(steps: int) -> dict[str, Any]:
    """On the PaddleOCR recognizer (1x3x48x320): from a stop, ``steps`` times ``next``
    -> ``stopped``, then stackTrace, scopes and the variables of every scope that is not marked expensive, as VS Code
    asks for them at each stop. Medians in ms of each request and of the whole round trip."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from dap_client import DapClient

    path = paddle_rec()
    times: dict[str, list[float]] = {"next": [], "stackTrace": [], "scopes": [], "variables": [], "round_trip": []}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "x.npz"
        np.savez(inputs, x=np.random.default_rng(0).random((1, 3, 48, 320)).astype(np.float32))
        client = DapClient.stdio()
        client.checks_schema = False
        client.initialize()
        client.launch(str(path), inputs=str(inputs), stopOnEntry=True)
        client.wait_for_event("stopped")
        for _ in range(steps):
            began = time.perf_counter()
            client.request("next", threadId=1)
            client.wait_for_event("stopped")
            t = time.perf_counter()
            times["next"].append(t - began)
            frames = client.request("stackTrace", threadId=1, startFrame=0, levels=20)["stackFrames"]
            times["stackTrace"].append(time.perf_counter() - t)
            t = time.perf_counter()
            scopes = client.request("scopes", frameId=frames[0]["id"])["scopes"]
            times["scopes"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for scope in scopes:
                if not scope.get("expensive"):
                    client.request("variables", variablesReference=scope["variablesReference"])
            times["variables"].append(time.perf_counter() - t)
            times["round_trip"].append(time.perf_counter() - began)
        client.disconnect()
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def feeds_for(name: str, path: Path) -> dict[str, np.ndarray]:
    if name == "paddle_det":
        return {"x": np.random.default_rng(0).random((1, 3, 640, 640)).astype(np.float32)}
    return engine_bench.inputs_for(path)


def polygraphy(given: str | None) -> str | None:
    """Polygraphy's command, in an environment without torch (made once)."""
    if given:
        return given
    exe = POLYGRAPHY_ENV / "bin" / "polygraphy"
    if not exe.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(POLYGRAPHY_ENV)], check=True)
            pip = [str(POLYGRAPHY_ENV / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            subprocess.run([*pip, "polygraphy", "onnxruntime", "numpy", "onnx"], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"no Polygraphy: {e}", file=sys.stderr)
            return None
    check = subprocess.run([str(POLYGRAPHY_ENV / "bin" / "python"), "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"], capture_output=True, text=True)
    assert check.stdout.strip() == "True", "Polygraphy's environment must not hold torch (it imports it: 2.3 s instead of 0.5)"
    return str(exe)


def fidelity(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    """Whether the watched run's outputs are the plain run's, and the optimized graph's nodes with and without the watch."""
    import onnxruntime as ort

    from graph_dap.runtime import DebugSession
    from graph_dap.runtime.engine.fidelity import own_nodes
    from graph_dap.runtime.engine.options import session_options

    plain = ort.InferenceSession(str(path), engine_bench.plain_options("all"), providers=["CPUExecutionProvider"])
    names = [o.name for o in plain.get_outputs()]
    want = dict(zip(names, plain.run(names, feeds)))
    s = DebugSession(path, feeds, break_on=["nan", "inf"])
    s.start()
    assert s.continue_().reason.value == "end"
    got = s.outputs()
    equal = all(np.array_equal(got[n], want[n], equal_nan=True) for n in names)
    max_abs = max(float(np.nanmax(np.abs(got[n].astype(np.float64) - want[n]))) for n in names)
    plan = s.runs.plan(s.levels.main, 0, len(s.sequence))
    assert plan is not None
    watch = next(iter(s.segments._sessions.values())).result()[4]  # the watch the segment ran (see engine.fidelity)
    fed, embedded = s.executor.split(plan.reads, s.values.get, s.values.fixed, s.runs.segment_embedded(s.values))
    ops: dict[str, list[str]] = {}
    added = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, w in (("plain", None), ("watched", watch)):
            model, _ = s.segments.build_model(plan.ran, fed, embedded, plan.wanted, w)
            so = session_options("all")
            so.optimized_model_filepath = os.path.join(tmp, f"{label}.onnx")
            ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            optimized = onnx.load(so.optimized_model_filepath)
            ops[label] = [n.op_type for n in own_nodes(optimized)]
            added = len(optimized.graph.node) - len(ops[label])
    return {
        "bit_equal": equal,
        "max_abs": max_abs,
        "nodes_plain": len(ops["plain"]),
        "nodes_watched": len(ops["watched"]),
        "watch_nodes": added,
        "same_kernels": ops["plain"] == ops["watched"],
        "watched_tensors": len(watch.watched) if watch is not None else 0,
    }


def processes(name: str, path: Path, feeds: dict[str, np.ndarray], poly: str | None, repeat: int) -> dict[str, Any]:
    """Whole processes, in turn, ``repeat`` times each: medians in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "x.npz"
        np.savez(inputs, **feeds)
        script = Path(tmp) / "plain.py"
        script.write_text(_PLAIN_SCRIPT)
        commands = {
            "plain_process": [sys.executable, str(script), str(path), str(inputs)],
            "graph_dap_run": [sys.executable, "-m", "graph_dap", "run", str(path), "--inputs", str(inputs), "--break-on", "nan,inf", "--json"],
        }
        if poly:  # (its own random inputs, of the feeds' shapes)
            shapes = [f"{k}:[{','.join(map(str, v.shape))}]" for k, v in feeds.items()]
            commands["polygraphy"] = [poly, "run", str(path), "--onnxrt", "--input-shapes", *shapes]
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(repeat):
            for key, cmd in commands.items():
                t = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True)
                times[key].append(time.perf_counter() - t)
                if r.returncode not in (0, 1):
                    raise SystemExit(f"{name}: {' '.join(cmd)} failed:\n{r.stderr.decode()[-2000:]}")
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--polygraphy", help="Polygraphy's command, from an environment without torch")
    p.add_argument("--no-polygraphy", action="store_true")
    p.add_argument("--out", default=str(RESULTS / "user_run.md"))
    p.add_argument("--dap-steps", type=int, default=40, help="steps of the DAP round trip on the PaddleOCR recognizer (0: none)")
    args = p.parse_args()
    import onnxruntime as ort

    poly = None if args.no_polygraphy else polygraphy(args.polygraphy)
    rows = []
    names = args.models.split(",")
    paths = {name: model_path(name) for name in names}  # (first: quantize_static's sessions cannot share graph-dap's thread pool)
    for name in names:
        print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
        path = paths[name]
        feeds = feeds_for(name, path)
        row: dict[str, Any] = {"model": name}
        row.update(fidelity(path, feeds))
        plain = ort.InferenceSession(str(path), engine_bench.plain_options("all"), providers=["CPUExecutionProvider"])

        def plain_run(session: Any = plain, x: dict[str, np.ndarray] = feeds) -> None:
            session.run(None, x)

        row["plain_ms"] = engine_bench.median_time(plain_run, args.repeat) * 1000
        if not name.startswith("qdq"):  # (int8 weights hold no NaN; a NaN scale shows at its DequantizeLinear)
            row.update(engine_bench.nan_at_half(path, feeds, [], plain_run, args.repeat))
        row.update(processes(name, path, feeds, poly, args.repeat))
        rows.append(row)
        print(row, file=sys.stderr)
    text = table(rows, poly is not None)
    if args.dap_steps:
        dap = dap_round_trips(args.dap_steps)
        print(dap, file=sys.stderr)
        text += (
            f"\nDAP on the PaddleOCR recognizer, medians of {args.dap_steps} steps (ms): next -> stopped {dap['next']:.1f}, "
            f"stackTrace {dap['stackTrace']:.1f}, scopes {dap['scopes']:.1f}, variables of every scope not marked expensive "
            f"{dap['variables']:.1f}; the whole round trip {dap['round_trip']:.1f}\n"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


def table(rows: list[dict[str, Any]], poly: bool) -> str:
    f = engine_bench.fmt
    lines = [
        "| model | plain ms | watched outputs = plain (max_abs) | optimized nodes plain / watched (+ watch's) | watched tensors | NaN at 50% | plain process s | graph-dap run --break-on nan,inf s | ratio | polygraphy run s | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gd, pp, pg = r.get("graph_dap_run"), r.get("plain_process"), r.get("polygraphy")
        lines.append(
            f"| {r['model']} | {f(r['plain_ms'], '.1f')} | {'yes' if r['bit_equal'] else 'no'} ({r['max_abs']:.3g}) | "
            f"{r['nodes_plain']} / {r['nodes_watched']} (+{r['watch_nodes']}){'' if r['same_kernels'] else ' differ'} | {r['watched_tensors']} | "
            f"{f(r.get('nan_half_ratio'))}x | {f(pp)} | {f(gd)} | {f(gd / pp if gd and pp else None)}x | "
            f"{f(pg) if poly else '-'} | {f(gd / pg if gd and pg else None)}x |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
