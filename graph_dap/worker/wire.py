"""What the worker sends of runtime objects: the protocol's dataclasses, made from the runtime's.

Tensors never cross the boundary whole: a value becomes its summary line, type and
statistics (:func:`summary`); the graph its nodes with attributes as text
(:func:`graph_info`); a stop its ``Stop.to_dict()`` with the position (:func:`stop_info`).
The messages themselves are defined in :mod:`graph_dap.worker.protocol`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_dap.kinds import SourceKind, ValueKind
from graph_dap.runtime import expr
from graph_dap.runtime.dtypes import EXTRA, is_extra, is_integer
from graph_dap.runtime.selection import layer_of, module_paths
from graph_dap.runtime.session import DebugSession, Stop
from graph_dap.runtime.tensor import TensorSummary, element_type, format_bytes, summarize
from graph_dap.worker import protocol as p

if TYPE_CHECKING:
    from graph_dap.runtime.graph import Graph, Node, ValueInfo
    from graph_dap.runtime.listing import Listing

_ONNX_TYPES = {
    "float32": "float",
    "float64": "double",
    **{name: name.replace("_", "") for name in EXTRA if name.startswith("float8")},  # float8e4m3fn...
}
_MAX_ATTRIBUTE_TEXT = 200


def plain(o: Any) -> Any:
    """msgpack's fallback: numpy scalars and arrays, sets, paths as plain data."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def tensor_type(dtype: str, kind: ValueKind = ValueKind.TENSOR) -> str:
    """ONNX's spelling of a value's type: ``tensor(float)``, ``seq(tensor(int64))``, ``seq(map(int64,tensor(float)))``."""
    if kind == ValueKind.SEQUENCE:
        return f"seq({_element_type(dtype)})"
    return _element_type(dtype)


def _element_type(text: str) -> str:
    """``float32`` -> ``tensor(float)``; ``map(int64,float32)`` -> ``map(int64,tensor(float))``; ``seq(...)`` likewise."""
    if text.startswith("map(") and text.endswith(")"):
        key, _, item = text[4:-1].partition(",")
        return f"map({key},{_element_type(item)})"
    if text.startswith("seq(") and text.endswith(")"):
        return f"seq({_element_type(text[4:-1])})"
    return f"tensor({_ONNX_TYPES.get(text, text)})"


def number_text(x: Any, hex_: bool = False) -> str:
    """One element as text: integers plainly (or in hex), floats with their dtype's digits."""
    if isinstance(x, np.bool_ | bool):
        return str(bool(x))
    if isinstance(x, np.integer | int) or (isinstance(x, np.generic) and is_extra(x.dtype) and is_integer(x.dtype)):
        return hex(int(x)) if hex_ else str(int(x))
    if isinstance(x, np.generic) and is_extra(x.dtype):  # bfloat16, float8: exact as float32
        return f"{float(x):.7g}"
    if isinstance(x, np.floating):
        if x.dtype.itemsize <= 4:
            return f"{float(x):.7g}"
        return repr(float(x))
    if isinstance(x, float):  # a map's item: onnxruntime gives ZipMap's float32 numbers as Python floats
        return f"{x:.7g}"
    if isinstance(x, np.complexfloating):
        return str(complex(x))
    if isinstance(x, bytes):
        return repr(x.decode("utf-8", "replace"))
    return repr(x) if isinstance(x, str) else str(x)


def _stat(v: float | None) -> str:
    return "?" if v is None else f"{v:.7g}"


