"""Quantized models against their float model: pairing by structure, the three errors, weights, sensitivity, the CLI.

Models are built here and quantized by onnxruntime's own tools (quantize_static in QDQ and
QOperator, quantize_dynamic, the MatMulNBits quantizer); values are checked against
onnxruntime's runs and against its qdq_loss_debug.
"""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from quant_models import block_quantized, cnn, coarser, matmul, quantize, samples

from graph_dap.cli import main
from graph_dap.runtime.engine.options import session_options
from graph_dap.runtime.tools.quant.analysis import compare_quantized
from graph_dap.runtime.tools.quant.errors import measure
from graph_dap.runtime.tools.quant.kernels import compare_kernels
from graph_dap.runtime.tools.quant.pairing import How
from graph_dap.runtime.tools.quant.params import QuantParams
from graph_dap.runtime.tools.quant.sensitivity import _baseline, in_float, run_sensitivity
from graph_dap.runtime.tools.quant.view import RECOMPUTED
from graph_dap.runtime.tools.quant.weights import dequantized_weight


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant")
    f = cnn(d / "float.onnx")
    out = {"float": f, "dir": d}
    for kind in ("qdq", "qoperator", "dynamic"):
        out[kind] = quantize(f, d / f"{kind}.onnx", kind)
    np.savez(d / "x.npz", **samples(1)[0])
    out["x"] = d / "x.npz"
    return out


def _run(path, feeds, names=None):
    """onnxruntime's whole run of the model (optimizations off), with ``names`` made outputs."""
    m = onnx.load(str(path)) if not isinstance(path, onnx.ModelProto) else onnx.ModelProto.FromString(path.SerializeToString())
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names or () if n not in have)
    sess = ort.InferenceSession(m.SerializeToString(), session_options("none"))
    return dict(zip(names or [o.name for o in sess.get_outputs()], sess.run(names, feeds)))


def test_every_format_pairs_by_structure_and_measures_against_onnxruntime(models):
    """QDQ (Relu folded into conv1's range), QOperator (integer outputs dequantized) and dynamic (names kept):
    every float tensor is paired or folded, every weight compared, and the accumulated error is the one between
    onnxruntime's own values of the two models."""
    feeds = samples(1)[0]
    float_values = _run(models["float"], feeds, ["c1", "c2", "s", "y"])
    for kind in ("qdq", "qoperator", "dynamic"):
        result = compare_quantized(models[kind], models["float"], feeds)
        pairing = result.pairing
        counts = pairing.counts()
        assert counts["float_unpaired"] == 0, (kind, pairing.unpaired_float)
        assert counts["weights_paired"] == counts["float_weights"] == 6, kind
        assert len(result.weights) == 6 and not result.weights_skipped
        if kind == "dynamic":
            assert pairing.pairs["r1"].how is How.NAME and "c1" in pairing.pairs
        else:
            assert pairing.pairs["r1"].how is How.FOLDED and "c1" in pairing.folded  # Relu folded into the quantized range
            assert pairing.pairs["c2"].how is How.STRUCTURE
            assert counts["float_paired"] == counts["float_activations"] == 7, kind  # the tensor before the Relu too
            group = next(g for g in result.groups if g.group.name == "conv1+relu1")
            assert [p.float_name for p in group.group.outputs] == ["r1", "c1"]  # what consumers read first
            c1 = pairing.pairs["c1"]
            value = _run(pairing.quant_view.graph.model, feeds, [c1.quant_name, pairing.pairs["r1"].quant_name])
            if kind == "qdq":  # the Conv's own output, before the QuantizeLinear that folds the Relu
                assert c1.how is How.STRUCTURE and pairing.quant_view.graph.producer(c1.quant_name).op_type == "Conv"
            else:  # recomputed beside the QLinearConv; requantized, it is the kernel's output (up to the last step's rounding)
                assert c1.how is How.RECOMPUTED and pairing.source_graph is not pairing.quant_view.graph
                assert pairing.source_graph.producer(c1.quant_name) is None  # not in the user's model
                params = pairing.quant_view.params[pairing.pairs["r1"].quant_name]
                got = params.quantize(value[c1.quant_name]).astype(np.int32)
                kernel = value[pairing.pairs["r1"].quant_name].astype(np.int32)
                assert np.abs(got - kernel).max() <= 1 and np.mean(got == kernel) > 0.99
                other = next(g.group for g in result.groups if g.group.name == "conv2")
                kept = in_float(pairing, [other])  # sensitivity runs the user's model: none of these nodes
                assert not any(n.name.startswith(RECOMPUTED) for n in kept.graph.node)
            assert group.per_output["c1"].snr == pytest.approx(measure(value[c1.quant_name], float_values["c1"]).snr, abs=1e-6)
        assert pairing.pairs["x"].how is How.INPUT
        quant_values = _run(models[kind], feeds, [pairing.pairs[n].quant_name for n in ("c2", "s", "y")])
        by_name = {g.group.outputs[0].float_name: g for g in result.groups}
        view = pairing.quant_view
        for name in ("c2", "s", "y"):
            q = pairing.pairs[name].quant_name
            value = view.params[q].dequantize(quant_values[q]) if view.form[q].value == "int" else quant_values[q]
            want = measure(value, float_values[name])
            assert by_name[name].accumulated.snr == pytest.approx(want.snr, abs=1e-6), (kind, name)
            assert by_name[name].local.snr >= by_name[name].accumulated.snr - 3  # the group's own error, not the sum
        if kind != "dynamic":
            g = by_name["c2"]
            assert g.params is not None and g.quant_only is not None and g.local.steps is not None
            assert g.quant_only.steps <= 0.5 + 1e-3 or g.clipped > 0  # rounding is at most half a step; more is clipping


