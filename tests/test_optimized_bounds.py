"""The Inf watch's bounds: activations stay fused under the watch, and a fault they hide is still found exactly.

A Conv, MatMul or Gemm of a >= 0 input, then a normalization, a constant scale or bias, a residual sum of
bounded terms (see ``graph_dap.runtime.engine.bounds``) is left unwatched, bounded by its sources' sums:
onnxruntime keeps its Relus fused; a check that fires has the exact check look at the whole chain.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from models import (
    assert_exact,
    init,
    make_model,
    optimized_nodes,
    ort_values,
    residual_stages,
    run_values,
    segment_own_nodes,
    tensor,
    whole_plan,
)
from onnx import helper

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.engine.faults import FaultFilter

R = np.random.default_rng(5)


def relu_chain(w1: np.ndarray, first: str = "Relu"):
    """x -> Relu -> Conv -> BatchNormalization -> Relu -> Conv -> BatchNormalization -> Relu: each Conv's input is >= 0
    (``first``: Identity, and the first Conv reads the model's input, of any sign)."""
    c = w1.shape[0]
    nodes = [
        helper.make_node(first, ["x"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["y1"], name="relu1"),
        helper.make_node("Conv", ["y1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "g", "b", "m", "v"], ["b2"], name="bn2"),
        helper.make_node("Relu", ["b2"], ["y2"], name="relu2"),
    ]
    inits = [init("w1", w1), init("w2", R.standard_normal((c, c, 3, 3)).astype(np.float32)), init("g", np.full(c, 0.5, np.float32)),
             init("b", np.full(c, 0.1, np.float32)), init("m", np.zeros(c, np.float32)), init("v", np.ones(c, np.float32))]  # fmt: skip
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("y2", [1, c, 8, 8])], inits)


def watched_whole(model: onnx.ModelProto, feeds: dict):
    """A session stopped at entry with the nan and inf filters, and the plan of its whole run as an optimized continue."""
    s = DebugSession(model, feeds, break_on=["nan", "inf"])
    s.start()
    return s, whole_plan(s)


def test_with_the_inf_filter_a_relu_is_fused_into_its_conv_and_a_hidden_minus_inf_is_still_found():
    """A Relu hides -Inf (Relu(-Inf) is 0), so the Inf watch had to sum the tensor before it, which kept
    onnxruntime from fusing the Relu into its Conv. A Conv of a >= 0 input can only make -Inf by overflow,
    which the sum of its input, scaled by the weights' norms, rules out or flags: the Relu's output and
    the Conv's input are watched instead, both ends of fused chains."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32))
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert plan.watch.bounded == {"c1": "r0", "b1": "r0", "c2": "y1", "b2": "y1"}
    assert set(plan.watch.watched) == {"r0", "y1", "y2"}
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = segment_own_nodes(segment)
    assert [n.op_type for n in own] == [n.op_type for n in optimized_nodes(model)]
    convs = [n for n in own if n.op_type in ("Conv", "FusedConv")]
    assert len(convs) == 2 and all(dict((a.name, a.s) for a in n.attribute).get("activation") == b"Relu" for n in convs)
    assert s.continue_().reason is StopReason.END
    assert_exact(s.value("y2"), run_values(model, feeds, ["y2"])["y2"], "y2")  # the user's own run's

    # Negative weights and a huge input: conv1 overflows to -Inf, which the Relu turns into 0
    bad = relu_chain(np.full((6, 4, 3, 3), -1.0, np.float32))
    huge = {"x": np.full((1, 4, 8, 8), 1e37, np.float32)}
    values = ort_values(bad, huge, ["c1", "y1", "y2"])
    assert np.isneginf(values["c1"]).any() and np.isfinite(values["y1"]).all() and np.isfinite(values["y2"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.value == "c1", stop.message
    assert_exact(s.value("c1"), values["c1"], "c1")


def test_a_normalization_that_makes_minus_inf_itself_keeps_its_output_watched():
    """An Inf shift makes -Inf of any value: no bound holds, the tensor before the Relu is summed itself."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32))
    shift = next(t for t in model.graph.initializer if t.name == "b")
    shift.CopyFrom(init("b", np.array([0.1, -np.inf, 0.1, 0.1, 0.1, 0.1], np.float32)))
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None and "b1" in plan.watch.watched and "b1" not in plan.watch.bounded
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "bn1" and stop.value == "b1", stop.message


def residual(c: int = 8, weights: dict | None = None, var: dict | None = None, plain_bn: bool = False):
    """r0 = Relu(x); a projection block ``out1 = Relu(Add(BN(Conv(Relu(BN(Conv(r0))))), BN(Conv1x1(r0))))`` and an
    identity block ``out2 = Relu(Sum(BN(Conv(Relu(BN(Conv(out1))))), out1))`` (older exports' Sum), as in resnet50.
    ``weights``, ``var``: a conv's weights and its normalization's variance, by block part (b1a, b1b, b1s, b2a, b2b);
    ``plain_bn``: normalizations that change (almost) nothing."""
    rng = np.random.default_rng(21)
    nodes, inits = [helper.make_node("Relu", ["x"], ["r0"], name="relu0")], []

    def conv_bn(x: str, cin: int, name: str, k: int = 3) -> str:
        w = (weights or {}).get(name)
        w = rng.standard_normal((c, cin, k, k)).astype(np.float32) * 0.3 if w is None else w
        nodes.extend([
            helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], name=f"{name}/conv", pads=[w.shape[-1] // 2] * 4),
            helper.make_node("BatchNormalization", [f"{name}.c", *(f"{name}.{p}" for p in "gbmv")], [f"{name}.bn"], name=f"{name}/bn"),
        ])  # fmt: skip
        g, b, m, v = (
            (np.ones(c), np.zeros(c), np.zeros(c), np.ones(c))
            if plain_bn
            else (rng.uniform(0.5, 1.5, c), rng.standard_normal(c) * 0.1, rng.standard_normal(c) * 0.1, rng.uniform(0.5, 1.5, c))
        )
        v = (var or {}).get(name, v)
        inits.extend(
            [init(f"{name}.w", w), *(init(f"{name}.{p}", np.asarray(a, np.float32)) for p, a in zip("gbmv", (g, b, m, v)))]
        )
        return f"{name}.bn"

    nodes.append(helper.make_node("Relu", [conv_bn("r0", 4, "b1a")], ["y1"], name="b1a/relu"))
    nodes.append(helper.make_node("Add", [conv_bn("y1", c, "b1b"), conv_bn("r0", 4, "b1s", k=1)], ["sum1"], name="b1/add"))
    nodes.append(helper.make_node("Relu", ["sum1"], ["out1"], name="b1/relu"))
    nodes.append(helper.make_node("Relu", [conv_bn("out1", c, "b2a")], ["y2"], name="b2a/relu"))
    nodes.append(helper.make_node("Sum", [conv_bn("y2", c, "b2b"), "out1"], ["sum2"], name="b2/sum"))
    nodes.append(helper.make_node("Relu", ["sum2"], ["out2"], name="b2/relu"))
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("out2", [1, c, 8, 8])], inits)


