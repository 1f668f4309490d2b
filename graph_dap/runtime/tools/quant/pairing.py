"""Pairing a quantized (or converted) model's tensors with the float model's, by graph structure.

Both models are seen as the float network they compute (:class:`~.view.ModelView`). From the
graph inputs, which both share, each float node is matched with the quantized model's node that
computes the same op on the paired inputs (QLinearConv is a Conv; Q/DQ pairs are transparent),
and their outputs are paired. A float op that the quantized model folded away (a Relu or Clip
folded into its producer's quantized range, a BatchNormalization folded into a Conv) is taken
into the pair of its input: its output is paired with what the quantized model computes there.
Tensors still unpaired are then paired by identical names (re-exports, dynamic quantization
keep them), and a user's pairing file settles what neither can. Weights are paired by their
position in matched nodes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from graph_dap.errors import CompareError
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.tools.quant.recompute import with_recomputed
from graph_dap.runtime.tools.quant.view import COMMUTATIVE, CanonicalNode, Form, ModelView, WeightSlot

__all__ = ["How", "Pair", "Pairing", "WeightPair", "pair_models", "read_pairing_file"]


class How(Enum):
    """How a pair was found."""

    INPUT = "input"  # a graph input, shared by name
    STRUCTURE = "structure"  # outputs of matched nodes
    FOLDED = "folded"  # a float op the other model folded away: its output paired with its producer's counterpart
    RECOMPUTED = "recomputed"  # what a quantized op computes before requantizing, recomputed with the float op (see .recompute)
    NAME = "name"  # the same name on both sides, found by nothing else
    FILE = "file"  # the user's pairing file


@dataclass(frozen=True, slots=True)
class Pair:
    """A float tensor and the quantized model's value that stands for it."""

    float_name: str
    quant_name: str  # the value a comparison reads (what consumers read)
    logical: str  # the quantized model's logical tensor (see ModelView)
    how: How
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"float": self.float_name, "quant": self.quant_name, "logical": self.logical, "how": self.how.value, "note": self.note}


@dataclass(frozen=True, slots=True)
class WeightPair:
    """A float weight and where the quantized model keeps it: an input of a quantized op, a DequantizeLinear's
    output, or an initializer of the same name."""

    float_name: str
    quant_name: str  # the quantized model's value (an integer initializer, a DequantizeLinear's output, a float initializer)
    node: CanonicalNode | None  # the quantized model's node that reads it (None: paired by name)
    position: int  # the input of ``node`` that holds it
    slot: WeightSlot | None  # for a quantized op: where its scale and zero point are