def test_pairs_and_sqnr_agree_with_onnxruntime_qdq_loss_debug(models, tmp_path):
    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization import qdq_loss_debug as qld

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples(1))

        def get_next(self):
            return next(self.items, None)

    acts = {}
    for kind in ("float", "qdq"):
        qld.modify_model_output_intermediate_tensors(str(models[kind]), str(tmp_path / f"{kind}_aug.onnx"))
        acts[kind] = qld.collect_activations(str(tmp_path / f"{kind}_aug.onnx"), Reader(), session_options("none"))
    theirs = qld.compute_activation_error(qld.create_activation_matching(acts["qdq"], acts["float"]))
    their_weights = qld.compute_weight_error(qld.create_weight_matching(str(models["float"]), str(models["qdq"])))
    result = compare_quantized(models["qdq"], models["float"], samples(1)[0])
    ours = {p.float_name: g for g in result.groups for p in g.group.outputs}
    compared = [n for n, e in theirs.items() if "xmodel_err" in e]
    assert len(compared) >= 6
    for name in compared:
        assert name in ours, name  # graph-dap pairs every tensor qdq_loss_debug pairs
        assert ours[name].per_output[name].snr == pytest.approx(theirs[name]["xmodel_err"], abs=0.01), name
    weights = {w.float_name: w for w in result.weights}
    assert set(their_weights) <= set(weights)
    for name, snr in their_weights.items():
        assert weights[name].error.snr == pytest.approx(snr, abs=0.01), name


def test_block_quantized_weights_match_onnxruntimes_dequantization(tmp_path):
    pytest.importorskip("onnx_ir")  # onnxruntime's MatMulNBits quantizer needs it
    f = matmul(tmp_path / "mm.onnx")
    eye = np.eye(64, dtype=np.float32)
    feeds = {"a": np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)}
    want_float = _run(f, feeds)["y"]
    for name, path in block_quantized(f, tmp_path).items():
        result = compare_quantized(path, f, feeds)
        (w,) = result.weights
        assert w.granularity == "block" and w.params.block_size == 32, name
        # onnxruntime's own dequantization: the model on an identity input is its weight
        seen = np.concatenate([_run(path, {"a": eye[i : i + 4]})["y"] for i in range(0, 64, 4)])
        mine, _, _ = dequantized_weight(result.pairing, result.pairing.weights[0])
        np.testing.assert_allclose(mine, seen, atol=1e-6)
        assert w.error.snr == pytest.approx(measure(seen, onnx.numpy_helper.to_array(onnx.load(str(f)).graph.initializer[0])).snr, abs=1e-3)
        assert w.worst_part_snr <= w.error.snr and w.error.steps <= 1.0 + 1e-6
        (g,) = result.groups
        assert g.accumulated.snr == pytest.approx(measure(_run(path, feeds)["y"], want_float).snr, abs=1e-4)


