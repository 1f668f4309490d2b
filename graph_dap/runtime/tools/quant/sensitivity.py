"""What to keep in float: the output SQNR each group recovers when it alone runs in float.

For each group, the quantized model with that group's nodes replaced by the float model's (float
weights; its inputs dequantized where they are integers, its outputs quantized again where the next
quantized op reads integers), run whole by onnxruntime: a session of a few milliseconds and one
plain run per group, so N groups cost about N plain runs. Ranked by the output SQNR recovered; with
a target, groups are kept in float in that order until the output reaches it, and their float
nodes' names are the ``nodes_to_exclude`` to give ``quantize_static``.

A group's output tensor is kept in float with it (its Q/DQ pair goes with it in QDQ). In QOperator the
next QLinear ops read that tensor as integers at a scale that is as much theirs as the group's:
there those readers are kept in float with the group, reading its float output, and are named in
its ``nodes_to_exclude`` too (a quantizer disabled, as AIMET's per-layer analysis does).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from graph_dap.errors import CompareError
from graph_dap.runtime.engine.options import ORT_ERRORS, check_providers, ort_message, session_options
from graph_dap.runtime.graph.order import outer_scope_reads
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.tools.quant.errors import Error, measure, quant_value_bytes
from graph_dap.runtime.tools.quant.groups import Group
from graph_dap.runtime.tools.quant.pairing import Pairing
from graph_dap.runtime.tools.quant.stream import total_bytes
from graph_dap.runtime.tools.quant.view import Form

__all__ = ["GroupSensitivity", "Sensitivity", "in_float", "run_sensitivity"]



@dataclass(frozen=True, slots=True)
class GroupSensitivity:
    """The output SQNR with one group kept in float, and how much that recovers."""

    index: int
    name: str
    output_snr: float
    recovered: float
    nodes: tuple[str, ...]  # its float nodes' names (for nodes_to_exclude)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "group": self.name, "output_snr": _num(self.output_snr), "recovered": _num(self.recovered), "nodes": list(self.nodes)}


@dataclass(slots=True)
class Sensitivity:
    """Groups ranked by the output SQNR each recovers; the smallest prefix that reaches a target."""

    baseline_snr: float  # the quantized model's output SQNR
    all_float_snr: float  # with every group kept in float (the float model: very high)
    ranked: list[GroupSensitivity]
    skipped: list[str]
    target: float | None = None
    chosen: list[int] = field(default_factory=list)
    chosen_snr: float | None = None
    runs: int = 0
    seconds: float = 0.0  # the one-group-in-float runs together (each: its model, its session, its runs)
    plain_seconds: float = 0.0  # a plain run of the quantized model, same options: the median of runs made among them
    inputs: int = 1  # the inputs each SQNR is measured over (their energies added)

    @property
    def nodes_to_exclude(self) -> list[str]:
        by_index = {g.index: g for g in self.ranked}
        return list(dict.fromkeys(n for i in self.chosen for n in by_index[i].nodes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_snr": _num(self.baseline_snr),
            "all_float_snr": _num(self.all_float_snr),
            "ranked": [g.to_dict() for g in self.ranked],
            "skipped": list(self.skipped),
            "target_snr": self.target,
            "chosen": list(self.chosen),
            "chosen_snr": None if self.chosen_snr is None else _num(self.chosen_snr),
            "nodes_to_exclude": self.nodes_to_exclude,
            "runs": self.runs,
            "inputs": self.inputs,
            "seconds": round(self.seconds, 4),
            "plain_run_seconds": round(self.plain_seconds, 4),
        }

    def text(self, limit: int = 10) -> str:
        lines = [
            f"sensitivity: output SQNR {_db(self.baseline_snr)} dB quantized, {_db(self.all_float_snr)} dB with every group in float"
            + (f", over {self.inputs} inputs" if self.inputs > 1 else "")
            + f"; {self.runs} models run; the {len(self.ranked)} one-group models took {self.seconds:.2f}s, "
            f"{self.seconds / max(len(self.ranked) * self.inputs * self.plain_seconds, 1e-9):.2f}x as many plain runs ({self.plain_seconds * 1000:.1f} ms each)",
            "  rank  recovers dB  output dB  group",
        ]
        for i, g in enumerate(self.ranked[: limit or len(self.ranked)]):
            lines.append(f"  {i + 1:>4}  {_db(g.recovered):>11}  {_db(g.output_snr):>9}  {g.name}")
        if len(self.ranked) > limit > 0:
            lines.append(f"  ... and {len(self.ranked) - limit} more (--json)")
        lines += [f"  not run in float: {s}" for s in self.skipped]
        if self.target is not None:
            if self.chosen_snr is not None and self.chosen_snr >= self.target:
                lines.append(f"target {self.target:g} dB reached ({_db(self.chosen_snr)} dB) with {len(self.chosen)} group(s) in float:")
            else:
                got = "-" if self.chosen_snr is None else _db(self.chosen_snr)
                lines.append(f"target {self.target:g} dB not reached ({got} dB with every group in float that ran)")
            lines.append(f"  quantize_static(..., nodes_to_exclude={self.nodes_to_exclude!r})")
        return "\n".join(lines)


def _num(v: float) -> float | str:
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def _db(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else str(_num(v))


# -- the model with groups in float -------------------------------------------------------


def _float_nodes(
    pairing: Pairing, g: Group, escaping: list[str], prefix: str, linked: dict[str, str], share: bool
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The float model's nodes of ``g`` (renamed, float weights copied) computing ``escaping``, the quantized model's
    values read outside the group: as float where consumers read float, quantized again where they read integers.
    ``linked``: the float values of groups already in float in the same model (by float tensor), read as they are;
    with ``share``, ``g``'s own are added to it."""
    fv, qv = pairing.float_view, pairing.quant_view
    fnodes = list(g.float_nodes)
    fname = {o: f"{prefix}f__{o}" for n in fnodes for o in n.outputs if o}
    inits: list[onnx.TensorProto] = []
    protos: list[onnx.NodeProto] = []
    float_inits = {t.name: t for t in fv.graph.model.graph.initializer}
    for n in fnodes:
        for i in n.all_inputs:
            if i in fname or i in fv.graph.input_names:
                continue
            if i in linked:  # computed in float by a group before it: read without a round trip through integers
                fname[i] = linked[i]
            elif i in pairing.pairs:
                read = pairing.pairs[i].quant_name
                if qv.form.get(read) is Form.INT:  # an integer tensor: dequantized for the float node
                    params = qv.params[read]
                    s, z = f"{prefix}s__{read}", f"{prefix}z__{read}"
                    inits += [numpy_helper.from_array(params.scale, s), numpy_helper.from_array(params.zero_point, z)]
                    protos.append(
                        helper.make_node("DequantizeLinear", [read, s, z], [f"{prefix}dq__{read}"], name=f"{prefix}dq__{read}", axis=params.axis or 1)
                    )
                    fname[i] = f"{prefix}dq__{read}"
                else:
                    fname[i] = read
            elif i in float_inits:
                t = numpy_helper.from_array(np.asarray(fv.graph.weights.array(float_inits[i])), f"{prefix}f__{i}")
                inits.append(t)
                fname[i] = t.name
    for n in fnodes:
        p = onnx.NodeProto()
        p.CopyFrom(n.proto)
        p.input[:] = [fname.get(i, i) for i in p.input]
        p.output[:] = [fname.get(o, o) for o in p.output]
        p.name = f"{prefix}f__{n.id}"
        protos.append(p)
    for v in escaping:
        f = pairing.by_logical[qv.logical(v)]
        src = fname.get(f, f)
        if qv.form.get(v) is Form.INT:
            params = qv.params[v]
            s, z = f"{prefix}s__{v}", f"{prefix}z__{v}"
            inits += [numpy_helper.from_array(params.scale, s), numpy_helper.from_array(params.zero_point, z)]
            protos.append(helper.make_node("QuantizeLinear", [src, s, z], [v], name=f"{prefix}out__{v}", axis=params.axis or 1))
        else:
            protos.append(helper.make_node("Identity", [src], [v], name=f"{prefix}out__{v}"))
    if share:
        linked.update({p.float_name: fname[p.float_name] for p in g.outputs if p.float_name in fname})
    return protos, inits