class Pairing:
    """The pairs, the weights paired, and why the other tensors were not paired."""

    def __init__(self, float_view: ModelView, quant_view: ModelView, source_graph: Graph | None = None) -> None:
        self.float_view = float_view
        self.quant_view = quant_view
        #: the user's quantized model; ``quant_view.graph`` is a copy with recomputing nodes when it has some (.recompute)
        self.source_graph = source_graph or quant_view.graph
        self.pairs: dict[str, Pair] = {}  # by float tensor
        self.by_logical: dict[str, str] = {}  # quantized logical tensor -> float tensor
        self.matched: dict[str, str] = {}  # float node id -> quantized node id
        self.folded: dict[str, str] = {}  # float tensor -> the float node folded on top of it
        self.weights: list[WeightPair] = []
        self.unpaired_float: dict[str, str] = {}
        self.unpaired_quant: dict[str, str] = {}

    # -- building --------------------------------------------------------------------

    def add(self, float_name: str, logical: str, how: How, note: str = "") -> bool:
        readable = self.quant_view.readable(logical)
        if float_name in self.pairs or logical in self.by_logical or readable is None:
            return False
        self.pairs[float_name] = Pair(float_name, readable, logical, how, note)
        self.by_logical[logical] = float_name
        return True

    def move(self, old: str, new: str, note: str) -> None:
        """Re-pair ``old``'s counterpart with ``new`` (a float op folded on top of ``old``)."""
        pair = self.pairs.pop(old)
        self.pairs[new] = Pair(new, pair.quant_name, pair.logical, How.FOLDED, note)
        self.by_logical[pair.logical] = new

    # -- reading ---------------------------------------------------------------------

    def inner(self, pair: Pair) -> bool:
        """Whether ``pair`` reads a value inside its group that no other group reads: a producer's float output before the
        QuantizeLinear that folds a Relu, or a QOperator op's value before it requantizes, recomputed."""
        return pair.how is How.RECOMPUTED or (pair.how is How.STRUCTURE and pair.quant_name != self.quant_view.readable(pair.logical))

    def folded_outputs(self) -> list[str]:
        """The outputs of the float ops the other model folded away (a Relu, a Clip): each paired with its producer's
        counterpart."""
        graph = self.float_view.graph
        return [graph.node(node_id).outputs[0] for node_id in self.folded.values()]

    def ordered(self) -> list[Pair]:
        """The pairs in the float model's run order (graph inputs first)."""
        graph = self.float_view.graph
        pos = {name: -1 for name in graph.input_names}
        for n in graph.nodes:
            for o in n.outputs:
                if o:
                    pos[o] = n.order
        return sorted(self.pairs.values(), key=lambda p: pos.get(p.float_name, -1))

    def float_activations(self) -> list[str]:
        """The float model's computed tensors (not constants)."""
        return [o for n in self.float_view.graph.nodes if not n.is_constant for o in n.outputs if o]

    def quant_activations(self) -> list[str]:
        """The quantized model's logical tensors that a node computes (not constants, not run-time scales)."""
        v = self.quant_view
        return [r for r in v.members if r not in v.graph.input_names and r not in v.recomputed and v.readable(r) is not None]

    def counts(self) -> dict[str, int]:
        acts = self.float_activations()
        paired = sum(1 for a in acts if a in self.pairs)
        folded = sum(1 for a in acts if a in self.folded and a not in self.pairs)
        quant = self.quant_activations()
        return {
            "float_activations": len(acts),
            "float_paired": paired,
            "float_folded": folded,
            "float_unpaired": len(acts) - paired - folded,
            "quant_activations": len(quant),
            "quant_paired": sum(1 for q in quant if q in self.by_logical),
            "weights_paired": len({w.float_name for w in self.weights} & self._float_weights()),
            "float_weights": len(self._float_weights()),
        }

    def _float_weights(self) -> set[str]:
        """Float constants read by the float model's computing nodes beside their activations (weights, biases, scales);
        not the bounds of a Clip folded into its producer's quantized range (the range holds them)."""
        v = self.float_view
        folded = set(self.folded.values())
        names: set[str] = set()
        for c in v.nodes:
            if c.node.id in folded:
                continue
            for i in c.node.inputs:
                if i and i in v.static and i not in c.acts:
                    value = v.constant(i)
                    if value is not None and value.dtype.kind == "f":
                        names.add(i)
        return names

    def summary(self) -> str:
        c = self.counts()
        share = 100.0 * c["float_paired"] / max(c["float_activations"], 1)
        return (
            f"paired {c['float_paired']} of the float model's {c['float_activations']} computed tensors ({share:.1f}%), "
            f"{c['float_folded']} folded into a neighbour's group, {c['float_unpaired']} unpaired; "
            f"{c['quant_paired']} of the other model's {c['quant_activations']} tensors; "
            f"{c['weights_paired']} of {c['float_weights']} float weights"
        )

    def text(self) -> str:
        """``--show-pairs``: every pair, then every unpaired tensor with why."""
        lines = [f"# {self.summary()}", "# float tensor  <->  quantized value  (how)"]
        for p in self.ordered():
            lines.append(f"{p.float_name}  <->  {p.quant_name}  ({p.how.value}{': ' + p.note if p.note else ''})")
        if self.weights:
            lines.append("# weights: float  <->  quantized value")
            for w in self.weights:
                where = f" ({w.node.node.id} input {w.position})" if w.node is not None else " (same name)"
                lines.append(f"{w.float_name}  <->  {w.quant_name}{where}")
        for name, why in self.unpaired_float.items():
            lines.append(f"# float only: {name}: {why}")
        for name, why in self.unpaired_quant.items():
            lines.append(f"# quantized only: {name}: {why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "pairs": [p.to_dict() for p in self.ordered()],
            "weights": [
                {"float": w.float_name, "quant": w.quant_name, "node": None if w.node is None else w.node.node.id, "input": w.position}
                for w in self.weights
            ],
            "unpaired_float": dict(self.unpaired_float),
            "unpaired_quant": dict(self.unpaired_quant),
        }


