"""graph-dap's speed and memory, side by side with plain onnxruntime and with Polygraphy.

    python benchmarks/run.py [--models squeezenet,resnet50,det640,gpt,...] [--repeat 7] [--out FILE]

Every ratio is measured in one process, against a plain ``InferenceSession.run`` at
``ORT_ENABLE_ALL`` (what a plain ``InferenceSession(path)`` does), with the global thread
pool graph-dap uses; the unoptimized plain run is the second column. Medians over
``--repeat`` runs. Peak RSS and the Polygraphy comparison are whole processes.
The table is printed and written to ``benchmarks/results/results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

import conv_models  # noqa: E402
from models import det_fpn, light_inputs, light_models, tiny_gpt  # noqa: E402

DEFAULT = ["squeezenet", "shufflenet", "inception_v1", "inception_v2", "resnet50", "densenet121", "zfnet512", "bvlc_alexnet",
           "vgg19", "det640", "det1280", "mobile640", "resnet640", "gpt"]  # fmt: skip


FIRST_SESSIONS = 3  # new sessions whose first continue is timed


def model_path(name: str) -> Path | None:
    """Where the model is on disk (built into benchmarks/results/ when it is ours)."""
    light = light_models()
    if name in light:
        return Path(light[name])
    RESULTS.mkdir(parents=True, exist_ok=True)
    if name.startswith("det"):
        path = RESULTS / f"{name}.onnx"
        if not path.exists():
            onnx.save(det_fpn(int(name[3:])), str(path))
        return path
    if name in ("mobile640", "resnet640"):
        path = RESULTS / f"{name}.onnx"
        if not path.exists():
            onnx.save(getattr(conv_models, name[:-3])(int(name[-3:])), str(path))
        return path
    if name == "gpt":
        return tiny_gpt(RESULTS / "tiny_gpt.onnx")
    raise SystemExit(f"unknown model '{name}'; known: {', '.join(DEFAULT)}")


def inputs_for(path: Path) -> dict[str, np.ndarray]:
    model = onnx.load(str(path), load_external_data=False)
    if path.parent.name == "light":
        return light_inputs(model)
    from graph_dap.runtime import load_graph, resolve_inputs

    return resolve_inputs(load_graph(path))


def median_time(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def interleaved(fn: Any, plain: Any, repeat: int) -> tuple[float, float]:
    """Medians of ``fn`` and of ``plain``, run in turn ``repeat`` times (machine noise hits both alike)."""
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(median_time(fn, 1))
        theirs.append(median_time(plain, 1))
    return statistics.median(ours), statistics.median(theirs)


def plain_options(level: str = "all") -> Any:
    """onnxruntime's defaults (``all``: what a plain ``InferenceSession`` does), on the global thread pool graph-dap uses."""
    from graph_dap.runtime.engine.options import session_options

    so = session_options(level)
    so.enable_cpu_mem_arena = True
    return so


