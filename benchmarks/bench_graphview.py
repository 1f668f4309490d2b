"""The graph view: the layout library chosen by measuring, and the page in headless Chromium, beside Netron.

    python benchmarks/bench_graphview.py [--runs 3] [--netron PATH/TO/netron] [--highlight-log FILE] [--out FILE]

1. dagre against elkjs (layered), on the layouts the view asks for: every group of each model
   laid out on its own with every module open (``graphview/engines.ts``, in Node), the same boxes
   and edges for both; time and edge crossings (straight segments, a proxy for readability).
2. The page ``graph-dap graph --out`` writes, in headless Chromium (``graphview/browser.mjs``):
   its size; the time from navigation to the first frame (collapsed by module); groups opened one
   at a time, breadth first; with every group open and the graph fitted, 240 frames of pan and zoom
   (frame intervals from requestAnimationFrame's timestamps, the view's draw time per frame).
3. Netron (``pip install netron`` in a venv of its own; ``--netron`` its executable) serving the same
   models, in the same browser: the time until its graph's nodes are in the page, and the same
   240 frames of pan and zoom (wheel events and scrolling).
4. ``--highlight-log``: the "graph-dap Graph" output of an end-to-end run in code-server
   (``vscode-ext/e2e-artifacts/graph-view.log``): how long after each ``stopped`` event the stop's
   node was drawn highlighted.

Models: the light models of the onnx wheel, the det-like FPN at 640 (``det_fpn``, PaddleOCR-style)
and ``module_transformer(182)``, 10,011 nodes with module scopes in their names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXT = ROOT / "vscode-ext"
sys.path.insert(0, str(HERE))

import onnx  # noqa: E402
from models import det_fpn, light_models, module_transformer  # noqa: E402

from graph_dap.runtime import load_graph  # noqa: E402
from graph_dap.runtime.tools.graphview.data import graph_data  # noqa: E402
from graph_dap.runtime.tools.graphview.page import write_page  # noqa: E402


def models(folder: Path) -> dict[str, Path]:
    out = {name: Path(p) for name, p in light_models().items()}
    for name, make in (("det_fpn640", lambda: det_fpn(640)), ("transformer10k", lambda: module_transformer(182))):
        path = folder / f"{name}.onnx"
        onnx.save(make(), path)
        out[name] = path
    return out


def engines(docs: dict[str, Path]) -> list[dict[str, Any]]:
    bundle = Path(tempfile.mkdtemp()) / "engines.js"
    env = {**os.environ, "NODE_PATH": str(EXT / "node_modules")}
    subprocess.run([str(EXT / "node_modules" / ".bin" / "esbuild"), str(HERE / "graphview" / "engines.ts"), "--bundle", "--platform=node",
                    "--format=cjs", f"--outfile={bundle}", "--log-level=warning"], check=True, env=env)
    rows = []
    for name, doc in docs.items():
        out = subprocess.run(["node", str(bundle), str(doc)], capture_output=True, text=True, check=True, timeout=3600)
        rows.append({"name": name, **json.loads(out.stdout.strip().splitlines()[-1])})
        print(rows[-1], file=sys.stderr)
    return rows


def browser(config: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(["node", str(HERE / "graphview" / "browser.mjs"), json.dumps(config)], capture_output=True, text=True, cwd=ROOT, timeout=7200)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def netron(exe: str, named: dict[str, Path], runs: int) -> list[dict[str, Any]]:
    rows = []
    for name, path in named.items():
        port = free_port()
        proc = subprocess.Popen([exe, str(path), "--port", str(port), "--host", "127.0.0.1", "--verbosity", "quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            got = browser({"runs": runs, "netron": [{"name": name, "url": f"http://127.0.0.1:{port}/", "fps": True}]})
            rows.append(got["netron"][0])
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return rows


def highlights(log: Path) -> list[dict[str, float]]:
    pattern = re.compile(r"stop (\d+): highlighted ([\d.]+) ms after the stopped event \(the node known ([\d.]+) ms after it, ([\d.]+) ms in the view\)")
    return [{"stop": int(m[1]), "total": float(m[2]), "node_known": float(m[3]), "view": float(m[4])} for m in pattern.finditer(log.read_text())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--netron", help="the netron executable (pip install netron in a venv of its own)")
    ap.add_argument("--highlight-log", type=Path, help="vscode-ext/e2e-artifacts/graph-view.log of an e2e run")
    ap.add_argument("--skip-engines", action="store_true", help="no dagre/elkjs comparison")
    ap.add_argument("--skip-browser", action="store_true", help="no Chromium (nor Netron)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-graphview-"))
    try:
        paths = models(work)
        docs: dict[str, Path] = {}
        pages: dict[str, Path] = {}
        sizes: dict[str, dict[str, Any]] = {}
        for name, path in paths.items():
            t0 = time.perf_counter()
            data = graph_data(load_graph(path))
            made = time.perf_counter() - t0
            docs[name] = work / f"{name}.json"
            docs[name].write_text(json.dumps(data, separators=(",", ":")))
            pages[name] = work / f"{name}.html"
            size = write_page(pages[name], data, [])
            sizes[name] = {"nodes": len(data["nodes"]), "page_mb": round(size / 1e6, 2), "document_s": round(made, 2)}
        result: dict[str, Any] = {"sizes": sizes}
        if not args.skip_engines:
            result["engines"] = engines({k: v for k, v in docs.items() if k != "transformer10k"})
        if args.skip_browser:
            specs = []
        else:
            specs = [{"name": "transformer10k", "path": str(pages["transformer10k"]), "opens": 40},
                     {"name": "densenet121", "path": str(pages["densenet121"]), "fps": True, "opens": 10}]
            specs += [{"name": n, "path": str(pages[n])} for n in ("det_fpn640", "resnet50", "inception_v2")]
        result["browser"] = browser({"runs": args.runs, "pages": specs})["pages"] if specs else []
        if args.netron and not args.skip_browser:
            result["netron"] = netron(args.netron, {n: paths[n] for n in ("densenet121", "transformer10k", "resnet50")}, args.runs)
        if args.highlight_log:
            result["highlight"] = highlights(args.highlight_log)
        text = json.dumps(result, indent=1)
        if args.out:
            args.out.write_text(text)
        print(text)
        for page in result["browser"]:
            if page.get("expand"):
                ms = [e["ms"] for e in page["expand"]]
                print(f"{page['name']}: {len(ms)} opens, median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
