"""A quantized model in the debugger (issue 26, item 7): a quantized tensor's Variables show its integers, its
dequantized values, the float model's paired tensor and the error; the tensor view draws the error centred on 0.
Values are checked against onnxruntime's own runs of both models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from dap_client import DapClient, DapError
from quant_models import cnn, quantize, samples

from graph_dap.runtime.engine.options import session_options

DQ = "c2_DequantizeLinear_Output"  # conv2's output after its own Q/DQ pair (what the Add reads)
Q = "c2_QuantizeLinear_Output"  # its integers
W = "w2_DequantizeLinear_Output"  # conv2's weight, per channel, as conv2 reads it


def _run(path: Path, feeds: dict[str, Any], names: list[str]) -> dict[str, np.ndarray]:
    """onnxruntime's whole run of the model (optimizations off), with ``names`` made outputs."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    sess = ort.InferenceSession(m.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feeds), strict=True))


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("quant_dap")
    f = cnn(d / "float.onnx")
    q = quantize(f, d / "qdq.onnx", "qdq")
    feeds = samples(1)[0]
    np.savez(d / "x.npz", **feeds)
    ours = _run(q, feeds, [Q, DQ, W])
    theirs = _run(f, feeds, ["c2"])
    w2 = onnx.numpy_helper.to_array(next(t for t in onnx.load(str(f)).graph.initializer if t.name == "w2"))
    return {"float": f, "qdq": q, "x": d / "x.npz", "int": ours[Q], "deq": ours[DQ], "ref": theirs["c2"], "w": ours[W], "w2": w2}


def _stats(var: dict[str, Any], dap: DapClient) -> dict[str, dict[str, Any]]:
    return dap.variables(var["variablesReference"])


def test_a_quantized_tensor_expands_to_its_integers_dequantized_values_reference_and_error(
    dap: DapClient, quantized: dict[str, Any]
) -> None:
    q = quantized
    dap.start(str(q["qdq"]), inputs=str(q["x"]), reference="model:float.onnx", cwd=str(q["qdq"].parent), breakpoints=["add"])
    dap.wait_for_stop("function breakpoint")
    values = dap.scope_variables("Values")
    children = _stats(values[DQ], dap)
    assert list(children)[:4] == ["integer", "dequantized", "reference", "error"], list(children)
    integer, deq, ref, err = (children[k] for k in ("integer", "dequantized", "reference", "error"))
    assert integer["type"] == f"tensor({q['int'].dtype})" and integer["evaluateName"] == f"`{DQ}@integer`"
    assert "c2" in ref["value"] and "SQNR" in err["value"] and "steps" in err["value"]

    want_err = q["deq"] - q["ref"]
    signal, noise = float(np.sum(q["ref"].astype(np.float64) ** 2)), float(np.sum(want_err.astype(np.float64) ** 2))
    err_stats = _stats(err, dap)
    assert float(err_stats["sqnr dB"]["value"]) == pytest.approx(10 * np.log10(signal / noise), abs=0.01)
    assert float(err_stats["max error"]["value"]) == pytest.approx(float(np.abs(want_err).max()), rel=1e-5)
    scale = float(onnx.numpy_helper.to_array(next(t for t in onnx.load(str(q["qdq"])).graph.initializer if t.name == "c2_scale")))
    assert float(err_stats["max error (steps)"]["value"]) == pytest.approx(float(np.abs(want_err).max()) / scale, rel=1e-3)

    # each form's numbers, read back element by element through its slices, are onnxruntime's
    for var, want in ((integer, q["int"]), (deq, q["deq"]), (ref, q["ref"]), (err, want_err)):
        row = dap.variables(dap.variables(dap.variables(_stats(var, dap)["[0]"]["variablesReference"])["[1]"]["variablesReference"])["[2]"]["variablesReference"])
        got = np.array([float(v["value"]) for k, v in row.items() if k.startswith("[")])
        np.testing.assert_allclose(got, want[0, 1, 2].astype(np.float64), rtol=1e-6, atol=1e-7)
    # the forms are expressions too: evaluate and the tensor view read them
    assert dap.evaluate(f"`{DQ}@error`.max()")["result"] == f"{float(want_err.max()):.7g}"

    # the integers' own value (a QuantizeLinear's output) has the same four forms
    assert list(_stats(values[Q], dap))[:4] == ["integer", "dequantized", "reference", "error"]
    # a weight's DequantizeLinear output: its integers, and its error against the float weight it is paired with
    assert dap.evaluate(f"`{W}@reference`.sum()")["result"] == f"{float(q['w2'].sum()):.7g}"
    assert dap.evaluate(f"`{W}@error`.max()")["result"] == f"{float((q['w'] - q['w2']).max()):.7g}"
    assert dap.evaluate(f"`{W}@integer`.dtype")["result"] == "int8"
    # a float value that is no quantized form has its statistics only
    assert "integer" not in _stats(values["x"], dap)

    # the tensor view draws the error centred on 0 (its cells: dequantized - reference, from onnxruntime's runs)
    body = dap.request("graphDap/tensorView", {"name": f"`{DQ}@error`", "index": [0, 1], "maxSize": 64})
    assert body["colorMap"] == "diverging" and body["shape"] == list(want_err.shape) and body["stride"] == [1, 1]
    np.testing.assert_allclose(np.array(body["data"], np.float64), want_err[0, 1].astype(np.float64), rtol=1e-5, atol=1e-7)
    assert "colorMap" not in dap.request("graphDap/tensorView", {"name": DQ, "index": [0, 1]})
    with pytest.raises(DapError, match="no value named"):
        dap.request("graphDap/tensorView", {"name": "`x@error`"})


def test_without_a_reference_a_quantized_tensor_shows_integers_and_dequantized_values(
    dap: DapClient, quantized: dict[str, Any]
) -> None:
    q = quantized
    dap.start(str(q["qdq"]), inputs=str(q["x"]), breakpoints=["add"])
    dap.wait_for_stop("function breakpoint")
    children = _stats(dap.scope_variables("Values")[DQ], dap)
    assert list(children)[:3] == ["integer", "dequantized", "shape"], list(children)
    assert dap.evaluate(f"`{DQ}@integer`.max()")["result"] == str(int(q["int"].max()))
    with pytest.raises(DapError, match="needs a float model to compare with"):
        dap.evaluate(f"`{DQ}@error`")
