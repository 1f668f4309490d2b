"""What to keep in float: the output SQNR each group recovers when it alone runs in float.

One model serves every run: each group of the quantized model becomes an ``If`` on a boolean
input of its own, whose then-branch is the float model's nodes of that group (float weights;
its inputs dequantized, its outputs quantized again where the next quantized op reads integers)
and whose else-branch is the group's quantized nodes. One session, one whole run per group with
its flag on (plus one with none and one with all), so N groups cost about N plain runs. Ranked by
the output SQNR recovered; with a target, groups are kept in float in that order until the output
reaches it, and their float nodes' names are the ``nodes_to_exclude`` to give ``quantize_static``.
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
from graph_dap.runtime import dtypes
from graph_dap.runtime.engine.options import ORT_ERRORS, check_providers, ort_message, session_options
from graph_dap.runtime.graph.order import outer_scope_reads
from graph_dap.runtime.inputs import InputsArg, resolve_inputs
from graph_dap.runtime.tools.quant.errors import Error, measure
from graph_dap.runtime.tools.quant.groups import Group
from graph_dap.runtime.tools.quant.pairing import Pairing
from graph_dap.runtime.tools.quant.view import Form

__all__ = ["GroupSensitivity", "Sensitivity", "run_sensitivity", "switch_model"]

_FLAG = "graph_dap_keep_float_{}"


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
    seconds: float = 0.0
    plain_seconds: float = 0.0  # one plain run of the quantized model, same options

    @property
    def nodes_to_exclude(self) -> list[str]:
        by_index = {g.index: g for g in self.ranked}
        return [n for i in self.chosen for n in by_index[i].nodes]

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
            "seconds": round(self.seconds, 4),
            "plain_run_seconds": round(self.plain_seconds, 4),
        }

    def text(self, limit: int = 10) -> str:
        lines = [
            f"sensitivity: output SQNR {_db(self.baseline_snr)} dB quantized, {_db(self.all_float_snr)} dB with every group in float; "
            f"{self.runs} runs in {self.seconds:.2f}s (a plain run: {self.plain_seconds * 1000:.1f} ms)",
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


# -- the switch model -------------------------------------------------------------------


def _value_info(pairing: Pairing, name: str, as_name: str) -> onnx.ValueInfoProto:
    """A branch output typed as the quantized model's ``name`` (integers: their params' type; contrib ops' outputs
    have no inferred type)."""
    qv = pairing.quant_view
    dtype = qv.params[name].dtype if qv.form.get(name) is Form.INT else qv.graph.value_info(name).dtype
    elem = helper.np_dtype_to_tensor_dtype(dtypes.dtype_of(dtype)) if dtype else onnx.TensorProto.FLOAT
    return helper.make_tensor_value_info(as_name, elem, None)


def _branch(
    pairing: Pairing, g: Group, escaping: list[str], prefix: str
) -> tuple[onnx.GraphProto, onnx.GraphProto]:
    """(float branch, quantized branch) of group ``g``: each computes ``escaping`` (renamed inside)."""
    fv, qv = pairing.float_view, pairing.quant_view
    # quantized branch: the group's nodes, every value they produce renamed
    qnodes = [n for n in g.quant_nodes if not n.is_static]
    made = {o for n in qnodes for o in n.outputs if o}
    qname = {o: f"{prefix}q__{o}" for o in made}
    qprotos = []
    for n in qnodes:
        p = onnx.NodeProto()
        p.CopyFrom(n.proto)
        p.input[:] = [qname.get(i, i) for i in p.input]
        p.output[:] = [qname.get(o, o) for o in p.output]
        p.name = f"{prefix}q__{n.id}"
        qprotos.append(p)
    q_out = [_value_info(pairing, v, qname[v]) for v in escaping]
    else_branch = helper.make_graph(qprotos, f"{prefix}quantized", [], q_out)
    # float branch: the float nodes, read from the quantized model's values, weights copied in
    fnodes = list(g.float_nodes)
    fmade = {o for n in fnodes for o in n.outputs if o}
    fname = {o: f"{prefix}f__{o}" for o in fmade}
    inits: list[onnx.TensorProto] = []
    extra: list[onnx.NodeProto] = []
    float_inits = {t.name: t for t in fv.graph.model.graph.initializer}
    for n in fnodes:
        for i in n.all_inputs:
            if i in fname or i in fv.graph.input_names:
                continue
            if i in float_inits and i not in pairing.pairs:
                t = numpy_helper.from_array(np.asarray(fv.graph.weights.array(float_inits[i])), f"{prefix}f__{i}")
                inits.append(t)
                fname[i] = t.name
            elif i in pairing.pairs:
                read = pairing.pairs[i].quant_name
                if qv.form.get(read) is Form.INT:
                    params = qv.params[read]
                    s, z = f"{prefix}s__{read}", f"{prefix}z__{read}"
                    inits += [numpy_helper.from_array(params.scale, s), numpy_helper.from_array(params.zero_point, z)]
                    extra.append(helper.make_node("DequantizeLinear", [read, s, z], [f"{prefix}dq__{read}"], axis=params.axis or 1))
                    fname[i] = f"{prefix}dq__{read}"
                else:
                    fname[i] = read
    fprotos = list(extra)
    for n in fnodes:
        p = onnx.NodeProto()
        p.CopyFrom(n.proto)
        p.input[:] = [fname.get(i, i) for i in p.input]
        p.output[:] = [fname.get(o, o) for o in p.output]
        p.name = f"{prefix}f__{n.id}"
        fprotos.append(p)
    f_out = []
    for v in escaping:
        f = pairing.by_logical[qv.logical(v)]
        src = fname.get(f, f)
        out = f"{prefix}fo__{v}"
        if qv.form.get(v) is Form.INT:
            params = qv.params[v]
            s, z = f"{prefix}s__{v}", f"{prefix}z__{v}"
            inits += [numpy_helper.from_array(params.scale, s), numpy_helper.from_array(params.zero_point, z)]
            fprotos.append(helper.make_node("QuantizeLinear", [src, s, z], [out], axis=params.axis or 1))
        else:
            fprotos.append(helper.make_node("Identity", [src], [out]))
        f_out.append(_value_info(pairing, v, out))
    then_branch = helper.make_graph(fprotos, f"{prefix}float", [], f_out, inits)
    return then_branch, else_branch


def switch_model(pairing: Pairing, groups: Sequence[Group]) -> tuple[onnx.ModelProto, dict[int, str], list[str]]:
    """The quantized model with each eligible group behind an ``If`` on its own flag input; the flags; why others were left out."""
    qv = pairing.quant_view
    graph = qv.graph
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    outputs = set(graph.output_names)
    removed: set[int] = set()
    ifs: list[onnx.NodeProto] = []
    flags: dict[int, str] = {}
    skipped: list[str] = []
    for g in groups:
        qnodes = [n for n in g.quant_nodes if not n.is_static]
        if not qnodes:
            continue
        inside = {n.order for n in qnodes}
        made = [o for n in qnodes for o in n.outputs if o]
        escaping = [v for v in made if v in outputs or any(c.order not in inside for c in graph.consumers(v))]
        own = {p.logical for p in g.outputs}
        bad = [v for v in escaping if qv.logical(v) not in own or qv.form.get(v) is Form.OPAQUE]
        if bad:
            skipped.append(f"{g.name}: its value '{bad[0]}' is read outside it and has no float counterpart")
            continue
        prefix = f"graph_dap_g{g.index}_"
        then_branch, else_branch = _branch(pairing, g, escaping, prefix)
        flag = _FLAG.format(g.index)
        flags[g.index] = flag
        ifs.append(helper.make_node("If", [flag], escaping, name=f"{prefix}switch", then_branch=then_branch, else_branch=else_branch))
        removed |= {n.index for n in qnodes}
    kept = [p for i, p in enumerate(model.graph.node) if i not in removed]
    del model.graph.node[:]
    model.graph.node.extend(_topological(kept + ifs, model))
    model.graph.input.extend(helper.make_tensor_value_info(f, onnx.TensorProto.BOOL, []) for f in flags.values())
    return model, flags, skipped


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
            raise CompareError("the groups of the quantized model form a cycle; sensitivity cannot run them one at a time")
    return order


# -- running it ---------------------------------------------------------------------------


def run_sensitivity(
    result: Any,
    inputs: InputsArg = None,
    *,
    dims: Mapping[str, int] | None = None,
    providers: Sequence[str] | None = None,
    target_snr: float | None = None,
    opt_level: str = "none",
    on_progress: Callable[[int, int], None] | None = None,
) -> Sensitivity:
    """Rank ``result``'s groups (a QuantComparison) by the output SQNR each recovers when kept in float."""
    pairing: Pairing = result.pairing
    groups = [g.group for g in result.groups]
    fg, qg = pairing.float_view.graph, pairing.quant_view.graph
    feeds = resolve_inputs(fg, inputs, dims)
    providers = check_providers(providers)
    model, flags, skipped = switch_model(pairing, groups)
    try:
        float_sess = ort.InferenceSession(fg.model.SerializeToString(), session_options(opt_level), providers=providers)
        plain = ort.InferenceSession(qg.model.SerializeToString(), session_options(opt_level), providers=providers)
        sess = ort.InferenceSession(model.SerializeToString(), session_options(opt_level), providers=providers)
    except ORT_ERRORS as e:
        raise CompareError(f"onnxruntime cannot run the quantized model with groups kept in float: {ort_message(e)}") from None
    names = [o.name for o in fg.model.graph.output]
    quant_names = [o.name for o in qg.model.graph.output]
    qnames = [n if n in quant_names else quant_names[i] for i, n in enumerate(names)]
    reference = dict(zip(names, float_sess.run(names, {k: feeds[k] for k in fg.input_names})))
    qfeeds = {k: feeds[k] for k in qg.input_names}
    began = time.perf_counter()
    plain.run(qnames, qfeeds)
    plain_seconds = time.perf_counter() - began
    del plain

    def output_snr(on: set[int]) -> float:
        fed = dict(qfeeds)
        fed.update({f: np.array(i in on) for i, f in flags.items()})
        outs = sess.run(qnames, fed)
        return Error.combine([measure(o, reference[n]) for n, o in zip(names, outs)]).snr

    began = time.perf_counter()
    baseline = output_snr(set())
    total = len(flags)
    rows = []
    by_index = {g.index: g for g in groups}
    for k, index in enumerate(flags):
        snr = output_snr({index})
        g = by_index[index]
        rows.append(GroupSensitivity(index, g.name, snr, snr - baseline, tuple(g.node_names())))
        if on_progress is not None:
            on_progress(k + 1, total)
    rows.sort(key=lambda r: (-r.recovered if not math.isnan(r.recovered) else math.inf, r.index))
    all_float = output_snr(set(flags))
    runs = total + 2
    out = Sensitivity(baseline, all_float, rows, skipped, target_snr)
    if target_snr is not None:
        chosen: list[int] = []
        snr = baseline
        for r in rows:
            if snr >= target_snr:
                break
            chosen.append(r.index)
            snr = output_snr(set(chosen))
            runs += 1
        out.chosen, out.chosen_snr = chosen, snr
    out.runs, out.seconds, out.plain_seconds = runs, time.perf_counter() - began, plain_seconds
    return out
