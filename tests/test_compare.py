"""Comparing runs in lockstep: metrics, tolerance, and the first divergence named at its origin."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from light import LIGHT_MODELS, light_inputs
from models import chain_feeds, chain_model, make_model, ort_values, tensor
from onnx import helper, numpy_helper

from graph_dap.runtime import DebugSession, StopReason, load_graph
from graph_dap.runtime.engine.options import session_options
from graph_dap.runtime.tools.compare import (
    METRICS,
    CompareError,
    Comparison,
    Condition,
    DumpSource,
    ModelSource,
    OptimizedSource,
    Reference,
    RunnerSource,
    Tolerance,
    compare_arrays,
    compare_model,
    parse_reference,
)
from graph_dap.runtime.tools.dump import dump_model


def perturbed(model: onnx.ModelProto, name: str, delta: float) -> onnx.ModelProto:
    """A copy of ``model`` with initializer ``name`` shifted by ``delta``."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, t in enumerate(m.graph.initializer):
        if t.name == name:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) + np.float32(delta), name))
            return m
    raise KeyError(name)


def reference_metrics(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """The metrics as their definitions say, straight in numpy (float64)."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.abs(a - b)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(d == 0, 0.0, d / np.abs(b))
    return {
        "max_abs": float(d.max()),
        "max_rel": float(rel.max()),
        "mse": float(np.mean(d * d)),
        "cosine": float(a @ b / np.sqrt((a @ a) * (b @ b))),
        "snr": float(10 * np.log10((b @ b) / (d @ d))) if d.any() else math.inf,
    }


# -- metrics -----------------------------------------------------------------------


def test_metrics_follow_their_definitions():
    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, 50)).astype(np.float32)
    a = (b + rng.standard_normal(b.shape).astype(np.float32) * 1e-3).astype(np.float32)
    result = compare_arrays(a, b)
    want = reference_metrics(a, b)
    for k in METRICS:
        assert result.metrics[k] == pytest.approx(want[k], rel=1e-9), k
    assert result.passed is bool(np.allclose(a, b, rtol=1e-4, atol=1e-5))
    assert result.mismatches == int(np.count_nonzero(~np.isclose(a, b, rtol=1e-4, atol=1e-5)))


def test_metrics_are_the_same_in_chunks(monkeypatch):
    import graph_dap.runtime.tools.metrics as metrics

    rng = np.random.default_rng(1)
    b = rng.standard_normal(1000)
    a = b + rng.standard_normal(1000) * 1e-2
    whole = compare_arrays(a, b)
    monkeypatch.setattr(metrics, "_CHUNK", 7)
    chunked = compare_arrays(a, b)
    for k in METRICS:
        assert chunked.metrics[k] == pytest.approx(whole.metrics[k], rel=1e-12), k
    assert chunked.mismatches == whole.mismatches


def test_allclose_rule_matches_numpy_inside_and_outside_the_tolerance():
    b = np.array([0.0, 1.0, -2.0, 1e-9, 100.0], np.float64)
    allowed = 1e-5 + 1e-4 * np.abs(b)
    for factor in (0.5, 0.99, 1.01, 2.0):
        for i in range(b.size):
            a = b.copy()
            a[i] += factor * allowed[i]
            got = compare_arrays(a, b, Tolerance(1e-5, 1e-4))
            assert got.passed is bool(np.allclose(a, b, rtol=1e-4, atol=1e-5)) is (factor < 1), (factor, i)


def test_nan_matches_nan_and_nothing_else():
    b = np.array([np.nan, 1.0, np.inf, -np.inf], np.float32)
    assert compare_arrays(b.copy(), b).passed
    assert compare_arrays(b.copy(), b).metrics["max_abs"] == 0
    a = b.copy()
    a[0] = 0.0  # NaN in the reference only
    r = compare_arrays(a, b)
    assert not r.passed and r.mismatches == 1 and math.isinf(r.metrics["max_abs"])
    a = b.copy()
    a[2] = -np.inf  # inf of the other sign
    assert not compare_arrays(a, b).passed


def test_shapes_dtypes_integers_and_strings():
    r = compare_arrays(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not r.passed and "shape 2x3 vs reference 3x2" in r.note
    assert compare_arrays(np.arange(5, dtype=np.int64), np.arange(5, dtype=np.int64)).passed
    r = compare_arrays(np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64))
    assert not r.passed and r.metrics["max_abs"] == 1
    assert compare_arrays(np.array(["a", "b"]), np.array(["a", "b"])).passed
    assert not compare_arrays(np.array(["a", "b"]), np.array(["a", "c"])).passed
    r = compare_arrays(np.ones(3, np.float16), np.ones(3, np.float32))
    assert r.passed and "dtype float16 vs reference float32" in r.note


def test_fail_conditions_replace_the_allclose_rule():
    b = np.ones(10, np.float32)
    a = b + np.float32(0.01)
    assert not compare_arrays(a, b).passed
    assert compare_arrays(a, b, Tolerance.make(fail_if=["max_abs>0.1"])).passed
    assert not compare_arrays(a, b, Tolerance.make(fail_if=["max_abs>0.1", "snr<60"])).passed
    c = Condition.parse("cosine < 0.999")
    assert (c.metric, c.op, c.threshold) == ("cosine", "<", 0.999)
    for bad in ("cosine", "speed<3", "snr<<3", "max_abs>x"):
        with pytest.raises(CompareError, match="not understood"):
            Condition.parse(bad)
    with pytest.raises(CompareError, match="non-negative"):
        Tolerance(-1.0, 0.0)


# -- the first divergence ----------------------------------------------------------


def _criterion(metric: str, run: np.ndarray, ref: np.ndarray) -> Tolerance:
    """A fail condition on ``metric`` between a perfect match and what the perturbation does."""
    m = reference_metrics(run, ref)[metric]
    if metric == "cosine":
        return Tolerance.make(fail_if=[f"cosine<{1 - (1 - m) / 10!r}"])
    if metric == "snr":
        return Tolerance.make(fail_if=[f"snr<{m + 10!r}"])
    return Tolerance.make(fail_if=[f"{metric}>{m / 10!r}"])


@pytest.mark.parametrize("metric", ["allclose", *METRICS])
def test_a_perturbed_weight_is_named_as_the_first_divergence_for_each_metric(tmp_path, metric):
    base, feeds = chain_model(), chain_feeds()
    bad = perturbed(base, "b", 0.01)  # read by node 'add' only
    dump_model(base, tmp_path / "ref.npz", feeds)
    truth, run = ort_values(base, feeds), ort_values(bad, feeds)
    tol = Tolerance() if metric == "allclose" else _criterion(metric, run["a"], truth["a"])
    result = compare_model(bad, Reference("dump", str(tmp_path / "ref.npz")), tolerance=tol)
    c = result.comparison
    first = c.first_divergence
    assert first is not None and first.node.id == "add" and first.value == "a"
    rows = {r.value: r for r in c.rows}
    assert [v for v, r in rows.items() if not r.passed][0] == "a"
    assert rows["c"].passed and rows["r"].passed and rows["side"].passed
    assert rows["a"].origin and not rows["m"].origin  # 'm' fails too, but only by propagation
    for k in METRICS:
        assert rows["a"].metrics[k] == pytest.approx(reference_metrics(run["a"], truth["a"])[k], rel=1e-6), k
    d = result.to_dict()
    assert any("made from another model" in n for n in d["notes"])
    assert d["first_divergence"]["node"] == {"id": "add", "name": "add", "op_type": "Add", "index": 2, "path": []}
    assert d["first_divergence"]["value"] == "a" and set(d["first_divergence"]["metrics"]) == set(METRICS)


def test_identical_runs_have_no_divergence(tmp_path):
    base, feeds = chain_model(), chain_feeds()
    dump_model(base, tmp_path / "ref.npz", feeds)
    result = compare_model(base, f"dump:{tmp_path / 'ref.npz'}")
    d = result.to_dict()
    assert d["first_divergence"] is None and d["failed"] == 0
    assert d["compared"] == 6 and d["matched"] == 6 and d["unmatched_run"] == 0 and d["unmatched_reference"] == 0
    assert all(r["metrics"]["max_abs"] == 0 and r["metrics"]["snr"] == "inf" for r in d["rows"])  # valid JSON: no Infinity


def test_a_second_model_matches_by_value_name_and_counts_the_rest():
    base, feeds = chain_model(), chain_feeds()
    other = perturbed(base, "s", 0.5)  # read by 'mul'
    other.graph.node[5].output[0] = "side_renamed"
    other.graph.output[1].name = "side_renamed"
    graph = load_graph(base)
    source = ModelSource(load_graph(other), feeds, {o for n in graph.nodes for o in n.outputs})
    c = Comparison(graph, source)
    stream = RunnerSource(graph, feeds)
    for node in graph.nodes:
        c.observe(node, stream.outputs(node))
    d = c.to_dict()
    assert d["matched"] == 5 and d["unmatched_run"] == 1 and d["unmatched_reference"] == 1
    assert d["first_divergence"]["node"]["name"] == "mul"
    assert "side" not in {r["value"] for r in d["rows"]}


def test_the_other_model_must_take_the_same_inputs():
    other = chain_model()
    other.graph.input[0].name = "image"
    other.graph.node[0].input[0] = "image"
    other.graph.node[5].input[0] = "image"
    with pytest.raises(CompareError, match="input 'image' has no counterpart"):
        ModelSource(load_graph(other), chain_feeds(), {"y"})


def test_a_reference_run_with_other_inputs_names_no_node(tmp_path):
    base = chain_model()
    dump_model(base, tmp_path / "ref.npz", chain_feeds(1))
    result = compare_model(base, Reference("dump", str(tmp_path / "ref.npz")), chain_feeds(2))
    d = result.to_dict()
    assert d["input_mismatches"] == ["x"] and d["failed"] > 0
    assert d["first_divergence"] is None
    assert any("other inputs" in n for n in d["notes"])


def test_a_plain_npz_of_values_is_a_reference_too(tmp_path):
    base, feeds = chain_model(), chain_feeds(5)
    np.savez(tmp_path / "theirs.npz", **ort_values(base, feeds), **feeds)  # made by some other script
    d = compare_model(base, Reference("dump", str(tmp_path / "theirs.npz"))).to_dict()  # its 'x' is used
    assert d["failed"] == 0 and d["compared"] == 6
    assert d["matched"] == 6 and d["unmatched_reference"] == 0


def test_compare_uses_the_dumps_inputs_when_given_none(tmp_path):
    base = chain_model()
    dump_model(base, tmp_path / "ref.npz", chain_feeds(7))
    d = compare_model(base, Reference("dump", str(tmp_path / "ref.npz"))).to_dict()
    assert d["failed"] == 0 and d["input_mismatches"] == []
    assert not any("another model" in n for n in d["notes"])
    assert any("the dump's" in n for n in d["notes"])


def _materialized(model: onnx.ModelProto, conv_name: str, feeds, scale: float = 1.0) -> onnx.ModelProto:
    """The model with the weight of ``conv_name`` (made by a ConstantOfShape) as an initializer, times ``scale``."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    conv = next(n for n in m.graph.node if n.name == conv_name)
    w_name = conv.input[1]
    w = ort_values(model, feeds, [w_name])[w_name]
    producer = next(i for i, n in enumerate(m.graph.node) if w_name in n.output)
    del m.graph.node[producer]
    m.graph.initializer.append(numpy_helper.from_array((w * np.float32(scale)).astype(w.dtype), w_name))
    if m.ir_version < 4:  # initializers must be graph inputs too
        m.graph.input.append(helper.make_tensor_value_info(w_name, onnx.TensorProto.FLOAT, list(w.shape)))
    return m


def test_a_perturbed_weight_in_a_light_model_is_the_first_divergence(tmp_path):
    path = LIGHT_MODELS["squeezenet"]
    original = onnx.load(path)
    feeds = light_inputs(original)
    base = _materialized(original, "n29", feeds)
    bad = _materialized(original, "n29", feeds, scale=1.01)
    onnx.save(base, str(tmp_path / "base.onnx"))
    onnx.save(bad, str(tmp_path / "bad.onnx"))
    dump_model(tmp_path / "base.onnx", tmp_path / "base.npz", feeds)
    for ref in (Reference("dump", str(tmp_path / "base.npz")), Reference("model", str(tmp_path / "base.onnx"))):
        result = compare_model(tmp_path / "bad.onnx", ref, feeds)
        d = result.to_dict()
        assert d["first_divergence"]["node"]["name"] == "n29", ref
        assert d["first_divergence"]["value"] == "r29"
        failing = [r for r in d["rows"] if not r["pass"]]
        assert failing and all(r["order"] >= failing[0]["order"] for r in failing)
        assert [r["node"]["name"] for r in d["rows"] if r["origin"]] == ["n29"]
        assert d["unmatched_run"] == 0
        origin_order = next(r["order"] for r in d["rows"] if r["origin"])
        assert all(r["pass"] for r in d["rows"] if r["order"] < origin_order)  # everything before it matches


def test_the_comparison_consulted_by_a_debug_session(tmp_path):
    """As a debug adapter uses it: observe after each node; the verdict says when to break."""
    base, feeds = chain_model(), chain_feeds()
    dump_model(base, tmp_path / "ref.npz", feeds)
    bad = perturbed(base, "b", 0.01)
    session = DebugSession(bad, feeds, skip_constants=False)
    comparison = Comparison(session.graph, DumpSource(tmp_path / "ref.npz"), Tolerance())
    assert comparison.check_inputs(session.inputs) == []
    verdicts = {}
    session.start()
    while True:
        node = session.current
        stop = session.step()
        verdicts[node.id] = comparison.observe(node, {o: session.value(o) for o in node.outputs if session.has_value(o)})
        if stop.reason is StopReason.END or session.at_end:
            break
    assert [n for n, v in verdicts.items() if v.first] == ["add"]
    assert [n for n, v in verdicts.items() if v.origin] == ["add"]
    assert verdicts["mul"].failed and not verdicts["mul"].origin
    assert "first divergence at add (Add): 'a'" in verdicts["add"].message
    # stepping back and observing again replaces, it does not add
    session.step_back()
    node = session.current
    session.step()
    again = comparison.observe(node, {o: session.value(o) for o in node.outputs})
    assert len(comparison.rows) == 6 and again.node.id == verdicts[node.id].node.id
    comparison.reset()
    assert comparison.rows == [] and comparison.first_divergence is None


def test_provider_reference_runs_in_lockstep():
    base, feeds = chain_model(), chain_feeds()
    d = compare_model(base, Reference("provider", "CPU"), feeds).to_dict()
    assert d["failed"] == 0 and d["compared"] == 6


def _ort_outputs(model: onnx.ModelProto, feeds, level: str):
    sess = ort.InferenceSession(model.SerializeToString(), session_options(level), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


@pytest.mark.parametrize("budget", [1, 256 << 20])
def test_the_optimized_side_shows_what_onnxruntime_computes_at_that_level(budget):
    path = LIGHT_MODELS["squeezenet"]
    model = onnx.load(path)
    feeds = light_inputs(model)
    graph = load_graph(path)
    side = OptimizedSource(graph, feeds, "extended", budget_bytes=budget)
    try:
        assert 0 < len(side.surviving) < side.total_values
        got = {}
        for node in graph.nodes:
            got.update(side.outputs(node))
        assert set(got) == set(side.surviving)
        assert side.runs == (len(side.surviving) if budget == 1 else 1)
        truth = _ort_outputs(model, feeds, "extended")
        for name, value in truth.items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    finally:
        side.close()


def test_against_an_optimization_level_compares_only_the_names_that_survive():
    path = LIGHT_MODELS["squeezenet"]
    model = onnx.load(path)
    feeds = light_inputs(model)
    result = compare_model(path, Reference("opt_level", "none"), feeds, opt_level="extended", tolerance=Tolerance(1e-4, 1e-3))
    d = result.to_dict()
    assert 0 < d["compared"] < len(ort_values(model, feeds))
    assert d["compared"] == d["matched"] and d["unmatched_reference"] > 0
    assert "optimized by onnxruntime at level 'extended'" in d["run"]
    assert any("fused away" in n for n in d["notes"])
    with pytest.raises(CompareError, match="both sides"):
        compare_model(path, Reference("opt_level", "none"), feeds, opt_level="none")


def test_references_parse_from_launch_arguments():
    assert parse_reference("run.npz") == Reference("dump", "run.npz")
    assert parse_reference("provider:CUDA") == Reference("provider", "CUDA")
    assert parse_reference("opt:all") == Reference("opt_level", "all")
    assert parse_reference("other.onnx") == Reference("model", "other.onnx")
    assert parse_reference({"optLevel": "basic"}) == Reference("opt_level", "basic")
    assert parse_reference({"dump": "a/b.npz"}) == Reference("dump", "a/b.npz")
    for bad in ("whatever", {"dump": 3}, {}):
        with pytest.raises(CompareError):
            parse_reference(bad)


def test_sequences_are_compared_element_by_element():
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["seq"], name="split", axis=0),
        helper.make_node("ConcatFromSequence", ["seq"], ["y"], name="cat", axis=0),
    ]
    model = make_model(nodes, [tensor("x", [4, 2])], [tensor("y", [4, 2])])
    feeds = {"x": np.arange(8, dtype=np.float32).reshape(4, 2)}
    d = compare_model(model, Reference("provider", "CPU"), feeds).to_dict()
    rows = {r["value"]: r for r in d["rows"]}
    assert rows["seq"]["pass"] and rows["seq"]["dtype"].startswith("seq(") and rows["y"]["pass"]