def first_fault_in_run_order(model: onnx.ModelProto, feeds: dict, skip: tuple[str, ...] = ()):
    """The exhaustive answer: the first node (in the graph's order, its run order here) with a NaN or Inf in its output, from
    onnxruntime's unoptimized values of every tensor; ``skip``: nodes whose Inf is excluded."""
    values = ort_values(model, feeds, [o for n in model.graph.node for o in n.output])
    for n in model.graph.node:
        for o in n.output:
            a = values[o]
            if np.isnan(a).any() or (n.name not in skip and np.isinf(a).any()):
                return n.name, o, values
    return None, None, values


def test_a_residual_blocks_relu_is_fused_with_its_conv_and_sum_under_the_inf_watch():
    """A residual block ends in Relu(Add(BN(Conv(y)), shortcut)), which onnxruntime fuses into one Conv reading the shortcut
    as its Sum input. The Add is left to a bound: from below by the Conv's bound when the shortcut is >= 0 (an earlier
    block's Relu), by both bounds, in one check, when the shortcut is a projection BN(Conv(r0))."""
    model = residual()
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    watch = plan.watch
    assert {"sum1", "sum2"} <= set(watch.bounded) and not {"sum1", "sum2"} & set(watch.watched)
    assert watch.bounded["sum1"] == watch.bounded["b1s.c"] == "y1" and dict(watch.scales["y1"].terms).keys() == {
        "r0"
    }  # the projection's source
    assert watch.bounded["sum2"] == "y2" and not watch.scales["y2"].terms  # the shortcut out1 >= 0 needs no bound
    assert {"r0", "y1", "out1", "y2", "out2"} == set(watch.watched)
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = segment_own_nodes(segment)
    assert [n.op_type for n in own] == [n.op_type for n in optimized_nodes(model)]
    fused = [n for n in own if n.op_type in ("Conv", "FusedConv") and len(n.input) == 4]  # (X, W, B and the Sum)
    assert len(fused) == 2 and all(dict((a.name, a.s) for a in n.attribute).get("activation") == b"Relu" for n in fused)
    assert s.continue_().reason is StopReason.END
    assert_exact(s.value("out2"), run_values(model, feeds, ["out2"])["out2"], "out2")  # the user's own run's


