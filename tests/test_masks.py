"""Infinities and NaNs a model makes on purpose: attention masks (-inf or finfo.min), the Softmax of a row masked whole.

They are recognized by how the graph is built (a mask put in place from a constant), not by names; the watch leaves
them alone, says so in a stop, and still finds a fault next to them. ``--nan-exclude`` is ``--inf-exclude``'s twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from models import as_shown, assert_same, init, make_model, ort_values, tensor
from onnx import TensorProto, helper

from graph_dap.runtime import DebugSession, StopReason, load_graph
from graph_dap.runtime.engine.masks import intended

T, D = 4, 8


def masked_attention(fill: float) -> object:
    """Scores of x with itself, a padding mask put in place with ``Where(keep, 0, fill)`` and added to them, Softmax,
    then the export's own guard ``Where(IsNaN(p), 0, p)`` (a row masked whole is NaN with -inf), times x."""
    w = np.random.default_rng(1).standard_normal((D, D)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["q"], name="q"),
        helper.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[1, 0]),
        helper.make_node("MatMul", ["q", "xt"], ["scores"], name="scores"),
        helper.make_node("Where", ["keep", "zero", "fill"], ["mask"], name="mask"),
        helper.make_node("Add", ["scores", "mask"], ["masked"], name="add_mask"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("IsNaN", ["p"], ["p_nan"], name="isnan"),
        helper.make_node("Where", ["p_nan", "zero", "p"], ["p_safe"], name="guard"),
        helper.make_node("MatMul", ["p_safe", "x"], ["y"], name="out"),
    ]
    inits = [init("w", w), init("zero", np.array(0.0, np.float32)), init("fill", np.array(fill, np.float32))]
    return make_model(nodes, [tensor("x", [T, D]), tensor("keep", [T, T], TensorProto.BOOL)], [tensor("y", [T, D])], inits)


