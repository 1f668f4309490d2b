"""Weights in external data: held once (mapped from the file), referenced by every session, values exactly the whole model's.

The models here are small; the same path serves a model whose external data exceeds protobuf's 2 GB
(``benchmarks/bench_big.py`` measures one of 2.5 GB).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import as_shown, assert_same, ort_values, run_values
from onnx import TensorProto, helper, numpy_helper

from graph_dap.errors import ModelError
from graph_dap.runtime import DebugSession, StopReason, load_graph
from graph_dap.runtime.tools.compare import compare_model
from graph_dap.runtime.tools.dump import dump_model, open_dump

V, D, H, T = 64, 32, 48, 5


def decoder_model() -> onnx.ModelProto:
    """tokens -> embedding (Gather) -> two MLP blocks with residuals and LayerNorm -> logits (MatMul)."""
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [w("emb", V, D), w("out_w", D, V)]
    nodes = [helper.make_node("Gather", ["emb", "tokens"], ["h0"], name="embed")]
    h = "h0"
    for i in range(2):
        inits += [w(f"w1_{i}", D, H), w(f"b1_{i}", H), w(f"w2_{i}", H, D), w(f"g_{i}", D), w(f"beta_{i}", D)]
        nodes += [
            helper.make_node("MatMul", [h, f"w1_{i}"], [f"a{i}"], name=f"up{i}"),
            helper.make_node("Add", [f"a{i}", f"b1_{i}"], [f"ab{i}"], name=f"bias{i}"),
            helper.make_node("Relu", [f"ab{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("MatMul", [f"r{i}", f"w2_{i}"], [f"d{i}"], name=f"down{i}"),
            helper.make_node("Add", [h, f"d{i}"], [f"res{i}"], name=f"residual{i}"),
            helper.make_node("LayerNormalization", [f"res{i}", f"g_{i}", f"beta_{i}"], [f"n{i}"], name=f"norm{i}", axis=-1),
        ]
        h = f"n{i}"
    nodes.append(helper.make_node("MatMul", [h, "out_w"], ["logits"], name="logits"))
    g = helper.make_graph(
        nodes,
        "decoder",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, T])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, T, V])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


TOKENS = {"tokens": np.array([[1, 5, 9, 33, 63]], np.int64)}


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "decoder.onnx"
    onnx.save_model(decoder_model(), str(path), save_as_external_data=True, location="decoder.onnx.data", size_threshold=0)
    return path


def _mapped(a: np.ndarray) -> bool:
    base = a
    while base is not None:
        if isinstance(base, np.memmap):
            return True
        base = base.base  # type: ignore[assignment]
    return False


def test_weights_stay_in_their_file_and_are_mapped_not_read(saved):
    g = load_graph(saved)
    assert all(t.data_location == TensorProto.EXTERNAL and not t.raw_data for t in g.model.graph.initializer)
    s = DebugSession(g, TOKENS)
    assert all(_mapped(s.value(t.name)) for t in g.model.graph.initializer)
    truth = numpy_helper.to_array(decoder_model().graph.initializer[0])
    assert_same(s.value("emb"), truth, "emb")


@pytest.mark.parametrize("opt_level", ["none", "all"])
def test_segments_and_single_nodes_reference_the_weights_and_match_the_whole_model(saved, opt_level):
    model = onnx.load(str(saved))  # with its data: onnxruntime's whole-model run is the ground truth
    truth = ort_values(model, TOKENS)
    s = DebugSession(saved, TOKENS, break_on=["nan", "inf"], opt_level=opt_level)
    s.start()
    assert s.continue_().reason == StopReason.END
    shown = {**truth, **run_values(model, TOKENS, ["logits"], opt_level)}  # the output as the user's run computes it
    for name, value in shown.items():
        assert_same(s.value(name), value, name)  # every value, as a person reads it, exactly onnxruntime's
    # the models built for onnxruntime hold references, not the weights' bytes
    nodes = list(s.sequence)
    feeds = {"tokens": TOKENS["tokens"]}
    segment, _ = s.executor.exact.build_model(nodes, feeds, s.values.fixed, ["logits"], None)
    weights = {t.name for t in segment.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert weights == {t.name for t in model.graph.initializer}
    assert segment.ByteSize() < 8_000 < sum(t.ByteSize() for t in model.graph.initializer)
    single = s.runner.one_node_model(s.graph.node("up0"), {"h0": truth["h0"]}, s.values.fixed)
    assert [t.data_location for t in single.graph.initializer] == [TensorProto.EXTERNAL]
    # stepping from the start: one-node sessions, each reading the file
    s.restart()
    for _ in nodes:
        s.step()
    assert_same(s.value("logits"), truth["logits"], "logits")


def test_a_set_weight_is_embedded_and_computed_with(saved):
    model = onnx.load(str(saved))
    s = DebugSession(saved, TOKENS)
    s.start()
    new = np.full((D, V), 0.01, np.float32)
    s.set_value("out_w", new)
    s.continue_()
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    for t in changed.graph.initializer:
        if t.name == "out_w":
            t.CopyFrom(numpy_helper.from_array(new, "out_w"))
    assert_same(s.value("logits"), run_values(changed, TOKENS, ["logits"])["logits"], "logits")  # as the user's run computes it
    assert_same(s.value("n1"), ort_values(model, TOKENS)["n1"], "n1")


def test_the_nan_watch_dump_and_compare_with_external_data(saved, tmp_path):
    model = onnx.load(str(saved))
    s = DebugSession(saved, TOKENS, break_on=["nan"])
    s.start()
    s.run_to("down0")
    r = s.value("r0").copy()
    r[0, 2, 3] = np.nan
    s.set_value("r0", r)
    stop = s.continue_()
    assert (stop.reason, stop.node.id if stop.node else None) == (StopReason.NAN, "down0")
    dump_model(saved, tmp_path / "run.npz", TOKENS)
    truth = ort_values(model, TOKENS)
    with open_dump(tmp_path / "run.npz") as d:
        for name, value in truth.items():
            assert_same(d.get(name), value, name)
    result = compare_model(saved, f"dump:{tmp_path / 'run.npz'}").to_dict()
    assert result["failed"] == 0 and result["compared"] == len(truth)


def test_external_data_through_a_symlink_out_of_the_folder_is_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    onnx.save_model(decoder_model(), str(tmp_path / "elsewhere.onnx"), save_as_external_data=True, location="w.data", size_threshold=0)
    (inner / "w.data").symlink_to(tmp_path / "w.data")
    (inner / "m.onnx").write_bytes((tmp_path / "elsewhere.onnx").read_bytes())
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_graph(inner / "m.onnx")


def test_truncated_external_data_is_refused_before_running(saved):
    data = saved.with_name("decoder.onnx.data")
    data.write_bytes(data.read_bytes()[:-4])
    with pytest.raises(ModelError, match="truncated"):
        load_graph(saved)


def test_the_sessions_hold_the_weights_about_once_and_values_stay_exact(saved, monkeypatch):
    from graph_dap.runtime.engine import budget as weight_budget

    monkeypatch.setattr(weight_budget, "COUNTED_BYTES", 0)  # the weights here are small: count them all
    truth = ort_values(onnx.load(str(saved)), TOKENS)
    # optimizations off: steps after an optimized segment's stop run on from its (last-bit) values
    s = DebugSession(saved, TOKENS, break_on=["nan", "inf"], opt_level="none")
    total = s.graph.weights.total_bytes
    s.executor.budget.limit = total  # as a model whose weights fill the budget
    s.start()
    s.continue_()
    s.restart()
    s.set_breakpoints(["norm1"])
    assert s.continue_().node.id == "norm1"
    for _ in range(3):
        s.step()
    s.continue_()
    b = s.executor.budget
    assert b.let_go > 0 and b.held_bytes <= total  # sessions let go to make room, never more than the weights once
    for name, value in truth.items():
        assert_same(s.value(name), value, name)


def test_the_budget_lets_the_least_recently_used_sessions_go():
    from graph_dap.runtime.engine.budget import MIN_BUDGET_BYTES, WeightBudget

    a: dict[str, str] = {}
    b: dict[str, str] = {}
    budget = WeightBudget(MIN_BUDGET_BYTES)
    third = MIN_BUDGET_BYTES // 3
    for owner, key in ((a, "x"), (b, "y"), (a, "z")):
        budget.reserve(owner, key, third)
        owner[key] = "session"
    budget.used(a, "x")  # now b's y is the oldest
    budget.reserve(b, "w", third)
    b["w"] = "session"
    assert (sorted(a), sorted(b), budget.let_go) == (["x", "z"], ["w"], 1)
    assert budget.held_bytes == 3 * third


def test_a_model_whose_weights_fill_the_budget_still_runs_at_the_level_asked(saved, monkeypatch):
    """The budget never changes the optimization level: the watched run gives what a plain run at that level gives,
    and every value shown at the end is what the user's run at that level computes (or says how it was computed)."""
    import onnxruntime as ort

    from graph_dap.runtime.engine import budget as weight_budget
    from graph_dap.runtime.engine.options import session_options

    monkeypatch.setattr(weight_budget, "MIN_BUDGET_BYTES", 0)  # the budget is the model's weights: no room for two
    truth = ort_values(onnx.load(str(saved)), TOKENS)
    plain = ort.InferenceSession(str(saved), session_options("all")).run(["logits"], TOKENS)[0]
    s = DebugSession(saved, TOKENS, break_on=["nan", "inf"], opt_level="all")
    assert s.executor.optimized and s.executor.segments.opt_level == "all"
    s.start()
    assert s.continue_().reason == StopReason.END
    assert s.executor.level_report() == {"asked": "all", "kept": True, "unoptimized": []}
    assert_same(s.outputs()["logits"], plain, "logits")  # the run's own: a plain run's at level 'all'
    inner = [n for n in truth if n != "logits"]  # (the output is checked above: as an output beside the others, fusions differ)
    shown = as_shown(s, onnx.load(str(saved)), TOKENS, inner)
    for name in inner:
        assert_same(s.value(name), shown[name], name)