def test_a_planted_coarse_layer_is_first_by_local_error_and_by_sensitivity(models, tmp_path):
    bad = coarser(models["qdq"], tmp_path / "bad.onnx", "c2_scale")  # conv2's output: 16x coarser steps
    feeds = samples(1)[0]
    result = compare_quantized(bad, models["float"], feeds)
    worst = result.ranked[0]
    assert worst.group.name == "conv2" and [p.float_name for p in worst.group.outputs] == ["c2"]
    assert result.first_divergence is worst  # the earliest group whose own error breaks snr<20
    assert result.ranked[0].accumulated.snr < 20 < min(g.accumulated.snr for g in result.groups[:2])
    later = [g for g in result.groups if g.group.index > worst.group.index]
    assert all(not result.born(g) for g in later)  # downstream groups inherit the error; they do not add it
    sens = run_sensitivity(result, feeds, target_snr=30.0)
    assert sens.ranked[0].name == "conv2" and sens.ranked[0].recovered > 10
    assert sens.all_float_snr > 80  # every group in float is the float model
    assert sens.nodes_to_exclude == ["conv2", "add"] and sens.chosen_snr >= 30  # add: the reader of c2 keeps its Q/DQ
    assert sens.runs == len(sens.ranked) + 1 + len(sens.chosen)
    whole = run_sensitivity(result, feeds, budget_bytes=0)  # each group's run a whole run, not only what it changes
    assert [(g.index, g.output_snr) for g in whole.ranked] == [(g.index, g.output_snr) for g in sens.ranked]
    # QOperator: conv2's integer output is read by the QLinearAdd at the same (coarse) scale: kept in float with it
    bad = coarser(models["qoperator"], tmp_path / "bad_qop.onnx", "c2_scale")
    result = compare_quantized(bad, models["float"], feeds)
    assert result.ranked[0].group.name == "conv2" and result.first_divergence is result.ranked[0]
    sens = run_sensitivity(result, feeds, target_snr=30.0)
    assert sens.ranked[0].name == "conv2" and sens.ranked[0].recovered > 10 and sens.ranked[1].recovered < 1
    assert sens.nodes_to_exclude == ["conv2", "add"] and sens.chosen_snr >= 30
    assert sens.all_float_snr > 80  # every group in float, reading each other's float values: the float model
    # its values sized past the contrib QLinear ops that stop onnx's shape inference: held, so each rerun is a cone
    assert _baseline(result.pairing, feeds, ["CPUExecutionProvider"], 1 << 30, "none") is not None
    whole = run_sensitivity(result, feeds, budget_bytes=0)  # several groups in float at once: the cones equal whole runs
    assert [(g.index, g.output_snr) for g in whole.ranked] == [(g.index, g.output_snr) for g in sens.ranked]