def _diagonal(c: int, cin: int, value: float, k: int = 1) -> np.ndarray:
    """Weights that scale channel ``o % cin`` into channel ``o`` (the middle tap of a k x k kernel): no padding effects."""
    w = np.zeros((c, cin, k, k), np.float32)
    for o in range(c):
        w[o, o % cin, k // 2, k // 2] = value
    return w


def _scaled(b1b: float, b1s: float, b2b: np.ndarray | float = 1.0) -> dict:
    """Normalizations that change nothing; y1 = x, out1 = (b1b + b1s) * x, y2 = out1 (x > 0 uniform)."""
    b2b = _diagonal(8, 8, b2b, 3) if isinstance(b2b, float) else b2b
    weights = {
        "b1a": _diagonal(8, 4, 1.0, 3),
        "b1b": _diagonal(8, 8, b1b, 3),
        "b1s": _diagonal(8, 4, b1s),
        "b2a": _diagonal(8, 8, 1.0, 3),
        "b2b": b2b,
    }
    return {"weights": weights, "plain_bn": True}


RESIDUAL_FAULTS = {
    # the identity block's Conv overflows to -Inf (72 taps of 1e37): its Sum and the Relu hide it
    "conv overflow in the identity block": (_scaled(0.5, 0.5, np.full((8, 8, 3, 3), -1.0, np.float32)), 1e37, "b2b/conv", {"sum1", "sum2"}),
    # the projection shortcut's Conv overflows to -Inf; r0's own check reads b1a's tiny weights: y1's check, with r0's sum, fires
    "shortcut overflow": ({"weights": {"b1a": np.full((8, 4, 3, 3), 1e-36, np.float32), "b1s": np.full((8, 4, 1, 1), -20.0, np.float32)}}, 1e37,
                          "b1s/conv", {"sum1", "sum2"}),
    # two finite halves of -2e38: the projection block's Add makes -Inf itself
    "add overflow": (_scaled(-20.0, -20.0), 1e37, "b1/add", {"sum1", "sum2"}),
    # and +Inf: the shortcut out1 (2e38) plus the Conv of it (2e38); the Relu passes it on
    "sum overflow to +inf": (_scaled(10.0, 10.0), 1e37, "b2/sum", {"sum1", "sum2"}),
    # a normalization of variance -1 makes NaN (its chain is not bounded: the Sum after it is summed itself)
    "nan in the identity block": ({"var": {"b2b": -np.ones(8)}}, None, "b2b/bn", {"sum1"}),
    "nan in the shortcut": ({"var": {"b1s": -np.ones(8)}}, None, "b1s/bn", {"sum2"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RESIDUAL_FAULTS))
def test_a_fault_a_fused_residual_block_hides_is_found_at_the_exact_original_node(case):
    """Each stop is the exhaustive check's: the first tensor, in run order, holding NaN or Inf, with onnxruntime's unoptimized values."""
    options, value, expected, bounded = RESIDUAL_FAULTS[case]
    model = residual(**options)
    x = np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32) if value is None else np.full((1, 4, 8, 8), value, np.float32)
    feeds = {"x": x}
    node, tensor_name, values = first_fault_in_run_order(model, feeds)
    assert node == expected  # (the case makes the fault it says)
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert {"sum1", "sum2"} & set(plan.watch.bounded) == bounded
    stop = s.continue_()
    assert stop.node.id == expected and stop.value == tensor_name, stop.message
    assert stop.reason is (StopReason.NAN if np.isnan(values[tensor_name]).any() else StopReason.INF)
    producer = s.graph.node(expected)
    for name in [*producer.inputs, *producer.outputs]:
        if name and name in values:
            assert_exact(s.value(name), values[name], f"{case}: {name}")


def test_a_source_whose_inf_is_excluded_bounds_nothing():
    """With r0's Relu excluded from the Inf filter, its +Inf would not fire its check: the Conv of it (which turns it
    into -Inf, hidden by the next Relu) keeps its own sum, and the stop is the exhaustive check's (it was missed)."""
    model = relu_chain(np.full((6, 4, 3, 3), -1.0, np.float32))
    x = np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32)
    x[0, 1, 3, 3] = np.inf
    feeds = {"x": x}
    node, name, values = first_fault_in_run_order(model, feeds, skip=("relu0",))
    assert node == "conv1" and np.isneginf(values[name]).any() and np.isfinite(values["y2"]).all()
    s = DebugSession(model, feeds, break_on=["nan", "inf"], inf_exclude=["relu0"])
    s.start()
    plan = whole_plan(s)
    assert plan.watch is not None and "r0" not in plan.watch.checked and "b1" in plan.watch.watched
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.value == name, stop.message
    assert_exact(s.value(name), values[name], name)