def summary(name: str, value: Any, stale: bool = False, hex_: bool = False, note: str = "", known: TensorSummary | None = None) -> p.Summary:
    """What the adapter shows of one value: its line, type and statistics (``known``: its summary, made already)."""
    s = known if known is not None else summarize(value)
    stats: tuple[tuple[str, str], ...] = ()
    scalar = None
    if s.kind == ValueKind.TENSOR:
        shape = "[" + ",".join(map(str, s.shape)) + "]"
        listed = [("shape", shape), ("dtype", s.dtype)]
        if s.min is not None:
            listed += [("min", _stat(s.min)), ("max", _stat(s.max)), ("mean", _stat(s.mean)), ("std", _stat(s.std))]
        listed += [("nan", str(s.nan)), ("+inf", str(s.posinf)), ("-inf", str(s.neginf)), ("zeros", str(s.zeros))]
        stats = tuple(listed)
        if s.size == 1:
            scalar = number_text(np.asarray(value).reshape(-1)[0], hex_)
    return p.Summary(
        name=name,
        text=s.text(),
        type=tensor_type(s.dtype, s.kind),
        dtype=s.dtype,
        shape=tuple(int(n) for n in s.shape),
        size=int(s.size),
        stats=stats,
        stale=stale,
        kind=s.kind,
        scalar=scalar,
        note=note,
    )


def pending(name: str, value: np.ndarray, stale: bool = False, note: str = "") -> p.Summary:
    """What the adapter shows at once of a weight whose statistics are still being computed: what costs nothing to
    know (its type, shape and bytes), nothing read from its data."""
    dtype = element_type(value)
    shape = "[" + ",".join(map(str, value.shape)) + "]"
    size = format_bytes(int(value.nbytes))
    return p.Summary(
        name=name,
        text=f"{dtype}{shape} {size}, statistics being computed",
        type=tensor_type(dtype, ValueKind.TENSOR),
        dtype=dtype,
        shape=tuple(int(n) for n in value.shape),
        size=int(value.size),
        stats=(("shape", shape), ("dtype", dtype), ("bytes", size)),
        stale=stale,
        note=note,
        pending=True,
    )


def computing(name: str, info: ValueInfo) -> p.Summary:
    """What the adapter shows at once of a value the run did not keep, to be recomputed once no call waits: its
    declared type."""
    return p.Summary(
        name=name,
        text=f"{info.type_text()} being computed",
        type=tensor_type(info.dtype or "?", info.kind),
        dtype=info.dtype or "?",
        shape=(),
        size=0,
        pending=True,
    )


def missing(name: str, info: ValueInfo, producer_label: str | None) -> p.Summary:
    """What the adapter shows of a value not computed yet: its declared type, and which node will compute it."""
    why = f"not computed yet ({producer_label} has not run)" if producer_label else "not computed yet"
    return p.Summary(
        name=name,
        text=f"{info.type_text()} {why}" if info.dtype else why,
        type=tensor_type(info.dtype or "?", info.kind),
        dtype=info.dtype or "?",
        shape=(),
        size=0,
        available=False,
    )