def feeds(padded_row: int | None = None, nan_at: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((T, D)).astype(np.float32)
    keep = np.tril(np.ones((T, T), bool))
    if padded_row is not None:
        keep[padded_row, :] = False  # a query that sees no key: its row is masked whole
    if nan_at is not None:
        x[nan_at] = np.nan
    return {"x": x, "keep": keep}


def test_a_minus_inf_mask_and_the_softmax_of_a_row_it_masks_whole_do_not_stop_the_run():
    model = masked_attention(-np.inf)
    intent = intended(load_graph(model))
    assert (intent.inf, intent.nan) == ({"mask", "add_mask"}, {"softmax"})
    truth = ort_values(model, feeds(padded_row=1))
    assert np.isnan(truth["p"][1]).all() and np.isfinite(truth["y"]).all()  # NaN on purpose, guarded
    s = DebugSession(model, feeds(padded_row=1), break_on=["nan", "inf"])
    s.start()
    assert s.continue_().reason is StopReason.END
    assert_same(s.value("y"), as_shown(s, model, feeds(padded_row=1), ["y"])["y"], "y")
    # a real NaN beside them is still found, and the stop says what the watch left alone, and why
    s = DebugSession(model, feeds(padded_row=1, nan_at=(2, 3)), break_on=["nan", "inf"])
    s.start()
    stop = s.continue_()
    assert (stop.reason, stop.node.id) == (StopReason.NAN, "q")
    assert "not watched: the Inf of 2 nodes (mask, add_mask): an attention mask: -inf on purpose, from the constant 'fill' (-inf)" in stop.message
    assert "the NaN of 1 node (softmax): a Softmax of 'masked', an attention mask: a row it masks whole" in stop.message
    assert {(e["node"], e["kind"]) for e in stop.details["excluded"]} == {("mask", "inf"), ("add_mask", "inf"), ("softmax", "nan")}


def test_a_finfo_min_mask_is_summed_without_overflowing_and_an_inf_next_to_it_is_found():
    """finfo(float32).min entries sum to -Inf: the watch sums the mask scaled down, so nothing is checked for nothing,
    and an Inf that the scores really hold still stops the run."""
    from graph_dap.runtime.engine import faults

    model = masked_attention(float(np.finfo(np.float32).min))
    intent = intended(load_graph(model))
    assert intent.large == {"mask", "masked"} and not intent.inf and not intent.nan
    checked: list[int] = []
    real = faults.FaultFilter.first_fault
    try:
        faults.FaultFilter.first_fault = lambda self, *a, **k: checked.append(1) or real(self, *a, **k)  # type: ignore[method-assign]
        for filters in (["inf"], ["nan", "inf"]):
            s = DebugSession(model, feeds(padded_row=1), break_on=filters)
            s.start()
            assert s.continue_().reason is StopReason.END
        assert not checked  # (the plain sums overflowed to -Inf and had every run check the mask exactly)
        big = feeds()
        big["x"][0] = 1e20  # the scores of row 0 overflow
        s = DebugSession(model, big, break_on=["inf"])
        s.start()
        stop = s.continue_()
        assert (stop.reason, stop.node.id) == (StopReason.INF, "scores")
    finally:
        faults.FaultFilter.first_fault = real  # type: ignore[method-assign]


@pytest.mark.parametrize("fast", [True, False])
def test_nan_exclude_leaves_a_nodes_nan_alone_and_says_so(fast, capsys, tmp_path):
    """--nan-exclude is --inf-exclude's twin: the node's NaN does not stop the run; its Inf still does, and a NaN
    elsewhere too, with the exclusion named in the stop."""
    nodes = [
        helper.make_node("Sqrt", ["x"], ["r"], name="root"),
        helper.make_node("IsNaN", ["r"], ["r_nan"], name="isnan"),
        helper.make_node("Where", ["r_nan", "zero", "r"], ["r_safe"], name="guard"),  # what reads it expects its NaN
        helper.make_node("Log", ["y"], ["l"], name="log"),
        helper.make_node("Add", ["r_safe", "l"], ["z"], name="sum"),
    ]
    model = make_model(nodes, [tensor("x", [4]), tensor("y", [4])], [tensor("z", [4])], [init("zero", np.array(0.0, np.float32))])
    x = np.array([1.0, -1.0, 4.0, 9.0], np.float32)  # Sqrt(-1) is NaN
    y = np.ones(4, np.float32)
    s = DebugSession(model, {"x": x, "y": y}, break_on=["nan", "inf"], nan_exclude=["root"], fast=fast)
    s.start()
    assert s.continue_().reason is StopReason.END
    y[2] = -1.0  # Log(-1): a NaN of another node
    s = DebugSession(model, {"x": x, "y": y}, break_on=["nan"], nan_exclude=["op:Sqrt"], fast=fast)
    s.start()
    stop = s.continue_()
    assert (stop.reason, stop.node.id) == (StopReason.NAN, "log") and "not watched: the NaN of op:Sqrt (--nan-exclude)" in stop.message
    if fast:  # the command line takes it too
        from graph_dap import cli

        path = tmp_path / "m.onnx"
        path.write_bytes(model.SerializeToString())
        np.savez(tmp_path / "in.npz", x=x, y=np.ones(4, np.float32))
        assert cli.main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--break-on", "nan", "--nan-exclude", "op:Sqrt"]) == 0
        assert cli.main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--break-on", "nan"]) == 1
        assert "stopped (NaN) at root (Sqrt)" in capsys.readouterr().out


def test_scan_takes_nan_exclude_records_it_and_replays_with_it(tmp_path, capsys):
    """A mask the model is fed (not recognized: it is no constant) masks row 1 whole, so its Softmax is NaN on purpose:
    ``scan --nan-exclude softmax --inf-exclude add_mask`` leaves it alone, still finds a real NaN where onnxruntime makes
    it, and keeps both exclusions in scan.json and in the replay's command and launch configuration."""
    import json
    import shlex

    from graph_dap import cli

    fed = masked_attention(-np.inf).graph
    nodes = [n for n in fed.node if n.name != "mask"]  # add_mask reads the input 'mask' instead
    model = make_model(nodes, [tensor("x", [T, D]), tensor("mask", [T, T])], [tensor("y", [T, D])],
                       [i for i in fed.initializer if i.name in ("w", "zero")])
    path = tmp_path / "attn.onnx"
    path.write_bytes(model.SerializeToString())
    cases = {}
    for name, nan_at in (("padded", None), ("poisoned", (2, 3))):
        f = feeds(padded_row=1, nan_at=nan_at)
        cases[name] = {"x": f["x"], "mask": np.where(f["keep"], 0.0, -np.inf).astype(np.float32)}
        np.savez(tmp_path / f"{name}.npz", **cases[name])
    truth = ort_values(model, cases["padded"])
    assert np.isnan(truth["p"][1]).all() and np.isfinite(truth["y"]).all()  # NaN on purpose, guarded
    poisoned = ort_values(model, cases["poisoned"])
    first = next(n.name for n in model.graph.node if n.name != "softmax" and any(np.isnan(poisoned[o]).any() for o in n.output))
    out = tmp_path / "o"
    code = cli.main(["scan", str(path), "--inputs", str(tmp_path / "*.npz"), "--out", str(out), "--workers", "1", "--json",
                     "--nan-exclude", "softmax", "--inf-exclude", "add_mask"])
    capsys.readouterr()
    assert code == 1
    data = json.loads((out / "scan.json").read_text())
    assert (data["options"]["nan_exclude"], data["options"]["inf_exclude"]) == (["softmax"], ["add_mask"])
    got = {r["id"]: r for r in data["results"]}
    assert got["padded"]["status"] == "clean"
    assert (got["poisoned"]["status"], got["poisoned"]["node"]["id"]) == ("nan", first)
    replay = got["poisoned"]["replay"]
    assert (replay["launch"]["nanExclude"], replay["launch"]["infExclude"]) == (["softmax"], ["add_mask"])
    args = shlex.split(replay["command"])[1:]
    assert "--nan-exclude=softmax" in args and "--inf-exclude=add_mask" in args
    assert cli.main([*args, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["node"]["id"] == first
    # the exclusion is what keeps the padded input clean: the same replay without it stops at the Softmax
    padded = [a for a in args if a != "--nan-exclude=softmax"]
    padded[padded.index("--inputs") + 1] = str(tmp_path / "padded.npz")
    assert cli.main([*padded, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["node"]["id"] == "softmax"