@pytest.mark.parametrize("metric", METRICS)
def test_nan_or_inf_on_one_side_fails_every_metric(metric):
    """A value NaN (or Inf) where the other side is finite is no agreement, whatever the rule: an all-NaN run,
    one NaN among finite values, an Inf against a finite value. Each metric's condition in its own direction fails."""
    b = np.linspace(0.5, 1.5, 64).astype(np.float32)
    cond = {"max_abs": "max_abs>1e-3", "max_rel": "max_rel>1e-3", "mse": "mse>1e-6", "cosine": "cosine<0.999", "snr": "snr<40"}
    rule = Tolerance.make(fail_if=[cond[metric]])
    assert compare_arrays(b.copy(), b, rule).passed
    for bad in (np.full_like(b, np.nan), np.where(np.arange(64) == 7, np.nan, b), np.where(np.arange(64) == 3, np.inf, b)):
        for run, ref in ((bad, b), (b, bad)):
            r = compare_arrays(run, ref, rule)
            assert not r.passed, (metric, run, ref)
            assert math.isnan(r.metrics["cosine"]) and r.metrics["snr"] == -math.inf
    r = compare_arrays([np.ones(3, np.float32), np.full(3, np.nan, np.float32)], [np.ones(3, np.float32)] * 2, rule)
    assert not r.passed and math.isnan(r.metrics["cosine"])  # a sequence's worst element is the NaN one
