"""Inputs for the scan tests: models built with onnx.helper, data sets written to disk, and generators.

The generators are what ``graph-dap scan --inputs-from scan_inputs:NAME`` imports
(the scan's workers import this module too). Two of their inputs end the worker process
that reads them, as an input that crashes onnxruntime would: the object holding the
array is rebuilt in the worker (unpickled) by a function that exits the process, every
time or only the first time (a marker file remembers).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
W = np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(4, 2)


def fault_chain_model(relu: str = "Relu") -> onnx.ModelProto:
    """``y = relu(MatMul(exp(80 * log(sqrt(x))), w))`` for x of shape [2, k].

    Clean for x in [1, 2] and k = 4. NaN first at ``root`` for x < 0, -Inf first at
    ``log`` for x = 0, +Inf first at ``exp`` for x > 9.3 (x**40 overflows), and
    ``matmul`` fails for k != 4. ``relu="LeakyRelu"`` makes a model that differs from it
    only where MatMul's output is negative.
    """
    nodes = [
        helper.make_node("Sqrt", ["x"], ["r"], name="root"),
        helper.make_node("Log", ["r"], ["l"], name="log"),
        helper.make_node("Mul", ["l", "k80"], ["l80"], name="times80"),
        helper.make_node("Exp", ["l80"], ["e"], name="exp"),
        helper.make_node("MatMul", ["e", "w"], ["m"], name="matmul"),
        helper.make_node(relu, ["m"], ["y"], name="relu", **({"alpha": 0.5} if relu == "LeakyRelu" else {})),
    ]
    inits = [numpy_helper.from_array(np.array(80.0, np.float32), "k80"), numpy_helper.from_array(W, "w")]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", F, [2, "k"])], [helper.make_tensor_value_info("y", F, [2, 2])], inits
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def signed_model(relu: str = "Relu") -> onnx.ModelProto:
    """``y = relu(x @ w) * 2``: a LeakyRelu twin differs from it exactly where ``x @ w`` is negative."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node(relu, ["m"], ["a"], name="act", **({"alpha": 0.5} if relu == "LeakyRelu" else {})),
        helper.make_node("Mul", ["a", "two"], ["y"], name="double"),
    ]
    inits = [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    graph = helper.make_graph(
        nodes, "signed", [helper.make_tensor_value_info("x", F, ["n", 4])], [helper.make_tensor_value_info("y", F, ["n", 2])], inits
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def clean_x(i: int, k: int = 4) -> np.ndarray:
    """A clean input: values in [1, 2], different for each ``i``."""
    return (1.0 + (np.arange(2 * k, dtype=np.float32).reshape(2, k) + i) % 7 / 7.0).astype(np.float32)


def poisoned(kind: str, i: int) -> np.ndarray:
    """An input whose first bad node is known: ``nan`` (at root), ``ninf`` (at log), ``inf`` (at exp), ``error`` (matmul)."""
    if kind == "error":
        return clean_x(i, 3)
    x = clean_x(i)
    x[1, i % 4] = {"nan": -1.0, "ninf": 0.0, "inf": 20.0}[kind]
    return x


def write_tensor_folder(folder: Path, x: np.ndarray) -> None:
    """``folder/input_0.pb``: the ONNX test-data layout."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())


# -- generators for --inputs-from ---------------------------------------------------------


def twelve() -> Any:
    """Twelve inputs; ids from a (id, feeds) pair; one poisoned (nan at root)."""
    for i in range(12):
        yield f"gen-{i:02d}", {"x": poisoned("nan", i) if i == 7 else clean_x(i)}


def gated() -> Any:
    """Ten inputs; after the third, waits for a writer on the FIFO ``$SCAN_GATE`` (if set): a scan stopped midway."""
    gate = os.environ.get("SCAN_GATE")
    for i in range(10):
        if i == 3 and gate:
            with open(gate) as f:  # blocks until someone opens it to write: nobody does, the scan is killed here
                f.read()
        yield {"x": clean_x(i)}


def killers() -> Any:
    """Ten inputs: the 4th ends its worker the first time it is read, the 8th every time."""
    marker = os.environ["SCAN_MARKER"]
    for i in range(10):
        if i == 3:
            yield {"x": Killer(clean_x(i), marker)}
        elif i == 7:
            yield {"x": Killer(clean_x(i))}
        else:
            yield {"x": clean_x(i)}


class Killer:
    """An array that ends the process that unpickles it (each time, or only while ``marker`` does not exist)."""

    def __init__(self, array: np.ndarray, marker: str | None = None) -> None:
        self.array = array
        self.marker = marker

    def __reduce__(self) -> Any:
        return (_rebuild, (self.array, self.marker))


def _rebuild(array: np.ndarray, marker: str | None) -> np.ndarray:
    if marker is None or not os.path.exists(marker):
        if marker is not None:
            Path(marker).touch()
        os._exit(70)
    return array
