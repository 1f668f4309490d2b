"""The listing language server on a 10,000-node model: latency of each feature, and its memory.

    python benchmarks/bench_lsp.py [--nodes 10000] [--samples 200] [--out FILE]

A plain JSON-RPC client over stdio (frames and ``json.loads``, as any editor does; no
typed structuring on the client side, so that the figures are the server's) starts
``python -m graph_dap lsp``, opens the listing of ``tests/models.py``'s ``layered_model``
and times: didOpen -> publishDiagnostics (the model loaded and analysed), the same for a
second listing of the model already loaded, hover / definition / references on value
names picked at random (medians and p95 over ``--samples``), documentSymbol (first and
median of 10), semanticTokens/full and foldingRange. Memory: the server's RSS after it
served all that, less its RSS after ``initialize`` (imports done), against what
``load_graph`` of the same model without initializer data adds to a process (the graph).
Targets from the issue: diagnostics within 1 s of opening, hover / definition /
references within 20 ms at the median, documentSymbol within 300 ms, memory within 2x
the graph without initializer data.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

import onnx  # noqa: E402
from models import layered_model  # noqa: E402

from graph_dap.runtime import load_graph, render_listing  # noqa: E402
from graph_dap.runtime.listing import Role, TokenKind  # noqa: E402


class Client:
    """A bare LSP client: requests by id, notifications into a queue."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "graph_dap", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        self._next = 0
        self._waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.notifications: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if line == b"":
                return
            msg = json.loads(out.read(length))
            if "id" in msg and "method" in msg:  # a request of the server's (progress tokens): accept it
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                self._waiting.pop(msg["id"]).put(msg)
            else:
                self.notifications.put(msg)

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> tuple[Any, float]:
        """The result, and the seconds from sending to having parsed the response."""
        self._next += 1
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self._waiting[self._next] = box
        t = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        msg = box.get(timeout=120)
        elapsed = time.perf_counter() - t
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg.get("result"), elapsed

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_diagnostics(self, uri: str) -> list[Any]:
        while True:
            msg = self.notifications.get(timeout=300)
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                return list(msg["params"]["diagnostics"])

    def rss_mb(self) -> float:
        return _rss_mb(self.proc.pid)

    def close(self) -> None:
        self.request("shutdown", None)
        self.notify("exit", None)
        self.proc.wait(timeout=30)


def _rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def graph_mb(model: Path) -> float:
    """What load_graph of the model adds to a process (imports done)."""
    code = (
        "import sys, gc, onnx, onnxruntime, numpy, lsprotocol.types, pygls.lsp.server\n"
        "from graph_dap.runtime import load_graph\n"
        "def rss():\n"
        "    return int([l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0].split()[1]) / 1024\n"
        "before = rss()\n"
        "g = load_graph(sys.argv[1])\n"
        "gc.collect()\n"
        "print(rss() - before)\n"
    )
    return float(subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, check=True).stdout)