def _escaping(pairing: Pairing, g: Group) -> tuple[list[str], str | None]:
    """The values of ``g``'s quantized nodes read outside it; why it cannot run in float (None: it can)."""
    qv = pairing.quant_view
    graph = qv.graph
    qnodes = [n for n in g.quant_nodes if not n.is_constant]
    inside = {n.order for n in qnodes}
    outputs = set(graph.output_names)
    made = [o for n in qnodes for o in n.outputs if o]
    escaping = [v for v in made if v in outputs or any(c.order not in inside for c in graph.consumers(v))]
    own = {p.logical for p in g.outputs}
    bad = [v for v in escaping if qv.logical(v) not in own or qv.form.get(v) is Form.OPAQUE]
    if not qnodes:
        return escaping, "it has no quantized node"
    if bad:
        return escaping, f"its value '{bad[0]}' is read outside it and has no float counterpart"
    return escaping, None


def integer_readers(pairing: Pairing, g: Group, groups: Sequence[Group], forms: tuple[Form, ...] = (Form.INT,)) -> list[Group]:
    """Those of ``groups`` that read one of ``g``'s values in one of ``forms`` (integers: QOperator's next QLinear ops,
    whose input scale is the one ``g``'s output is quantized at; dequantized: QDQ's readers of its Q/DQ pair)."""
    qv = pairing.quant_view
    escaping, _ = _escaping(pairing, g)
    ints = {v for v in escaping if qv.form.get(v) in forms}
    if not ints:
        return []
    return [h for h in groups if h.index != g.index and any(ints.intersection(n.inputs) for n in h.quant_nodes)]


