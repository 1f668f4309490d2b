"""Infinities, NaNs and huge numbers a model makes on purpose: attention masks, and the Softmax of a row they mask whole.

Exported transformers mask attention with a constant: ``-inf``, or ``finfo(float32).min``
(``-3.4e38``), put in place by a ``Where`` (``Where(mask, 0, -inf)``), added to the scores
(``scores + mask``), or multiplied in (``(1 - mask) * finfo.min``). Such values are read from how
the graph is built, not from names (an exporter names them ``val_196``): a value that a constant
of magnitude ``2**100`` or more (or an infinite one) reaches through nodes that carry their
inputs' values (``Where``'s data inputs, ``Add``, ``Expand``, ``Reshape``, ``Cast``...) is *large*;
reached from an infinite constant, its Inf is *intended*. A ``Softmax`` of a value whose Inf is
intended makes NaN on purpose, on a row that the mask covers whole (a padded position): its NaN is
intended too (the export's own ``Where(IsNaN(p), 0, p)`` after it says so).

The watch (see :mod:`.watch`) sums a large value scaled down (:data:`SCALE`), so that a sum of
``finfo.min`` entries does not overflow into an Inf that no entry holds (which made every watched
run check the tensor exactly); it leaves an intended Inf or NaN alone, and a stop names what it
left alone and why (:meth:`.faults.FaultFilter.excluded`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from graph_dap.kinds import Fault
from graph_dap.runtime.graph import Graph, Node

#: A constant at least this large in magnitude makes a value large (``finfo(float32).min`` is about ``-2**128``).
LARGE = 2.0**100
#: What a large value is multiplied by before it is summed: ``2**31`` entries of ``FLT_MAX`` then sum below ``FLT_MAX``.
SCALE = 2.0**-40
# Elements of a constant looked at: a mask's constant is a number, or a precomputed causal mask (T x T). A weight is
# not read (a model's weights, read to look for masks, would all become pages of this process).
_MAX_CONSTANT = 1 << 16

# The input positions whose values a node's output carries (None: all of them).
_CARRIES: dict[str, tuple[int, ...] | None] = {
    "Where": (1, 2),
    "Add": None,
    "Sub": None,
    "Sum": None,
    "Mul": None,
    "Max": None,
    "Min": None,
    "Concat": None,
    "Neg": (0,),
    "Abs": (0,),
    "Expand": (0,),
    "Tile": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Transpose": (0,),
    "Slice": (0,),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "Identity": (0,),
    "Cast": (0,),
    "CastLike": (0,),
    "Pad": (0, 2),
    "Trilu": (0,),
    "Dropout": (0,),
    "ConstantOfShape": (),  # (its value attribute: see _attribute_constant)
}
_SOFTMAX = frozenset({"Softmax", "LogSoftmax"})


@dataclass(frozen=True, slots=True)
class Intent:
    """What a model makes on purpose. ``large``: values holding numbers near the end of the float range (or infinite)
    by construction; ``inf``/``nan``: ids of the nodes whose Inf (NaN) is intended; ``why``: (node id, kind, reason)."""

    large: frozenset[str] = frozenset()
    inf: frozenset[str] = frozenset()
    nan: frozenset[str] = frozenset()
    why: tuple[tuple[str, Fault, str], ...] = ()


NO_INTENT = Intent()


def _constant(value: np.ndarray) -> tuple[bool, bool]:
    """(large, infinite) of a float constant that is a mask's: one number, or zeros and one large number (a causal
    mask's ``0`` and ``-inf``). A weight that holds an Inf among other numbers is a fault, not a mask."""
    if value.dtype.kind != "f" or value.size == 0 or value.size > _MAX_CONSTANT:
        return False, False
    with np.errstate(all="ignore"):
        if (np.abs(value) < LARGE).all():  # (a weight: one pass, no sort)
            return False, False
    distinct = np.unique(value.astype(np.float64).reshape(-1))
    with np.errstate(all="ignore"):
        large = distinct[~(np.abs(distinct) < LARGE)]  # (NaN is neither)
    if large.size != 1 or np.isnan(large[0]) or (distinct.size > 1 and not (distinct.size == 2 and 0.0 in distinct)):
        return False, False
    return True, bool(np.isinf(large[0]))


