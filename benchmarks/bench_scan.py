"""graph-dap scan over a data set: its wall time next to a plain onnxruntime loop, and what it finds.

    python benchmarks/bench_scan.py [--inputs 500] [--size 640] [--threads 2] [--poisoned 5] [--no-ray] [--pairs K]

The model is the detection-sized FPN of benchmarks/models.py (det640). The data set is
``--inputs`` .npz files (one image each, seeded), ``--poisoned`` of them (5, the most; 0: a
clean data set) poisoned (a NaN, or values large enough that some convolution or sum
overflows); each scan's first bad node is checked against onnxruntime's own values (the
model with every node output made a graph output). A failing input costs the scan more than
a clean one (it is located, kept in failing/): ``--poisoned 0`` times a clean data set.

Measured, each in a fresh process, with the same total number of onnxruntime threads
(``--threads``): a plain loop (``InferenceSession.run`` per file with graph-dap's session
options at the level a scan runs at: the global pool, ORT_ENABLE_ALL), before the scans and
after them (the faster is the base); the scan on the local pool (N workers x 1 thread, and 1
worker x N threads) and on a local Ray (N workers, and 1); for scale, plain loops with
onnxruntime's own defaults (a pool per session, ORT_ENABLE_ALL) and with optimizations off.
Wall times include starting the processes. The table goes to stdout and benchmarks/results/scan.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

#: The poisons, spread over the data set (at 7%, 30%, 52%, 78%, 95% of it): a NaN pixel; a 64x64 patch of huge
#: values, or the whole image at +/-c: finite, but some sum overflows (at the stem, or deeper for a smaller c).
POISONS = (("nan", 0.0), ("patch", 1e38), ("patch", 3e37), ("whole", 3e37), ("whole", 1e37))


#: How many inputs are poisoned (at most len(POISONS)); set from --poisoned.
POISONED = [len(POISONS)]


#: The optimization level a scan's runs use (graph-dap's default, DebugSession's opt_level): the plain loop's base.
SCAN_LEVEL = "all"


def poisoned(count: int) -> dict[int, tuple[str, float]]:
    return {count * p // 100: kind for p, kind in list(zip((7, 30, 52, 78, 95), POISONS))[: POISONED[0]]}


def build(size: int, count: int) -> tuple[Path, Path]:
    """The model and the data set on disk (made once)."""
    import onnx
    from models import det_fpn

    RESULTS.mkdir(parents=True, exist_ok=True)
    model = RESULTS / f"det{size}.onnx"
    if not model.exists():
        onnx.save(det_fpn(size), str(model))
    data = RESULTS / (f"scan_data_{size}_{count}" + ("" if POISONED[0] == len(POISONS) else f"_p{POISONED[0]}"))
    marker = data / ".complete"
    if not marker.exists():
        data.mkdir(exist_ok=True)
        poison = poisoned(count)
        for i in range(count):
            x = np.random.default_rng(i).standard_normal((1, 3, size, size)).astype(np.float32)
            if i in poison:
                kind, value = poison[i]
                y, z = size // 3, size // 2
                if kind == "nan":
                    x[0, 1, y, z] = np.nan
                elif kind == "patch":
                    x[0, :, y : y + 64, z : z + 64] = value
                else:
                    x[:] = np.float32(value) * np.sign(x)
            np.savez(data / f"image_{i:04d}.npz", image=x)
        marker.touch()
    return model, data


def truth(model: Path, data: Path, count: int) -> dict[str, tuple[str, str]]:
    """onnxruntime's first node with a NaN or Inf output, for each poisoned input."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    m = onnx.load(str(model))
    names = [o for n in m.graph.node for o in n.output if o]
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names if n not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out: dict[str, tuple[str, str]] = {}
    for i in poisoned(count):
        ident = f"image_{i:04d}"
        with np.load(data / f"{ident}.npz") as z:
            values = dict(zip(names, sess.run(names, {"image": z["image"]})))
        for node in m.graph.node:
            bad = [np.asarray(values[o]) for o in node.output if o and not np.isfinite(values[o]).all()]
            if bad:
                out[ident] = (node.name, "nan" if any(np.isnan(b).any() for b in bad) else "inf")
                break
    return out