def bench_in_process(name: str, repeat: int) -> dict[str, Any]:
    """All the in-process timings for one model."""
    import onnxruntime as ort

    from graph_dap.runtime import DebugSession

    path = model_path(name)
    assert path is not None
    feeds = inputs_for(path)
    exclude = ["op:Where"] if name == "gpt" else []
    t = time.perf_counter()
    plain = ort.InferenceSession(str(path), plain_options("all"), providers=["CPUExecutionProvider"])
    plain.run(None, feeds)
    out: dict[str, Any] = {"model": name, "plain_create_run_s": time.perf_counter() - t}
    plain_none = ort.InferenceSession(str(path), plain_options("none"), providers=["CPUExecutionProvider"])
    plain_none.run(None, feeds)
    # The first continue of FIRST_SESSIONS new sessions, the median: onnxruntime lays out some sessions'
    # buffers worse than others (a session slow on its first run stays slow: inception_v2's plain
    # session ran 21 or 37 ms, whichever it got), and one sample of one session told little.
    firsts = []
    for _ in range(FIRST_SESSIONS):
        s = DebugSession(path, feeds, break_on=["nan", "inf"], inf_exclude=exclude)
        s.start()
        for thread in s.prepare_next():  # as the worker does while stopped on entry
            thread.join()
        t = time.perf_counter()
        first = s.continue_()
        firsts.append(time.perf_counter() - t)
        assert first.reason.value == "end", first.message
    out["nodes"] = len(s.graph.nodes)
    out["continue_first_s"] = statistics.median(firsts)

    def watched() -> None:
        s.restart()
        s.continue_()

    restart_s = median_time(lambda: s.restart(), repeat)
    # interleave plain and watched runs so that machine noise hits both alike
    plains, nones, watches = [], [], []
    for _ in range(repeat):
        plains.append(median_time(lambda: plain.run(None, feeds), 1))
        nones.append(median_time(lambda: plain_none.run(None, feeds), 1))
        watches.append(median_time(watched, 1) - restart_s)
    out["plain_s"] = statistics.median(plains)
    out["plain_none_s"] = statistics.median(nones)
    out["continue_watch_s"] = statistics.median(watches)
    out["continue_ratio"] = out["continue_watch_s"] / out["plain_s"]
    out["first_ratio"] = out["continue_first_s"] / out["plain_s"]
    out.update(nan_at_half(path, feeds, exclude, plain=lambda: plain.run(None, feeds), repeat=repeat))

    seq = s.sequence
    target = seq[int(0.9 * (len(seq) - 1))]
    b = DebugSession(path, feeds)
    b.set_breakpoints([target.id])
    b.start()
    t = time.perf_counter()
    stop = b.continue_()
    out["bp90_first_s"] = time.perf_counter() - t
    assert stop.node is not None and stop.node.id == target.id

    def to_bp() -> None:
        b.restart()
        b.continue_()

    bp_times, bp_plains = interleaved(to_bp, lambda: plain.run(None, feeds), repeat)
    out["bp90_warm_s"] = max(bp_times - restart_s, 0.0)
    out["bp90_ratio"] = out["bp90_warm_s"] / bp_plains

    # one step in the middle: step, then step back, many times
    mid = seq[len(seq) // 2]
    st = DebugSession(path, feeds)
    st.start()
    st.run_to(mid.id)
    st.step()
    st.step_back()
    step_times, compute_times = [], []
    feeds_mid = {i: st.value(i) for i in mid.all_inputs if i not in st.graph.initializer_names}
    consts = {i: st.value(i) for i in mid.all_inputs if i in st.graph.initializer_names}
    for _ in range(max(repeat, 20)):
        t = time.perf_counter()
        st.step()
        step_times.append(time.perf_counter() - t)
        st.step_back()
        t = time.perf_counter()
        st.runner.run(mid, feeds_mid, consts, st.constants.version)
        compute_times.append(time.perf_counter() - t)
    out["step_s"] = statistics.median(step_times)
    out["step_node_compute_s"] = statistics.median(compute_times)
    out["step_overhead_ms"] = (out["step_s"] - out["step_node_compute_s"]) * 1000

    # set a value near the input, then continue to the end
    sv = DebugSession(path, feeds, break_on=["nan", "inf"], inf_exclude=exclude)
    sv.start()
    sv.step()
    near = next(o for o in sv.last_node.outputs if o) if sv.last_node else None

    def set_and_continue() -> None:
        sv.restart()
        sv.step()
        sv.set_value(near, np.asarray(sv.value(near)) * 1)
        sv.continue_()

    if near is not None:
        set_and_continue()
        out["set_continue_s"] = median_time(set_and_continue, repeat) - restart_s
        out["set_continue_ratio"] = out["set_continue_s"] / out["plain_s"]
    return out


def nan_at_half(path: Path, feeds: dict[str, np.ndarray], exclude: list[str], plain: Any, repeat: int) -> dict[str, Any]:
    """A NaN written into the first weight read at 50% depth: the watched continue stops at its reader, exactly."""
    from graph_dap.runtime import DebugSession, load_graph

    graph = load_graph(path)
    inits = set(graph.initializer_names)
    half = len(graph.nodes) // 2
    position = {n.id: k for k, n in enumerate(graph.nodes)}

    def own_weight(n: Any, i: str) -> bool:
        """A float weight that no node before ``n`` reads (an exporter may share one initializer among layers)."""
        return i in inits and graph.value_info(i).dtype == "float32" and all(position.get(c.id, -1) >= position[n.id] for c in graph.consumers(i))

    node = next((n for n in graph.nodes[half:] if any(own_weight(n, i) for i in n.inputs)), None)
    if node is None:
        return {}
    weight = next(i for i in node.inputs if own_weight(node, i))
    model = onnx.load(str(path))
    for t in model.graph.initializer:
        if t.name == weight:
            a = onnx.numpy_helper.to_array(t).copy()
            a.reshape(-1)[a.size // 2] = np.nan
            t.CopyFrom(onnx.numpy_helper.from_array(a, weight))
    s = DebugSession(model, feeds, break_on=["nan", "inf"], inf_exclude=exclude)
    first = s.continue_()
    assert first.reason.value == "nan" and first.node is not None and first.node.id == node.id, (first.message, node.id)

    def found() -> None:
        s.restart()
        stop = s.continue_()
        assert stop.node is not None and stop.node.id == node.id

    found()  # warm: its parts built
    ours, theirs = interleaved(found, plain, repeat)
    return {"nan_half_s": ours, "nan_half_ratio": ours / theirs, "nan_half_node": node.id}


def peak_rss(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB and exit code of a whole process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def rss_child(kind: str, name: str, budget: float) -> None:
    """Run once as ``kind`` ("plain" or "graph-dap") in this process, for peak RSS."""
    import onnxruntime as ort

    from graph_dap.runtime import DebugSession

    path = model_path(name)
    assert path is not None
    feeds = inputs_for(path)
    if kind == "plain":
        ort.InferenceSession(str(path), plain_options(), providers=["CPUExecutionProvider"]).run(None, feeds)
    else:
        # a debugging session under the budget: watched continue, then stepping, reading, stepping back, setting
        s = DebugSession(path, feeds, break_on=["nan", "inf"], inf_exclude=["op:Where"] if name == "gpt" else [], memory_budget_mb=budget)
        s.start()
        assert s.continue_().reason.value == "end"
        s.restart()
        mid = s.sequence[len(s.sequence) // 2]
        s.run_to(mid.id)
        for _ in range(5):
            s.step()
        early = next(o for o in s.sequence[1].outputs if o)
        s.value(early)
        for _ in range(3):
            s.step_back()
        s.set_value(early, np.asarray(s.value(early)) * 1)
        assert s.continue_().reason.value == "end"
        print(json.dumps({"evictions": s.store.evictions, "peak_cached_mb": s.store.peak_cached_bytes / 2**20}))


def bench_processes(name: str, budget: float) -> dict[str, Any]:
    path = model_path(name)
    assert path is not None
    me = [sys.executable, str(Path(__file__).resolve())]
    out: dict[str, Any] = {}
    _, out["rss_plain_mb"], _ = peak_rss(me + ["--rss-child", "plain", name])
    _, out["rss_graphdap_mb"], _ = peak_rss(me + ["--rss-child", "graph-dap", name, "--budget", str(budget)])
    graph_dap = shutil.which("graph-dap")
    polygraphy = shutil.which("polygraphy")
    if graph_dap:
        out["gd_run_s"], out["gd_run_mb"], _ = peak_rss([graph_dap, "run", str(path), "--break-on", "nan,inf"]
                                                        + (["--inf-exclude", "op:Where"] if name == "gpt" else []))
    if polygraphy:
        out["poly_plain_s"], out["poly_plain_mb"], _ = peak_rss([polygraphy, "run", str(path), "--onnxrt"])
        out["poly_mark_s"], out["poly_mark_mb"], rc = peak_rss([polygraphy, "run", str(path), "--onnxrt", "--onnx-outputs", "mark", "all", "--validate"])
        out["poly_mark_rc"] = rc
    return out


def fmt(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict[str, Any]], budget: float) -> str:
    lines = [
        f"Median of the runs; ratios are to a plain onnxruntime run at ORT_ENABLE_ALL (a plain InferenceSession), global thread pool, measured side by side; the unoptimized plain run is its own column. Memory budget for graph-dap's peak RSS: {budget:g} MB.",
        "",
        "| model | nodes | plain ms (all) | plain ms (none) | continue nan+inf | first continue after entry | NaN at 50% found | bp@90% warm | bp@90% first ms | step overhead ms (node ms) | set_value+continue | peak RSS plain / graph-dap MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r.get('nodes', '-')} | {fmt(r.get('plain_s', 0) * 1000, '.1f')} | {fmt(r.get('plain_none_s', 0) * 1000, '.1f')} | "
            f"{fmt(r.get('continue_ratio'))}x | {fmt(r.get('first_ratio'))}x | {fmt(r.get('nan_half_ratio'))}x | "
            f"{fmt(r.get('bp90_ratio'))}x | {fmt(r.get('bp90_first_s', 0) * 1000, '.0f')} | "
            f"{fmt(r.get('step_overhead_ms'), '.3f')} ({fmt(r.get('step_node_compute_s', 0) * 1000, '.2f')}) | {fmt(r.get('set_continue_ratio'))}x | "
            f"{fmt(r.get('rss_plain_mb'), '.0f')} / {fmt(r.get('rss_graphdap_mb'), '.0f')} |"
        )
    lines += [
        "",
        "Whole processes (wall seconds / peak RSS MB): Polygraphy's plain run (the floor), graph-dap's NaN/Inf watch, Polygraphy marking every tensor as an output.",
        "",
        "| model | polygraphy run --onnxrt | graph-dap run --break-on nan,inf | polygraphy --onnx-outputs mark all --validate |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {fmt(r.get('poly_plain_s'))} s / {fmt(r.get('poly_plain_mb'), '.0f')} | {fmt(r.get('gd_run_s'))} s / {fmt(r.get('gd_run_mb'), '.0f')} | "
            f"{fmt(r.get('poly_mark_s'))} s / {fmt(r.get('poly_mark_mb'), '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT))
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--budget", type=float, default=256.0, help="memory budget (MB) for graph-dap's peak-RSS run")
    p.add_argument("--out", default=str(RESULTS / "results.md"))
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--rss-child", nargs=2, metavar=("KIND", "MODEL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], args.rss_child[1], args.budget)
        return
    if args.one:
        print(json.dumps(bench_in_process(args.one, args.repeat)))
        return
    rows = []
    for name in args.models.split(","):
        if model_path(name) is None:
            print(f"skipping {name}: needs torch and onnxscript (pip install torch==2.13.0 onnxscript)", file=sys.stderr)
            continue
        print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
        # each model in a fresh process: one model's sessions and caches do not slow the next
        r = subprocess.run([sys.executable, __file__, "--one", name, "--repeat", str(args.repeat)], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            raise SystemExit(f"benchmark of {name} failed")
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row.update(bench_processes(name, args.budget))
        rows.append(row)
    text = table(rows, args.budget)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    (out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print(text)


if __name__ == "__main__":
    main()
