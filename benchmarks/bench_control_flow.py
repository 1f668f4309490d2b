"""Control flow: a watched continue through a Loop-heavy and an If model, and a stop inside an iteration.

    python benchmarks/bench_control_flow.py [--repeat 9] [--size 512] [--iterations 64]

Models (built here): ``loop``: 64 iterations of ``h = tanh(h @ w + b)`` on a 512x512 state
(MatMul, Add and Tanh in the body); ``if``: a two-way If whose taken branch is a chain
of 24 512x512 MatMul+Relu layers. Ratios are to a plain onnxruntime session of the
same model at the level graph-dap runs segments at (``all``, onnxruntime's default),
measured side by side in one process (plain and graph-dap in turn), medians over ``--repeat`` runs:
- continue nan+inf: restart, then continue to the end with the nan and inf filters on;
- stop in iteration 40: restart, then continue to a breakpoint inside the body with the
  condition ``iteration == 40``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from graph_dap.runtime import BreakpointSpec, DebugSession, StopReason  # noqa: E402
from graph_dap.runtime.engine.options import session_options  # noqa: E402


def loop_model(size: int, iterations: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal((1, size)) * 0.1).astype(np.float32), "b")
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["h_in", "w"], ["mm"], name="mm"),
            helper.make_node("Add", ["mm", "b"], ["pre"], name="add"),
            helper.make_node("Tanh", ["pre"], ["h_out"], name="tanh"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_in", f, [size, size]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("h_out", f, [size, size])],
    )
    trip = numpy_helper.from_array(np.array(iterations, np.int64), "trip")
    go = numpy_helper.from_array(np.array(True), "go")
    g = helper.make_graph(
        [helper.make_node("Loop", ["trip", "go", "h0"], ["h"], body=body, name="loop")],
        "loop_model",
        [helper.make_tensor_value_info("h0", f, [size, size])],
        [helper.make_tensor_value_info("h", f, [size, size])],
        [w, b, trip, go],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def if_model(size: int, layers: int = 24) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32), f"w{k}") for k in range(layers)]

    def branch(name: str, act: str) -> onnx.GraphProto:
        nodes, prev = [], "x"
        for k in range(layers):
            nodes.append(helper.make_node("MatMul", [prev, f"w{k}"], [f"{name}_m{k}"], name=f"{name}_mm{k}"))
            nodes.append(helper.make_node(act, [f"{name}_m{k}"], [f"{name}_a{k}"], name=f"{name}_act{k}"))
            prev = f"{name}_a{k}"
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(prev, f, [size, size])])

    g = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
            helper.make_node("Constant", [], ["zero"], value_float=0.0, name="zero"),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="c"),
            helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Relu"), else_branch=branch("else", "Tanh"), name="branch"),
        ],
        "if_model",
        [helper.make_tensor_value_info("x", f, [size, size])],
        [helper.make_tensor_value_info("y", f, [size, size])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def median(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench(name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], repeat: int, inner_bp: BreakpointSpec | None) -> dict[str, Any]:
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    plain = ort.InferenceSession(model.SerializeToString(), session_options(s.executor.opt_level), providers=["CPUExecutionProvider"])
    plain.run(None, feeds)

    def watched() -> None:
        s.restart()
        stop = s.continue_()
        assert stop.reason is StopReason.END, stop

    watched()
    watched()
    # side by side: each round one plain run and one watched continue, so that machine noise hits both alike
    plains, watches = [], []
    for _ in range(repeat):
        plains.append(median(lambda: plain.run(None, feeds), 1))
        watches.append(median(watched, 1))
    t_plain, t_watch = statistics.median(plains), statistics.median(watches)
    row: dict[str, Any] = {"model": name, "plain_ms": t_plain * 1e3, "continue": t_watch / t_plain, "ort_calls": None}
    s.restart()
    calls = s.ort_calls
    s.continue_()
    row["ort_calls"] = s.ort_calls - calls
    if inner_bp is not None:
        b = DebugSession(model, feeds)
        b.set_breakpoints([inner_bp])

        def to_iteration() -> None:
            b.restart()
            stop = b.continue_(check_first=True)
            assert stop.reason is StopReason.BREAKPOINT and b.iteration == 40, stop

        to_iteration()
        stops = []
        for _ in range(repeat):
            plains.append(median(lambda: plain.run(None, feeds), 1))
            stops.append(median(to_iteration, 1))
        t_plain = statistics.median(plains)
        t_stop = statistics.median(stops)
        # the plain run only has to reach iteration 40 of 64 for a fair floor
        row["stop40"] = t_stop / (t_plain * 40 / 64)
        row["stop40_vs_whole"] = t_stop / t_plain
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(2)
    size = args.size
    h0 = (rng.standard_normal((size, size)) * 0.1).astype(np.float32)
    rows = [
        bench("loop (64 x MatMul+Add+Tanh)", loop_model(size, args.iterations), {"h0": h0}, args.repeat, BreakpointSpec("tanh", condition="iteration == 40")),
        bench("if (24 x MatMul+Relu in the taken branch)", if_model(size), {"x": np.abs(h0)}, args.repeat, None),
    ]
    print("| model | plain ms | continue nan+inf | onnxruntime calls | stop in iteration 40 (vs plain to 40/64) | (vs the whole plain run) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        stop = f"{r['stop40']:.2f}x" if "stop40" in r else "-"
        whole = f"{r['stop40_vs_whole']:.2f}x" if "stop40" in r else "-"
        print(f"| {r['model']} | {r['plain_ms']:.1f} | {r['continue']:.2f}x | {r['ort_calls']} | {stop} | {whole} |")


if __name__ == "__main__":
    main()