def _attribute_constant(node: Node) -> np.ndarray | None:
    for a in node.proto.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return numpy_helper.to_array(a.t)
        if a.name == "value_float":
            return np.asarray(a.f, np.float32)
        if a.name == "value_floats":
            return np.asarray(list(a.floats), np.float32)
    return None


def _sources(graph: Graph) -> dict[str, tuple[bool, str]]:
    """Large constants by name: (infinite, how it reads in a reason)."""
    out: dict[str, tuple[bool, str]] = {}
    weights = graph.weights
    for scope in graph.scopes.values():
        for t in scope.initializers:
            if t.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16):
                continue
            if int(np.prod(t.dims)) > _MAX_CONSTANT:
                continue  # (before anything reads it)
            big, infinite = _constant(np.asarray(weights.array(t), dtype=np.float64) if t.data_type == onnx.TensorProto.BFLOAT16 else weights.array(t))
            if big:
                out[t.name] = (infinite, _constant_text(t.name, weights.array(t), infinite))
    for node in graph.all_nodes():
        if node.op_type in ("Constant", "ConstantOfShape") and node.domain in ("", "ai.onnx") and node.outputs:
            value = _attribute_constant(node)
            if value is not None:
                big, infinite = _constant(value)
                if big:
                    out[node.outputs[0]] = (infinite, _constant_text(node.outputs[0], value, infinite))
    return out


def _constant_text(name: str, value: np.ndarray, infinite: bool) -> str:
    flat = np.asarray(value, np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        pick = flat[np.isinf(flat)][0] if infinite else flat[np.argmax(np.abs(np.where(np.isfinite(flat), flat, 0)))]
    return f"the constant '{name}' ({'-inf' if pick < 0 and infinite else 'inf' if infinite else f'{pick:.4g}'})"


def intended(graph: Graph) -> Intent:
    """What ``graph`` makes on purpose (see the module): its large values, and its intended Inf and NaN."""
    sources = _sources(graph)
    if not sources:
        return NO_INTENT
    large: dict[str, tuple[bool, str]] = dict(sources)  # value -> (infinite, where it comes from)
    inf: set[str] = set()
    nan: set[str] = set()
    why: list[tuple[str, Fault, str]] = []
    for node in graph.all_nodes():
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in _SOFTMAX and node.inputs and large.get(node.inputs[0], (False, ""))[0]:
            nan.add(node.id)
            why.append((node.id, Fault.NAN, f"a {node.op_type} of '{node.inputs[0]}', an attention mask: a row it masks whole "
                        f"(a padded position) makes NaN on purpose; the mask comes from {large[node.inputs[0]][1]}"))
            continue
        positions = _CARRIES.get(node.op_type)
        if node.op_type not in _CARRIES or node.op_type == "ConstantOfShape":
            continue
        data = [i for k, i in enumerate(node.inputs) if i and (positions is None or k in positions)]
        reached = [large[i] for i in data if i in large]
        if not reached:
            continue
        infinite = any(r[0] for r in reached)
        origin = next((r[1] for r in reached if r[0] == infinite), reached[0][1])
        for o in node.outputs[:1]:
            if o:
                large[o] = (infinite, origin)
        if infinite:
            inf.add(node.id)
            why.append((node.id, Fault.INF, f"an attention mask: -inf on purpose, from {origin}"))
    return Intent(frozenset(v for v in large if v not in sources), frozenset(inf), frozenset(nan), tuple(why))


def summary(intent: Intent, kinds: Iterable[Fault] = (Fault.INF, Fault.NAN)) -> str:
    """``the Inf of 3 nodes (a, b, c): an attention mask...; the NaN of 2 nodes (...): ...``: what ``intent`` leaves
    alone of ``kinds``, in a line."""
    wanted = set(kinds)
    parts = []
    for kind, label in ((Fault.INF, "Inf"), (Fault.NAN, "NaN")):
        items = [(n, w) for n, k, w in intent.why if k is kind and kind in wanted]
        if items:
            parts.append(f"the {label} of {len(items)} node{'s' if len(items) != 1 else ''} ({', '.join(n for n, _ in items[:3])}"
                         f"{' ...' if len(items) > 3 else ''}): {items[0][1]}")
    return "; ".join(parts)
