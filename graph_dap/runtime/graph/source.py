"""Where each node came from in the model's own source: its Python call stack and its module scopes.

``torch.onnx.export(..., dynamo=True)`` writes, per node, ``pkg.torch.onnx.stack_trace`` (a Python
traceback, outermost frame first: ``File ".../model.py", line 25, in forward`` and the source line)
and the module path it ran in (``namespace``: ``: m.Net/h.0: m.Block/h.0.attn: m.Attn/softmax:
aten.softmax.int``, or ``pkg.torch.onnx.name_scopes`` with ``pkg.torch.onnx.class_hierarchy``).
The innermost frames may be torch's own (``torch/nn/modules/linear.py``): the user's frame is the
innermost one outside the torch package. The TorchScript exporter, tf2onnx and paddle2onnx write
none of this: the module path survives only in node names (``/encoder/layer.0/attention/MatMul``,
``model/dense/MatMul``), and gives module scopes without files or lines.

A :class:`SourceMap` is made once per graph (``Graph.sources``, on first use); it parses every
node's metadata, indexes the nodes by the user's lines (for breakpoints on ``model.py:25``) and
groups a line's nodes into its executions (:meth:`SourceMap.executions`): one line of Python run
once makes several consecutive nodes, and a debugger counts it once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graph_dap.paths import is_library, split_path, tail_length

if TYPE_CHECKING:
    from graph_dap.runtime.graph import Graph, Node

TRACE_KEY = "pkg.torch.onnx.stack_trace"
NAMESPACE_KEY = "namespace"
SCOPES_KEY = "pkg.torch.onnx.name_scopes"
CLASSES_KEY = "pkg.torch.onnx.class_hierarchy"

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+?))?\s*$')
_LINE_SPEC = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
_NO_MODULE = "_empty_nn_module_stack"  # torch.export's module for the nodes it makes itself


def base_name(path: str) -> str:
    parts = split_path(path)
    return parts[-1] if parts else path


@dataclass(frozen=True, slots=True)
class SourceFrame:
    """One Python frame of a node's stack: the file as the exporting machine named it, the line, the function.

    ``module`` is the path of the module whose ``forward`` (or code called from it) the frame
    runs in (``blocks.0.attn``; ``''`` the model itself), ``cls`` that module's class when this
    frame is its ``forward`` (``tinymodel.Attention``); both None/'' when the metadata has none.
    """

    path: str
    line: int
    function: str
    code: str = ""  # the source line as the traceback quotes it
    library: bool = False  # torch's own code: shown, de-emphasized, never the user's line
    module: str | None = None
    cls: str = ""

    @property
    def file_name(self) -> str:
        return base_name(self.path)

    @property
    def qualname(self) -> str:
        """``Attention.forward``: the function, with its class when the frame is a module's ``forward``."""
        return f"{self.cls.rsplit('.', 1)[-1]}.{self.function}" if self.cls else self.function

    @property
    def location(self) -> str:
        """``tinymodel.py:17``."""
        return f"{self.file_name}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        """``{path, line, function}``: how JSON reports name a source line."""
        return {"path": self.path, "line": self.line, "function": self.function}


@dataclass(frozen=True, slots=True)
class ModuleScope:
    """A module a node ran in: its path (``blocks.0.attn``, ``''`` the model itself) and class (``''`` when unknown)."""

    path: str
    cls: str = ""

    @property
    def class_name(self) -> str:
        return self.cls.rsplit(".", 1)[-1] if self.cls else ""

    def text(self) -> str:
        """``blocks.0.attn: Attention``; ``(model): TinyModel`` for the root."""
        name = self.path or "(model)"
        return f"{name}: {self.class_name}" if self.cls else name


@dataclass(frozen=True, slots=True)
class NodeSource:
    """A node's source: its Python frames (innermost first) and its module scopes (outermost first).

    ``derived``: the modules come from the node's name (no frames, no classes).
    """

    frames: tuple[SourceFrame, ...] = ()
    modules: tuple[ModuleScope, ...] = ()
    derived: bool = False

    @property
    def user_frame(self) -> SourceFrame | None:
        """The innermost frame outside torch: the user's own line."""
        return next((f for f in self.frames if not f.library), None)

    @property
    def user_frames(self) -> tuple[SourceFrame, ...]:
        return tuple(f for f in self.frames if not f.library)

    @property
    def module(self) -> ModuleScope | None:
        """The innermost module scope."""
        return self.modules[-1] if self.modules else None

    @property
    def module_path(self) -> str | None:
        m = self.module
        return None if m is None else m.path


