"""The kernels that really run: a quantized model at onnxruntime's ``all`` level, group by group.

graph-dap's node-by-node run of a QDQ model is its float simulation; at the level users deploy,
onnxruntime fuses Q/DQ and their op into integer kernels (QLinearConv, often in NHWC), changes
int8 to uint8, reorders layouts. Here the optimized model (``optimized_model_filepath``) runs
whole with, for each group, the value that stands for its output there: the group's own value
where a form of it survives optimization, else the output of the fused node whose origin holds the
group's op (``profile --fused``'s many-to-one map), dequantized with that node's own scale and
zero point and put back from NHWC or NCHWc blocks. Each is compared with the float model's value
and with the simulation's; where kernels and simulation part by more than ``threshold`` steps, the
fused node is named, and bisecting ``disabled_optimizers`` names the optimizer responsible.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from graph_dap.errors import CompareError
from graph_dap.runtime.engine.options import ORT_ERRORS, check_providers, ort_message, session_options
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.tools.profile import FusedNode, derive_fused, optimize_model
from graph_dap.runtime.tools.quant.errors import Error, measure, readable_value
from graph_dap.runtime.tools.quant.groups import Group
from graph_dap.runtime.tools.quant.params import QuantParams
from graph_dap.runtime.tools.quant.view import QUANT_OPS, Form

__all__ = ["OPTIMIZERS", "KernelComparison", "KernelRow", "compare_kernels"]

#: onnxruntime's graph transformers that act on quantized CPU models (names as disabled_optimizers takes them).
OPTIMIZERS = (
    "QDQSelectorActionTransformer", "QDQS8ToU8Transformer", "QDQPropagationTransformer", "QDQFinalCleanupTransformer",
    "EnsureUniqueDQForNodeUnit", "NhwcTransformer", "NchwcTransformer", "ConvActivationFusion", "ConvAddActivationFusion",
    "ConstantFolding", "CommonSubexpressionElimination", "TransposeOptimizer", "MatMulIntegerToFloatFusion",
    "DynamicQuantizeMatMulFusion", "GemmActivationFusion", "MatMulAddFusion", "Level1_RuleBasedTransformer",
    "Level2_RuleBasedTransformer",
)  # fmt: skip


#: Ops that move integers without changing what they mean (their output keeps their input's scale and zero point).
_MOVES_INTEGERS = frozenset({"NhwcMaxPool", "MaxPool", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Resize", "Concat"})


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One group as the optimized model computes it."""

    group: Group
    value: str  # the optimized model's value read
    node: str  # the optimized node that computes it
    op: str
    layout: str  # "" (as the model), "NHWC" or "NCHWc" (put back to NCHW here)
    params: QuantParams | None  # how the value read is dequantized (None: it is float)
    vs_float: Error
    vs_simulation: Error
    steps: float | None  # max |kernel - simulation| in the group's output steps