def plain(model: Path, data: Path, threads: int, level: str, pool: str) -> float:
    """A plain loop in this process: read each file, run it; wall seconds.

    ``pool="global"``: the options graph-dap's own sessions use (onnxruntime's global pool
    of ``threads``, as benchmarks/run.py compares against); ``"session"``: onnxruntime's
    defaults, a pool of ``threads`` per session.
    """
    import onnxruntime as ort

    if pool == "global":
        from graph_dap.runtime.engine.options import session_options, set_thread_count

        set_thread_count(threads)
        so = session_options(level)
    else:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.graph_optimization_level = {"none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    so.log_severity_level = 3
    began = time.perf_counter()
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    for f in sorted(data.glob("*.npz")):
        with np.load(f) as z:
            sess.run(None, {"image": z["image"]})
    return time.perf_counter() - began


def plain_process(model: Path, data: Path, threads: int, level: str, pool: str = "global") -> float:
    """:func:`plain` in a fresh process, wall time from its start (imports included, as a scan's)."""
    began = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--plain", str(model), str(data), str(threads), level, pool], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def scan(model: Path, data: Path, out: Path, *extra: str) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """``graph-dap scan`` in a fresh process: wall seconds, its summary, its results file."""
    began = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "graph_dap", "scan", str(model), "--inputs", str(data), "--out", str(out), "--json", *extra],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    if run.returncode not in (0, 1):
        raise SystemExit(f"graph-dap scan {' '.join(extra)} failed ({run.returncode}):\n{run.stderr[-3000:]}")
    end = json.loads(run.stdout.splitlines()[-1])
    return wall, end, json.loads((out / "scan.json").read_text())


def found(results: dict[str, Any], expected: dict[str, tuple[str, str]]) -> tuple[int, list[str]]:
    """How many poisoned inputs the scan found at onnxruntime's first bad node; what it got wrong."""
    by_id = {r["id"]: r for r in results["results"]}
    wrong = []
    hits = 0
    for ident, (node, kind) in expected.items():
        r = by_id.get(ident, {})
        got = ((r.get("node") or {}).get("id"), r.get("status"))
        if got == (node, kind):
            hits += 1
        else:
            wrong.append(f"{ident}: scan {got}, onnxruntime {(node, kind)}")
    extra = [r["id"] for r in results["results"] if r["status"] != "clean" and r["id"] not in expected]
    wrong += [f"{i}: flagged, but clean for onnxruntime" for i in extra]
    return hits, wrong


def pairs(model: Path, data: Path, n: int, t: int, k: int, size: int) -> None:
    """On a shared machine the load drifts: pairs run back to back compare under about the same load."""
    rows = []
    for i in range(k):
        base = plain_process(model, data, t, SCAN_LEVEL)
        wall, end, _ = scan(model, data, RESULTS / "scan_out_pairs", "--workers", str(t), "--threads", "1")
        load = os.getloadavg()[0]
        rows.append((base, wall, load))
        print(f"pair {i + 1}: plain {base:.1f} s, scan {wall:.1f} s, {wall / base:.2f}x (load average {load:.1f})", flush=True)
    ratios = sorted(w / b for b, w, _ in rows)
    text = "\n".join(
        [f"{k} pairs over {n} inputs of det{size} ({POISONED[0]} poisoned), {t} threads in all (a plain loop, then the scan with {t} workers x 1 thread):", "",
         "| pair | plain s | scan s | scan / plain | load average after |", "| --- | --- | --- | --- | --- |"]
        + [f"| {i + 1} | {b:.1f} | {w:.1f} | {w / b:.2f}x | {load:.1f} |" for i, (b, w, load) in enumerate(rows)]
        + ["", f"median ratio {ratios[len(ratios) // 2]:.2f}x"]
    )
    print(text)
    (RESULTS / ("scan_pairs.md" if POISONED[0] == len(POISONS) else f"scan_pairs_p{POISONED[0]}.md")).write_text(text + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inputs", type=int, default=500)
    p.add_argument("--size", type=int, default=640)
    p.add_argument("--threads", type=int, default=2, help="total onnxruntime threads (default 2: this machine's cores)")
    p.add_argument("--poisoned", type=int, default=len(POISONS), choices=range(len(POISONS) + 1), metavar="N",
                   help=f"poisoned inputs among them, 0 to {len(POISONS)} (default {len(POISONS)}; 0: time a clean data set)")
    p.add_argument("--no-ray", action="store_true")
    p.add_argument(
        "--pairs",
        type=int,
        default=0,
        metavar="K",
        help="instead: K pairs of a plain loop and a scan (N workers x 1 thread) run one after the other; each pair's ratio",
    )
    p.add_argument("--plain", nargs=5, metavar=("MODEL", "DATA", "THREADS", "LEVEL", "POOL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.plain:
        print(plain(Path(args.plain[0]), Path(args.plain[1]), int(args.plain[2]), args.plain[3], args.plain[4]))
        return
    n, t = args.inputs, args.threads
    POISONED[0] = args.poisoned
    model, data = build(args.size, n)
    if args.pairs:
        pairs(model, data, n, t, args.pairs, args.size)
        return
    expected = truth(model, data, n)
    print(f"onnxruntime's first bad nodes: {expected}", flush=True)
    rows: list[tuple[str, float, str, str]] = []
    first = plain_process(model, data, t, SCAN_LEVEL)
    print(f"plain loop: {first:.1f} s", flush=True)
    runs = [(f"scan, local pool: {t} workers x 1 thread", ("--workers", str(t), "--threads", "1"))]
    runs.append((f"scan, local pool: 1 worker x {t} threads", ("--workers", "1", "--threads", str(t))))
    if not args.no_ray:
        runs.append((f"scan, local Ray: {t} workers x 1 thread", ("--ray", "--workers", str(t), "--threads", "1")))
        runs.append(("scan, local Ray: 1 worker x 1 thread", ("--ray", "--workers", "1", "--threads", "1")))
    measured = []
    for label, extra in runs:
        out = RESULTS / f"scan_out_{'ray' if '--ray' in extra else 'local'}_{extra[extra.index('--workers') + 1]}x{extra[-1]}_p{args.poisoned}"
        wall, end, results = scan(model, data, out, *extra)
        hits, wrong = found(results, expected)
        note = f"{hits} of {len(expected)} poisoned found at onnxruntime's first bad node" + (f"; {wrong}" if wrong else "")
        measured.append((label, wall, f"{end['counts']['clean']} clean, {end['failed']} failing; {note}"))
        print(measured[-1], flush=True)
    last = plain_process(model, data, t, SCAN_LEVEL)
    print(f"plain loop again: {last:.1f} s", flush=True)
    base = min(first, last)  # the faster of the two plain loops, one before the scans and one after
    rows.append((f"plain onnxruntime loop, {t} threads (graph-dap's options: global pool, ORT_ENABLE_ALL as a scan), before / after", base,
                 "1.00x", f"{first:.1f} s / {last:.1f} s"))
    rows += [(label, wall, f"{wall / base:.2f}x", what) for label, wall, what in measured]
    ort_default = plain_process(model, data, t, "all", "session")
    rows.append((f"plain onnxruntime loop, {t} threads, onnxruntime's defaults: a pool per session, ORT_ENABLE_ALL (for scale)", ort_default,
                 f"{ort_default / base:.2f}x", "-"))
    unoptimized = plain_process(model, data, t, "none")
    rows.append((f"plain onnxruntime loop, {t} threads, global pool, optimizations off (for scale)", unoptimized, f"{unoptimized / base:.2f}x", "-"))
    table = [f"{n} inputs of det{args.size} (1x3x{args.size}x{args.size}, one .npz each, {args.poisoned} poisoned), {t} threads in all; "
             "wall seconds, processes started included.", "",
             "| run | wall s | vs plain | found |", "| --- | --- | --- | --- |"]
    table += [f"| {label} | {wall:.1f} | {ratio} | {what} |" for label, wall, ratio, what in rows]
    text = "\n".join(table)
    print(text)
    (RESULTS / ("scan.md" if args.poisoned == len(POISONS) else f"scan_p{args.poisoned}.md")).write_text(text + "\n")
    os.sync()


if __name__ == "__main__":
    main()