def _replaced(
    pairing: Pairing, groups: Sequence[Group], shared: Sequence[Group]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], set[int], set[str]]:
    """``groups``' float nodes and weights, the indices of the quantized nodes they replace, and the quantized model's
    values they write for the rest of it; in run order, those after one of ``shared`` reading its float outputs."""
    share = {g.index for g in shared}
    linked: dict[str, str] = {}
    added: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    removed: set[int] = set()
    written: set[str] = set()
    for g in sorted(groups, key=lambda g: g.index):  # in run order: a group in float reads the float values of those before
        escaping, _ = _escaping(pairing, g)
        nodes, weights = _float_nodes(pairing, g, escaping, f"graph_dap_g{g.index}_", linked, g.index in share)
        added += nodes
        inits += weights
        removed |= {n.index for n in g.quant_nodes if not n.is_constant}
        written.update(escaping)
    return added, inits, removed, written


def in_float(pairing: Pairing, groups: Sequence[Group], shared: Sequence[Group] | None = None) -> onnx.ModelProto:
    """The quantized model with ``groups`` computed by the float model's nodes and weights; the groups after one of
    ``shared`` (default: all of them) read its float outputs as they are, the others their quantized values."""
    graph = pairing.source_graph  # the user's model: not the recomputing nodes compare runs (see .recompute)
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    added, inits, removed, _ = _replaced(pairing, groups, groups if shared is None else shared)
    model.graph.initializer.extend(inits)
    kept = [p for i, p in enumerate(model.graph.node) if i not in removed]
    del model.graph.node[:]
    model.graph.node.extend(_topological(kept + added, model))
    return model


def _topological(nodes: list[onnx.NodeProto], model: onnx.ModelProto) -> list[onnx.NodeProto]:
    ready = {v.name for v in model.graph.input} | {t.name for t in model.graph.initializer} | {""}
    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    needs = [[x for x in list(n.input) + sorted(outer_scope_reads(n)) if x in producer] for n in nodes]
    order: list[onnx.NodeProto] = []
    done: set[int] = set()
    while len(done) < len(nodes):
        progressed = False
        for i, n in enumerate(nodes):
            if i not in done and all(x in ready for x in needs[i]):
                order.append(n)
                done.add(i)
                ready.update(n.output)
                progressed = True
        if not progressed:
            raise CompareError("the groups of the quantized model form a cycle; they cannot be kept in float one at a time")
    return order