def _attribute_text(v: Any) -> str:
    text = str(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= _MAX_ATTRIBUTE_TEXT else text[: _MAX_ATTRIBUTE_TEXT - 3] + "..."


def graph_info(graph: Graph, model_path: str, listing: Listing, listing_path: str | None, skip_constants: bool) -> p.GraphInfo:
    """The loaded model: its nodes (every scope's: the main graph's in run order, each followed by its bodies'), value names, the listing."""
    nodes = tuple(
        p.NodeInfo(
            id=n.id,
            index=n.index,
            op_type=n.op_type,
            domain=n.domain,
            inputs=tuple(n.all_inputs),
            outputs=tuple(o for o in n.outputs if o),
            attributes=tuple((k, _attribute_text(v)) for k, v in n.attributes.items()),
            line=listing.line_of(n.id) or 0,
            has_subgraphs=n.has_subgraphs,
            constant=n.is_constant and skip_constants,
            name=n.name,
            path=tuple(p.PathStep(s.node, s.attribute) for s in n.path),
            enterable=n.enterable,
            modules=module_paths(graph, n),
        )
        for n in graph.all_nodes()
    )
    return p.GraphInfo(
        name=graph.name,
        model_path=model_path,
        nodes=nodes,
        inputs=tuple(graph.input_names),
        outputs=tuple(graph.output_names),
        initializers=tuple(graph.initializer_names),
        listing=listing.text,
        listing_path=listing_path,
        value_names=tuple(graph.value_names()),
        functions=tuple(expr.FUNCTIONS),
        source_files=graph.sources.files,
    )


def frame_name(qualname: str, module: str | None) -> str:
    """A Python frame's name, with its module when that is one of repeated blocks (``LlamaMLP.forward  [model.layers.8.mlp]``):
    a line that runs once per layer shows which layer it runs in."""
    return f"{qualname}  [{module}]" if module and layer_of([module]) is not None else qualname


def node_source(graph: Graph, node: Node) -> p.NodeSourceInfo:
    """A node's Python frames (innermost first) with the nodes each line made; without them, its module scopes."""
    sources = graph.sources
    source = sources.of(node)
    if source is None:
        return p.NodeSourceInfo(node.id, SourceKind.NONE)
    if source.frames:
        frames = tuple(
            p.SourceFrameInfo(
                name=frame_name(f.qualname, f.module),
                path=f.path,
                line=f.line,
                function=f.function,
                code=f.code,
                library=f.library,
                module=f.module,
                cls=f.cls,
                produced=tuple(n.id for n in sources.produced(node, depth)),
            )
            for depth, f in enumerate(source.frames)
        )
        return p.NodeSourceInfo(node.id, SourceKind.PYTHON, frames)
    modules = [m for m in reversed(source.modules) if m.path]
    frames = tuple(
        p.SourceFrameInfo(name=m.text(), module=m.path, cls=m.cls, produced=tuple(n.id for n in sources.produced(node, depth)))
        for depth, m in enumerate(modules)
    )
    return p.NodeSourceInfo(node.id, SourceKind.MODULE if frames else SourceKind.NONE, frames)


def stop_info(session: DebugSession, stop: Stop, repeat: p.Repeat | None = None, comparison: tuple[str, ...] = ()) -> p.StopInfo:
    """A stop with the position and the levels of the program counter; at the end, the iterations' timings, the comparison,
    and whether every continue ran at the optimization level asked (``details.opt_level``).

    Its fields are ``Stop.to_dict``'s (the CLI's ``run --json``), ``node`` as ``node_ref`` names it.
    """
    path = tuple(p.PathStep(s.node, s.attribute, s.iteration) for s in stop.path) if stop.node is not None else ()
    node = stop.node
    details = {**stop.details, "opt_level": session.executor.level_report()} if stop.completed else stop.details
    return p.StopInfo(
        reason=stop.reason,
        node=None if node is None else p.NodeRef(node.id, node.name, node.op_type, node.index, path),
        current=session.current.id if session.current else None,
        last_node=session.last_node.id if session.last_node else None,
        value=stop.value,
        message=stop.message,
        details=details,
        breakpoint_ids=tuple(stop.breakpoint_ids),
        repeat=repeat,
        comparison=comparison,
        path=path,
        frames=tuple(frames(session)),
    )


def frames(session: DebugSession) -> list[p.FrameInfo]:
    """The levels of the program counter, innermost first: where it is, then each control-flow node it is inside."""
    stack = session.frames
    out: list[p.FrameInfo] = []
    for level in range(len(stack)):
        frame = stack[len(stack) - 1 - level]
        last = frame.timeline.last
        if level == 0:
            nxt = frame.timeline.next_node
            name = nxt.label if nxt is not None else "end of the graph"
            out.append(p.FrameInfo(0, nxt.id if nxt is not None else None, name, last.id if last else None))
            continue
        inner = stack[len(stack) - level]
        owner = inner.owner
        assert owner is not None
        at = f", iteration {inner.iteration}" if inner.iteration is not None else ""
        out.append(p.FrameInfo(level, owner.id, f"{owner.label} {inner.scope.attribute}{at}", last.id if last else None))
    return out


def tensor_view(body: Mapping[str, Any]) -> p.TensorView:
    """The ``graphDap/tensorView`` body of ``graph_dap.runtime.tools.tensor_view`` as the protocol carries it."""
    fields = {("slice_shape" if k == "sliceShape" else k): v for k, v in body.items()}
    return p.decode(p.TensorView, fields, "a tensor view")