def test_every_command_reads_the_external_data_from_the_models_folder_run_from_another(saved, tmp_path, monkeypatch, capsys):
    """onnxruntime looks external data up beside a model given by path, but relative to the current folder for a
    model given as bytes: each session over the model must be told its folder."""
    from graph_dap import cli
    from graph_dap.runtime.tools.scan.reference import OutputsReference, check_reference

    truth = ort_values(onnx.load(str(saved)), TOKENS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    model = str(Path("..") / saved.name)
    np.savez("in.npz", **TOKENS)
    commands = [
        ["run", model, "--inputs", "in.npz", "--break-on", "nan,inf", "--opt-level", "all"],
        ["listing", model, "--out", "listing.txt"],
        ["dump", model, "--inputs", "in.npz", "--out", "run.npz"],
        ["compare", model, "--inputs", "in.npz", "--against-opt-level", "all"],
        ["compare", model, "--inputs", "in.npz", "--opt-level", "all", "--against-opt-level", "none"],
        ["compare", model, "--inputs", "in.npz", "--against-provider", "CPU"],
        ["profile", model, "--inputs", "in.npz", "--repeat", "1", "--opt-level", "all", "--json"],
        ["profile", model, "--fused"],
    ]
    for argv in commands:
        capsys.readouterr()
        assert cli.main(argv) == 0, (argv, capsys.readouterr().err)
    with open_dump("run.npz") as d:
        for name, value in truth.items():
            assert_same(d.get(name), value, name)
    mask = os.umask(0o022)
    os.umask(mask)
    for written in ("listing.txt", "run.npz", "run.npz.json"):  # created as open() creates a file, not mkstemp's 0600
        assert stat.S_IMODE(os.stat(written).st_mode) == 0o666 & ~mask, written
    # a scan's reference: the model at another level, and another model given by a relative path
    for spec in ("opt_level:none", f"model:{model}"):
        ref = OutputsReference(load_graph(model), check_reference(spec), Path.cwd())
        np.testing.assert_allclose(ref.outputs(TOKENS)["logits"], truth["logits"], rtol=1e-5, atol=1e-6)


def test_scopes_answer_at_once_without_statistics_then_have_the_client_ask_again(dap, saved, tmp_path):
    """At a stop, a page reads no weight and recomputes nothing before it answers: the Initializers scope gives each
    weight's type, shape and bytes (summarized in the background), the Values scope each value the optimized run did
    not keep by its type (recomputed once no call waits); an ``invalidated`` event (with the frame) then has the
    client ask again, and the page holds the summaries of the weights' own values and of onnxruntime's. (A client
    without the event gets them in the first answer, as before: the worker's default, tested in test_language_models.)"""
    from graph_dap.runtime.tensor import format_bytes, summarize
    from graph_dap.worker import wire

    np.savez(tmp_path / "tokens.npz", **TOKENS)
    arrays = {t.name: numpy_helper.to_array(t) for t in decoder_model().graph.initializer}
    dap.start(str(saved), inputs=str(tmp_path / "tokens.npz"), breakpoints=["logits"])  # (a client that takes the event)
    dap.wait_for_stop("function breakpoint")
    frame = dap.top_frame()["id"]
    first = dap.variables(dap.scopes(frame)["Initializers"]["variablesReference"])
    assert set(first) == set(arrays)
    for name, v in first.items():
        a, shape = arrays[name], f"[{','.join(map(str, arrays[name].shape))}]"
        assert v["value"] == f"float32{shape} {format_bytes(a.nbytes)}, statistics being computed", name
        listed = dap.variables(v["variablesReference"], filter="named")
        assert {k: s["value"] for k, s in listed.items()} == {"shape": shape, "dtype": "float32", "bytes": format_bytes(a.nbytes)}
    assert dap.wait_for_event("invalidated") == {"areas": ["variables"], "stackFrameId": frame}
    again = dap.variables(dap.scopes(frame)["Initializers"]["variablesReference"])
    assert set(again) == set(arrays)
    for name, v in again.items():
        assert v["value"] == summarize(arrays[name]).text(), name
        listed = dap.variables(v["variablesReference"], filter="named")
        assert {k: s["value"] for k, s in listed.items()} == dict(wire.summary(name, arrays[name]).stats), name
    # the Values scope: what the optimized run did not keep (its MatMul + Add fused, say) comes by its type first
    first = dap.variables(dap.scopes(frame)["Values"]["variablesReference"])
    recomputed = [n for n, v in first.items() if v["value"].endswith(" being computed") and n not in arrays]
    assert {"a0", "ab0", "res1"} <= set(recomputed) and first["a0"]["value"] == "float32[1,5,48] being computed"
    assert dap.wait_for_event("invalidated") == {"areas": ["variables"], "stackFrameId": frame}
    shown = dap.scope_variables("Values")  # (asked again until nothing is being computed)
    truth = ort_values(onnx.load(str(saved)), TOKENS)
    for name in recomputed:
        assert shown[name]["value"] == f"{summarize(truth[name]).text()} (recomputed with the original nodes)", name