# -- the pairing file -----------------------------------------------------------------


def read_pairing_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """A user's pairs: a JSON object ``{"float tensor": "quantized value"}``, or lines ``FLOAT QUANT`` (# comments)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise CompareError(f"cannot read the pairing file {p}: {e.strerror or e}") from None
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise CompareError(f"pairing file {p}: not JSON ({e.msg} at line {e.lineno}); expected {{\"FLOAT\": \"QUANT\", ...}}") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise CompareError(f'pairing file {p}: expected one JSON object of names, {{"FLOAT": "QUANT", ...}}')
        return dict(data)
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise CompareError(f"pairing file {p} line {number}: expected 'FLOAT_TENSOR QUANT_VALUE', got '{line.strip()}'")
        out[words[0]] = words[1]
    return out


# -- matching ------------------------------------------------------------------------


def _key(op: str, logicals: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    items = tuple(logicals)
    return (op, tuple(sorted(items)) if op in COMMUTATIVE else items)


def _score(f: CanonicalNode, q: CanonicalNode) -> tuple[int, int]:
    """Prefer the quantized node named like the float one (``conv1``, ``conv1_quant``), then the earliest."""
    fname, qname = f.node.name or f.node.id, q.node.name or q.node.id
    same = qname == fname or qname.startswith(fname + "_") or qname.startswith(fname + "/")
    return (0 if same else 1, q.node.order)


def _shape_ok(a: Any, b: Any) -> bool:
    return a is None or b is None or len(a) != len(b) or all(x == y or not isinstance(x, int) or not isinstance(y, int) for x, y in zip(a, b))


def pair_models(float_graph: Graph, quant_graph: Graph, user_pairs: Mapping[str, str] | None = None, *, recompute: bool = True) -> Pairing:
    """Pair ``quant_graph``'s tensors with ``float_graph``'s (see the module).

    With ``recompute``, where a QOperator op wrote a folded Relu's or Clip's output, the tensor before it is paired with
    the op's value before requantizing, recomputed in a copy of the quantized model (:mod:`.recompute`)."""
    pairing = _pair(float_graph, quant_graph, user_pairs, None)
    if recompute:
        qv = pairing.quant_view
        roots = [pairing.pairs[out].logical for out in pairing.folded_outputs() if out in pairing.pairs]
        ints = [r for r in roots if qv.form.get(r) is Form.INT]
        copy = with_recomputed(qv, ints) if ints else None
        if copy is not None:
            pairing = _pair(float_graph, copy, user_pairs, quant_graph)
    return pairing