def test_sensitivity_over_a_data_set_adds_each_inputs_energies(models, tmp_path, capsys):
    """One input's ranking moves with what it shows; over a data set each group's output SQNR adds the inputs' signal
    and noise energies. Checked against onnxruntime's runs of the model with conv2 in float on each input; the cones
    equal whole runs; the command line reads the data set as scan reads its inputs."""
    bad = coarser(models["qdq"], tmp_path / "bad.onnx", "c2_scale")
    data = samples(3)
    result = compare_quantized(bad, models["float"], data[0])
    sens = run_sensitivity(result, data=data)
    assert sens.inputs == 3 and sens.ranked[0].name == "conv2" and "over 3 inputs" in sens.text()
    whole = run_sensitivity(result, data=data, budget_bytes=0)
    assert [(g.index, g.output_snr) for g in whole.ranked] == [(g.index, g.output_snr) for g in sens.ranked]
    conv2 = next(g.group for g in result.groups if g.group.name == "conv2")
    sess = ort.InferenceSession(in_float(result.pairing, [conv2]).SerializeToString(), session_options("none"))
    signal = noise = 0.0
    for feeds in data:
        want = _run(models["float"], feeds)
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        for name, w in want.items():
            signal += float(np.sum(w.astype(np.float64) ** 2))
            noise += float(np.sum((got[name].astype(np.float64) - w) ** 2))
    assert sens.ranked[0].output_snr == pytest.approx(10 * math.log10(signal / noise), abs=1e-3)
    folder = tmp_path / "data"
    folder.mkdir()
    for i, feeds in enumerate(data):
        np.savez(folder / f"x{i}.npz", **feeds)
    argv = ["compare", str(bad), "--against-model", str(models["float"]), "--inputs", str(folder / "x0.npz"), "--sensitivity"]
    assert main([*argv, "--sensitivity-data", str(folder), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)["sensitivity"]
    assert got["inputs"] == 3 and got["ranked"][0]["group"] == "conv2"
    assert got["ranked"][0]["output_snr"] == pytest.approx(sens.ranked[0].output_snr, abs=1e-6)
    assert main([*argv[:-1], "--sensitivity-data", str(folder)]) == 2
    assert "--sensitivity-data needs --sensitivity" in capsys.readouterr().err


def test_the_command_line_ranks_groups_reports_and_says_what_is_wrong_in_one_line(models, tmp_path, capsys):
    q, f, x = str(models["qoperator"]), str(models["float"]), str(models["x"])
    assert main(["compare", q, "--against-model", f, "--inputs", x, "--json", "--sensitivity", "--report", str(tmp_path / "r")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rule"]["fail_if"] == ["snr<20"] and data["pairing"]["float_unpaired"] == 0
    assert [g["index"] for g in data["groups"]] == sorted(g["index"] for g in data["groups"])
    assert data["ranked"][0] == min(data["groups"], key=lambda g: g["local"]["snr"])["index"]
    assert data["sensitivity"]["ranked"] and len(data["weights"]) == 6
    page = (tmp_path / "r" / "report.html").read_text()
    assert 'id="snr-chart"' in page and page.count("<rect class=\"local\"") == len(data["groups"]) and 'id="sensitivity"' in page
    assert main(["compare", q, "--against-model", f, "--inputs", x, "--show-pairs", "--fail-if", "snr<60"]) == 1
    out = capsys.readouterr().out
    assert "r1  <->  c1_quantized  (folded" in out and "first divergence (local error):" in out and "FAIL" in out
    # bad input: one line each, exit 2
    other = cnn(tmp_path / "other.onnx", input_name="image")
    (tmp_path / "pairs.txt").write_text("c2 no_such_value\n")
    cases = [
        (["compare", q, "--against-model", str(other)], "do not share their inputs"),
        (["compare", q, "--against-model", f, "--pairs", str(tmp_path / "pairs.txt")], "'no_such_value', which is no value of the quantized model"),
        (["compare", q, "--against-opt-level", "all", "--sensitivity"], "--sensitivity compares a quantized model with its float model"),
        (["compare", q, "--against-model", str(models["qdq"])], "both models are quantized"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_memory_holds_only_what_groups_still_need(models):
    """Over the budget, both models run node by node and keep a value only until its groups are done; the same errors."""
    feeds = samples(1)[0]
    whole = compare_quantized(models["qdq"], models["float"], feeds)
    streamed = compare_quantized(models["qdq"], models["float"], feeds, budget_bytes=0)
    largest = 1 * 8 * 16 * 16 * 4  # one activation
    # node by node, the float side holds at most the residual (r1) and the values of the group at hand
    assert streamed.memory["float_peak_bytes"] <= 4 * largest + 16 * 16 * 3 * 4 < whole.memory["float_peak_bytes"]
    for a, b in zip(whole.groups, streamed.groups):
        assert (a.accumulated.snr, a.local.snr) == pytest.approx((b.accumulated.snr, b.local.snr), abs=1e-6)
    # QOperator: onnx's shape inference sizes nothing after QLinearAdd (a contrib op); sized by their float
    # tensors, its values fit the budget and it runs whole too (it ran node by node before), with the same errors
    whole = compare_quantized(models["qoperator"], models["float"], feeds)
    streamed = compare_quantized(models["qoperator"], models["float"], feeds, budget_bytes=0)
    assert whole.memory["quant_peak_bytes"] > streamed.memory["quant_peak_bytes"]
    for a, b in zip(whole.groups, streamed.groups):
        assert (a.accumulated.snr, a.local.snr, a.quant_only.snr if a.quant_only else None) == (
            b.accumulated.snr, b.local.snr, b.quant_only.snr if b.quant_only else None)  # fmt: skip


def test_one_pass_round_trip_is_quantize_then_dequantize_bit_for_bit():
    """quantized_round_trip (one pass for the integers, the round trip and the clipped count) against
    quantize, dequantize and a direct count; per tensor with and without a zero point, per channel; NaN, -0.0."""
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 7)).astype(np.float32) * 4
    x.flat[:4] = [np.nan, -0.001, np.inf, -np.inf]
    for params in (
        QuantParams.make(np.float32(0.02), np.uint8(128)),
        QuantParams.make(np.float32(0.05), np.int8(0)),
        QuantParams.make(np.array([0.01, 0.03, 0.05], np.float32), np.array([3, 0, -2], np.int8), axis=1),
    ):
        with np.errstate(invalid="ignore"):  # NaN has no integer
            q, trip, clipped = params.quantized_round_trip(x)
            want = params.quantize(x)
        assert q.dtype == want.dtype and np.array_equal(q, want)
        back = params.dequantize(want)
        assert trip.tobytes() == back.tobytes()  # bit for bit: signed zeros too
        t = x.astype(np.float64) / params.scale_for(x.shape) + params.zero_point.astype(np.float64).reshape(params.scale_for(x.shape).shape)
        lo, hi = params.qrange
        assert clipped == int(np.count_nonzero(t < lo - 0.5) + np.count_nonzero(t > hi + 0.5)) > 0
        assert params.round_trip_clipped(x[:, :, 1:])[1] == params.clipped(x[:, :, 1:])
    # a hair under a half: x / scale + zp rounds up in float32 (3.4999998 + 128 is 131.5), onnxruntime rounds x / scale
    # first and then adds the zero point; the integers and the round trip are onnxruntime's own
    near = np.array([3.4999998, -2.4999998, 5.4999995, 0.5, 1.5, -0.5, 70.0, -200.0], np.float32)
    for zp in (np.uint8(128), np.int8(-3)):
        params = QuantParams.make(np.float32(1.0), zp)
        qdq = onnx.helper.make_graph(
            [onnx.helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), onnx.helper.make_node("DequantizeLinear", ["q", "s", "z"], ["t"])],
            "qdq", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8])],
            [onnx.helper.make_tensor_value_info(n, t, [8]) for n, t in (("q", onnx.helper.np_dtype_to_tensor_dtype(zp.dtype)), ("t", onnx.TensorProto.FLOAT))],
            [onnx.numpy_helper.from_array(np.float32(1.0), "s"), onnx.numpy_helper.from_array(np.asarray(zp), "z")],
        )  # fmt: skip
        sess = ort.InferenceSession(onnx.helper.make_model(qdq, opset_imports=[onnx.helper.make_opsetid("", 13)]).SerializeToString(), session_options("none"))
        want_q, want_t = sess.run(["q", "t"], {"x": near})
        q, trip, clipped = params.quantized_round_trip(near)
        assert np.array_equal(q, want_q) and np.array_equal(params.quantize(near), want_q) and np.array_equal(trip, want_t), (zp, q, want_q)
        assert np.array_equal(params.round_trip(near), want_t) and clipped == 1  # -200: below either range


