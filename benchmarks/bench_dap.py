"""DAP responsiveness of graph-dap's adapter, with debugpy's figures measured the same way.

    python benchmarks/bench_dap.py [--steps 60] [--light squeezenet,resnet50,...] [--out FILE]

One client (tests/dap_client.py, schema checks off so that both adapters pay the
same client cost) times request -> response (stackTrace, scopes, variables) and
request -> ``stopped`` event (next), medians over ``--steps`` steps, and launch ->
``stopped`` on entry (from spawning the adapter to the first stop: initialize, launch,
configurationDone). graph-dap steps through a chain of small
nodes; debugpy steps through a Python program of as many plain statements. Targets
from the issue: next -> stopped 3 ms plus the node's compute; stackTrace, scopes and
variables 2 ms each; launch -> stopped on entry 1.5 s for the light models.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))  # before this folder: its models are the tests' (this folder has a models.py too)

from dap_client import DapClient  # noqa: E402
from light import light_models  # noqa: E402
from models import wide_model  # noqa: E402


def _ms(samples: list[float]) -> str:
    if not samples:
        return "-"
    return f"{statistics.median(samples) * 1000:.2f}"


def _timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _client(argv: list[str] | None = None) -> DapClient:
    client = DapClient.stdio(argv)
    client.checks_schema = False
    return client


def _steps(client: DapClient, steps: int, variables_of: Callable[[dict[str, Any]], int]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"next": [], "stackTrace": [], "scopes": [], "variables": []}
    for _ in range(steps):
        t = time.perf_counter()
        client.request("next", threadId=1)
        client.wait_for_event("stopped")
        out["next"].append(time.perf_counter() - t)
        t = time.perf_counter()
        frames = client.request("stackTrace", threadId=1, startFrame=0, levels=20)["stackFrames"]
        out["stackTrace"].append(time.perf_counter() - t)
        t = time.perf_counter()
        scopes = client.request("scopes", frameId=frames[0]["id"])["scopes"]
        out["scopes"].append(time.perf_counter() - t)
        ref = variables_of({s["name"]: s for s in scopes})
        t = time.perf_counter()
        client.request("variables", variablesReference=ref)
        out["variables"].append(time.perf_counter() - t)
    return out


def graph_dap(folder: Path, steps: int) -> tuple[dict[str, list[float]], float]:
    model, inputs, _ = wide_model(folder, count=steps + 5, rows=64)
    spawned = time.perf_counter()
    client = _client()
    client.initialize()
    client.launch(str(model), inputs=str(inputs), stopOnEntry=True)
    client.wait_for_event("stopped")
    launch = time.perf_counter() - spawned
    result = _steps(client, steps, lambda s: s["Inputs"]["variablesReference"])
    client.disconnect()
    return result, launch


def debugpy_figures(folder: Path, steps: int) -> tuple[dict[str, list[float]], float]:
    program = folder / "program.py"
    program.write_text("".join(f"x{i} = {i} * 2\n" for i in range(steps + 5)))
    spawned = time.perf_counter()
    client = _client([sys.executable, "-m", "debugpy.adapter"])
    client.request(
        "initialize", clientID="bench", adapterID="debugpy", linesStartAt1=True, columnsStartAt1=True, pathFormat="path"
    )
    seq = client.send(
        "launch",
        {
            "type": "python",
            "request": "launch",
            "program": str(program),
            "stopOnEntry": True,
            "console": "internalConsole",
            "justMyCode": True,
        },
    )
    client.wait_for_event("initialized")
    client.request("configurationDone")
    client.response(seq)
    client.wait_for_event("stopped")
    launch = time.perf_counter() - spawned
    result = _steps(client, steps, lambda s: next(iter(s.values()))["variablesReference"])
    client.disconnect()
    return result, launch


def light_launches(names: list[str], repeat: int) -> dict[str, tuple[float, int]]:
    import onnx

    available = light_models()
    out: dict[str, tuple[float, int]] = {}
    for name in names:
        if name not in available:
            continue
        nodes = len(onnx.load(available[name], load_external_data=False).graph.node)
        launches = []
        for _ in range(repeat):
            spawned = time.perf_counter()
            client = _client()
            client.initialize()
            client.launch(available[name], stopOnEntry=True)
            client.wait_for_event("stopped", timeout=120)
            launches.append(time.perf_counter() - spawned)
            client.disconnect()
        out[name] = (statistics.median(launches), nodes)
    return out


_PLAIN_PROCESS = (
    "import sys, time, numpy as np, onnxruntime as ort; "
    "feeds = dict(np.load(sys.argv[2])); t = time.perf_counter(); "
    "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']).run(None, feeds); "
    "print(time.perf_counter() - t)"
)
#: How long an adapter started ahead has waited when a session takes it (the extension starts the next
#: one a second after a session ends, or two after it activates; a person takes longer to press F5 again).
WARM_WAIT_S = 2.0


def _launch_to_end(client: DapClient, model: Path, inputs: Path) -> None:
    """Launch (initialized already), stop on entry, continue with the nan and inf filters, to ``terminated``."""
    client.launch(str(model), inputs=str(inputs), stopOnEntry=True, exceptions=["nan", "inf"])
    client.wait_for_event("stopped", timeout=120)
    client.request("continue", threadId=1)
    client.wait_for_event("terminated", timeout=120)


def launch_to_end(models: dict[str, Path], repeat: int) -> dict[str, dict[str, float]]:
    """Launch, stop on entry, continue with the nan and inf filters, to ``terminated``: timed from spawning the
    adapter (``spawn``) and from sending ``launch`` (``launch``: the adapter up and initialized; its worker, started
    at ``initialize``, may still be importing); beside a plain create-and-run in
    this process (``plain``: a fresh ``InferenceSession(path)`` at ``ORT_ENABLE_ALL`` and one run, onnxruntime
    imported already) and as a whole new Python process (``process``: the user's own script doing the same)."""
    import subprocess

    import numpy as np
    import onnxruntime as ort

    from graph_dap.runtime import load_graph, resolve_inputs
    from graph_dap.runtime.engine.options import session_options

    out: dict[str, dict[str, float]] = {}
    for name, path in models.items():
        feeds = resolve_inputs(load_graph(path))
        inputs = Path(tempfile.mkdtemp()) / "inputs.npz"
        np.savez(inputs, **feeds)
        times: dict[str, list[float]] = {"plain": [], "fresh": [], "process": [], "spawn": [], "launch": [], "warm": []}
        for _ in range(repeat):
            t = time.perf_counter()
            ort.InferenceSession(str(path), session_options("all"), providers=["CPUExecutionProvider"]).run(None, feeds)
            times["plain"].append(time.perf_counter() - t)
            t = time.perf_counter()
            plain = subprocess.run([sys.executable, "-c", _PLAIN_PROCESS, str(path), str(inputs)], check=True, capture_output=True, text=True)
            times["process"].append(time.perf_counter() - t)
            times["fresh"].append(float(plain.stdout.strip().splitlines()[-1]))
            spawned = time.perf_counter()
            client = _client()
            client.initialize()
            launched = time.perf_counter()
            _launch_to_end(client, path, inputs)
            ended = time.perf_counter()
            times["spawn"].append(ended - spawned)
            times["launch"].append(ended - launched)
            client.disconnect()
            # The extension's warm start: the adapter (and its worker) started ahead, waiting; F5 sends initialize.
            client = _client()
            time.sleep(WARM_WAIT_S)
            began = time.perf_counter()
            client.initialize()
            _launch_to_end(client, path, inputs)
            times["warm"].append(time.perf_counter() - began)
            client.disconnect()
        out[name] = {k: statistics.median(v) for k, v in times.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3, help="launches per light model")
    parser.add_argument("--light", default="all", help="comma list of light models, or all")
    parser.add_argument("--no-debugpy", action="store_true")
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--end-to-end", default="resnet50,mobile640,resnet640", help="models for launch -> continue to the end")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ours, our_launch = graph_dap(folder, args.steps)
        theirs, their_launch = ({}, 0.0) if args.no_debugpy else debugpy_figures(folder, args.steps)
        names = list(light_models()) if args.light == "all" else [n for n in args.light.split(",") if n]
        light = light_launches(names, args.repeat)
        import run as bench_run

        e2e = {n: bench_run.model_path(n) for n in args.end_to_end.split(",") if n}
        ends = launch_to_end({n: p for n, p in e2e.items() if p is not None}, args.repeat)
    their_text = f"{their_launch * 1000:.0f}" if theirs else "-"
    lines = [
        f"DAP responsiveness, medians of {args.steps} steps, ms (2 cores; {os.cpu_count()} CPUs seen)",
        "",
        "| request | target | graph-dap | debugpy (stock) |",
        "| --- | --- | --- | --- |",
        f"| next -> stopped | 3 + node compute | {_ms(ours['next'])} | {_ms(theirs.get('next', []))} |",
        f"| stackTrace | 2 | {_ms(ours['stackTrace'])} | {_ms(theirs.get('stackTrace', []))} |",
        f"| scopes | 2 | {_ms(ours['scopes'])} | {_ms(theirs.get('scopes', []))} |",
        f"| variables | 2 | {_ms(ours['variables'])} | {_ms(theirs.get('variables', []))} |",
        f"| launch -> stopped on entry (small model / script) | 1500 | {our_launch * 1000:.0f} | {their_text} |",
        "",
        "| light model | nodes | launch -> stopped on entry, ms (target 1500) |",
        "| --- | --- | --- |",
    ]
    for name, (launch, nodes) in light.items():
        lines.append(f"| {name} | {nodes} | {launch * 1000:.0f} |")
    lines += [
        "",
        "| model | from launch, ms | from spawning the adapter, ms | adapter started ahead, from initialize, ms |"
        " plain create + run in this process, ms | the same in a new process, ms | plain script as a process, ms |"
        " from launch / plain in this process (target 1.5x) | started ahead / plain in a new process | from spawning / plain process |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in ends.items():
        lines.append(
            f"| {name} | {t['launch'] * 1000:.0f} | {t['spawn'] * 1000:.0f} | {t['warm'] * 1000:.0f} | {t['plain'] * 1000:.0f} | "
            f"{t['fresh'] * 1000:.0f} | {t['process'] * 1000:.0f} | {t['launch'] / t['plain']:.2f}x | {t['warm'] / t['fresh']:.2f}x | "
            f"{t['spawn'] / t['process']:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
