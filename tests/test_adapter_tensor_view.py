"""The tensor viewer's request ``graphDap/tensorView`` (vscode-ext/PROTOCOL.md), checked against onnxruntime's values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dap_client import DapClient, DapError
from models import reference, running_model, save_inputs, save_model

BODY_KEYS = {
    "name", "dtype", "shape", "sliceShape", "index", "stride", "data",
    "min", "max", "mean", "nan", "posinf", "neginf", "histogram",
}  # fmt: skip
LOG = "block/log_out:0"  # a value name that needs backticks in expressions


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Log (NaN where x < 0, -Inf where x == 0), Reciprocal (+Inf at 0), Shape, ReduceSum, Greater, a sequence."""
    from onnx import TensorProto, helper

    rng = np.random.RandomState(3)
    x = np.abs(rng.randn(1, 3, 40, 33)).astype(np.float32) + 0.05
    x[0, 2, 11, 4] = -1.0  # one NaN in the log
    x[0, 2, 5, 7] = 0.0  # -Inf in the log, +Inf in the reciprocal
    x[0, 2, 30, 31] = 0.0
    x[0, 1, :, :3] -= 0.5  # NaNs elsewhere in the tensor
    feeds = {"x": x}
    f = TensorProto.FLOAT
    path = save_model(
        tmp_path / "viewed.onnx",
        [
            helper.make_node("Log", ["x"], [LOG], name="log1"),
            helper.make_node("Reciprocal", ["x"], ["recip"], name="recip1"),
            helper.make_node("Shape", ["x"], ["shape"], name="shape1"),
            helper.make_node("ReduceSum", ["x"], ["total"], name="sum1", keepdims=0),
            helper.make_node("Greater", ["x", "one"], ["big"], name="gt1"),
            helper.make_node("SequenceConstruct", ["x", "x"], ["pair"], name="seq1"),
            helper.make_node("Add", [LOG, "recip"], ["y"], name="add1"),
        ],
        [helper.make_tensor_value_info("x", f, [1, 3, 40, 33])],
        [
            helper.make_tensor_value_info("y", f, [1, 3, 40, 33]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [4]),
            helper.make_tensor_value_info("total", f, []),
            helper.make_tensor_value_info("big", TensorProto.BOOL, [1, 3, 40, 33]),
        ],
        {"one": np.array(1.0, np.float32)},
    )
    feeds_path = save_inputs(tmp_path / "viewed_inputs.npz", feeds)
    values = reference(path, feeds)
    return path, feeds_path, values


def _stopped_before_add(dap: DapClient, model: tuple[Path, Path, dict[str, Any]]) -> dict[str, Any]:
    path, inputs, values = model
    dap.start(str(path), inputs=str(inputs), breakpoints=["add1"])
    dap.wait_for_stop("function breakpoint")
    return values


def _view(dap: DapClient, **args: Any) -> dict[str, Any]:
    body = dap.request("graphDap/tensorView", args)
    assert set(body) == BODY_KEYS, set(body) ^ BODY_KEYS
    return body


def _expected_cells(plane: np.ndarray, step_h: int, step_w: int) -> list[list[Any]]:
    """Block by block, the slow way: NaN, +Inf, -Inf (in that order) if the block holds one, else its finite mean."""
    rows = []
    for top in range(0, plane.shape[0], step_h):
        row = []
        for left in range(0, plane.shape[1], step_w):
            block = plane[top : top + step_h, left : left + step_w].astype(np.float64)
            if np.isnan(block).any():
                row.append("nan")
            elif np.isposinf(block).any():
                row.append("inf")
            elif np.isneginf(block).any():
                row.append("-inf")
            else:
                row.append(float(block.mean()))
        rows.append(row)
    return rows


def _same_cells(got: list[list[Any]], want: list[list[Any]]) -> None:
    assert [len(r) for r in got] == [len(r) for r in want]
    for g_row, w_row in zip(got, want):
        for g, w in zip(g_row, w_row):
            if isinstance(w, str):
                assert g == w
            else:
                assert g == pytest.approx(w, rel=1e-6, abs=1e-9)