def test_large_values_go_a_chunk_at_a_time_with_the_same_round_trip_and_metrics_as_float64():
    """From 2**20 elements on, the round trip and the metrics go a cache-sized chunk at a time: the integers,
    the round trip and the clipped count are bit for bit the whole-array ones; the sums are float64's within float32
    rounding; NaN or a channel's steps take the whole array."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 400001)) * 3).astype(np.float32)  # 19 chunks of 65536 and a part
    x.flat[[0, 65536, 131071, 200000]] = [-0.001, 500.0, -500.0, 2.5]
    for params in (QuantParams.make(np.float32(0.02), np.uint8(128)), QuantParams.make(np.float32(0.05), np.int8(0))):
        q, trip, clipped = params.quantized_round_trip(x)
        assert q.dtype == params.quantize(x[:1, :1]).dtype and np.array_equal(q, params.quantize(x))
        assert trip.tobytes() == params.dequantize(q).tobytes()  # signed zeros too
        assert np.array_equal(params.round_trip(x), trip)  # (-0.0 stays -0.0 here, as the whole array way leaves it)
        t = x.astype(np.float64) / float(params.scale) + int(params.zero_point)
        lo, hi = params.qrange
        assert clipped == int(np.count_nonzero(t < lo - 0.5) + np.count_nonzero(t > hi + 0.5)) > 0
        with_nan = x.copy()
        with_nan.flat[140000] = np.nan  # in the third chunk: the whole array's way, NaN's integer as onnxruntime's
        with np.errstate(invalid="ignore"):
            q2, trip2, _ = params.quantized_round_trip(with_nan)
            assert np.array_equal(q2, params.quantize(with_nan)) and trip2.tobytes() == params.dequantize(q2).tobytes()
        e = measure(trip, x, params)
        d = trip.astype(np.float64) - x
        signal, noise = float(np.dot(x.astype(np.float64).ravel(), x.astype(np.float64).ravel())), float(np.dot(d.ravel(), d.ravel()))
        assert e.snr == pytest.approx(10 * math.log10(signal / noise), abs=1e-4) and e.size == x.size
        assert e.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6) and e.steps == pytest.approx(e.max_abs / float(params.scale))
        cos = float(np.dot(trip.astype(np.float64).ravel(), x.ravel())) / math.sqrt(float(np.dot(trip.astype(np.float64).ravel(), trip.ravel())) * signal)
        assert e.cosine == pytest.approx(cos, abs=1e-5)  # float32 sums
    channels = QuantParams.make(np.array([0.01, 0.02, 0.03], np.float32), np.zeros(3, np.int8), axis=0)
    e = measure(channels.round_trip(x), x, channels)  # steps per channel: the whole difference at once
    assert e.steps == pytest.approx(max(np.abs(channels.round_trip(x)[i] - x[i]).max() / s for i, s in enumerate((0.01, 0.02, 0.03))), rel=1e-5)
    assert math.isinf(measure(x, np.where(x > 0, x, np.inf)).noise)  # Inf on one side fails, as compare_arrays says


def test_the_kernels_at_level_all_are_read_at_fused_outputs_and_the_optimizer_named(models, tmp_path):
    """Symmetric activations: onnxruntime's QLinearConv (NHWC) parts from the float simulation. Each group's kernel value is
    the one onnxruntime's own optimized model (optimized_model_filepath) holds, dequantized and put back to NCHW; the
    bisection names the optimizer whose disabling brings the outputs back to the simulation."""
    q = quantize(models["float"], tmp_path / "sym.onnx", "qdq_symmetric")
    feeds = samples(1)[0]
    result = compare_quantized(q, models["float"], feeds)
    kernels = compare_kernels(result, feeds)
    assert len(kernels.rows) == len(result.groups) and not kernels.unread
    fused = [r for r in kernels.rows if r.op == "QLinearConv"]
    assert fused and any(r.layout == "NHWC" for r in fused)
    assert kernels.parted and kernels.output_divergence > 0.05
    # ground truth: onnxruntime's optimized model, saved and run with each value read made an output
    so = session_options("all")
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(q), so)
    theirs = _run(tmp_path / "optimized.onnx", feeds, [r.value for r in kernels.rows])
    float_values = _run(models["float"], feeds, [r.group.outputs[0].float_name for r in kernels.rows])
    for r in kernels.rows:
        value = theirs[r.value] if r.params is None else r.params.dequantize(theirs[r.value])
        value = np.moveaxis(value, -1, 1) if r.layout == "NHWC" else value
        assert measure(value, float_values[r.group.outputs[0].float_name]).snr == pytest.approx(r.vs_float.snr, abs=1e-6), r.value
    assert kernels.responsible == ["QDQSelectorActionTransformer"]
    sess = ort.InferenceSession(str(q), session_options("all"), disabled_optimizers=kernels.responsible)
    simulation = _run(q, feeds)["y"]
    y_scale = result.groups[-1].params.scale
    assert np.abs(sess.run(["y"], feeds)[0] - simulation).max() <= float(y_scale) * 1.0001


def test_a_scan_against_the_float_model_ranks_groups_over_the_data_set(models, tmp_path):
    """scan QUANT --reference model:FLOAT: an SQNR rule, each input's mismatch at the group where the error is born,
    and each group's SQNR over every input (energies added: the SQNR of the inputs taken together)."""
    from graph_dap.runtime.tools.quant.dataset import aggregate
    from graph_dap.runtime.tools.scan.results import InputResult
    from graph_dap.runtime.tools.scan.runner import InputScanner, ScanConfig
    from graph_dap.runtime.tools.scan.sources import ItemKind, WorkItem

    bad = coarser(models["qdq"], tmp_path / "bad.onnx", "c2_scale")
    config = ScanConfig(model=str(bad), break_on=("nan", "inf", "error", "mismatch"), reference=f"model:{models['float']}")
    scanner = InputScanner(config)
    results: list[InputResult] = []
    for i, feeds in enumerate(samples(3)):
        result, _ = scanner.scan(WorkItem(i, f"in{i}", ItemKind.ARRAYS, f"in{i}", feeds=feeds))
        results.append(result)
    scanner.close()
    assert [r.status for r in results] == ["mismatch"] * 3 and {r.node.id for r in results} == {"conv2"}
    assert results[0].comparison["groups"]["names"][2] == "conv2"
    groups = aggregate((r.id, r.comparison["groups"]) for r in results)
    assert groups[0]["group"] == "conv2" and groups[0]["inputs"] == 3
    # the data set's SQNR of a group is that of its values taken together
    one = [compare_quantized(bad, models["float"], feeds) for feeds in samples(3)]
    signal = sum(c.groups[2].accumulated.signal for c in one)
    noise = sum(c.groups[2].accumulated.noise for c in one)
    assert groups[0]["accumulated_snr"] == pytest.approx(10 * np.log10(signal / noise), abs=1e-6)