# -- running it ---------------------------------------------------------------------------


def _baseline(pairing: Pairing, feeds: Mapping[str, Any], providers: list[str], budget: int, level: str) -> dict[str, Any] | None:
    """The values a group's cone may read from the rest of the quantized model, from one whole run; None over ``budget``.

    That is every computed value but those only a QuantizeLinear or DequantizeLinear reads (a QDQ tensor's float value
    and its integers): a cone holds such a reader only when it holds its writer, so they are never fed to one (in QDQ
    they are two thirds of the values)."""
    graph = pairing.source_graph
    forms = ("QuantizeLinear", "DequantizeLinear")
    outputs = set(graph.output_names)
    names = [
        o for n in graph.nodes if not n.is_constant for o in n.outputs
        if o and (o in outputs or any(c.op_type not in forms for c in graph.consumers(o)))
    ]  # fmt: skip
    size = total_bytes(quant_value_bytes(pairing, graph, names, feeds))
    if size is None or size > budget:
        return None
    model = graph.wire.skeleton()
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    try:
        sess = ort.InferenceSession(graph.wire.to_bytes(model), session_options(level), providers=providers)
        return dict(zip(names, sess.run(names, dict(feeds))))
    except ORT_ERRORS as e:
        raise CompareError(f"onnxruntime cannot run the quantized model: {ort_message(e)}") from None