def _stats(samples: list[float]) -> str:
    s = sorted(samples)
    return f"{statistics.median(s) * 1000:.2f} / {s[int(len(s) * 0.95) - 1] * 1000:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="graph-dap-bench-lsp-"))
    model = folder / "model.onnx"
    proto = layered_model(args.nodes)
    onnx.save(proto, str(model))
    listing = render_listing(load_graph(model))
    file = folder / "model.onnxtxt"
    file.write_text(listing.text)
    second = folder / "copy.onnxtxt"
    second.write_text(listing.text)
    # (a model with its initializers' data stripped is refused at load now: their bytes are subtracted instead)
    data_mb = sum(onnx.numpy_helper.to_array(t).nbytes for t in proto.graph.initializer) / 2**20
    base = graph_mb(model) - data_mb
    from graph_dap.lsp.analysis import Analysis
    from graph_dap.lsp.diagnostics import model_diagnostics
    from graph_dap.lsp.versions import load_version

    t = time.perf_counter()
    version = load_version(model)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    model_diagnostics(Analysis(version), ("CPUExecutionProvider",))  # type: ignore[arg-type]
    diagnose_s = time.perf_counter() - t
    del version

    client = Client()
    client.request("initialize", {"processId": os.getpid(), "capabilities": {"window": {"workDoneProgress": True}}, "rootUri": None})
    client.notify("initialized", {})
    cold = client.rss_mb()
    # Warm up on the example: onnx's schema registry, onnxruntime's kernel registry and pygls's first
    # replies are loaded once per process, whatever the model; the baseline below includes them.
    example = folder / "nan_demo.onnx"
    shutil.copy(ROOT / "examples" / "nan_demo.onnx", example)
    warm = folder / "nan_demo.onnxtxt"
    warm.write_text(render_listing(load_graph(example)).text)
    wdoc = {"uri": warm.resolve().as_uri()}
    client.notify("textDocument/didOpen", {"textDocument": {**wdoc, "languageId": "onnx-listing", "version": 1, "text": warm.read_text()}})
    client.wait_diagnostics(wdoc["uri"])
    for method in ("textDocument/documentSymbol", "textDocument/semanticTokens/full", "textDocument/foldingRange"):
        client.request(method, {"textDocument": wdoc})
    client.request("textDocument/hover", {"textDocument": wdoc, "position": {"line": 16, "character": 40}})
    client.notify("textDocument/didClose", {"textDocument": wdoc})
    rss0 = client.rss_mb()
    uri = file.resolve().as_uri()
    t = time.perf_counter()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "onnx-listing", "version": 1, "text": listing.text}})
    found = client.wait_diagnostics(uri)
    open_s = time.perf_counter() - t
    uri2 = second.resolve().as_uri()
    t = time.perf_counter()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri2, "languageId": "onnx-listing", "version": 1, "text": listing.text}})
    client.wait_diagnostics(uri2)
    reopen_s = time.perf_counter() - t

    rng = random.Random(0)
    spots = [
        (line - 1, tok.start + 1)
        for line, tokens in listing.line_tokens.items()
        if listing.node_at(line)
        for tok in tokens
        if tok.kind is TokenKind.VALUE and tok.role is Role.USE
    ]
    picks = rng.sample(spots, min(args.samples, len(spots)))
    doc = {"uri": uri}
    times: dict[str, list[float]] = {"hover": [], "definition": [], "references": []}
    for line, col in picks:
        pos = {"line": line, "character": col}
        times["hover"].append(client.request("textDocument/hover", {"textDocument": doc, "position": pos})[1])
        times["definition"].append(client.request("textDocument/definition", {"textDocument": doc, "position": pos})[1])
        refs = {"textDocument": doc, "position": pos, "context": {"includeDeclaration": True}}
        times["references"].append(client.request("textDocument/references", refs)[1])
    symbols, first_symbols = client.request("textDocument/documentSymbol", {"textDocument": doc})
    symbol_times = [client.request("textDocument/documentSymbol", {"textDocument": doc})[1] for _ in range(10)]
    count = 0
    stack = list(symbols)
    while stack:
        s = stack.pop()
        count += 1
        stack += s.get("children") or []
    tokens_s = client.request("textDocument/semanticTokens/full", {"textDocument": doc})[1]
    folding_s = client.request("textDocument/foldingRange", {"textDocument": doc})[1]
    rss1 = client.rss_mb()
    # every listing of the model closed, then one opened again, the model unchanged (issue 28: 1.67 s before)
    for closing in (uri, uri2):
        client.notify("textDocument/didClose", {"textDocument": {"uri": closing}})
        client.wait_diagnostics(closing)  # the server clears a closed listing's diagnostics
    t = time.perf_counter()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "onnx-listing", "version": 2, "text": listing.text}})
    client.wait_diagnostics(uri)
    closed_reopen_s = time.perf_counter() - t
    client.close()

    rows = [
        ("didOpen -> publishDiagnostics, model not loaded yet (load + analysis)", "-", f"{open_s * 1000:.0f}"),
        ("of which (in one process): loading the model / analysis and diagnostics", "- / 1000", f"{load_s * 1000:.0f} / {diagnose_s * 1000:.0f}"),
        ("didOpen -> publishDiagnostics, model loaded", "1000", f"{reopen_s * 1000:.1f}"),
        ("didOpen -> publishDiagnostics, all its listings closed before, model unchanged", "300", f"{closed_reopen_s * 1000:.1f}"),
        ("hover (median / p95)", "20", _stats(times["hover"])),
        ("definition (median / p95)", "20", _stats(times["definition"])),
        ("references (median / p95)", "20", _stats(times["references"])),
        (f"documentSymbol ({count} symbols): first / median of 10", "300", f"{first_symbols * 1000:.1f} / {statistics.median(symbol_times) * 1000:.1f}"),
        ("semanticTokens/full", "-", f"{tokens_s * 1000:.1f}"),
        ("foldingRange", "-", f"{folding_s * 1000:.1f}"),
        ("server memory for the model after all that, MB (x the graph)", "2x", f"{rss1 - rss0:.1f} ({(rss1 - rss0) / base:.2f}x)"),
        ("the same from a cold server (one-time costs included), MB", "-", f"{rss1 - cold:.1f} ({(rss1 - cold) / base:.2f}x)"),
        ("graph without initializer data (load_graph), MB", "-", f"{base:.1f}"),
    ]
    text = [
        f"Listing language server, {args.nodes} nodes ({len(listing.text.splitlines())} lines, {len(found)} diagnostics), "
        f"times in ms over {len(picks)} random value positions:",
        "",
        "| measure | target | measured |",
        "| --- | --- | --- |",
    ]
    text += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    print("\n".join(text))
    if args.out:
        Path(args.out).write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