def test_a_scan_against_the_float_model_builds_its_sessions_once_and_measures_each_input_as_compare_does(models, tmp_path, monkeypatch):
    """The whole runs' and the local batches' sessions are built for the first input and kept for the next (the same
    models); each input's errors are those compare gives it alone."""
    from graph_dap.runtime.loading import load_graph
    from graph_dap.runtime.tools.quant.dataset import GroupsPerInput

    bad = coarser(models["qdq"], tmp_path / "bad.onnx", "c2_scale")
    per_input = GroupsPerInput(load_graph(bad), models["float"])
    built: list[int] = []

    class Counted(ort.InferenceSession):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", Counted)
    counts = []
    for feeds in samples(3):
        energies, born = per_input.measure(feeds)
        counts.append(len(built))
        alone = compare_quantized(bad, models["float"], feeds)
        assert born is not None and born.group.name == "conv2"
        want = [[g.accumulated.signal, g.accumulated.noise, g.local.signal, g.local.noise, g.accumulated.max_abs] for g in alone.groups]
        assert energies["energies"] == want
        built.clear()
    assert counts[0] == 4 and counts[1:] == [0, 0], counts  # two whole runs, two local batches; then none


def test_a_re_export_with_other_names_pairs_by_structure(models, tmp_path):
    """Neither model quantized (every computed tensor and node renamed, as a re-export does): --structure pairs them all."""
    m = onnx.load(str(models["float"]))
    renamed = {o: f"t{i}" for i, n in enumerate(m.graph.node) for o in n.output if o != "y"}
    for n in m.graph.node:
        n.name = "export/" + n.name
        n.input[:] = [renamed.get(i, i) for i in n.input]
        n.output[:] = [renamed.get(o, o) for o in n.output]
    onnx.save(m, str(tmp_path / "re.onnx"))
    result = compare_quantized(tmp_path / "re.onnx", models["float"], samples(1)[0])
    assert {p.float_name: p.quant_name for p in result.pairing.pairs.values()} == {"x": "x", **renamed, "y": "y"}
    assert all(g.accumulated.snr == math.inf for g in result.groups) and result.pairing.counts()["weights_paired"] == 6