def parse_stack_trace(text: str) -> list[SourceFrame]:
    """The frames of a traceback as torch.onnx writes it, outermost first, each with its quoted source line."""
    frames: list[SourceFrame] = []
    pending: dict[str, Any] | None = None
    code = ""
    for raw in text.splitlines():
        m = _FRAME.match(raw)
        if m:
            if pending is not None:
                frames.append(SourceFrame(**pending, code=code))
            path = m.group("path")
            pending = {"path": path, "line": int(m.group("line")), "function": (m.group("function") or "").strip(), "library": is_library(path)}
            code = ""
        elif pending is not None and not code and raw.strip():
            code = raw.strip()
    if pending is not None:
        frames.append(SourceFrame(**pending, code=code))
    return frames


def _literal_list(text: str) -> list[str]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def metadata_modules(metadata: dict[str, str]) -> list[ModuleScope]:
    """The modules a node ran in, outermost first, from ``namespace`` (or name scopes and classes); the op itself left out."""
    namespace = metadata.get(NAMESPACE_KEY, "")
    entries: list[tuple[str, str]] = []
    if namespace:
        for part in namespace.split("/"):
            name, _, cls = part.partition(":")
            entries.append((name.strip(), cls.strip()))
    else:
        names = _literal_list(metadata.get(SCOPES_KEY, ""))
        classes = _literal_list(metadata.get(CLASSES_KEY, ""))
        if len(classes) != len(names):
            classes = [""] * len(names)
        entries = list(zip(names, classes))
    # the last entry is the node's own op; torch.export's placeholder for nodes it made itself (runtime asserts on
    # symbolic sizes) is no module of the model
    return [ModuleScope(name, cls) for name, cls in entries[:-1] if not name.startswith(_NO_MODULE)]


def name_modules(name: str) -> list[ModuleScope]:
    """Module scopes from a node name: ``/encoder/layer.0/MatMul`` -> ``encoder``, ``encoder.layer.0``; ``model/dense/MatMul`` -> ``model``, ``model/dense``."""
    if "/" not in name:
        return []
    torch_style = name.startswith("/")
    parts = [p for p in name.split("/") if p][:-1]
    sep = "." if torch_style else "/"
    return [ModuleScope(sep.join(parts[: k + 1])) for k in range(len(parts))]


def _defined_in(frame: SourceFrame, cls: str) -> bool:
    """Whether ``frame``'s file is where class ``cls`` (``pkg.mod.Class``) is defined."""
    module = cls.rsplit(".", 1)[0] if "." in cls else ""
    if not module:
        return False
    if module == "__main__":
        return True
    want = module.split(".")
    parts = split_path(frame.path)
    if not parts:
        return False
    stem = parts[-1].rsplit(".", 1)[0]
    have = parts[:-1] + ([] if stem == "__init__" else [stem])
    return have[-len(want) :] == want


def _aligned(frames_outer: list[SourceFrame], modules: list[ModuleScope]) -> list[SourceFrame]:
    """Each frame with the module it runs in: a ``forward`` defined where the next module's class is, is that module's."""
    out: list[SourceFrame] = []
    current: ModuleScope | None = None
    j = 0
    for f in frames_outer:
        cls = ""
        if f.function == "forward":
            hit = next((k for k in range(j, len(modules)) if _defined_in(f, modules[k].cls)), None)
            if hit is not None:
                current, j, cls = modules[hit], hit + 1, modules[hit].cls
        module = current.path if current is not None else None
        out.append(SourceFrame(f.path, f.line, f.function, f.code, f.library, module, cls))
    return out