def _pair(float_graph: Graph, quant_graph: Graph, user_pairs: Mapping[str, str] | None, source: Graph | None) -> Pairing:
    fv, qv = ModelView(float_graph), ModelView(quant_graph)
    pairing = Pairing(fv, qv, source)
    missing = [n for n in float_graph.input_names if n not in quant_graph.input_names]
    if missing or not float_graph.input_names:
        raise CompareError(
            f"the models do not share their inputs: the float model's input '{missing[0] if missing else '(none)'}' is no input "
            f"of the quantized model (its inputs: {', '.join(quant_graph.input_names) or 'none'}); both must take the same inputs"
        )
    for name in float_graph.input_names:
        pairing.add(name, name, How.INPUT)
    for fname, qname in (user_pairs or {}).items():
        if not float_graph.has_value(fname):
            raise CompareError(f"the pairing file names '{fname}', which is no tensor of the float model")
        if not quant_graph.has_value(qname):
            raise CompareError(f"the pairing file names '{qname}', which is no value of the quantized model")
        if not pairing.add(fname, qv.logical(qname), How.FILE) and fname not in pairing.pairs:
            raise CompareError(
                f"the pairing file pairs '{fname}' with '{qname}', which cannot be read as a float value or is paired twice"
            )
    index: dict[tuple[str, tuple[str, ...]], list[CanonicalNode]] = {}
    for c in qv.nodes:
        index.setdefault(_key(c.op, (qv.logical(a) for a in c.acts)), []).append(c)
    matched_q: set[str] = set()
    done: set[str] = set()
    why: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for f in fv.nodes:
            if f.node.id in done:
                continue
            if not all(a in pairing.pairs for a in f.acts) or not f.acts:
                continue
            logicals = [pairing.pairs[a].logical for a in f.acts]
            cands = [c for c in index.get(_key(f.op, logicals), []) if c.node.id not in matched_q and _types_ok(fv, f, qv, c)]
            if cands:
                c = min(cands, key=lambda c: _score(f, c))
                matched_q.add(c.node.id)
                done.add(f.node.id)
                pairing.matched[f.node.id] = c.node.id
                _pair_outputs(pairing, f, c, why)
                _pair_weights(pairing, f, c)
                changed = True
            elif _foldable(fv, f, pairing):
                src = f.acts[0]
                out = next(o for o in f.node.outputs if o)
                producer = float_graph.producer(src)
                note = f"{f.node.op_type} {f.node.id} folded into the quantized {producer.op_type if producer else 'input'}'s range"
                pairing.move(src, out, note)
                pairing.folded[src] = f.node.id
                if f.op in RANGE_FOLDS:  # (a BatchNormalization folded into a Conv's weights leaves no pre-BN value)
                    _pair_before_quantize(pairing, src, out, f.node.id)
                done.add(f.node.id)
                changed = True
        for o in pairing.float_activations():
            if o not in pairing.pairs and o not in pairing.folded and quant_graph.has_value(o):
                if _shape_ok(fv.shape(o), qv.shape(o)) and pairing.add(o, qv.logical(o), How.NAME):
                    changed = True
    paired = {w.float_name for w in pairing.weights}
    for name in sorted(pairing._float_weights() - paired):
        if name in qv.static and qv.constant(name) is not None:
            pairing.weights.append(WeightPair(name, name, None, -1, None))
    _explain(pairing, done, why)
    return pairing


#: Float ops another model may fold into their producer: an activation into a quantized range or a fused kernel
#: (FusedConv), a BatchNormalization into a Conv's weights, what a converter drops. (A bias Add is not: an optimizer
#: folds it into the op after, as SkipLayerNormalization's bias.)
FOLDABLE = frozenset({"Relu", "Clip", "BatchNormalization", "Identity", "Dropout"})
#: Those folded into the range of their producer's quantized output: the producer still computes their input.
RANGE_FOLDS = frozenset({"Relu", "Clip"})


def _types_ok(fv: ModelView, f: CanonicalNode, qv: ModelView, q: CanonicalNode) -> bool:
    """Whether the two nodes' first outputs may hold one tensor: types that differ are refused unless one is a float
    type (a quantized or a float16 form); a Cast to bool is not a Cast to int32."""
    a, b = fv.graph.value_info(f.node.outputs[0]).dtype, qv.graph.value_info(q.node.outputs[0]).dtype
    return a is None or b is None or a == b or "float" in a or "float" in b


def _foldable(fv: ModelView, f: CanonicalNode, pairing: Pairing) -> bool:
    """A one-input float op of :data:`FOLDABLE` whose input has no other reader and whose counterpart no quantized op
    of its type reads."""
    if f.op not in FOLDABLE or len(f.acts) != 1 or f.node.is_constant:
        return False
    src = f.acts[0]
    outs = [o for o in f.node.outputs if o]
    if len(outs) != 1 or src in pairing.folded or len(fv.graph.consumers(src)) != 1:
        return False
    if src in fv.graph.output_names:
        return False
    a, b = fv.shape(src), fv.shape(outs[0])
    if a is not None and b is not None and a != b:
        return False
    logical = pairing.pairs[src].logical
    return not any(c.op == f.op for c in pairing.quant_view.consumers(logical))