def test_a_debug_session_against_the_float_model_stops_where_the_error_is_born(models, tmp_path):
    """The debugger's mismatch filter with reference model:FLOAT.onnx (a launch argument): the stop is at the node that
    finishes the first group whose local error breaks the rule, not at the first value that differs by name."""
    from graph_dap.runtime import DebugSession, StopReason
    from graph_dap.runtime.tools.lockstep import Lockstep, ReferenceSpec

    bad = coarser(models["qdq"], tmp_path / "bad.onnx", "c2_scale")
    session = DebugSession(str(bad), samples(1)[0])
    lockstep = Lockstep(session, ReferenceSpec.make(f"model:{models['float']}"))
    try:
        stop = lockstep.continue_()
        assert stop.reason is StopReason.MISMATCH and stop.node.id == "c2_DequantizeLinear"
        assert stop.value == "c2_DequantizeLinear_Output" and float(stop.details["local SQNR dB"]) < 20
        assert "conv2" in stop.message and lockstep.to_dict()["first_divergence"]["group"] == "conv2"
        assert lockstep.continue_().reason is StopReason.END
    finally:
        lockstep.close()


def test_weights_held_by_constant_nodes_are_paired_and_compared(tmp_path):
    """paddle2onnx writes weights as Constant nodes, not initializers: they are read from the node's proto and compared."""
    m = onnx.load(str(cnn(tmp_path / "float_init.onnx")))
    moved = {"b2", "w3"}
    constants = [
        onnx.helper.make_node("Constant", [], [t.name], name=f"const_{t.name}", value=t) for t in m.graph.initializer if t.name in moved
    ]
    kept = [t for t in m.graph.initializer if t.name not in moved]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(constants + nodes)
    onnx.save(m, str(tmp_path / "float.onnx"))
    q = quantize(tmp_path / "float.onnx", tmp_path / "qdq.onnx", "qdq")
    result = compare_quantized(q, tmp_path / "float.onnx", samples(1)[0])
    weights = {w.float_name: w for w in result.weights}
    assert moved <= set(weights) and result.pairing.counts()["weights_paired"] == 6
    # quantize_static quantizes such a weight at run time (a Q/DQ pair on the Constant): read as onnxruntime computes it
    w3 = onnx.numpy_helper.to_array(next(t.attribute[0].t for t in constants if t.output[0] == "w3"))
    ort_w3 = _run(q, samples(1)[0], ["w3_DequantizeLinear_Output"])["w3_DequantizeLinear_Output"]
    read = dequantized_weight(result.pairing, next(w for w in result.pairing.weights if w.float_name == "w3"))
    assert read is not None and np.array_equal(read[0], ort_w3)
    assert weights["w3"].error.snr == pytest.approx(measure(ort_w3, w3).snr, abs=1e-4)


def test_a_transformer_optimizers_fused_ops_pair_many_to_one():
    """bert from torch against onnxruntime's transformer optimizer's rewrite of it (EmbedLayerNormalization, Attention,
    SkipLayerNormalization, BiasGelu): the fused ops' outputs are paired, a bias Add the optimizer moved into
    SkipLayerNormalization is inside that group (not 'folded' into the MatMul before it), a Cast to int32 is not the
    float model's Cast to bool, and the errors are those between onnxruntime's own outputs of the two models."""
    from pathlib import Path

    data = Path(__file__).parent / "data" / "converters"
    feeds = dict(np.load(data / "bert_torch.inputs.npz"))
    result = compare_quantized(data / "bert_optimized.onnx", data / "bert_torch.onnx", feeds)
    pairing = result.pairing
    assert not any(p.how is How.FOLDED for p in pairing.pairs.values())
    assert "/bert/Cast_output_0" not in pairing.pairs
    dense = "/bert/encoder/layer.0/output/dense/MatMul_output_0"
    assert pairing.pairs[dense].quant_name == dense
    bias = "/bert/encoder/layer.0/output/dense/Add_output_0"
    assert "SkipLayerNormalization" in pairing.unpaired_float[bias] and "inside the group" in pairing.unpaired_float[bias]
    skip = next(g for g in result.groups if "/bert/encoder/layer.0/output/LayerNorm/LayerNormalization_output_0" in g.per_output)
    assert [n.op_type for n in skip.group.quant_nodes] == ["SkipLayerNormalization"]
    assert {n.op_type for n in skip.group.float_nodes if not n.is_constant} == {"Add", "LayerNormalization"}  # many-to-one
    theirs = _run(data / "bert_optimized.onnx", feeds, ["last_hidden_state"])["last_hidden_state"]
    ours = _run(data / "bert_torch.onnx", feeds, ["last_hidden_state"])["last_hidden_state"]
    last = next(g for g in result.groups if "last_hidden_state" in g.per_output)
    assert last.per_output["last_hidden_state"].snr == pytest.approx(measure(theirs, ours).snr, abs=1e-6)