def node_source(node: Node) -> NodeSource | None:
    """What a node's metadata (or name) says of its source; None when nothing."""
    md = node.metadata
    modules = metadata_modules(md) if (NAMESPACE_KEY in md or SCOPES_KEY in md) else []
    trace = md.get(TRACE_KEY, "")
    frames = parse_stack_trace(trace) if trace else []
    if frames:
        return NodeSource(tuple(reversed(_aligned(frames, modules))), tuple(modules))
    if modules:
        return NodeSource((), tuple(modules))
    derived = name_modules(node.name)
    return NodeSource((), tuple(derived), derived=True) if derived else None


@dataclass(frozen=True, slots=True)
class LineSpec:
    """A breakpoint on a source line: ``model.py:25`` (a path, or the tail of one) and the line."""

    file: str
    line: int


def parse_line_spec(text: str) -> LineSpec | None:
    """``FILE:LINE`` as a line spec; None when ``text`` is not of that form."""
    m = _LINE_SPEC.match(text.strip())
    if not m or not m.group("file").strip():
        return None
    return LineSpec(m.group("file").strip(), int(m.group("line")))


@dataclass(slots=True)
class _Run:
    key: tuple[Any, ...]
    callee: str | None
    nodes: list[Node]


def _outer(source: NodeSource) -> tuple[SourceFrame, ...]:
    return tuple(reversed(source.frames))


def _line_depth(outer: Sequence[SourceFrame], path: str, line: int, user_only: bool) -> int | None:
    """Where (outermost first) a stack has ``path:line``; None when it has not."""
    return next(
        (k for k, f in enumerate(outer) if f.line == line and f.path == path and not (user_only and f.library)),
        None,
    )


def _execution(outer: Sequence[SourceFrame], k: int) -> tuple[tuple[Any, ...], str | None]:
    """What tells one execution of the line at ``outer[k]`` from another: the frames down to it, and the module it calls."""
    key = tuple((f.path, f.line, f.function, f.module) for f in outer[: k + 1])
    callee = None
    if k + 1 < len(outer) and outer[k + 1].module != outer[k].module:
        callee = outer[k + 1].module
    return key, callee