def fpn(p0_weights: np.ndarray | None = None, out_weights: np.ndarray | None = None):
    """A feature pyramid as in det640: s0 = Relu(Conv(Relu(x))), s1 = Relu(Conv(s0)) at half size, their 1x1 lateral Convs
    (no activation: of any sign) merged top-down, td = Add(lat0, Resize(lat1)), then p0 = Relu(Conv(td)), p1 = Relu(Conv(lat1)),
    y = Relu(Conv(Concat(p0, Resize(p1)))), prob = Sigmoid(Resize(Conv1x1(y))). Every Relu's input is a Conv of tensors
    bounded by the sums of s0 and s1 or p0 and p1; the Sigmoid's (which hides +Inf and -Inf) by the sum of y."""
    rng = np.random.default_rng(8)
    w = {"w0": _diagonal(8, 4, 1.0, 3), "w1": _diagonal(8, 8, 1.0, 3), "l0": _diagonal(8, 8, 1.0), "l1": _diagonal(8, 8, 1.0),
         "p0": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.3 if p0_weights is None else p0_weights,
         "p1": _diagonal(8, 8, 1.0, 3), "h": rng.standard_normal((4, 16, 3, 3)).astype(np.float32) * 0.3,
         "o": rng.standard_normal((1, 4, 1, 1)).astype(np.float32) if out_weights is None else out_weights}  # fmt: skip
    conv = lambda x, k, out, **a: helper.make_node("Conv", [x, k], [out], name=out, pads=[w[k].shape[-1] // 2] * 4, **a)  # noqa: E731
    nodes = [
        helper.make_node("Relu", ["x"], ["r0"], name="relu0"),
        conv("r0", "w0", "c0"), helper.make_node("Relu", ["c0"], ["s0"], name="s0"),
        conv("s0", "w1", "c1", strides=[2, 2]), helper.make_node("Relu", ["c1"], ["s1"], name="s1"),
        conv("s0", "l0", "lat0"), conv("s1", "l1", "lat1"),
        helper.make_node("Resize", ["lat1", "", "two"], ["up"], name="up", mode="linear"),
        helper.make_node("Add", ["lat0", "up"], ["td"], name="td"),
        conv("td", "p0", "c2"), helper.make_node("Relu", ["c2"], ["p0out"], name="p0"),
        conv("lat1", "p1", "c3"), helper.make_node("Relu", ["c3"], ["p1out"], name="p1"),
        helper.make_node("Resize", ["p1out", "", "two"], ["p1up"], name="p1up", mode="nearest"),
        helper.make_node("Concat", ["p0out", "p1up"], ["fuse"], name="fuse", axis=1),
        conv("fuse", "h", "c4"), helper.make_node("Relu", ["c4"], ["y"], name="head"),
        conv("y", "o", "c5"), helper.make_node("Resize", ["c5", "", "two"], ["big"], name="big", mode="nearest"),
        helper.make_node("Sigmoid", ["big"], ["prob"], name="prob"),
    ]  # fmt: skip
    inits = [init(k, v) for k, v in w.items()] + [init("two", np.array([1, 1, 2, 2], np.float32))]
    return make_model(nodes, [tensor("x", [1, 4, 8, 8])], [tensor("prob", [1, 1, 16, 16])], inits)


def test_a_conv_of_a_bounded_tensor_of_any_sign_is_bounded_too():
    """An FPN's Convs read sums of lateral Convs and upsamplings, of any sign, but within the bound of the sums of the
    Relus they come from (a nearest or linear Resize keeps the largest magnitude, a Concat's is its parts' largest): their
    Relus fuse. So is the head's Sigmoid's input (it hides +Inf and -Inf alike): neither it nor the Conv before it is summed."""
    model = fpn()
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    watch = plan.watch
    assert {"c2", "c3", "c4", "td", "lat0", "up", "fuse"} <= set(watch.bounded) and not {"c2", "c3", "c4"} & set(watch.watched)
    assert watch.bounded["c2"] == "s1" and dict(watch.scales["s1"].terms).keys() == {
        "s0"
    }  # td: lat0 (of s0) + Resize(lat1 (of s1))
    assert watch.bounded["c4"] == "p1out" and dict(watch.scales["p1out"].terms).keys() == {"p0out"}
    # the Sigmoid's input is left to it and to y's check, the Conv before it (a Resize carries no fault on) to the check alone
    assert (
        watch.bounded["big"] == watch.bounded["c5"] == "y"
        and "big" not in watch.watched
        and "c5" not in {*watch.watched, *watch.guards}
    )
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = segment_own_nodes(segment)
    plain = optimized_nodes(model)
    assert [n.op_type for n in own] == [n.op_type for n in plain]
    assert sum(n.op_type == "Relu" for n in own) == 1  # (r0: the input's)
    assert s.continue_().reason is StopReason.END
    assert_exact(s.value("prob"), run_values(model, feeds, ["prob"])["prob"], "prob")  # the user's own run's

    # td = 2e37 everywhere; c2's 72 taps of -1 overflow to -Inf, which its Relu hides
    bad = fpn(np.full((8, 8, 3, 3), -1.0, np.float32))
    huge = {"x": np.full((1, 4, 8, 8), 1e37, np.float32)}
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "c2" and np.isfinite(values["prob"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "c2" and stop.value == name, stop.message
    assert_exact(s.value("c2"), values["c2"], "c2")
    assert_exact(s.value("td"), values["td"], "td")

    # y = 1e37 (at least) somewhere; the 1x1 head Conv of weight 1e2 makes +Inf, which the Sigmoid turns into 1
    bad = fpn(out_weights=np.full((1, 4, 1, 1), 1e2, np.float32))
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "c5" and np.isposinf(values["c5"]).any() and np.isfinite(values["prob"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "c5" and stop.value == name, stop.message
    assert_exact(s.value("c5"), values["c5"], "c5")


def test_a_conv_of_a_value_the_segment_is_fed_is_bounded_by_the_sum_of_its_magnitudes():
    """A Conv of the model's input (of any sign: a network's first Conv, or a part's first, fed what the part before
    made) is bounded by the sum of |input|, which the check reads: its Relu fuses too, and an overflow is still found."""
    model = relu_chain(R.standard_normal((6, 4, 3, 3)).astype(np.float32), first="Identity")
    feeds = {"x": R.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    s, plan = watched_whole(model, feeds)
    assert plan is not None and plan.watch is not None
    assert plan.watch.bounded["b1"] == "y1" and "x" in dict(plan.watch.scales["y1"].terms) and "x" in plan.watch.checked
    segment, _ = s.segments.build_model(plan.ran, feeds, s.store.fixed, plan.wanted, plan.watch)
    own = segment_own_nodes(segment)
    assert [n.op_type for n in own] == [n.op_type for n in optimized_nodes(model)]
    assert "ReduceL1" in {n.op_type for n in segment.graph.node}
    assert s.continue_().reason is StopReason.END

    bad = relu_chain(np.full((6, 4, 3, 3), 1.0, np.float32), first="Identity")
    huge = {"x": np.full((1, 4, 8, 8), -1e37, np.float32)}  # 36 taps of -1e37: -Inf, hidden by the Relu
    node, name, values = first_fault_in_run_order(bad, huge)
    assert node == "conv1" and np.isfinite(values["y1"]).all()
    s = DebugSession(bad, huge, break_on=["nan", "inf"])
    stop = s.continue_()
    assert stop.reason is StopReason.INF and stop.node.id == "conv1" and stop.value == name, stop.message
    assert_exact(s.value(name), values[name], name)


def test_a_shortcut_set_from_outside_is_not_taken_to_be_non_negative():
    """out1 is a Relu's output, but once set (here to -FLT_MAX) and fed to the segment after it, it is any value: the
    identity block's Sum (-FLT_MAX plus a Conv of -1e33) makes -Inf, which its Relu hides. The check reads sum(|out1|)."""
    model = residual(weights={"b2a": _diagonal(8, 8, -1e33 / 3.4e38, 3), "b2b": _diagonal(8, 8, -1.0, 3)}, plain_bn=True)
    feeds = {"x": np.abs(R.standard_normal((1, 4, 8, 8))).astype(np.float32)}
    low = np.full((1, 8, 8, 8), -np.finfo(np.float32).max, np.float32)
    stops = []
    for kwargs in ({"opt_level": "none", "fast": False}, {}):  # the exhaustive check, then the watched optimized continue
        s = DebugSession(model, feeds, break_on=["nan", "inf"], **kwargs)
        s.set_breakpoints(["b2a/conv"])
        assert s.continue_().node.id == "b2a/conv"
        s.set_breakpoints([])
        s.set_value("out1", low)
        stop = s.continue_()
        stops.append((stop.reason, stop.node.id if stop.node else None, stop.value))
        assert stop.reason is StopReason.INF, stop.message
        assert np.isneginf(s.value("sum2")).all() and np.isfinite(s.value("b2b.bn")).all()
    assert stops[0] == stops[1] == (StopReason.INF, "b2/sum", "sum2")


def test_a_nan_in_a_fed_value_that_no_node_reads_stops_nothing():
    """A strided Conv skips the input's odd positions: a NaN there reaches no output, and the exhaustive check runs
    to the end. The check reads sum(|x|) (NaN), taken as +Inf: looked at, nothing found, and no stop claiming the
    optimized graph made a NaN."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
    ]
    model = make_model(
        nodes,
        [tensor("x", [1, 3, 8, 8])],
        [tensor("r", [1, 4, 4, 4])],
        [init("w", R.standard_normal((4, 3, 1, 1)).astype(np.float32))],
    )
    x = R.standard_normal((1, 3, 8, 8)).astype(np.float32)
    x[0, 1, 3, 5] = np.nan
    assert first_fault_in_run_order(model, {"x": x})[0] is None
    s, plan = watched_whole(model, {"x": x})
    assert plan is not None and plan.watch is not None and plan.watch.bounded == {"c": "r"} and "x" in plan.watch.checked
    stop = s.continue_()
    assert stop.reason is StopReason.END, stop.message


def test_a_watched_run_in_parts_is_cut_where_no_residual_sum_reads_across():
    """A cut where a value live across it is read by an Add makes that Add read a model input, which onnxruntime runs
    in its plain layout (no Conv+Add+Relu fusion, for that block and every one after it in the part): the parts are cut
    before a projection block instead (its input read by two Convs), and every block's Add and Relu fuse into its Conv."""
    model = residual_stages("pipiii")
    s = DebugSession(model, {"x": R.standard_normal((1, 16, 8, 8)).astype(np.float32)}, break_on=["nan", "inf"])
    s.start()
    bounds = s.planner.parts(0, len(s.sequence), 2)
    assert len(bounds) == 3 and s.sequence[bounds[1]].id == "b2a"  # (the even cut falls inside b2, before identity block b3)
    fused = 0
    for a, b in zip(bounds, bounds[1:]):
        for filt in (FaultFilter(False, False), FaultFilter(True, True)):
            plan = s.planner.plan(a, b, filt=filt, dtypes=s.executor.dtypes, budget=s.store.budget, conditions=lambda x, y: [],
                                  constants=s.store.fixed, version="probe", optimized=True)  # fmt: skip
            assert plan is not None
            zeros = lambda r: np.zeros((1, 16, 8, 8), np.float32)  # noqa: E731  (every value read is 1x16x8x8)
            feeds, embedded = s.executor.split(plan.reads, zeros, s.values.fixed, s.runs.segment_embedded(s.values))
            segment, _ = s.segments.build_model(plan.ran, feeds, embedded, plan.wanted, plan.watch)
            convs = [n for n in optimized_nodes(segment) if n.op_type == "Conv" and len(n.input) == 4]
            fused += len(convs) if filt.active else 0
            assert all(dict((t.name, t.s) for t in n.attribute).get("activation") == b"Relu" for n in convs)
    assert fused == 6
