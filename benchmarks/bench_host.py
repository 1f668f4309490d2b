"""What graph-dap's wrapper around ``InferenceSession`` costs a program, measured in one process.

    python benchmarks/bench_host.py [--models squeezenet,resnet50,...] [--repeat 31] [--rounds 5]

1. The wrapper when nothing applies, on a model that runs in about 1 ms: ``session.run`` through the
   wrapper (installed with the mixed mode's handler, nothing armed; and with a breakpoint armed in another
   model, so that each call goes through the handler) beside onnxruntime's own ``run`` on the same session,
   interleaved, the median of ``--rounds`` rounds of ``--repeat`` calls each. The target: within 2 %.
2. The ``nan`` filter alone, where every run is watched with the fast engine: the watched model (in-graph
   sums, a session with the program's options) beside a plain ``run`` of the program's session (onnxruntime's
   default options), on the benchmark models; and what the first watched run costs (building the watch).

The table is printed (Markdown), for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from run import inputs_for, model_path  # noqa: E402

DEFAULT = ["squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121", "bvlc_alexnet", "det640"]


def one_ms_model(path: Path, width: int = 256, depth: int = 24, rows: int = 32) -> Path:
    """A chain of ``depth`` MatMul + Relu on a ``rows`` x ``width`` tensor: about 1 ms a run on this machine."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev = "x"
    for i in range(depth):
        w = numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [prev, w.name], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "one_ms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [rows, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int, rounds: int, block: int = 1) -> dict[str, float]:
    """Median seconds per call of each function, called in turns (``block`` calls each) so that drift hits all alike."""
    per: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm
    for _ in range(rounds):
        for _ in range(max(1, repeat // block)):
            for name, fn in fns.items():
                for _ in range(block):
                    t = time.perf_counter()
                    fn()
                    per[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in per.items()}


def wrapper_overhead_us(repeat: int) -> dict[str, float]:
    """The wrapper's own time per call, without onnxruntime: its methods over a stand-in that returns at once."""
    from graph_dap.host import hook
    from graph_dap.host import protocol as hp
    from graph_dap.host.debugged import DebuggedHandler
    from graph_dap.host.identity import ModelIdentity

    class Session:
        pass

    session = Session()
    handler = DebuggedHandler(".")
    model = ModelIdentity("/m.onnx", "/m.onnx", None, "m.onnx")
    session.__dict__["_graph_dap"] = hook.Bound(model, hook._counter(model))
    handler._debuggable[model.key] = True
    saved_run, saved_handler = hook._RUN, hook._HANDLER

    def instant(self: Any, output_names: Any, feeds: Any, run_options: Any = None) -> Any:
        return None

    hook._RUN, hook._HANDLER = instant, handler
    try:
        feeds: dict[str, Any] = {}
        out = {}
        for label, config in (("idle", hp.Config(filters=("error",))), ("engaged", hp.Config(filters=("error",), armed=("x",)))):
            handler.configure(config)
            times = interleaved({"bare": lambda: instant(session, None, feeds), "wrapped": lambda: hook._run(session, None, feeds)}, repeat, 5)
            out[label] = (times["wrapped"] - times["bare"]) * 1e6
        return out
    finally:
        hook._RUN, hook._HANDLER = saved_run, saved_handler


def wrapper_cost(folder: Path, repeat: int, rounds: int) -> dict[str, float]:
    """Plain ``run`` vs the wrapper (nothing applies; a breakpoint armed in another model) on the 1 ms model."""
    import onnxruntime as ort

    from graph_dap.host import hook
    from graph_dap.host import protocol as hp
    from graph_dap.host.debugged import DebuggedHandler

    path = one_ms_model(folder / "one_ms.onnx")
    handler = DebuggedHandler(str(folder))  # the mixed mode's handler, without an adapter: nothing is announced
    hook.install(handler)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    key = session._graph_dap.model.key
    handler._debuggable[key] = True
    feeds = {"x": np.random.default_rng(1).standard_normal((32, 256)).astype(np.float32)}
    original = hook._RUN
    assert original is not None

    def plain() -> Any:
        return original(session, None, feeds, None)

    def wrapped() -> Any:
        return session.run(None, feeds)

    handler.configure(hp.Config(filters=("error",)))
    idle = interleaved({"plain": plain, "wrapped": wrapped}, repeat, rounds)
    handler.configure(hp.Config(filters=("error",), armed=("another model",)))
    engaged = interleaved({"plain": plain, "wrapped": wrapped}, repeat, rounds)
    return {
        "plain_ms": idle["plain"] * 1e3,
        "idle_ratio": idle["wrapped"] / idle["plain"],
        "engaged_plain_ms": engaged["plain"] * 1e3,
        "engaged_ratio": engaged["wrapped"] / engaged["plain"],
    }


def watch_cost(name: str, repeat: int, rounds: int) -> dict[str, Any]:
    """A plain run of the program's session beside the nan watch of its runs, on one benchmark model."""
    import onnxruntime as ort

    from graph_dap.host import hook
    from graph_dap.host.watch import Watcher

    path = model_path(name)
    if path is None:
        return {}
    feeds = inputs_for(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    bound = hook._bind(session)
    assert bound.model is not None
    begin = time.perf_counter()
    watcher = Watcher(session, bound.model, ["nan"], [])
    built = time.perf_counter() - begin
    call = hook.Call(session, bound, 1, None, feeds, None, "run", None)
    original = hook._RUN
    assert original is not None
    times = interleaved({"plain": lambda: original(session, None, feeds, None), "watched": lambda: watcher.run(call)}, repeat, rounds)
    results, flagged = watcher.run(call)
    plain = original(session, None, feeds, None)
    same = all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(results, plain))
    return {
        "model": name,
        "nodes": len(onnx.load(str(path), load_external_data=False).graph.node),
        "watched": len(watcher.watch.watched),
        "plain_ms": times["plain"] * 1e3,
        "ratio": times["watched"] / times["plain"],
        "build_ms": built * 1e3,
        "flagged": flagged,
        "same": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT))
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        overhead = wrapper_overhead_us(20000)
        cost = wrapper_cost(Path(folder), args.repeat * 10, args.rounds)
        print("The wrapper when nothing applies (the mixed mode's handler), one process, calls in turns:\n")
        print("| | plain run | wrapped, nothing armed | wrapped, a breakpoint armed in another model |")
        print("|---|---|---|---|")
        print(f"| 24 x (MatMul 32x256x256 + Relu) | {cost['plain_ms']:.3f} ms | {cost['idle_ratio']:.4f}x | {cost['engaged_ratio']:.4f}x |")
        print(f"| the wrapper alone (a stand-in session) | | {overhead['idle']:.2f} us a call | {overhead['engaged']:.2f} us a call |")
        print("\nThe nan filter alone: every run watched (in-graph sums, the program's options) beside a plain run:\n")
        print("| model | nodes | tensors summed | plain run ms | watched run | first watched run: building the watch ms | outputs equal |")
        print("|---|---|---|---|---|---|---|")
        for name in [m for m in args.models.split(",") if m]:
            row = watch_cost(name, max(3, args.repeat // 4), args.rounds)
            if not row:
                print(f"| {name} | (not available) | | | | | |")
                continue
            print(
                f"| {name} | {row['nodes']} | {row['watched']} | {row['plain_ms']:.2f} | {row['ratio']:.3f}x | {row['build_ms']:.0f} | "
                f"{'yes' if row['same'] else 'NO'} |"
            )


if __name__ == "__main__":
    main()
