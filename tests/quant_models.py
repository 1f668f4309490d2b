"""Tiny float models for the quantization tests, and their quantizations by onnxruntime's own tools.

``cnn``: conv1 (+ a Relu the QDQ quantizer folds into conv1's range, per-channel weights), conv2,
a residual Add, Sigmoid, Mul (SiLU), conv3 1x1 to a 4x16x16 output. ``matmul``: one MatMul whose
weight block quantization (MatMulNBits, DequantizeLinear with block_size) quantizes to 4 bits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def cnn(path: Path, input_name: str = "x") -> Path:
    rng = np.random.default_rng(0)
    inits: list[onnx.TensorProto] = []

    def w(name: str, shape: tuple[int, ...], s: float = 0.3) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Conv", [input_name, w("w1", (8, 3, 3, 3)), w("b1", (8,), 0.1)], ["c1"], name="conv1", pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", w("w2", (8, 8, 3, 3), 0.2), w("b2", (8,), 0.1)], ["c2"], name="conv2", pads=[1] * 4),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
        helper.make_node("Sigmoid", ["s"], ["sg"], name="sig"),
        helper.make_node("Mul", ["s", "sg"], ["m"], name="mul"),
        helper.make_node("Conv", ["m", w("w3", (4, 8, 1, 1)), w("b3", (4,), 0.1)], ["y"], name="conv3"),
    ]
    g = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def matmul(path: Path) -> Path:
    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "W"], ["y"], name="mm")],
        "mm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [weight],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, str(path))
    return path


def samples(n: int = 4, shape: tuple[int, ...] = (1, 3, 16, 16), name: str = "x") -> list[dict[str, np.ndarray]]:
    return [{name: np.random.default_rng(100 + i).standard_normal(shape).astype(np.float32)} for i in range(n)]


@contextlib.contextmanager
def shared_thread_pool() -> Iterator[None]:
    """onnxruntime's quantization tools make their own SessionOptions; in a process where graph-dap set onnxruntime's
    global thread pool, every session must use it: their options are made to, for the time of the call."""
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import ensure_global_thread_pool

    ensure_global_thread_pool()
    made = ort.SessionOptions

    def options() -> ort.SessionOptions:
        so = made()
        so.use_per_session_threads = False
        return so

    ort.SessionOptions = options  # type: ignore[misc]
    try:
        yield
    finally:
        ort.SessionOptions = made  # type: ignore[misc]


def quantize(float_path: Path, out: Path, kind: str) -> Path:
    """``kind``: qdq (per-channel weights), qdq_symmetric (also symmetric activations: onnxruntime's int8 kernels then
    part from the float simulation), qoperator (per-channel), dynamic."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples())

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    with shared_thread_pool():
        if kind == "dynamic":
            quantize_dynamic(str(float_path), str(out))
        else:
            fmt = QuantFormat.QOperator if kind == "qoperator" else QuantFormat.QDQ
            extra = {"ActivationSymmetric": True} if kind == "qdq_symmetric" else {}
            quantize_static(str(float_path), str(out), Reader(), quant_format=fmt, per_channel=True, extra_options=extra)
    return out


def coarser(path: Path, out: Path, scale: str, factor: float = 16.0) -> Path:
    """A copy of a quantized model with the initializer ``scale`` (an activation's scale) ``factor`` times coarser."""
    m = onnx.load(str(path))
    for i, t in enumerate(m.graph.initializer):
        if t.name == scale:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(factor), scale))
            break
    else:
        raise KeyError(scale)
    onnx.save(m, str(out))
    return out


def block_quantized(float_path: Path, folder: Path) -> dict[str, Path]:
    """The MatMul's weight in 4 bits, blocks of 32: as MatMulNBits and as DequantizeLinear with block_size."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer, QuantFormat

    out = {}
    for name, fmt in (("nbits", QuantFormat.QOperator), ("dq_block", QuantFormat.QDQ)):
        config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=name == "dq_block", quant_format=fmt)
        q = MatMulNBitsQuantizer(onnx.load(str(float_path)), algo_config=config)
        with shared_thread_pool():
            q.process()
        path = folder / f"{name}.onnx"
        q.model.save_model_to_file(str(path))
        out[name] = path
    return out
