"""The program of the mixed-mode tests (``tests/programs/infer_loop.py``), its two models, and what onnxruntime says.

SCALE: ``x -> double (Mul 2) -> plus1 (Add 1) -> y``; ROOT: ``y -> shift (Add 5) -> sqrt1 (Sqrt) -> halve (Mul 0.5) -> z``.
Call ``i`` of the program feeds ``x = i`` (a 2x4 tensor), except ``x[0, 0] = -5`` at call 7, where ROOT's Sqrt makes a NaN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from models import save_model
from onnx import TensorProto, helper

PROGRAM = Path(__file__).resolve().parent / "programs" / "infer_loop.py"


def program_line(marker: str) -> int:
    """The 1-based line of the program that holds ``marker``."""
    for number, text in enumerate(PROGRAM.read_text().splitlines(), 1):
        if marker in text:
            return number
    raise AssertionError(f"no line of {PROGRAM.name} holds {marker!r}")


def loop_models(folder: Path) -> tuple[Path, Path]:
    """The two models of the program, written to ``folder``."""
    scale = save_model(
        folder / "scale.onnx",
        [
            helper.make_node("Mul", ["x", "two"], ["doubled"], name="double"),
            helper.make_node("Add", ["doubled", "one"], ["y"], name="plus1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        {"two": np.array(2, np.float32), "one": np.array(1, np.float32)},
    )
    root = save_model(
        folder / "root.onnx",
        [
            helper.make_node("Add", ["y", "five"], ["shifted"], name="shift"),
            helper.make_node("Sqrt", ["shifted"], ["root"], name="sqrt1"),
            helper.make_node("Mul", ["root", "half"], ["z"], name="halve"),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])],
        {"five": np.array(5, np.float32), "half": np.array(0.5, np.float32)},
    )
    return scale, root


def call_inputs(i: int) -> np.ndarray:
    """What the program feeds SCALE at call ``i``."""
    x = np.full((2, 4), float(i), np.float32)
    if i == 7:
        x[0, 0] = -5.0
    return x


def printed(scale: Path, root: Path, x: Any) -> str:
    """The line the program prints for a call whose SCALE input is ``x``, with onnxruntime's values."""
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    # graph-dap set the test process's global thread pool: every session here must use it
    (y,) = ort.InferenceSession(str(scale), session_options("none"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (z,) = ort.InferenceSession(str(root), session_options("none"), providers=["CPUExecutionProvider"]).run(None, {"y": y})
    return f"{float(z.sum()):.4f}"
