"""Dumps inside control flow, and of the values converters' models hold: maps and strings.

Every value a dump writes inside an If branch or a Loop iteration is checked against onnxruntime's
own value of the same tensor in an equivalent model without the control flow (the taken branches
inlined, the loop unrolled: ``v@k`` is ``v`` in iteration ``k``), every tensor a graph output.
"""

from __future__ import annotations

import json

import numpy as np
from cf_models import function_model, if_model, loop_model, unrolled_loop
from inline import inline_ifs
from models import assert_same, ort_values, zipmap_model

from graph_dap.runtime.tools.compare import compare_model
from graph_dap.runtime.tools.dump import dump_model, open_dump


def test_a_dump_holds_every_value_of_the_taken_branches_two_levels_deep(tmp_path):
    model = if_model(nested=True)
    feeds = {"x": np.linspace(0.5, 3.0, 6, dtype=np.float32).reshape(2, 3)}  # sum > 0, max > 2: then, then
    truth = ort_values(inline_ifs(model, feeds), feeds)
    result = dump_model(model, tmp_path / "if.npz", feeds)
    with open_dump(result.path) as d:
        for name in ("t_mul", "t_relu", "t_out", "t_cond", "n_sqrt", "y", "z"):
            assert_same(d.get(name), truth[name], name)
        assert not d.has("e_add") and not d.has("n_neg")  # branches not taken compute nothing
        assert [s["node"] for s in d.producer("n_sqrt")["path"]] == ["the_if", "inner_if"]
    # --values matches values found only inside the bodies
    inner = dump_model(model, tmp_path / "inner.npz", feeds, values=["n_*"])
    assert inner.skipped == ()
    with open_dump(inner.path) as d:
        assert d.names == ["x", "n_sqrt"]


def test_a_dump_holds_each_loop_iteration_under_its_own_key(tmp_path):
    model, trip = loop_model(trip=4), 4
    feeds = {"h0": np.full((1, 4), 0.1, np.float32), "x": np.array([[0.3, -0.2, 0.5, 0.1]], np.float32)}
    truth = ort_values(unrolled_loop(model, trip), feeds)
    dump_model(model, tmp_path / "loop.npz", feeds)
    with open_dump(tmp_path / "loop.npz") as d:
        for k in range(trip):
            for name in ("mm", "pre", "h_out"):
                assert_same(d.get(f"{name}@{k}"), truth[f"{name}@{k}"], f"{name}@{k}")
        assert_same(d.get("mm"), truth["mm@0"])  # the first iteration's also by its name
        assert_same(d.get("hs"), truth["hs"])
        assert d.producer("pre@2")["path"] == [{"node": "loop", "attribute": "body", "iteration": 2}]
    meta = json.loads((tmp_path / "loop.npz.json").read_text())
    assert {e["as"] for e in meta["values"] if e["name"] == "tanh_out" or e["name"] == "h_out"} == {f"h_out@{k}" for k in range(trip)}


def test_a_function_called_twice_writes_each_calls_values(tmp_path):
    model = function_model()
    feeds = {"x": np.arange(4, dtype=np.float32)}
    dump_model(model, tmp_path / "f.npz", feeds)
    with open_dump(tmp_path / "f.npz") as d:
        first, second = d.get("XS"), d.get("XS#2")  # the formal names of the two calls
    np.testing.assert_array_equal(first, feeds["x"] * 2)
    np.testing.assert_array_equal(second, (feeds["x"] * 2 + np.arange(4, dtype=np.float32)) * -3)


def test_sequences_of_maps_are_summarized_dumped_read_back_and_compared(tmp_path):
    from graph_dap.runtime import DebugSession, render_listing

    for labels in (None, ["cat", "dog", "bird"]):
        model = zipmap_model(labels)
        feeds = {"x": np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)}
        truth = ort_values(model, feeds)["probs"]
        s = DebugSession(model, feeds)
        s.start()
        s.continue_()
        key = "int64" if labels is None else "string"
        first = next(iter(truth[0]))
        assert s.summary("probs").text().startswith(f"seq(map({key},float32)) len=2 [{{{first!r}: ")
        assert s.evaluate(f"probs[1][{first!r}]") == truth[1][first]
        assert f"probs: seq(map({key},float32))" in render_listing(s.graph).text
        dump_model(model, tmp_path / "z.npz", feeds)
        with open_dump(tmp_path / "z.npz") as d:
            assert d.get("probs") == truth  # keys and numbers as onnxruntime gave them
        report = compare_model(model, f"dump:{tmp_path / 'z.npz'}", feeds).to_dict()
        assert report["failed"] == 0 and any(r["value"] == "probs" for r in report["rows"])
