"""Build ``examples/nan_demo.onnx``: a small image classifier with a NaN in the middle.

The "norm" block computes a standard deviation as ``Sqrt(var - eps)`` instead of
``Sqrt(var + eps)``: wherever a channel's variance is below eps the square root
is NaN, which then spreads to the logits. ``graph-dap run examples/nan_demo.onnx
--break-on nan`` stops at that Sqrt, not at the output.

Run: python examples/make_example.py [OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(7)

    def init(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        init("stem.weight", 8, 3, 3, 3),
        init("stem.bias", 8),
        init("block.conv.weight", 8, 8, 3, 3),
        init("block.conv.bias", 8),
        numpy_helper.from_array(np.array([0.2], np.float32), "norm.eps"),
        init("head.weight", 10, 8),
        init("head.bias", 10),
        numpy_helper.from_array(np.array([1, -1], np.int64), "flat_shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "stem.weight", "stem.bias"], ["stem_out"], name="stem/conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["stem_out"], ["stem_act"], name="stem/relu"),
        helper.make_node("Conv", ["stem_act", "block.conv.weight", "block.conv.bias"], ["block_out"], name="block/conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["block_out"], ["block_act"], name="block/relu"),
        helper.make_node("ReduceMean", ["block_act"], ["norm_mean"], name="norm/mean", axes=[2, 3], keepdims=1),
        helper.make_node("Sub", ["block_act", "norm_mean"], ["norm_centered"], name="norm/center"),
        helper.make_node("Mul", ["norm_centered", "norm_centered"], ["norm_sq"], name="norm/square"),
        helper.make_node("ReduceMean", ["norm_sq"], ["norm_var"], name="norm/var", axes=[2, 3], keepdims=1),
        # The bug: var - eps instead of var + eps.
        helper.make_node("Sub", ["norm_var", "norm.eps"], ["norm_var_eps"], name="norm/var_eps"),
        helper.make_node("Sqrt", ["norm_var_eps"], ["norm_std"], name="norm/std"),
        helper.make_node("Div", ["norm_centered", "norm_std"], ["norm_out"], name="norm/scale"),
        helper.make_node("MaxPool", ["norm_out"], ["pool_out"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["pool_out"], ["gap_out"], name="gap"),
        helper.make_node("Reshape", ["gap_out", "flat_shape"], ["features"], name="flatten"),
        helper.make_node("Gemm", ["features", "head.weight", "head.bias"], ["logits"], name="head/fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="head/softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "nan_demo",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="graph-dap-example")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("nan_demo.onnx")
    onnx.save(build(), str(out))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