def _saved(path, nodes, inits):
    """A model of ``nodes`` from x (1x3x16x16) to y (1x4x16x16), opset 17, saved at ``path``."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], inits)  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_batchnormalization_folded_into_its_conv_leaves_no_pre_bn_tensor(tmp_path):
    """Conv -> BatchNormalization -> Relu: quantize_static folds the BN into the Conv's weights and the Relu into its
    range. The BN's output (the Relu's input) is paired with what computes it (QDQ: the Conv's float output; QOperator:
    the QLinearConv's value before requantizing), the Conv's own output, which no quantized model computes, stays folded."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "beta"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "var"),
        numpy_helper.from_array(rng.standard_normal((4, 8, 1, 1)).astype(np.float32) * 0.3, "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2"),
    ]
    f = _saved(tmp_path / "cbr.onnx", nodes, inits)
    feeds = samples(1)[0]
    float_b = _run(f, feeds, ["b"])["b"]
    pre = tmp_path / "cbr_pre.onnx"  # what quantization's pre-processing does first: the BN folded into the Conv
    options = session_options("basic")
    options.optimized_model_filepath = str(pre)
    ort.InferenceSession(str(f), options)
    assert "BatchNormalization" not in {n.op_type for n in onnx.load(str(pre)).graph.node}
    for kind in ("qdq", "qoperator"):
        result = compare_quantized(quantize(pre, tmp_path / f"{kind}.onnx", kind), f, feeds)
        pairing = result.pairing
        assert "c" in pairing.folded and "c" not in pairing.pairs and "b" in pairing.folded  # c: the pre-BN conv
        assert pairing.pairs["b"].how is (How.STRUCTURE if kind == "qdq" else How.RECOMPUTED), kind
        value = _run(pairing.quant_view.graph.model, feeds, [pairing.pairs["b"].quant_name])[pairing.pairs["b"].quant_name]
        assert measure(value, float_b).snr > 30, kind  # the post-BN value, not the pre-BN one


def test_a_qoperator_models_recomputed_values_past_contrib_ops_are_sized_so_it_runs_whole(tmp_path):
    """Conv -> Add -> Conv -> Add -> Relu -> Conv in QOperator: the second Add's value before the folded Relu is recomputed
    from the first QLinearAdd's output (a contrib op: onnx's shape inference sizes nothing after it). Sized by the float
    tensor it is paired with, every value compare holds is known, so the quantized model runs whole within the budget,
    with the same errors as node by node (the recomputed value had no size, and PaddleOCR det's quantized side streamed)."""
    from onnx import helper, numpy_helper

    from graph_dap.runtime.tools.quant.errors import quant_value_bytes
    from graph_dap.runtime.tools.quant.stream import total_bytes

    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.3, n)
             for n, s in (("w1", (3, 3, 3, 3)), ("w2", (3, 3, 3, 3)), ("w3", (4, 3, 1, 1)))]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
        helper.make_node("Add", ["c1", "x"], ["s1"], name="add1"),
        helper.make_node("Conv", ["s1", "w2"], ["c2"], name="conv2", pads=[1] * 4),
        helper.make_node("Add", ["c2", "s1"], ["s2"], name="add2"),
        helper.make_node("Relu", ["s2"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w3"], ["y"], name="conv3"),
    ]
    f = _saved(tmp_path / "res.onnx", nodes, inits)
    feeds = samples(1)[0]
    q = quantize(f, tmp_path / "res_qoperator.onnx", "qoperator")
    whole = compare_quantized(q, f, feeds)
    pairing = whole.pairing
    assert pairing.pairs["s2"].how is How.RECOMPUTED
    demanded = [p.quant_name for g in whole.groups for p in g.group.outputs]
    assert pairing.quant_view.graph.value_info(pairing.pairs["s2"].quant_name).nbytes is None  # past QLinearAdd
    sizes = quant_value_bytes(pairing, pairing.quant_view.graph, demanded, feeds)
    assert None not in sizes.values(), sizes
    assert total_bytes(sizes) <= 1 << 30  # the default budget: a whole run
    streamed = compare_quantized(q, f, feeds, budget_bytes=0)
    for a, b in zip(whole.groups, streamed.groups):
        assert (a.accumulated.snr, a.local.snr) == (b.accumulated.snr, b.local.snr)