def test_a_slice_is_block_downsampled_and_keeps_every_nan(dap: DapClient, model: tuple[Path, Path, dict[str, Any]]) -> None:
    values = _stopped_before_add(dap, model)
    logged = values[LOG]
    body = _view(dap, name=LOG, index=[0, 2], maxSize=16)
    assert body["name"] == LOG and body["dtype"] == "float32" and body["shape"] == [1, 3, 40, 33]
    assert body["sliceShape"] == [40, 33] and body["index"] == [0, 2]
    assert body["stride"] == [math.ceil(40 / 16), math.ceil(33 / 16)]
    plane = logged[0, 2]
    _same_cells(body["data"], _expected_cells(plane, *body["stride"]))
    step_h, step_w = body["stride"]
    assert body["data"][11 // step_h][4 // step_w] == "nan"  # one NaN among nine cells still shows
    assert sum(row.count("nan") for row in body["data"]) == 1 and sum(row.count("-inf") for row in body["data"]) == 2
    # statistics of the whole tensor, finite values only
    finite = logged[np.isfinite(logged)].astype(np.float64)
    assert body["min"] == pytest.approx(finite.min()) and body["max"] == pytest.approx(finite.max())
    assert body["mean"] == pytest.approx(finite.mean(), rel=1e-9)
    assert (body["nan"], body["posinf"], body["neginf"]) == (
        int(np.isnan(logged).sum()),
        int(np.isposinf(logged).sum()),
        int(np.isneginf(logged).sum()),
    )
    counts, edges = np.histogram(finite, bins=len(body["histogram"]["counts"]))
    assert 32 <= len(counts) <= 64
    assert body["histogram"]["counts"] == counts.tolist()
    assert body["histogram"]["edges"] == pytest.approx(edges.tolist())
    # the +Inf of another value, at full size
    recip = _view(dap, name="recip", index=[0, 2])
    assert recip["stride"] == [1, 1] and recip["posinf"] == int(np.isposinf(values["recip"]).sum())
    _same_cells(recip["data"], _expected_cells(values["recip"][0, 2], 1, 1))


def test_missing_and_out_of_range_indices_are_filled_and_clamped(
    dap: DapClient, model: tuple[Path, Path, dict[str, Any]]
) -> None:
    values = _stopped_before_add(dap, model)
    clamped = _view(dap, name=LOG, index=[5, 99], maxSize=64)
    assert clamped["index"] == [0, 2] and clamped["stride"] == [1, 1]
    _same_cells(clamped["data"], _expected_cells(values[LOG][0, 2], 1, 1))
    filled = _view(dap, name=f"`{LOG}`")
    assert filled["index"] == [0, 0] and filled["name"] == f"`{LOG}`"
    _same_cells(filled["data"], _expected_cells(values[LOG][0, 0], 1, 1))


def test_integers_booleans_scalars_and_one_axis(dap: DapClient, model: tuple[Path, Path, dict[str, Any]]) -> None:
    values = _stopped_before_add(dap, model)
    shape = _view(dap, name="shape", index=[3, 3])
    assert shape["dtype"] == "int64" and shape["sliceShape"] == [4] and shape["index"] == [] and shape["stride"] == [1]
    assert shape["data"] == [values["shape"].tolist()] and shape["min"] == int(values["shape"].min())
    total = _view(dap, name="total")
    assert total["shape"] == [] and total["sliceShape"] == [] and total["stride"] == [] and total["index"] == []
    assert total["data"] == [[pytest.approx(float(values["total"]), rel=1e-6)]]
    big = _view(dap, name="big", index=[0, 1], maxSize=40)
    assert big["dtype"] == "bool" and big["stride"] == [1, 1]
    assert big["data"] == values["big"][0, 1].astype(int).tolist()
    assert big["mean"] == pytest.approx(values["big"].mean())


def test_a_child_variable_is_viewed_by_its_evaluate_name(dap: DapClient, model: tuple[Path, Path, dict[str, Any]]) -> None:
    values = _stopped_before_add(dap, model)
    var = dap.scope_variables("Values")[LOG]
    assert var["type"].startswith("tensor") and var["__vscodeVariableMenuContext"] == "tensor"
    child = dap.variables(var["variablesReference"])["[0]"]
    assert child["evaluateName"] == f"`{LOG}`[0]" and child["type"].startswith("tensor")
    body = _view(dap, name=child["evaluateName"], index=[1], maxSize=8)
    assert body["shape"] == [3, 40, 33] and body["index"] == [1] and body["stride"] == [5, 5]
    _same_cells(body["data"], _expected_cells(values[LOG][0, 1], 5, 5))
    doubled = _view(dap, name="recip * 2", index=[0, 1])
    _same_cells(doubled["data"], _expected_cells(values["recip"][0, 1] * 2, 1, 1))


def test_what_cannot_be_viewed_says_why(dap: DapClient, model: tuple[Path, Path, dict[str, Any]]) -> None:
    _stopped_before_add(dap, model)
    with pytest.raises(DapError, match=r"no value named 'nothing_here' \(not computed yet\?\)"):
        dap.request("graphDap/tensorView", {"name": "nothing_here"})
    with pytest.raises(DapError, match=r"no value named 'a/b:0' \(not computed yet\?\)"):
        dap.request("graphDap/tensorView", {"name": "a/b:0"})
    with pytest.raises(DapError, match=r"'y' is not computed yet: node add1 \(Add\) makes it, the next node"):
        dap.request("graphDap/tensorView", {"name": "y"})
    with pytest.raises(DapError, match="'pair' is a sequence of 2 tensors, not a tensor"):
        dap.request("graphDap/tensorView", {"name": "pair"})
    with pytest.raises(DapError, match="'index\\[0\\]' must be an integer"):
        dap.request("graphDap/tensorView", {"name": "x", "index": ["0"]})


def test_a_view_while_the_model_runs_is_refused(dap: DapClient, tmp_path: Path) -> None:
    dap.start(str(running_model(tmp_path)), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.request("continue", threadId=1)
    dap.wait_for_event("progressStart", where=lambda b: b["title"] == "Running the model")
    with pytest.raises(DapError, match="the model is running: pause it first"):
        dap.request("graphDap/tensorView", {"name": "x"})
    dap.request("pause", threadId=1)
    dap.wait_for_stop("pause")
    assert _view(dap, name="x", maxSize=64)["stride"] == [16, 16]  # x: 1024 x 1024, in blocks of 16 x 16


def test_the_body_is_the_same_when_computed_in_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    from graph_dap.runtime.tools import tensor_view as view

    rng = np.random.RandomState(5)
    a = rng.randn(2, 5, 37, 23)
    a[1, 3, rng.randint(0, 37, 6), rng.randint(0, 23, 6)] = [np.nan, np.inf, -np.inf, np.nan, 1e3, -1e3]
    whole = view.tensor_view("a", a, [1, 3], 9)
    monkeypatch.setattr(view, "_CHUNK", 7)  # bands of blocks, histogram passes: a few elements at a time
    chunked = view.tensor_view("a", a, [1, 3], 9)
    assert chunked["data"] == whole["data"] and chunked["histogram"] == whole["histogram"]
    _same_cells(chunked["data"], _expected_cells(a[1, 3], *chunked["stride"]))
    finite = a[np.isfinite(a)]
    counts, edges = np.histogram(finite, bins=len(chunked["histogram"]["counts"]))
    assert chunked["histogram"]["counts"] == counts.tolist()
    assert chunked["histogram"]["edges"] == pytest.approx(edges.tolist())
    assert (chunked["min"], chunked["max"]) == (finite.min(), finite.max())
