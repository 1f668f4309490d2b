"""Where the time goes: onnxruntime's own profiling of a whole run, mapped back to the model's nodes.

The model runs whole in one session with ``SessionOptions.enable_profiling``; each
kernel event is attributed to its node by name (graph-dap names every node by its
id before building the session). With optimizations off, the timed nodes are the
model's own; at another level they are the optimized graph's nodes, each listed
with the original nodes it came from where the graph says so (:func:`fused_graph`).
Times are medians over ``repeat`` runs after ``warmup`` untimed ones.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort

from graph_dap import log as _log
from graph_dap.errors import ProfileError
from graph_dap.files import write_text_atomic
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine.fusion import FusedGraph, FusedNode, derive_fused, named_by_id, origin_text
from graph_dap.runtime.engine.options import ORT_ERRORS, check_opt_level, check_providers, session_options
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.graph.source import SourceMap, source_fields
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.selection import Selection
from graph_dap.runtime.tensor import format_bytes
from graph_dap.runtime.tools.by_source import SourceTime, by_line, by_module

__all__ = ["FusedGraph", "FusedNode", "NodeTime", "Profile", "ProfileError", "fused_graph", "optimize_model", "profile_model"]

METHOD = "onnxruntime profiling (SessionOptions.enable_profiling) of whole runs, kernel times mapped to nodes by name"
_MAX_INLINE = 1_800_000_000  # bytes; protobuf cannot serialize 2 GiB
_log_ = _log.get_logger(__name__)


# -- sessions over the whole model ----------------------------------------------------


def _session(graph: Graph, so: ort.SessionOptions, providers: Sequence[str], folder: Path) -> ort.InferenceSession:
    """A session over the whole model, its nodes named by id; big models go through a file with external data."""
    model = named_by_id(graph)
    if model.ByteSize() < _MAX_INLINE:
        source: Any = model.SerializeToString()
    else:
        path = folder / "model.onnx"
        onnx.save_model(model, str(path), save_as_external_data=True, location="model.onnx.data")
        source = str(path)
    del model
    try:
        return ort.InferenceSession(source, so, providers=list(providers))
    except ORT_ERRORS as e:
        raise ProfileError(f"onnxruntime cannot load the model: {str(e).splitlines()[0]}") from None


def _save_optimized(so: ort.SessionOptions, path: Path) -> None:
    so.optimized_model_filepath = str(path)
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", path.name + ".data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")


def optimize_model(graph: Graph, opt_level: str, providers: Sequence[str] | None, folder: Path) -> Path:
    """Have onnxruntime optimize the model at ``opt_level`` and save it in ``folder``; its path."""
    so = session_options(check_opt_level(opt_level), graph.weights.data_folder)
    path = folder / "optimized.onnx"
    _save_optimized(so, path)
    _session(graph, so, check_providers(providers), folder)
    return path


# -- the fused graph -------------------------------------------------------------------


def fused_graph(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    opt_level: str = OptLevel.ALL,
    providers: Sequence[str] | None = None,
    save_to: str | os.PathLike[str] | None = None,
) -> FusedGraph:
    """The graph onnxruntime runs at ``opt_level``, each node with the original nodes it came from.
    ``save_to`` also keeps onnxruntime's optimized model (with its weights in ``save_to.data``)."""
    graph = model if isinstance(model, Graph) else load_graph(model)
    check_opt_level(opt_level)
    with tempfile.TemporaryDirectory(prefix="graph-dap-fused-") as tmp:
        path = Path(save_to) if save_to else Path(tmp) / "optimized.onnx"
        so = session_options(opt_level, graph.weights.data_folder)
        _save_optimized(so, path)
        _session(graph, so, check_providers(providers), Path(tmp))
        optimized = onnx.load(str(path), load_external_data=False)
    return derive_fused(graph, optimized, opt_level)


