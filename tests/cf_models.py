"""Control-flow test models built with onnx.helper, and their equivalents without control flow.

The equivalents (an If's taken branch inlined, a Loop or Scan unrolled, a function
inlined) compute the same values with plain nodes; every value of them is a graph
output, so onnxruntime's own values of every tensor inside a body can be compared
with what graph-dap shows at each iteration.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), functions=(), opset=OPSET, name="g") -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(f.domain, 1) for f in functions if f.domain]
    m = helper.make_model(g, opset_imports=list({o.domain: o for o in imports}.values()), functions=list(functions))
    m.ir_version = 8
    return m


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, dtype=dtype), name + "_t"))


# -- If -------------------------------------------------------------------------------


def if_model(nested: bool = False) -> onnx.ModelProto:
    """``y = If(sum(x) > 0) then relu(x*w)+b else -(x+b)``; both branches read outer values (w, b).

    With ``nested``, the then-branch holds another If on ``x.max() > 2``.
    """
    then_nodes = [
        helper.make_node("Mul", ["x", "w"], ["t_mul"], name="t_mul"),
        helper.make_node("Relu", ["t_mul"], ["t_relu"], name="t_relu"),
        helper.make_node("Add", ["t_relu", "b"], ["t_out"], name="t_add"),
    ]
    if nested:
        inner_then = helper.make_graph(
            [helper.make_node("Sqrt", ["t_out"], ["n_sqrt"], name="n_sqrt")], "inner_then", [], [vi("n_sqrt", [2, 3])]
        )
        inner_else = helper.make_graph(
            [helper.make_node("Neg", ["t_out"], ["n_neg"], name="n_neg")], "inner_else", [], [vi("n_neg", [2, 3])]
        )
        then_nodes += [
            helper.make_node("ReduceMax", ["x"], ["t_max"], keepdims=0, name="t_max"),
            const("two", 2.0),
            helper.make_node("Greater", ["t_max", "two"], ["t_cond"], name="t_cond"),
            helper.make_node("If", ["t_cond"], ["t_final"], then_branch=inner_then, else_branch=inner_else, name="inner_if"),
        ]
        then_out = "t_final"
    else:
        then_out = "t_out"
    then_g = helper.make_graph(then_nodes, "then", [], [vi(then_out, [2, 3])])
    else_g = helper.make_graph(
        [
            helper.make_node("Add", ["x", "b"], ["e_add"], name="e_add"),
            helper.make_node("Neg", ["e_add"], ["e_out"], name="e_neg"),
        ],
        "else",
        [],
        [vi("e_out", [2, 3])],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        const("zero", 0.0),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="cond"),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="the_if"),
        helper.make_node("Mul", ["y", "y"], ["z"], name="square"),
    ]
    w = numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    b = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "b")
    return model(nodes, [vi("x", [2, 3])], [vi("z", [2, 3])], [w, b])


# -- Loop -----------------------------------------------------------------------------


def loop_model(trip: int = 6, exit_at: float | None = None, scan: bool = True, size: int = 4) -> onnx.ModelProto:
    """``h = tanh(h @ w + x * i)`` for ``i < trip`` (Loop with carried ``h``, a scan output of each ``h``).

    ``w`` and ``x`` are read from the outer scope. With ``exit_at``, the body's condition
    is ``sum(h) < exit_at``: the loop ends early.
    """
    body_nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=F, name="cast_i"),
        helper.make_node("MatMul", ["h_in", "w"], ["mm"], name="mm"),
        helper.make_node("Mul", ["x", "i_f"], ["xi"], name="xi"),
        helper.make_node("Add", ["mm", "xi"], ["pre"], name="pre"),
        helper.make_node("Tanh", ["pre"], ["h_out"], name="tanh"),
    ]
    if exit_at is not None:
        body_nodes += [
            helper.make_node("ReduceSum", ["h_out"], ["h_sum"], keepdims=0, name="h_sum"),
            const("limit", exit_at),
            helper.make_node("Less", ["h_sum", "limit"], ["cond_out"], name="keep_going"),
        ]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_same"))
    outs = [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, size])]
    if scan:
        body_nodes.append(helper.make_node("Identity", ["h_out"], ["h_scan"], name="h_scan"))
        outs.append(vi("h_scan", [1, size]))
    body = helper.make_graph(
        body_nodes, "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", [1, size])], outs
    )
    loop_outs = ["h_final", "hs"] if scan else ["h_final"]
    nodes = [
        const("trip", trip, np.int64),
        const("go", True, np.bool_),
        helper.make_node("Loop", ["trip", "go", "h0"], loop_outs, body=body, name="loop"),
        helper.make_node("Relu", ["h_final"], ["y"], name="relu"),
    ]
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((size, size)) * 0.5).astype(np.float32), "w")
    outputs = [vi("y", [1, size])] + ([vi("hs", [None, 1, size])] if scan else [])
    return model(nodes, [vi("h0", [1, size]), vi("x", [1, size])], outputs, [w])


def unrolled_loop(original: onnx.ModelProto, iterations: int) -> onnx.ModelProto:
    """``loop_model`` with its Loop unrolled ``iterations`` times; body value ``v`` of iteration ``k`` is ``v@k``."""
    g = original.graph
    loop = next(n for n in g.node if n.op_type == "Loop")
    body = next(a.g for a in loop.attribute if a.name == "body")
    i_name, cond_name, h_name = (v.name for v in body.input)
    nodes = [n for n in g.node if n.op_type not in ("Loop", "Relu")]
    carried = loop.input[2]
    produced: list[str] = []
    scans: list[str] = []
    for k in range(iterations):
        rename = {i_name: f"{i_name}@{k}", cond_name: f"{cond_name}@{k}", h_name: carried}
        nodes.append(const(f"{i_name}@{k}", k, np.int64))
        nodes.append(const(f"{cond_name}@{k}", True, np.bool_))
        for n in body.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = f"{n.name}@{k}" if n.name else ""
            del copy.input[:]
            copy.input.extend(rename.get(i, i) for i in n.input)
            del copy.output[:]
            for o in n.output:
                rename[o] = f"{o}@{k}"
                copy.output.append(rename[o])
                produced.append(rename[o])
            if n.op_type == "Constant":
                for a in copy.attribute:
                    if a.name == "value":
                        a.t.name = rename[n.output[0]] + "_t"
            nodes.append(copy)
        carried = rename[body.output[1].name]
        if len(body.output) > 2:
            scans.append(rename[body.output[2].name])
    nodes.append(helper.make_node("Identity", [carried], ["h_final"], name="h_final"))
    nodes.append(helper.make_node("Relu", ["h_final"], ["y"], name="relu"))
    outputs = [vi("y", [1, None])] + [helper.make_value_info(p, onnx.TypeProto()) for p in produced]
    if scans:
        nodes.append(const("axis0", [0], np.int64))
        for k, name in enumerate(scans):
            nodes.append(helper.make_node("Unsqueeze", [name, "axis0"], [f"{name}_u"], name=f"unsqueeze{k}"))
        nodes.append(helper.make_node("Concat", [f"{n}_u" for n in scans], ["hs"], axis=0, name="stack"))
        outputs.append(helper.make_value_info("hs", onnx.TypeProto()))
    return model(nodes, list(g.input), outputs, list(g.initializer))


# -- Scan -----------------------------------------------------------------------------


def scan_model(length: int = 5, reverse: bool = False) -> onnx.ModelProto:
    """A running sum over rows: ``acc = acc + log(row)``, each ``acc`` a scan output (Scan-16)."""
    body = helper.make_graph(
        [
            helper.make_node("Log", ["row"], ["lg"], name="log_row"),
            helper.make_node("Add", ["acc_in", "lg"], ["acc_out"], name="acc"),
            helper.make_node("Identity", ["acc_out"], ["acc_scan"], name="acc_scan"),
        ],
        "scan_body",
        [vi("acc_in", [3]), vi("row", [3])],
        [vi("acc_out", [3]), vi("acc_scan", [3])],
    )
    attrs: dict[str, Any] = {"num_scan_inputs": 1}
    if reverse:
        attrs["scan_input_directions"] = [1]
    nodes = [helper.make_node("Scan", ["acc0", "rows"], ["acc_final", "accs"], body=body, name="scan", **attrs)]
    return model(nodes, [vi("acc0", [3]), vi("rows", [length, 3])], [vi("acc_final", [3]), vi("accs", [length, 3])], opset=16)


# -- model-local functions --------------------------------------------------------------


def _ref_node(op, inputs, outputs, name, attribute):
    node = helper.make_node(op, inputs, outputs, name=name)
    node.attribute.append(attribute)
    return node


def function_model() -> onnx.ModelProto:
    """``y = scale_add(scale_add(x, a), b)``: a model-local function called twice, an attribute bound per call."""
    fn = helper.make_function(
        "local",
        "ScaleAdd",
        ["X", "Y"],
        ["Z"],
        [
            helper.make_node("Constant", [], ["k"], value_float=0.0, name="k"),
            _ref_node("Constant", [], ["f"], "f", helper.make_attribute_ref("value_float", TensorProto.FLOAT, ref_attr_name="factor")),
            helper.make_node("Mul", ["X", "f"], ["XS"], name="scale"),
            helper.make_node("Add", ["XS", "Y"], ["S"], name="add"),
            helper.make_node("Add", ["S", "k"], ["Z"], name="plus_k"),
        ],
        [helper.make_opsetid("", OPSET)],
        attributes=["factor"],
    )
    nodes = [
        helper.make_node("ScaleAdd", ["x", "a"], ["u"], domain="local", factor=2.0, name="first_call"),
        helper.make_node("ScaleAdd", ["u", "b"], ["y"], domain="local", factor=-3.0, name="second_call"),
    ]
    a = numpy_helper.from_array(np.arange(4, dtype=np.float32), "a")
    b = numpy_helper.from_array(np.ones(4, np.float32), "b")
    return model(nodes, [vi("x", [4])], [vi("y", [4])], [a, b], functions=[fn])


# -- sequences ------------------------------------------------------------------------


def sequence_model() -> onnx.ModelProto:
    """A Loop that grows a sequence (SequenceInsert of each iteration's row), then ConcatFromSequence."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Cast", ["i"], ["i_f"], to=F, name="cast"),
            helper.make_node("Mul", ["x", "i_f"], ["row"], name="row"),
            helper.make_node("SequenceInsert", ["seq_in", "row"], ["seq_out"], name="insert"),
        ],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), helper.make_tensor_sequence_value_info("seq_in", F, None)],
        [vi("cond_out", [], TensorProto.BOOL), helper.make_tensor_sequence_value_info("seq_out", F, None)],
    )
    nodes = [
        const("trip", 3, np.int64),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F, name="empty"),
        helper.make_node("Loop", ["trip", "", "empty"], ["rows"], body=body, name="grow"),
        helper.make_node("ConcatFromSequence", ["rows"], ["y"], axis=0, new_axis=1, name="concat"),
    ]
    return model(nodes, [vi("x", [2])], [vi("y", [3, 2])])