@dataclass(slots=True)
class KernelComparison:
    """Every group read from the optimized model, what could not be, and the optimizer found responsible."""

    opt_level: str
    rows: list[KernelRow]
    unread: list[str]
    threshold: float
    output_divergence: float  # max |kernels - simulation| over the model's outputs
    responsible: list[str] = field(default_factory=list)
    bisect_note: str = ""

    @property
    def parted(self) -> list[KernelRow]:
        """The groups where kernels and simulation part by more than the threshold, in graph order."""
        return [r for r in self.rows if r.steps is not None and r.steps > self.threshold]

    def to_dict(self) -> dict[str, Any]:
        return {
            "opt_level": self.opt_level,
            "threshold_steps": self.threshold,
            "rows": [
                {
                    "index": r.group.index,
                    "group": r.group.name,
                    "value": r.value,
                    "fused_node": r.node,
                    "op": r.op,
                    "layout": r.layout,
                    "vs_float": r.vs_float.to_dict(),
                    "vs_simulation": r.vs_simulation.to_dict(),
                    "steps": r.steps,
                }
                for r in self.rows
            ],
            "parted": [r.group.index for r in self.parted],
            "unread": list(self.unread),
            "output_divergence": self.output_divergence,
            "responsible": list(self.responsible),
            "bisect": self.bisect_note,
        }

    def text(self) -> str:
        lines = [
            f"kernels at level '{self.opt_level}': {len(self.rows)} groups read from onnxruntime's optimized model; "
            f"its outputs differ from the simulation's by up to {self.output_divergence:.4g}",
        ]
        head = ["group", "fused node", "op", "vs float dB", "vs simulation dB", "steps", ""]
        cells = []
        for r in self.rows:
            op = r.op + (f" ({r.layout})" if r.layout else "")
            steps = "-" if r.steps is None else f"{r.steps:.3g}"
            mark = f"parts (> {self.threshold:g} step)" if r in self.parted else ""
            cells.append([r.group.name, r.node, op, _db(r.vs_float.snr), _db(r.vs_simulation.snr), steps, mark])
        widths = [max([len(head[i])] + [len(c[i]) for c in cells]) for i in range(len(head))]
        for row in [head, *cells]:
            lines.append("  " + "  ".join(c.ljust(w) if i < 3 or i == 6 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        lines += [f"  not read: {u}" for u in self.unread]
        first = self.parted[0] if self.parted else None
        if first is not None:
            lines.append(
                f"  kernels and simulation part first at {first.group.name}: fused node {first.node} ({first.op}), "
                f"{first.steps:.3g} steps"
            )
        if self.bisect_note:
            lines.append(f"  {self.bisect_note}")
        return "\n".join(lines)


def _db(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def _layout(node: onnx.NodeProto) -> str:
    if node.domain == "com.microsoft.nchwc":
        return "NCHWc"
    if any(a.name == "channels_last" and a.i == 1 for a in node.attribute):
        return "NHWC"
    return ""


def _to_nchw(value: np.ndarray, layout: str, shape: Sequence[int]) -> tuple[np.ndarray, str]:
    """``value`` put back to the float tensor's NCHW ``shape``, and the layout it was in. The layout a node's attribute
    says, else the one its shape shows: onnxruntime's NHWC transformer leaves elementwise ops between its Transposes
    working on NHWC data with no attribute to say so."""
    shape = tuple(shape)
    if layout == "NCHWc" or (value.ndim == 5 and len(shape) == 4):
        n, blocks, h, w, b = value.shape
        return np.moveaxis(value, 4, 2).reshape(n, blocks * b, h, w)[:, : shape[1]], "NCHWc"
    if layout == "NHWC" or (value.ndim == 4 and value.shape != shape and value.shape == (shape[0], *shape[2:], shape[1])):
        return np.moveaxis(value, -1, 1), "NHWC"
    return value, layout


def _with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> bytes:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    return m.SerializeToString()


def _run(model: onnx.ModelProto, names: Sequence[str], feeds: Mapping[str, Any], level: str, providers: list[str],
         disabled: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """A whole run of ``model`` at ``level`` with ``names`` made outputs (onnxruntime's optimizers in ``disabled`` off)."""
    so = session_options(level)
    try:
        sess = ort.InferenceSession(_with_outputs(model, names), so, providers=providers, disabled_optimizers=list(disabled))
        used = {i.name for i in sess.get_inputs()}
        return dict(zip(names, sess.run(list(names), {k: v for k, v in feeds.items() if k in used})))
    except ORT_ERRORS as e:
        raise CompareError(f"onnxruntime failed on the quantized model at level '{level}': {ort_message(e)}") from None


def compare_kernels(
    result: Any,
    inputs: InputsArg = None,
    *,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    opt_level: str = "all",
    threshold: float = 1.0,
    budget_bytes: int = 256 << 20,
) -> KernelComparison:
    """Compare ``result``'s groups (a QuantComparison) as onnxruntime's kernels at ``opt_level`` compute them."""
    pairing = result.pairing
    fv, qv = pairing.float_view, pairing.quant_view
    fg, qg = fv.graph, pairing.source_graph  # the user's model (quant_view's may hold recomputing nodes: .recompute)
    providers = check_providers(providers)
    feeds = resolve_inputs(fg, inputs, dims)
    with tempfile.TemporaryDirectory(prefix="graph-dap-kernels-") as tmp:
        path = optimize_model(qg, opt_level, providers, Path(tmp))
        optimized = onnx.load(str(path))
    fused = derive_fused(qg, optimized, opt_level)
    producer = {o: n for n in optimized.graph.node for o in n.output if o}
    consts = {t.name: t for t in optimized.graph.initializer}
    plans: list[tuple[Group, Any, str, str, QuantParams | None, str, str]] = []  # group, pair, read, node, params, layout, op
    unread: list[str] = []
    for ge in result.groups:
        g: Group = ge.group
        p = g.outputs[0]
        plan = _plan(qv, p, producer, consts, fused.nodes)
        if isinstance(plan, str):
            unread.append(f"{g.name}: {plan}")
        else:
            plans.append((g, p, *plan))
    rows: list[KernelRow] = []
    chunk: list[tuple[Group, Any, str, str, QuantParams | None, str, str]] = []
    used = 0
    for k, item in enumerate(plans):
        chunk.append(item)
        used += fg.value_info(item[1].float_name).nbytes or (4 << 20)
        if used >= budget_bytes or k == len(plans) - 1:
            rows += _measure_chunk(chunk, qv, fg, optimized, feeds, providers)
            chunk, used = [], 0
    outputs = list(qg.output_names)
    sim = _run(qg.model, outputs, feeds, "none", providers)
    kern = _run(optimized, outputs, feeds, "none", providers)
    divergence = max(float(np.max(np.abs(np.asarray(kern[n], np.float32) - np.asarray(sim[n], np.float32)))) for n in outputs)
    out = KernelComparison(opt_level, rows, unread, threshold, divergence)
    if out.parted or divergence > 0:
        _bisect(out, qg, outputs, sim, feeds, opt_level, providers, result)
    return out


def _plan(qv: Any, pair: Any, producer: Mapping[str, onnx.NodeProto], consts: Mapping[str, onnx.TensorProto],
          fused: Sequence[FusedNode]) -> tuple[str, str, QuantParams | None, str, str] | str:  # fmt: skip
    """(value to read, the fused node that computes the group, params to dequantize the value, layout, op) in the
    optimized model; or why there is none. The value is what the group's consumers read: its DequantizeLinear's
    output where it survives, else its QuantizeLinear's output (onnxruntime may have made it uint8: its own scale and
    zero point are read), else the output of the fused integer node whose origin holds the group's op."""
    members = qv.members.get(pair.logical, [pair.logical])
    root = qv.graph.producer(pair.logical)
    owner = next((f for f in fused if root is not None and root.id in f.origin), None)
    node_name, op = (owner.name, owner.op_type) if owner is not None else ("", "")
    for m in members:
        if qv.form.get(m) is Form.DEQUANTIZED and m in producer:
            return m, node_name or producer[m].name, None, _layout(producer[m]), op or producer[m].op_type
    consumers = [n for n in producer.values() if n.op_type == "QuantizeLinear" and n.input and n.input[0] in members]
    for q in consumers:
        params = _const_params(q, 1, 2, consts)
        if params is not None:
            return q.output[0], node_name or q.name, params, _layout(q), op or q.op_type
    if root is None or owner is None:
        return "its value is no longer computed under its name"
    spec = QUANT_OPS.get(owner.op_type)
    node = next((n for n in producer.values() if n.name == owner.name), None)
    root_value = members[0]
    if node is not None and spec is None and qv.form.get(root_value) is Form.INT and owner.op_type in _MOVES_INTEGERS:
        # an op that moves integers (NhwcMaxPool, a Transpose): its output keeps the tensor's own scale and zero point
        return node.output[0], owner.name, qv.params[root_value], _layout(node), owner.op_type
    if spec is None or spec.out_params is None or node is None:
        return f"fused into {owner.name} ({owner.op_type}), whose output is not this tensor"
    params = _const_params(node, *spec.out_params, consts)
    if params is None:
        return f"fused into {owner.name} ({owner.op_type}) whose output scale is not a constant"
    return node.output[0], owner.name, params, _layout(node), owner.op_type


def _const_params(node: onnx.NodeProto, scale: int, zero_point: int, consts: Mapping[str, onnx.TensorProto]) -> QuantParams | None:
    s = node.input[scale] if scale < len(node.input) else ""
    z = node.input[zero_point] if zero_point < len(node.input) else ""
    if s not in consts:
        return None
    zp = numpy_helper.to_array(consts[z]) if z in consts else None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    return QuantParams.make(numpy_helper.to_array(consts[s]), zp, axis=axis)


def _measure_chunk(chunk: list[Any], qv: Any, fg: Any, optimized: onnx.ModelProto, feeds: Mapping[str, Any],
                   providers: list[str]) -> list[KernelRow]:  # fmt: skip
    """One whole run of each model for a chunk of groups: the kernels' values, the simulation's, the float model's."""
    kern = _run(optimized, [c[2] for c in chunk], feeds, "none", providers)
    sim = _run(qv.graph.model, [c[1].quant_name for c in chunk], feeds, "none", providers)
    flo = _run(fg.model, [c[1].float_name for c in chunk], feeds, "none", providers)
    rows = []
    for g, p, read, node, params, layout, op in chunk:
        f = np.asarray(flo[p.float_name])
        k, layout = _to_nchw(np.asarray(kern[read] if params is None else params.dequantize(kern[read])), layout, f.shape)
        s = readable_value(qv, p.quant_name, sim[p.quant_name])
        vs_sim = measure(k, s, qv.params.get(p.quant_name))
        rows.append(KernelRow(g, read, node, op, layout, params, measure(k, f), vs_sim, vs_sim.steps))
    return rows


def _bisect(out: KernelComparison, qg: Any, outputs: list[str], sim: Mapping[str, Any], feeds: Mapping[str, Any],
            level: str, providers: list[str], result: Any) -> None:  # fmt: skip
    """Find the optimizers whose disabling brings the model's outputs back to the simulation's (within the threshold)."""
    tol = 0.0
    for ge in result.groups:
        for p in ge.group.outputs:
            if p.quant_name in outputs and ge.params is not None and ge.params.per_tensor:
                tol = max(tol, out.threshold * float(ge.params.scale))
    tol = tol or 1e-5

    def diverges(disabled: Sequence[str]) -> bool:
        got = _run(qg.model, outputs, feeds, level, providers, disabled)
        return any(float(np.max(np.abs(np.asarray(got[n], np.float32) - np.asarray(sim[n], np.float32)))) > tol for n in outputs)

    if not diverges(()):
        out.bisect_note = f"the outputs are within {out.threshold:g} step(s) of the simulation; nothing to bisect"
        return
    candidates = list(OPTIMIZERS)
    if diverges(candidates):
        out.bisect_note = "with every known optimizer disabled the outputs still part from the simulation: the kernels themselves"
        return
    while len(candidates) > 1:
        half = candidates[: len(candidates) // 2]
        rest = candidates[len(candidates) // 2 :]
        if not diverges(half):
            candidates = half
        elif not diverges(rest):
            candidates = rest
        else:
            break
    out.responsible = candidates
    names = ", ".join(candidates)
    out.bisect_note = f"responsible: {names} (with it disabled, the outputs are within {out.threshold:g} step(s) of the simulation)"
    if math.isnan(out.output_divergence):
        out.bisect_note += "; the outputs hold NaN"