class _Cones:
    """The quantized model read once, to build for groups in float only the part of it they change: their float
    nodes and every node downstream of the values they write, with the constants those need, fed the plain run's
    values (the same nodes as :func:`in_float`'s model downstream of them, without copying and sorting it per group)."""

    def __init__(self, pairing: Pairing) -> None:
        self.pairing = pairing
        self.model = pairing.source_graph.model
        self.nodes = list(self.model.graph.node)
        self.inits = {t.name: t for t in self.model.graph.initializer}
        self.reads = [[i for i in n.input if i] + sorted(outer_scope_reads(n)) for n in self.nodes]
        self._reads = {id(n): r for n, r in zip(self.nodes, self.reads)}
        self.static = set(self.inits)
        self.producer: dict[str, onnx.NodeProto] = {}
        for n, reads in zip(self.nodes, self.reads):
            self.producer.update({o: n for o in n.output if o})
            inputs = [i for i in n.input if i]
            if len(reads) == len(inputs) and all(i in self.static for i in inputs):  # no subgraph reading outside it
                self.static.update(o for o in n.output if o)

    def reads_of(self, node: onnx.NodeProto) -> list[str]:
        """What ``node`` reads (its subgraphs' outer-scope reads too): found once for the model's own nodes."""
        reads = self._reads.get(id(node))
        return reads if reads is not None else [i for i in node.input if i] + sorted(outer_scope_reads(node))

    def model_for(
        self, groups: Sequence[Group], shared: Sequence[Group], held: Mapping[str, Any], feeds: Mapping[str, Any]
    ) -> tuple[onnx.ModelProto, dict[str, Any], list[str]] | None:
        """What ``groups`` in float change (``shared``: as :func:`in_float`): the model, its feeds, the graph outputs
        it computes; None when it reads a value ``held`` lacks."""
        added, added_inits, removed, changed = _replaced(self.pairing, groups, shared)
        cone = list(added)
        for i, (n, reads) in enumerate(zip(self.nodes, self.reads)):
            if i not in removed and any(r in changed for r in reads):
                cone.append(n)
                changed.update(o for o in n.output if o)
        inits = set(self.inits) | {t.name for t in added_inits}
        made = {o for n in cone for o in n.output if o}
        # the static nodes (a weight's DequantizeLinear) the cone reads, and theirs
        need = [i for n in cone for i in self.reads_of(n) if i not in made and i in self.static and i not in inits]
        extra: dict[int, onnx.NodeProto] = {}
        while need:
            p = self.producer[need.pop()]
            if id(p) not in extra:
                extra[id(p)] = p
                need += [i for i in p.input if i and i not in inits]
        nodes = [n for n in self.nodes if id(n) in extra] + cone
        made |= {o for n in extra.values() for o in n.output if o}
        read = {i for n in nodes for i in self.reads_of(n)}
        fed = sorted(r for r in read if r not in made and r not in inits)
        if any(r not in held and r not in feeds for r in fed):
            return None  # a value the plain run's held ones lack: the group's run is a whole run
        values = {r: np.asarray(held[r] if r in held else feeds[r]) for r in fed}
        outputs = [o.name for o in self.model.graph.output if o.name in made]
        sub = helper.make_model(
            helper.make_graph(
                nodes,
                "graph_dap_cone",
                [helper.make_tensor_value_info(r, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for r, v in values.items()],
                [helper.make_empty_tensor_value_info(o) for o in outputs],
                [t for name, t in self.inits.items() if name in read] + added_inits,
            ),
            opset_imports=list(self.model.opset_import),
        )
        sub.ir_version = self.model.ir_version
        sub.functions.extend(self.model.functions)
        if len(groups) > 1:  # a reader kept in float may also read a node downstream of the first group
            ordered = _topological(list(sub.graph.node), sub)
            del sub.graph.node[:]
            sub.graph.node.extend(ordered)
        return sub, values, outputs


def run_sensitivity(
    result: Any,
    inputs: InputsArg = None,
    *,
    data: Sequence[InputsArg] | None = None,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    target_snr: float | None = None,
    opt_level: str = "none",
    on_progress: Callable[[int, int], None] | None = None,
    budget_bytes: int = 1 << 30,
) -> Sensitivity:
    """Rank ``result``'s groups (a QuantComparison) by the output SQNR each recovers when kept in float.

    ``data``: several inputs, over which each output SQNR is measured (their energies added: one input's SQNRs move
    with what it shows, a data set's do not); default ``inputs`` alone. One input at a time: when the quantized model's
    values fit ``budget_bytes``, one plain run keeps them and each group's run computes only the nodes downstream of
    it; else each group's run is a whole run."""
    pairing: Pairing = result.pairing
    groups = [g.group for g in result.groups]
    fg, qg = pairing.float_view.graph, pairing.source_graph
    feeds_list = [resolve_inputs(fg, x, dims) for x in (data if data else [inputs])]
    providers = check_providers(providers)
    names = [o.name for o in fg.model.graph.output]
    quant_names = [o.name for o in qg.model.graph.output]
    qnames = [n if n in quant_names else quant_names[i] for i, n in enumerate(names)]
    qfeeds = [{k: feeds[k] for k in qg.input_names} for feeds in feeds_list]

    def session(model: onnx.ModelProto) -> ort.InferenceSession:
        try:
            return ort.InferenceSession(model.SerializeToString(), session_options(opt_level), providers=providers)
        except ORT_ERRORS as e:
            raise CompareError(f"onnxruntime cannot run the quantized model with groups kept in float: {ort_message(e)}") from None

    float_session = session(fg.model)
    references = [dict(zip(names, float_session.run(names, {k: feeds[k] for k in fg.input_names}))) for feeds in feeds_list]

    def output_errors(out: Mapping[str, Any], reference: Mapping[str, Any]) -> list[Error]:
        """Each output of one input's run (by the quantized model's output names) against the float model's."""
        return [measure(out[q], reference[n]) for n, q in zip(names, qnames)]

    def combined(outputs: Sequence[Mapping[str, Any]]) -> float:
        """The output SQNR over every input: ``outputs`` one per input."""
        return Error.combine([e for out, ref in zip(outputs, references) for e in output_errors(out, ref)]).snr

    def output_snr(model: onnx.ModelProto) -> float:
        sess = session(model)
        return combined([dict(zip(qnames, sess.run(qnames, f))) for f in qfeeds])

    plain = session(qg.model)
    plain_times: list[float] = []

    def time_plain() -> None:
        """One plain run of the quantized model, timed: every few groups, so that the ratio is side by side."""
        began = time.perf_counter()
        plain.run(qnames, qfeeds[0])
        plain_times.append(time.perf_counter() - began)

    baseline = combined([dict(zip(qnames, plain.run(qnames, f))) for f in qfeeds])
    eligible, skipped = [], []
    for g in groups:
        _, why = _escaping(pairing, g)
        if why is None:
            eligible.append(g)
        elif g.float_nodes:
            skipped.append(f"{g.name}: {why}")
    # a group whose output the next QLinear ops read as integers is kept in float with them, its float output read as
    # it is: else its output would be quantized again at the scale it has now, which is theirs (QOperator)
    kept = {g.index: [g, *integer_readers(pairing, g, eligible)] for g in eligible}
    # what to exclude: in QDQ a group in float drops its output's Q/DQ pair, which quantize_static keeps while a reader
    # of that tensor is quantized (it quantizes the inputs of the nodes it quantizes): its readers are named too
    named = {i: [*groups_, *integer_readers(pairing, groups_[0], eligible, (Form.DEQUANTIZED,))] for i, groups_ in kept.items()}
    cones: _Cones | None = None
    spent = 0.0
    errors: dict[int, list[Error]] = {g.index: [] for g in eligible}
    for k, (feeds, reference) in enumerate(zip(qfeeds, references)):  # one input at a time: its held values alone
        held = _baseline(pairing, feeds, providers, budget_bytes, opt_level)
        if held is not None and cones is None:
            cones = _Cones(pairing)
        for j, g in enumerate(eligible):
            if j % 8 == 0:
                time_plain()
            began = time.perf_counter()
            # only what g in float changes runs again, the rest is the plain run's, when it is held; else a whole run
            cone = None if held is None or cones is None else cones.model_for(kept[g.index], [g], held, feeds)
            if held is None or cone is None:
                got = dict(zip(qnames, session(in_float(pairing, kept[g.index], [g])).run(qnames, feeds)))
            else:
                sub, sub_feeds, produced = cone
                ran = dict(zip(produced, session(sub).run(produced, sub_feeds))) if produced else {}
                got = {q: ran[q] if q in ran else held[q] for q in qnames}
            errors[g.index] += output_errors(got, reference)
            spent += time.perf_counter() - began
            if on_progress is not None:
                on_progress(k * len(eligible) + j + 1, len(qfeeds) * len(eligible))
    rows = []
    for g in eligible:
        snr = Error.combine(errors[g.index]).snr
        names_ = dict.fromkeys(n for h in named[g.index] for n in h.node_names())
        rows.append(GroupSensitivity(g.index, g.name, snr, snr - baseline, tuple(names_)))
    rows.sort(key=lambda r: (-r.recovered if not math.isnan(r.recovered) else math.inf, r.index))
    time_plain()
    all_float = output_snr(in_float(pairing, eligible))
    out = Sensitivity(baseline, all_float, rows, skipped, target_snr)
    if target_snr is not None:
        by_index = {g.index: g for g in eligible}
        chosen: list[int] = []
        snr = baseline
        for r in rows:
            if snr >= target_snr:
                break
            chosen.append(r.index)
            snr = output_snr(in_float(pairing, list({h.index: h for i in chosen for h in kept[i]}.values()), [by_index[i] for i in chosen]))
        out.chosen, out.chosen_snr = chosen, snr
    # the time of the one-group-in-float runs (session and run each), and a plain run's median measured among them
    out.runs, out.seconds, out.inputs = len(eligible) * len(qfeeds) + 1 + len(out.chosen), spent, len(qfeeds)
    out.plain_seconds = sorted(plain_times)[len(plain_times) // 2]
    return out
