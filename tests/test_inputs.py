"""Inputs: arrays, .npz, .npy, test-data folders, made-up values; clear errors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from models import make_model, tensor
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime import InputError, load_graph, resolve_inputs


def _two_input_graph():
    nodes = [helper.make_node("Add", ["x", "y"], ["z"])]
    return load_graph(make_model(nodes, [tensor("x", ["batch", 3]), tensor("y", [1, 3])], [tensor("z", ["batch", 3])]))


def test_dict_and_random_fill():
    g = _two_input_graph()
    x = np.ones((2, 3), np.float32)
    out = resolve_inputs(g, {"x": x})
    assert out["x"] is not x or np.array_equal(out["x"], x)
    assert out["y"].shape == (1, 3) and out["y"].dtype == np.float32


def test_random_inputs_are_deterministic_and_use_dims():
    g = _two_input_graph()
    a = resolve_inputs(g, None, {"batch": 5})
    b = resolve_inputs(g, None, {"batch": 5})
    assert a["x"].shape == (5, 3)
    np.testing.assert_array_equal(a["x"], b["x"])
    assert resolve_inputs(g)["x"].shape == (1, 3)  # unknown dims default to 1


def test_npz_npy_and_test_data_folder(tmp_path):
    g = _two_input_graph()
    x, y = np.full((2, 3), 2, np.float32), np.full((1, 3), 3, np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=y)
    got = resolve_inputs(g, tmp_path / "in.npz")
    np.testing.assert_array_equal(got["y"], y)
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    for i, (name, arr) in enumerate([("x", x), ("y", y)]):
        (folder / f"input_{i}.pb").write_bytes(numpy_helper.from_array(arr, name).SerializeToString())
    got = resolve_inputs(g, folder)
    np.testing.assert_array_equal(got["x"], x)
    single = load_graph(make_model([helper.make_node("Neg", ["x"], ["z"])], [tensor("x", [2])], [tensor("z", [2])]))
    np.save(tmp_path / "x.npy", np.array([1, 2], np.float32))
    np.testing.assert_array_equal(resolve_inputs(single, tmp_path / "x.npy")["x"], [1, 2])
    with pytest.raises(InputError, match="give a .npz"):
        resolve_inputs(g, tmp_path / "x.npy")


def test_a_file_that_is_no_npz_or_npy_says_what_it_is(tmp_path):
    g = _two_input_graph()
    (tmp_path / "text.npz").write_text("x,y\n1,2\n")
    with pytest.raises(InputError, match=r"text.npz: not a .npz \(a zip archive of .npy files\) \(it starts with b'x,'\)"):
        resolve_inputs(g, tmp_path / "text.npz")  # numpy itself speaks of pickled data
    (tmp_path / "empty.npy").write_bytes(b"")
    single = load_graph(make_model([helper.make_node("Neg", ["x"], ["z"])], [tensor("x", [2])], [tensor("z", [2])]))
    with pytest.raises(InputError, match="empty.npy: empty file; expected a .npy file"):
        resolve_inputs(single, tmp_path / "empty.npy")
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3), np.float32))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "in.npz").read_bytes()[:100])  # a zip, truncated: numpy's words
    with pytest.raises(InputError, match="cut.npz: "):
        resolve_inputs(g, tmp_path / "cut.npz")


def test_wrong_name_shape_dtype_are_clear():
    g = _two_input_graph()
    with pytest.raises(InputError, match=r"no input 'q' \(its inputs: x, y\)"):
        resolve_inputs(g, {"q": np.ones(3)})
    with pytest.raises(InputError, match=r"input 'y' expects float32\[1,3\], got float32\[2,3\]"):
        resolve_inputs(g, {"y": np.ones((2, 3), np.float32)})
    with pytest.raises(InputError, match=r"input 'x' expects float32\[batch,3\], got int64\[2\]"):
        resolve_inputs(g, {"x": np.ones(2, np.int64)})
    with pytest.raises(InputError, match=r"with batch=4"):
        resolve_inputs(g, {"x": np.ones((2, 3), np.float32)}, {"batch": 4})
    with pytest.raises(InputError, match="inputs not found"):
        resolve_inputs(g, "/nonexistent/in.npz")


def test_int_and_bool_inputs_are_made_up_in_range():
    nodes = [helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT), helper.make_node("Not", ["b"], ["nb"])]
    g = load_graph(make_model(nodes, [tensor("i", [4], TensorProto.INT64), tensor("b", [4], TensorProto.BOOL)],
                              [tensor("f", [4]), tensor("nb", [4], TensorProto.BOOL)]))
    out = resolve_inputs(g)
    assert out["i"].dtype == np.int64 and out["b"].dtype == np.bool_
    assert onnx.helper.np_dtype_to_tensor_dtype(out["i"].dtype) == TensorProto.INT64


def test_a_whole_shape_sizes_an_input_whose_dimensions_have_no_name(tmp_path, capsys):
    """paddle2onnx writes -1 for a dynamic dimension, other exporters leave it unnamed: ``--shape x=2,5``."""
    x = tensor("x", [None, 5])
    x.type.tensor_type.shape.dim[0].dim_value = -1
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [tensor("y", None)])
    g = load_graph(model)
    assert resolve_inputs(g, None, {"x": (3, 5)})["x"].shape == (3, 5)
    assert resolve_inputs(g, None, {"x": (3, 5), "batch": 7})["x"].shape == (3, 5)  # a name no input has is ignored
    for dims, says in [
        ({"x": (3, 5, 1)}, "input 'x' is float32[?,5], of rank 2; the shape set has 3 dimensions: [3, 5, 1]"),
        ({"x": (3, 4)}, "input 'x' is float32[?,5]: dimension 1 is 5, the shape set says 4"),
        ({"y": (3,)}, "a shape is set for 'y', but the model has no such input (its inputs: x)"),
        ({"x": (3, -1)}, "the shape of input 'x' must be non-negative integers, got [3, -1]"),
    ]:
        with pytest.raises(InputError) as e:
            resolve_inputs(g, None, dims)
        assert str(e.value) == says
    with pytest.raises(InputError, match=r"input 'x' is given with shape \[2, 5\], but its shape is set to \[3, 5\]"):
        resolve_inputs(g, {"x": np.ones((2, 5), np.float32)}, {"x": (3, 5)})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    from graph_dap.cli import main  # in this process: the command line's parsing and reporting, no interpreter to start

    assert main(["run", str(path), "--shape", "x=2,5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summaries"]["y"]["shape"] == [2, 5]
    assert main(["dump", str(path), "--shape", "x=2,a", "--out", str(tmp_path / "d.npz")]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("--shape expects INPUT=D0,D1,... with non-negative integers (INPUT= for a scalar), got 'x=2,a'")
