"""What the worker sends of runtime objects: plain dicts of summaries, nodes and stops.

Tensors never cross the boundary whole: a value becomes its summary line, type and
statistics (:func:`summary_wire`); the graph its nodes with attributes as text
(:func:`graph_wire`); a stop the ids of its nodes (:func:`stop_wire`). The adapter
reads them back with :mod:`graph_dap.worker.client`'s ``from_wire`` methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_dap.runtime import expr
from graph_dap.runtime.session import DebugSession, Stop
from graph_dap.runtime.tensor import summarize

if TYPE_CHECKING:
    from graph_dap.runtime.graph import Graph, ValueInfo
    from graph_dap.runtime.listing import Listing
    from graph_dap.runtime.tools.lockstep import Divergence

_ONNX_TYPES = {"float32": "float", "float64": "double"}
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


def tensor_type(dtype: str, kind: str = "tensor") -> str:
    """ONNX's spelling of a value's type: ``tensor(float)``, ``seq(tensor(int64))``."""
    inner = f"tensor({_ONNX_TYPES.get(dtype, dtype)})"
    return f"seq({inner})" if kind == "sequence" else inner


def number_text(x: Any, hex_: bool = False) -> str:
    """One element as text: integers plainly (or in hex), floats with their dtype's digits."""
    if isinstance(x, np.bool_ | bool):
        return str(bool(x))
    if isinstance(x, np.integer | int):
        return hex(int(x)) if hex_ else str(int(x))
    if isinstance(x, np.floating):
        if x.dtype.itemsize <= 4:
            return f"{float(x):.7g}"
        return repr(float(x))
    if isinstance(x, np.complexfloating):
        return str(complex(x))
    if isinstance(x, bytes):
        return repr(x.decode("utf-8", "replace"))
    return repr(x) if isinstance(x, str) else str(x)


def _stat(v: float | None) -> str:
    return "?" if v is None else f"{v:.7g}"


def summary_wire(name: str, value: Any, stale: bool = False, hex_: bool = False) -> dict[str, Any]:
    """What the adapter shows of one value: its line, type and statistics."""
    s = summarize(value)
    wire: dict[str, Any] = {
        "name": name,
        "text": s.text(),
        "type": tensor_type(s.dtype, s.kind),
        "dtype": s.dtype,
        "shape": list(s.shape),
        "size": s.size,
        "stale": stale,
        "kind": s.kind,
    }
    if s.kind == "tensor":
        shape = "[" + ",".join(map(str, s.shape)) + "]"
        stats = [("shape", shape), ("dtype", s.dtype)]
        if s.min is not None:
            stats += [("min", _stat(s.min)), ("max", _stat(s.max)), ("mean", _stat(s.mean)), ("std", _stat(s.std))]
        stats += [("nan", str(s.nan)), ("+inf", str(s.posinf)), ("-inf", str(s.neginf)), ("zeros", str(s.zeros))]
        wire["stats"] = stats
        if s.size == 1:
            wire["scalar"] = number_text(np.asarray(value).reshape(-1)[0], hex_)
    return wire


def missing_wire(name: str, info: ValueInfo, producer_label: str | None) -> dict[str, Any]:
    """What the adapter shows of a value not computed yet: its declared type, and which node will compute it."""
    why = f"not computed yet ({producer_label} has not run)" if producer_label else "not computed yet"
    return {
        "name": name,
        "text": f"{info.type_text()} {why}" if info.dtype else why,
        "type": tensor_type(info.dtype or "?", info.kind),
        "dtype": info.dtype or "?",
        "shape": [],
        "size": 0,
        "available": False,
    }


def _attribute_text(v: Any) -> str:
    text = str(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= _MAX_ATTRIBUTE_TEXT else text[: _MAX_ATTRIBUTE_TEXT - 3] + "..."


def graph_wire(graph: Graph, model_path: str, listing: Listing, listing_path: str | None, skip_constants: bool) -> dict[str, Any]:
    """The loaded model as ``GraphInfo.from_wire`` reads it: nodes in run order, value names, the listing."""
    statics = {n.id for n in graph.nodes if n.is_static and skip_constants}
    nodes = [
        {
            "id": n.id,
            "index": n.index,
            "op_type": n.op_type,
            "domain": n.domain,
            "inputs": list(n.all_inputs),
            "outputs": [o for o in n.outputs if o],
            "attributes": [(k, _attribute_text(v)) for k, v in n.attributes.items()],
            "line": listing.line_of(n.id) or 0,
            "has_subgraphs": n.has_subgraphs,
            "static": n.id in statics,
        }
        for n in graph.nodes
    ]
    return {
        "name": graph.name,
        "model_path": model_path,
        "nodes": nodes,
        "inputs": list(graph.input_names),
        "outputs": list(graph.output_names),
        "initializers": list(graph.initializer_names),
        "listing": listing.text,
        "listing_path": listing_path,
        "value_names": graph.value_names(),
        "functions": list(expr.FUNCTIONS),
    }


def stop_wire(session: DebugSession, stop: Stop | Divergence, extra_details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A stop as ``StopInfo.from_wire`` reads it; a :class:`Divergence` is a ``mismatch`` stop."""
    where = {
        "pc": session.pc.id if session.pc else None,
        "last_node": session.last_node.id if session.last_node else None,
    }
    if not isinstance(stop, Stop):  # a divergence from the reference
        return {
            "reason": "mismatch",
            "node": stop.node.id,
            **where,
            "tensor": stop.value,
            "message": stop.message,
            "details": stop.details(),
            "breakpoint_ids": [],
        }
    return {
        "reason": stop.reason.value,
        "node": stop.node.id if stop.node else None,
        **where,
        "tensor": stop.tensor,
        "message": stop.message,
        "details": {**stop.details, **(extra_details or {})},
        "breakpoint_ids": list(stop.breakpoint_ids),
    }
