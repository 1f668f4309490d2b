"""The whole-model watch that a program's runs get (``graph_dap.runtime.tools.watched``): its sums flag the runs
whose tensors hold NaN or Inf, inside control flow too, and its outputs are onnxruntime's own for the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cf_models import scan_model
from models import chain_files as chain_model
from models import inf_model, nan_model
from onnx import helper

from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.options import session_options
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.tools.watched import watched_model


def run_watched(model: onnx.ModelProto, feeds: dict[str, np.ndarray], filt: FaultFilter) -> tuple[list[np.ndarray], bool, list[np.ndarray]]:
    """The watched model's outputs and flag, and the plain model's outputs, both in onnxruntime."""
    graph = load_graph(model)
    watched = watched_model(graph, filt)
    names = [o.name for o in model.graph.output]
    plain = ort.InferenceSession(model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"]).run(names, feeds)
    session = ort.InferenceSession(watched.model.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    if watched.sentinel is None:
        return session.run(names, feeds), False, plain
    *outs, sums = session.run([*names, watched.sentinel], feeds)
    return outs, watched.flagged(sums), plain


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    "make, filt, flagged",
    [
        (chain_model, FaultFilter(True, True), False),
        (nan_model, FaultFilter(True, False), True),
        (inf_model, FaultFilter(False, True), True),
        (inf_model, FaultFilter(False, True, ("op:Div", "add1")), False),  # the Inf is expected there
    ],
)
def test_the_watch_flags_exactly_the_faulty_runs_and_keeps_the_outputs(tmp_path: Path, make, filt, flagged):
    path, _, feeds = make(tmp_path)
    outs, got, plain = run_watched(onnx.load(path), feeds, filt)
    assert got is flagged
    assert same(outs, plain)


def test_a_nan_inside_a_scan_body_is_flagged_though_the_outputs_are_clean():
    rows = np.abs(np.random.default_rng(0).standard_normal((5, 3))).astype(np.float32) + 0.5
    m = scan_model()
    g = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    g.node.insert(1, helper.make_node("IsNaN", ["lg"], ["lg_nan"], name="isnan"))
    g.node.insert(2, helper.make_node("Constant", [], ["zero"], value_float=0.0, name="zero"))
    g.node.insert(3, helper.make_node("Where", ["lg_nan", "zero", "lg"], ["lg_clean"], name="clean"))
    g.node[4].input[1] = "lg_clean"
    feeds = {"acc0": np.zeros(3, np.float32), "rows": rows}
    outs, got, plain = run_watched(m, feeds, FaultFilter(True, False))
    assert got is False and same(outs, plain)
    rows[3, 1] = -1.0  # log(-1) in iteration 3, cleaned before the outputs
    feeds["rows"] = rows
    outs, got, plain = run_watched(m, feeds, FaultFilter(True, False))
    assert np.isfinite(plain[0]).all()
    assert got is True and same(outs, plain)
