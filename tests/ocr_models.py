"""A PaddleOCR-style text detector (DBNet: backbone, FPN neck, DB head), small, for the graph view's tests.

Node names carry the module path as exporters without PyTorch's metadata write it
(``backbone/stage1/conv1/conv``), so graph-dap derives nested module scopes from them. The head's
binarize branch takes ``Sqrt`` of a convolution's output: with ``nan=True`` that output is negative
somewhere for any input, so a NaN starts at ``head/binarize/sqrt`` and spreads to what follows.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def ocr_det(size: int = 32, nan: bool = True) -> onnx.ModelProto:
    """The detector at ``size`` x ``size`` (a multiple of 8): about 60 nodes in 14 module scopes."""
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def const(name: str, a: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def conv(x: str, cin: int, cout: int, scope: str, stride: int = 1, k: int = 3, act: str | None = "Relu", bias: float = 0.0) -> str:
        w = const(f"{scope}.weight", rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)))
        b = const(f"{scope}.bias", np.full(cout, bias))
        out = f"{scope}.conv_out"
        nodes.append(helper.make_node("Conv", [x, w, b], [out], name=f"{scope.replace('.', '/')}/conv", pads=[k // 2] * 4, strides=[stride, stride]))
        if act:
            nodes.append(helper.make_node(act, [out], [f"{scope}.act_out"], name=f"{scope.replace('.', '/')}/{act.lower()}"))
            out = f"{scope}.act_out"
        return out

    x = conv("image", 3, 8, "backbone.stem", stride=2)
    feats = []
    cin = 8
    for i, c in enumerate([8, 16, 16]):
        s = f"backbone.stage{i + 1}"
        a = conv(x, cin, c, f"{s}.conv1", stride=1 if i == 0 else 2)
        b = conv(a, c, c, f"{s}.conv2", act=None)
        short = conv(x, cin, c, f"{s}.short", stride=1 if i == 0 else 2, k=1, act=None)
        nodes.append(helper.make_node("Add", [b, short], [f"{s}.sum"], name=f"{s.replace('.', '/')}/add"))
        nodes.append(helper.make_node("Relu", [f"{s}.sum"], [f"{s}.out"], name=f"{s.replace('.', '/')}/relu"))
        x, cin = f"{s}.out", c
        feats.append((x, c))
    lat = [conv(f, c, 8, f"neck.lateral{i}", k=1, act=None) for i, (f, c) in enumerate(feats)]
    top = lat[2]
    const("neck.up2", np.array([1, 1, 2, 2]))
    for i in (1, 0):
        nodes.append(helper.make_node("Resize", [top, "", "neck.up2"], [f"neck.up{i}"], name=f"neck/top_down{i}/resize", mode="nearest"))
        nodes.append(helper.make_node("Add", [lat[i], f"neck.up{i}"], [f"neck.td{i}"], name=f"neck/top_down{i}/add"))
        top = f"neck.td{i}"
    fused = conv(top, 8, 8, "neck.smooth")
    prob = conv(fused, 8, 4, "head.binarize.conv1")
    prob = conv(prob, 4, 1, "head.binarize.conv2", act=None, bias=-0.5 if nan else 4.0)
    nodes.append(helper.make_node("Sqrt", [prob], ["head.binarize.sqrt"], name="head/binarize/sqrt"))
    nodes.append(helper.make_node("Sigmoid", ["head.binarize.sqrt"], ["head.binarize.prob"], name="head/binarize/sigmoid"))
    thresh = conv(fused, 8, 1, "head.thresh.conv", act="Sigmoid")
    const("head.k", np.array([50.0]))
    nodes.append(helper.make_node("Sub", ["head.binarize.prob", thresh], ["head.diff"], name="head/step/sub"))
    nodes.append(helper.make_node("Mul", ["head.diff", "head.k"], ["head.scaled"], name="head/step/mul"))
    nodes.append(helper.make_node("Sigmoid", ["head.scaled"], ["head.binary"], name="head/step/sigmoid"))
    const("head.up2", np.array([1, 1, 2, 2]))
    nodes.append(helper.make_node("Resize", ["head.binary", "", "head.up2"], ["maps"], name="head/upsample/resize", mode="linear"))
    graph = helper.make_graph(
        nodes, "ocr_det", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("maps", TensorProto.FLOAT, [1, 1, size, size])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
