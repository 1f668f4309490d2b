"""Convolutional benchmark models whose optimized run is much faster than the unoptimized one.

Both are built here at 640x640 with BatchNormalization and HardSwish after every convolution
(the pattern of MobileNet-style detectors): ``mobile640`` (inverted residual blocks with
depthwise convolutions) and ``resnet640`` (basic residual blocks). onnxruntime's optimizer
folds each BatchNormalization into its Conv, fuses the activation, and runs the convolutions
in its blocked NCHWc layout.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, name: str, groups: int = 1, act: bool = True) -> str:
        fan_in = cin // groups * k * k
        w = self.init(f"{name}.weight", self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in))
        self.nodes.append(
            helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}/conv", pads=[k // 2] * 4, strides=[stride] * 2, group=groups)
        )
        bn = [
            self.init(f"{name}.bn_scale", 1.0 + 0.1 * self.rng.standard_normal(cout)),
            self.init(f"{name}.bn_bias", 0.1 * self.rng.standard_normal(cout)),
            self.init(f"{name}.bn_mean", 0.1 * self.rng.standard_normal(cout)),
            self.init(f"{name}.bn_var", 1.0 + 0.1 * np.abs(self.rng.standard_normal(cout))),
        ]
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv", *bn], [f"{name}.bn"], name=f"{name}/bn"))
        if not act:
            return f"{name}.bn"
        self.nodes.append(helper.make_node("HardSwish", [f"{name}.bn"], [f"{name}.act"], name=f"{name}/hswish"))
        return f"{name}.act"

    def model(self, name: str, out: str, channels: int, size: int) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("GlobalAveragePool", [out], ["pooled"], name="head/pool"))
        g = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
            [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, channels, 1, 1])],
            self.inits,
        )
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def mobile(size: int = 640) -> onnx.ModelProto:
    """MobileNetV2/V3-like: a stem, then inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 project)."""
    b = _Builder(7)
    x = b.conv_bn("image", 3, 16, 3, 2, "stem")
    cin = 16
    for i, (c, stride, expand) in enumerate([(16, 1, 1), (24, 2, 4), (24, 1, 3), (40, 2, 3), (40, 1, 3), (80, 2, 4), (80, 1, 2), (112, 1, 4), (160, 2, 4)]):
        hidden = cin * expand
        h = b.conv_bn(x, cin, hidden, 1, 1, f"block{i}.expand") if expand != 1 else x
        h = b.conv_bn(h, hidden, hidden, 3, stride, f"block{i}.dw", groups=hidden)
        h = b.conv_bn(h, hidden, c, 1, 1, f"block{i}.project", act=False)
        if stride == 1 and cin == c:
            b.nodes.append(helper.make_node("Add", [x, h], [f"block{i}.sum"], name=f"block{i}/add"))
            h = f"block{i}.sum"
        x, cin = h, c
    x = b.conv_bn(x, cin, 320, 1, 1, "last")
    return b.model("mobile", x, 320, size)


def resnet(size: int = 640) -> onnx.ModelProto:
    """ResNet18-like basic blocks with BatchNormalization and HardSwish."""
    b = _Builder(11)
    x = b.conv_bn("image", 3, 32, 3, 2, "stem")
    cin = 32
    for i, (c, stride) in enumerate([(32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2)]):
        a = b.conv_bn(x, cin, c, 3, stride, f"block{i}.a")
        h = b.conv_bn(a, c, c, 3, 1, f"block{i}.b", act=False)
        short = x if stride == 1 and cin == c else b.conv_bn(x, cin, c, 1, stride, f"block{i}.short", act=False)
        b.nodes.append(helper.make_node("Add", [h, short], [f"block{i}.sum"], name=f"block{i}/add"))
        b.nodes.append(helper.make_node("HardSwish", [f"block{i}.sum"], [f"block{i}.out"], name=f"block{i}/hswish"))
        x, cin = f"block{i}.out", c
    return b.model("resnet", x, cin, size)