# -- profiling --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeTime:
    """The time of one node: the median over the timed runs of its kernel time."""

    name: str
    op_type: str
    index: int | None  # the node's index in the model file (None for nodes the optimizer made)
    time_ms: float
    share: float  # of the sum of every node's time
    bytes: int  # produced by the node (onnxruntime's output_size)
    runs: int
    origin: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "op_type": self.op_type,
            "index": self.index,
            "time_ms": round(self.time_ms, 6),
            "share": round(self.share, 6),
            "bytes": self.bytes,
        }
        if self.origin:
            d["from"] = list(self.origin)
        return d


@dataclass(frozen=True, slots=True)
class Profile:
    """A profile of whole runs; ``nodes`` are sorted with the slowest first."""

    total_ms: float  # the sum of every node's median time (what shares are of)
    run_ms: float  # the median wall time of one run (kernels plus the executor's overhead)
    repeat: int
    warmup: int
    opt_level: str
    providers: tuple[str, ...]
    nodes: tuple[NodeTime, ...]
    not_timed: tuple[tuple[str, str], ...]  # (node id, why) for the model's nodes without a kernel event
    fused: FusedGraph | None = None
    events: tuple[dict[str, Any], ...] = field(default=(), repr=False)  # per run and node: {run, name, ts, dur}
    method: str = METHOD
    sources: SourceMap | None = field(default=None, repr=False, compare=False)  # the model's, for lines and modules
    depth: int = 0  # by_module: module paths cut to this many components (0: the innermost module)
    chosen: str = ""  # what `restricted` kept ("" : every node)

    def originals(self, n: NodeTime) -> tuple[str, ...]:
        """The model's nodes a timed node stands for: itself, or (optimized) those it came from."""
        return (n.origin or (n.name,)) if self.fused is not None else (n.name,)

    def _timed(self) -> list[tuple[tuple[str, ...], float]]:
        return [(self.originals(n), n.time_ms) for n in self.nodes]

    def by_line(self) -> list[SourceTime]:
        """Node times per line of the model's Python source (a fused node's split over its originals' lines)."""
        return by_line(self.sources, self._timed()) if self.sources is not None else []

    def by_module(self) -> list[SourceTime]:
        """Node times per module scope (cut to :attr:`depth` components)."""
        return by_module(self.sources, self._timed(), self.depth) if self.sources is not None else []

    def restricted(self, selection: Selection, label: str) -> Profile:
        """Only the timed nodes ``selection`` chooses (a fused node when one of its originals is), shares still of the
        whole run; ``label`` says which (``profile --nodes``)."""
        graph = selection.graph
        kept = tuple(n for n in self.nodes if any(graph.has_node(o) and selection.node(graph.node(o)) for o in self.originals(n)))
        return replace(self, nodes=kept, chosen=label)

    def _source(self, n: NodeTime) -> dict[str, Any]:
        return source_fields(self.sources, self.originals(n)) if self.sources is not None else {"source": [], "module": None}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "total_ms": round(self.total_ms, 6),
            "run_ms": round(self.run_ms, 6),
            "repeat": self.repeat,
            "warmup": self.warmup,
            "method": self.method,
            "opt_level": self.opt_level,
            "providers": list(self.providers),
            "nodes": [{**n.to_dict(), **self._source(n)} for n in self.nodes],
            "not_timed": [{"name": n, "why": w} for n, w in self.not_timed],
            "by_line": [t.to_dict() for t in self.by_line()],
            "by_module": [t.to_dict() for t in self.by_module()],
        }
        if self.fused is not None:
            d["fused"] = self.fused.to_dict()
        return d

    def text(self, top: int = 25) -> str:
        what = "the model's own nodes" if self.opt_level == OptLevel.NONE else f"the graph optimized at level '{self.opt_level}'"
        lines = [
            f"method: {self.method}; optimizations {self.opt_level}: times are of {what}",
            f"median of {self.repeat} run(s) after {self.warmup} warm-up: a run takes {self.run_ms:.3f} ms; "
            f"nodes {self.total_ms:.3f} ms in all, {len(self.nodes)} timed",
        ]
        if self.chosen:
            chosen = sum(n.time_ms for n in self.nodes)
            lines.append(f"chosen: {self.chosen}: {len(self.nodes)} nodes, {chosen:.3f} ms ({chosen / self.total_ms if self.total_ms else 0:.1%})")
        shown = self.nodes if top <= 0 else self.nodes[:top]
        head = f"{'rank':>4}  {'index':>5}  {'node':<32}  {'op':<18}  {'time_ms':>9}  {'share':>6}  {'bytes':>9}"
        if self.opt_level != OptLevel.NONE:
            head += "  from"
        lines.append(head)
        for rank, n in enumerate(shown, 1):
            idx = "-" if n.index is None else str(n.index)
            line = f"{rank:>4}  {idx:>5}  {n.name[:32]:<32}  {n.op_type[:18]:<18}  {n.time_ms:>9.4f}  {n.share:>6.1%}  {format_bytes(n.bytes):>9}"
            if self.opt_level != OptLevel.NONE:
                line += "  " + origin_text(n.origin, 4)
            lines.append(line)
        if len(shown) < len(self.nodes):
            lines.append(f"... {len(self.nodes) - len(shown)} more (--top 0 lists all)")
        if self.not_timed:
            why: dict[str, int] = {}
            for _, w in self.not_timed:
                why[w] = why.get(w, 0) + 1
            lines.append("not timed: " + "; ".join(f"{c} node(s): {w}" for w, c in why.items()))
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The timed runs as trace events (chrome://tracing, Perfetto): one complete event per node and run.

        Runs are on thread 1; a model with module scopes has a thread per module (named by its path)
        holding its nodes' events, with the module as their category and the source lines in their args.
        """
        by_name = {n.name: n for n in self.nodes}
        t0 = min((e["ts"] for e in self.events), default=0)
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "graph-dap profile"}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": f"onnxruntime ({self.opt_level})"}},
        ]
        threads: dict[str, int] = {}
        for e in self.events:
            n = by_name.get(e["name"])
            cat = "run" if e.get("run_event") else (n.op_type if n else "node")
            args: dict[str, Any] = {"run": e["run"]}
            tid = 1
            if n is not None and not e.get("run_event"):
                args.update({"op_type": n.op_type, "index": n.index, "bytes": n.bytes})
                if n.origin:
                    args["from"] = list(n.origin)
                where = self._source(n)
                if where["module"] is not None:
                    module = where["module"] or "(model)"
                    if module not in threads:
                        threads[module] = len(threads) + 2
                        out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": threads[module], "args": {"name": module}})
                        out.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": threads[module], "args": {"sort_index": threads[module]}})
                    tid, cat = threads[module], module
                    args["module"] = where["module"]
                if where["source"]:
                    args["source"] = [f"{s['path']}:{s['line']}" for s in where["source"]]
            out.append(
                {"name": e["name"], "cat": cat, "ph": "X", "ts": e["ts"] - t0, "dur": e["dur"], "pid": 1, "tid": tid, "args": args}
            )
        return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"tool": "graph-dap", "method": self.method}}

    def write_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        write_text_atomic(path, json.dumps(self.chrome_trace()))


def profile_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    inputs: InputsArg = None,
    *,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    opt_level: str = OptLevel.NONE,
    repeat: int = 3,
    warmup: int = 1,
) -> Profile:
    """Run the model ``warmup + repeat`` times under onnxruntime's profiler; the median time of each node."""
    if repeat < 1 or warmup < 0:
        raise ProfileError(f"repeat must be at least 1 and warmup at least 0, got repeat={repeat}, warmup={warmup}")
    check_opt_level(opt_level)
    graph = model if isinstance(model, Graph) else load_graph(model)
    feeds = resolve_inputs(graph, inputs, dims)
    provs = check_providers(providers)
    with tempfile.TemporaryDirectory(prefix="graph-dap-profile-") as tmp:
        folder = Path(tmp)
        so = session_options(opt_level, graph.weights.data_folder)
        so.enable_profiling = True
        so.profile_file_prefix = str(folder / "ort_profile")
        if opt_level != OptLevel.NONE:
            _save_optimized(so, folder / "optimized.onnx")
        sess = _session(graph, so, provs, folder)
        try:
            for i in range(warmup + repeat):
                sess.run(None, feeds)
                _log_.debug("profile run %d of %d done", i + 1, warmup + repeat)
        except ORT_ERRORS as e:
            raise ProfileError(f"onnxruntime failed running the model: {str(e).splitlines()[0]}") from None
        finally:
            trace_file = sess.end_profiling()
        events = json.loads(Path(trace_file).read_text(encoding="utf-8"))
        fused = None
        if opt_level != OptLevel.NONE:
            fused = derive_fused(graph, onnx.load(str(folder / "optimized.onnx"), load_external_data=False), opt_level)
    return _build_profile(graph, events, repeat, warmup, opt_level, tuple(provs), fused)


def _build_profile(
    graph: Graph,
    events: list[dict[str, Any]],
    repeat: int,
    warmup: int,
    opt_level: str,
    providers: tuple[str, ...],
    fused: FusedGraph | None,
) -> Profile:
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e["ts"])
    if len(runs) < warmup + repeat:
        raise ProfileError(f"onnxruntime's profile holds {len(runs)} runs, expected {warmup + repeat}")
    timed = runs[warmup:]
    kernels = sorted(
        (e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    per_node: dict[str, list[float]] = {}
    info: dict[str, tuple[str, int]] = {}
    trace: list[dict[str, Any]] = []
    k = 0
    for r, run in enumerate(timed):
        start, end = run["ts"], run["ts"] + run["dur"]
        trace.append({"run": r, "name": f"run {r}", "ts": start, "dur": run["dur"], "run_event": True})
        sums: dict[str, float] = {}
        open_until = -1
        while k < len(kernels) and kernels[k]["ts"] < start:
            k += 1
        while k < len(kernels) and kernels[k]["ts"] <= end:
            e = kernels[k]
            k += 1
            if e["ts"] < open_until:  # inside a node already counted: a subgraph's node
                continue
            open_until = e["ts"] + e["dur"]
            name = e["name"][: -len("_kernel_time")]
            args = e.get("args", {})
            sums[name] = sums.get(name, 0.0) + e["dur"] / 1000.0
            try:
                size = int(args.get("output_size", 0))
            except (TypeError, ValueError):
                size = 0
            info[name] = (str(args.get("op_name", "")), size)
            trace.append({"run": r, "name": name, "ts": e["ts"], "dur": e["dur"]})
        for name, ms in sums.items():
            per_node.setdefault(name, []).append(ms)
    medians = {name: statistics.median(v) for name, v in per_node.items()}
    total = sum(medians.values())
    origins = fused.by_name() if fused is not None else {}
    nodes = []
    for name, ms in medians.items():
        op, size = info[name]
        index: int | None = None
        origin: tuple[str, ...] = ()
        if fused is None:
            index = graph.node(name).index if graph.has_node(name) else None
        else:
            f = origins.get(name)
            if f is not None:
                origin, index = f.origin, f.index
        nodes.append(NodeTime(name, op, index, ms, ms / total if total else 0.0, size, len(per_node[name]), origin))
    nodes.sort(key=lambda n: (-n.time_ms, n.name))
    timed_names = set(medians)
    covered = {o for n in nodes for o in n.origin} if fused is not None else timed_names
    not_timed = []
    for n in graph.nodes:
        if n.id in covered:
            continue
        if n.is_constant_op:
            why = "Constant nodes become initializers when onnxruntime loads the model"
        elif fused is not None and n.id in fused.removed:
            why = f"the optimizer (level '{opt_level}') folded or removed them"
        else:
            why = "no kernel event in onnxruntime's profile"
        not_timed.append((n.id, why))
    run_ms = statistics.median(r["dur"] / 1000.0 for r in timed)
    return Profile(
        total, run_ms, repeat, len(runs) - repeat, opt_level, providers, tuple(nodes), tuple(not_timed), fused, tuple(trace),
        sources=graph.sources,
    )