def _pair_before_quantize(pairing: Pairing, src: str, out: str, folded_id: str) -> None:
    """Pair the input of a folded op with its quantized producer's own float output, before the QuantizeLinear that folds
    the op into its range (QDQ: the Conv writes the pre-Relu value, its Q/DQ round trip is the Relu's output). QOperator
    ops write the folded value as integers: there the input stays folded."""
    qv = pairing.quant_view
    folded = pairing.pairs[out]
    root = folded.logical  # the value its producer computed
    producer = qv.graph.producer(root)
    if producer is None:
        return
    if qv.form.get(root) is Form.FLOAT and root != folded.quant_name:
        note = f"{producer.op_type} {producer.id}'s output before the QuantizeLinear that folds {folded_id}"
        pairing.pairs[src] = Pair(src, root, folded.logical, How.STRUCTURE, note)
    elif root in qv.before_requantize:
        note = f"{producer.op_type} {producer.id}'s value before it requantizes (folding {folded_id}), recomputed with {producer.op_type[7:]}"
        pairing.pairs[src] = Pair(src, qv.before_requantize[root], folded.logical, How.RECOMPUTED, note)


def _pair_outputs(pairing: Pairing, f: CanonicalNode, c: CanonicalNode, why: dict[str, str]) -> None:
    qv = pairing.quant_view
    for fo, qo in zip(f.node.outputs, c.node.outputs):
        if not fo or not qo:
            continue
        logical = qv.logical(qo)
        if not pairing.add(fo, logical, How.STRUCTURE) and fo not in pairing.pairs:
            why[fo] = (
                f"its counterpart '{qo}' ({c.node.op_type}) holds integers without a known scale"
                if qv.readable(logical) is None
                else f"its counterpart '{qo}' is paired with '{pairing.by_logical.get(logical)}' already"
            )


def _pair_weights(pairing: Pairing, f: CanonicalNode, c: CanonicalNode) -> None:
    fv, qv = pairing.float_view, pairing.quant_view
    seen = {(w.float_name, w.quant_name) for w in pairing.weights}
    fins, qins = f.node.inputs, c.node.inputs
    slots = {s.float_position: s for s in c.spec.weights} if c.spec is not None else None
    for pos, name in enumerate(fins):
        if not name or name not in fv.static or fv.constant(name) is None:
            continue
        if fv.constant(name).dtype.kind != "f":  # type: ignore[union-attr]
            continue
        if (name, qins[pos] if pos < len(qins) else "") in seen:
            continue  # one weight read by several nodes (a Resize's scales): compared once
        if slots is None:
            if pos < len(qins) and qins[pos] and qins[pos] in qv.static:
                pairing.weights.append(WeightPair(name, qins[pos], c, pos, None))
        elif pos in slots and slots[pos].value < len(qins) and qins[slots[pos].value] in qv.static:
            pairing.weights.append(WeightPair(name, qins[slots[pos].value], c, slots[pos].value, slots[pos]))
        elif c.node.op_type == "QLinearConv" and pos == 2 and len(qins) > 8 and qins[8]:
            pairing.weights.append(WeightPair(name, qins[8], c, 8, None))


def _explain(pairing: Pairing, done: set[str], why: dict[str, str]) -> None:
    fv, qv = pairing.float_view, pairing.quant_view
    for name in pairing.float_activations():
        if name in pairing.pairs:
            continue
        if name in pairing.folded:
            pairing.unpaired_float[name] = f"folded: the quantized model computes {pairing.folded[name]}'s output directly"
            continue
        producer = fv.graph.producer(name)
        if name in why:
            pairing.unpaired_float[name] = why[name]
        elif producer is not None and producer.id not in done:
            inputs = [a for a in next((c.acts for c in fv.nodes if c.node.id == producer.id), ()) if a not in pairing.pairs]
            pairing.unpaired_float[name] = (
                f"{producer.id} ({producer.op_type}) reads unpaired '{inputs[0]}'"
                if inputs
                else f"no {producer.op_type} of the quantized model reads the counterparts of {producer.id}'s inputs"
            )
        else:
            pairing.unpaired_float[name] = "no counterpart"
    for logical in pairing.quant_activations():
        if logical not in pairing.by_logical:
            p = qv.graph.producer(logical)
            pairing.unpaired_quant[logical] = f"computed by {p.id} ({p.op_type}), which has no float counterpart" if p else "no counterpart"