class SourceMap:
    """Every node's source, and the index from the user's lines to nodes."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._of: dict[str, NodeSource] = {}
        self._lines: dict[tuple[str, int], list[Node]] = {}
        self._runs: dict[tuple[Any, str, int], dict[str, list[Node]]] = {}  # (scope, file, line) -> node id -> its execution
        files: dict[str, None] = {}
        for node in graph.all_nodes():
            source = node_source(node)
            if source is None:
                continue
            self._of[node.id] = source
            seen: set[tuple[str, int]] = set()
            for f in source.user_frames:
                files.setdefault(f.path)
                if (f.path, f.line) not in seen:
                    seen.add((f.path, f.line))
                    self._lines.setdefault((f.path, f.line), []).append(node)
        self.files: tuple[str, ...] = tuple(files)  # the user's files, as the stack traces name them

    def of(self, node: Node | str) -> NodeSource | None:
        """A node's source, or None when its model says nothing of it."""
        return self._of.get(node if isinstance(node, str) else node.id)

    @property
    def has_frames(self) -> bool:
        """Whether any node carries a Python stack trace."""
        return bool(self.files)

    def match_files(self, text: str) -> list[str]:
        """The user's files that ``text`` names: the same path, else those that end with it component-wise."""
        if text in self.files:
            return [text]
        want = len(split_path(text))
        return [f for f in self.files if want and tail_length(f, text) == want]

    def nodes_at(self, path: str, line: int) -> list[Node]:
        """The nodes whose stack has ``path:line`` in a frame of the user's own code, in the order of ``Graph.all_nodes``."""
        return list(self._lines.get((path, line), ()))

    def lines_of(self, path: str) -> list[int]:
        """The lines of ``path`` that made nodes, in order."""
        return sorted(line for p, line in self._lines if p == path)

    def executions(self, path: str, line: int, sequence: Iterable[Node], user_only: bool = True) -> list[list[Node]]:
        """The runs of ``sequence`` (one scope's nodes in run order) that one execution of ``path:line`` made.

        A run is consecutive nodes whose stacks are the same down to that line and that call the
        same module from it (a loop over layers runs the line once per layer); nodes without a
        stack neither start nor end a run, a node from another line ends it.
        """
        runs: list[list[Node]] = []
        current: _Run | None = None
        for node in sequence:
            source = self._of.get(node.id)
            if source is None or not source.frames:
                continue
            outer = _outer(source)
            k = _line_depth(outer, path, line, user_only)
            if k is None:
                current = None
                continue
            key, callee = _execution(outer, k)
            if current is not None and current.key == key and (current.callee is None or callee is None or current.callee == callee):
                current.nodes.append(node)
                current.callee = current.callee or callee
                continue
            current = _Run(key, callee, [node])
            runs.append(current.nodes)
        return runs

    def produced(self, node: Node, depth: int) -> list[Node]:
        """The nodes that the execution of the line at frame ``depth`` (0: innermost) of ``node``'s stack made, ``node`` among them.

        Without frames, ``depth`` counts module scopes (0: the innermost): the run of nodes around
        ``node`` inside that module.
        """
        source = self._of.get(node.id)
        if source is None:
            return [node]
        scope = self.graph.scope_of(node)
        sequence = scope.nodes
        if source.frames:
            if not 0 <= depth < len(source.frames):
                return [node]
            f = source.frames[depth]
            key = (scope.path, f.path, f.line)
            if key not in self._runs:  # (a stop shows every frame's: each a pass over the scope, 0.3 s for a 2,166-node model)
                self._runs[key] = {n.id: run for run in self.executions(f.path, f.line, sequence, user_only=False) for n in run}
            return self._runs[key].get(node.id, [node])
        modules = source.modules
        if not 0 <= depth < len(modules):
            return [node]
        want = modules[len(modules) - 1 - depth].path
        pos = next(i for i, n in enumerate(sequence) if n.id == node.id)

        def inside(n: Node) -> bool | None:
            s = self._of.get(n.id)
            if s is None or not s.modules:
                return None  # says nothing: neither in nor out
            return any(m.path == want for m in s.modules)

        lo = hi = pos
        for step, bound in ((-1, -1), (1, len(sequence))):
            i = pos + step
            while i != bound:
                got = inside(sequence[i])
                if got is False:
                    break
                if got:
                    lo, hi = min(lo, i), max(hi, i)
                i += step
        return [n for n in sequence[lo : hi + 1] if inside(n) is not False]


def user_lines(sources: SourceMap, node_ids: Iterable[str]) -> list[SourceFrame]:
    """The distinct user lines of some nodes (a fused node's originals), in order of first appearance."""
    out: dict[tuple[str, int], SourceFrame] = {}
    for nid in node_ids:
        s = sources.of(nid)
        f = s.user_frame if s is not None else None
        if f is not None:
            out.setdefault((f.path, f.line), f)
    return list(out.values())


def shared_module(sources: SourceMap, node_ids: Iterable[str]) -> str | None:
    """The innermost module that all of some nodes ran in (for a fused node: its originals'); None when unknown."""
    common: list[str] | None = None
    for nid in node_ids:
        s = sources.of(nid)
        if s is None or not s.modules:
            continue
        paths = [m.path for m in s.modules]
        if common is None:
            common = paths
        else:
            k = 0
            while k < min(len(common), len(paths)) and common[k] == paths[k]:
                k += 1
            common = common[:k]
    return common[-1] if common else None


def source_fields(sources: SourceMap, node_ids: Iterable[str]) -> dict[str, Any]:
    """``{"source": [{path, line, function}], "module": path}`` of some nodes, as JSON reports carry them."""
    ids = list(node_ids)
    return {"source": [f.to_dict() for f in user_lines(sources, ids)], "module": shared_module(sources, ids)}
