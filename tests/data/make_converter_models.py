"""Make the corpus of converters' models in tests/data/converters/: small models written by the tools users use.

The tests read what this writes and need none of these tools. To make the files again, in a
virtual environment of their own (none of them is a dependency of graph-dap):

    python3 -m venv /tmp/conv && /tmp/conv/bin/pip install torch==2.13.0 onnxscript onnx==1.23.2 \\
        onnxruntime==1.32.0 scikit-learn skl2onnx transformers tensorflow-cpu tf2onnx paddlepaddle paddle2onnx
    /tmp/conv/bin/python tests/data/make_converter_models.py

Measured with scikit-learn 1.9.1, skl2onnx 1.20.0, torch 2.13.0, transformers 5.25.0,
tensorflow-cpu 2.21.0, tf2onnx 1.17.0, paddlepaddle 3.3.1, paddle2onnx 2.1.0, onnxruntime 1.32.0. Each model is a few hundred KB at most;
every random number is seeded, so the files come out the same from the same versions. What each
model exercises is listed in RELIABILITY.md ("A corpus of converters' models"); ``CORPUS`` below
names the files and the inputs (``<name>.inputs.npz``) written beside them.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent / "converters"


def _save(name: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    HERE.mkdir(exist_ok=True)
    path = HERE / f"{name}.onnx"
    tmp = path.with_name(path.name + ".tmp")
    onnx.save_model(model, str(tmp), save_as_external_data=False)
    os.replace(tmp, path)
    np.savez(HERE / f"{name}.inputs.npz", **inputs)
    print(f"{name}.onnx: {len(model.graph.node)} nodes, {path.stat().st_size:,} bytes")


# -- scikit-learn through skl2onnx --------------------------------------------------------


def sklearn_models() -> None:
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.8)
    names = np.array(["cat", "dog", "bird"])[y]
    batch = {"X": x[:3]}
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression())
    # integer labels with ZipMap (skl2onnx's default: a sequence of maps), string labels without
    _save("skl_forest_int_zipmap", to_onnx(forest.fit(x, y), x[:1], target_opset=17), batch)
    _save("skl_forest_str", to_onnx(forest.fit(x, names), x[:1], options={"zipmap": False}, target_opset=17), batch)
    # string labels with ZipMap (maps keyed by class name), integer labels without
    _save("skl_pipeline_str_zipmap", to_onnx(pipeline.fit(x, names), x[:1], target_opset=17), batch)
    _save("skl_pipeline_int", to_onnx(pipeline.fit(x, y), x[:1], options={"zipmap": False}, target_opset=17), batch)


# -- PyTorch ------------------------------------------------------------------------------


def _torch_export(module, args: tuple, names: list[str], outputs: list[str], **kw) -> onnx.ModelProto:
    import torch

    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = Path(tmp) / "m.onnx"
        torch.onnx.export(module, args, str(path), input_names=names, output_names=outputs, **kw)
        return onnx.load(str(path))


def bert_models() -> None:
    """A 2-layer BERT (transformers' BertModel, tiny config) exported by torch.onnx.export, then fused by
    onnxruntime's transformer optimizer, then quantized by quantize_dynamic."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu",
    )
    config._attn_implementation = "eager"  # the attention as MatMul/Softmax, as the optimizer's fusions expect
    bert = BertModel(config, add_pooling_layer=True).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    model = Wrapped().eval()
    ids = torch.randint(0, 64, (1, 8))
    mask = torch.ones(1, 8, dtype=torch.int64)
    mask[0, 6:] = 0  # two padding tokens: the attention mask holds -inf-like values on purpose
    types = torch.zeros(1, 8, dtype=torch.int64)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
    names = list(feeds)
    exported = _torch_export(
        model, (ids, mask, types), names, ["last_hidden_state", "pooler_output"], dynamo=False, opset_version=17,
        dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names},
    )
    _save("bert_torch", exported, feeds)
    with tempfile.TemporaryDirectory() as tmp:
        src, opt, quant = (Path(tmp) / n for n in ("b.onnx", "opt.onnx", "q.onnx"))
        onnx.save(exported, str(src))
        fused = optimizer.optimize_model(str(src), model_type="bert", num_heads=2, hidden_size=32, opt_level=0)
        fused.save_model_to_file(str(opt))
        _save("bert_optimized", onnx.load(str(opt)), feeds)
        quantize_dynamic(str(opt), str(quant), weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        _save("bert_quant_dynamic", onnx.load(str(quant)), feeds)


def cnn_models() -> None:
    """A small CNN (Conv, BatchNorm, ReLU, a residual Add, pooling, Linear) exported, then quantize_static in
    QDQ and QOperator formats with a few calibration images."""
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
            self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            h = self.stem(x)
            h = torch.relu(h + self.block(h))
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))

    torch.manual_seed(0)
    net = Net().eval()
    image = torch.randn(1, 3, 16, 16)
    exported = _torch_export(net, (image,), ["image"], ["logits"], dynamo=False, opset_version=17)
    rng = np.random.default_rng(1)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.items, None)

    feeds = {"image": image.numpy()}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cnn.onnx"
        onnx.save(exported, str(src))
        for fmt, name in ((QuantFormat.QDQ, "cnn_qdq"), (QuantFormat.QOperator, "cnn_qoperator")):
            out = Path(tmp) / f"{name}.onnx"
            quantize_static(str(src), str(out), Reader(), quant_format=fmt, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            _save(name, onnx.load(str(out)), feeds)


def vad_model() -> None:
    """silero-vad's shape: the network inside nested Ifs (the sample rate, then a data-dependent check), an
    LSTM two levels deep, weights as main-graph Constants read by the branches; scripted, so torch writes If."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, k: int) -> None:
            super().__init__()
            self.stft = nn.Conv1d(1, 8, k, stride=4)
            self.lstm = nn.LSTM(8, 8, batch_first=True)
            self.head = nn.Linear(8, 1)

        def forward(self, x, h, c):
            y = torch.relu(self.stft(x.unsqueeze(1))).transpose(1, 2)
            o, (h2, c2) = self.lstm(y, (h, c))
            return torch.sigmoid(self.head(o[:, -1])), h2, c2

    class VAD(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n16 = Net(8)
            self.n8 = Net(4)

        def forward(self, x, sr, h, c):
            x = x * 0.5
            if bool(sr == 16000):
                if bool(x.abs().sum() >= 0):
                    return self.n16(x, h, c)
                else:
                    return x.sum().reshape(1, 1), h, c
            else:
                return self.n8(x, h, c)

    torch.manual_seed(0)
    scripted = torch.jit.script(VAD().eval())
    x, sr, h, c = torch.randn(1, 64), torch.tensor(16000), torch.zeros(1, 1, 8), torch.zeros(1, 1, 8)
    exported = _torch_export(scripted, (x, sr, h, c), ["input", "sr", "h", "c"], ["out", "hn", "cn"], dynamo=False, opset_version=16)
    _save("vad_nested_if_lstm", exported, {"input": x.numpy(), "sr": sr.numpy(), "h": h.numpy(), "c": c.numpy()})


# -- Keras through tf2onnx ---------------------------------------------------------------


def keras_model() -> None:
    """A Keras image classifier (NHWC) through tf2onnx: its Transposes around the convolution, the batch
    norm as Mul/Add, the Flatten as Shape/Gather/Concat/Reshape, Dense as MatMul + Add."""
    import tensorflow as tf
    import tf2onnx

    tf.random.set_seed(0)
    inp = tf.keras.Input((16, 16, 3), name="image")
    x = tf.keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.Flatten()(x)
    x = tf.keras.layers.Dense(8, activation="tanh")(x)
    out = tf.keras.layers.Dense(3, activation="softmax", name="probs")(x)
    model = tf.keras.Model(inp, out)
    spec = (tf.TensorSpec((None, 16, 16, 3), tf.float32, name="image"),)
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=13)
    image = np.random.default_rng(2).standard_normal((1, 16, 16, 3)).astype(np.float32)
    _save("keras_tf2onnx", proto, {"image": image})


# -- paddle2onnx's patterns ----------------------------------------------------------------


def paddle_model() -> None:
    """A PaddleOCR-style detector head through paddle.jit.save and paddle2onnx 2.1 (its PIR parser): the bias
    as a separate Add, Identity nodes, dims named DynamicDimension.N, a Reshape through a shape computed at run
    time. (paddle2onnx 2.1 cannot convert an upsampling by a scale factor: that is left out here.)"""
    import paddle
    import paddle2onnx
    from paddle import nn

    paddle.seed(0)

    class Net(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(3, 8, 3, stride=2, padding=1)
            self.bn1 = nn.BatchNorm2D(8)
            self.act = nn.Hardswish()
            self.conv2 = nn.Conv2D(8, 4, 3, padding=1)
            self.bn2 = nn.BatchNorm2D(4)
            self.conv3 = nn.Conv2D(4, 1, 1)

        def forward(self, x):
            y = self.act(self.bn1(self.conv1(x)))
            y = nn.functional.sigmoid(self.conv3(nn.functional.relu(self.bn2(self.conv2(y)))))
            return paddle.reshape(y, [paddle.shape(x)[0], -1])

    net = Net()
    net.eval()
    with tempfile.TemporaryDirectory() as tmp:
        paddle.jit.save(net, f"{tmp}/inference", input_spec=[paddle.static.InputSpec([None, 3, None, None], "float32", "x")])
        program = next(f for f in Path(tmp).iterdir() if f.suffix in (".json", ".pdmodel"))
        paddle2onnx.export(str(program), f"{tmp}/inference.pdiparams", f"{tmp}/m.onnx", opset_version=14)
        model = onnx.load(f"{tmp}/m.onnx")
    image = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    _save("paddle2onnx", model, {"x": image})


def paddle_style_model() -> None:
    """What paddle2onnx 1.x wrote for a PaddleOCR-style detector head (FACTS: -1 dims), built with onnx.helper:
    input dims as -1, unnamed Constant nodes, Conv + BatchNormalization + HardSwish, Reshape through a shape
    computed at run time, Resize by scales, Sigmoid."""
    rng = np.random.default_rng(3)

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name + "_value"))  # no node name

    def init(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("conv1_weights", (8, 3, 3, 3)), init("conv2_weights", (4, 8, 3, 3)), init("conv3_weights", (1, 4, 1, 1))]
    for name, n in (("bn1", 8), ("bn2", 4)):
        inits += [
            numpy_helper.from_array(np.abs(rng.standard_normal(n)).astype(np.float32) + 0.5, f"{name}_scale"),
            numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, f"{name}_offset"),
            numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, f"{name}_mean"),
            numpy_helper.from_array(np.abs(rng.standard_normal(n)).astype(np.float32) + 0.5, f"{name}_variance"),
        ]
    nodes = [
        helper.make_node("Conv", ["x", "conv1_weights"], ["conv2d_0.tmp_0"], name="conv2d_0", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["conv2d_0.tmp_0", "bn1_scale", "bn1_offset", "bn1_mean", "bn1_variance"], ["batch_norm_0.tmp_2"], name="batch_norm_0", epsilon=1e-5),
        helper.make_node("HardSwish", ["batch_norm_0.tmp_2"], ["hardswish_0.tmp_0"], name="hardswish_0"),
        helper.make_node("Conv", ["hardswish_0.tmp_0", "conv2_weights"], ["conv2d_1.tmp_0"], name="conv2d_1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv2d_1.tmp_0", "bn2_scale", "bn2_offset", "bn2_mean", "bn2_variance"], ["batch_norm_1.tmp_2"], name="batch_norm_1", epsilon=1e-5),
        helper.make_node("Relu", ["batch_norm_1.tmp_2"], ["relu_0.tmp_0"], name="relu_0"),
        const("scales_0", np.array([1.0, 1.0, 2.0, 2.0], np.float32)),
        helper.make_node("Resize", ["relu_0.tmp_0", "", "scales_0"], ["nearest_interp_v2_0.tmp_0"], name="nearest_interp_v2_0", mode="nearest"),
        helper.make_node("Conv", ["nearest_interp_v2_0.tmp_0", "conv3_weights"], ["conv2d_2.tmp_0"], name="conv2d_2"),
        helper.make_node("Sigmoid", ["conv2d_2.tmp_0"], ["sigmoid_0.tmp_0"], name="sigmoid_0"),
        helper.make_node("Shape", ["x"], ["shape_0.tmp_0"], name="shape_0"),
        const("slice_starts", np.array([0], np.int64)),
        const("slice_ends", np.array([1], np.int64)),
        helper.make_node("Slice", ["shape_0.tmp_0", "slice_starts", "slice_ends"], ["slice_0.tmp_0"], name="slice_0"),
        const("minus_one", np.array([-1], np.int64)),
        helper.make_node("Concat", ["slice_0.tmp_0", "minus_one"], ["concat_0.tmp_0"], name="concat_0", axis=0),
        helper.make_node("Reshape", ["sigmoid_0.tmp_0", "concat_0.tmp_0"], ["save_infer_model/scale_0.tmp_0"], name="reshape2_0"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, None, None])
    for d in x.type.tensor_type.shape.dim:
        d.dim_value = -1
    x.type.tensor_type.shape.dim[1].dim_value = 3
    y = helper.make_tensor_value_info("save_infer_model/scale_0.tmp_0", TensorProto.FLOAT, [None, None])
    for d in y.type.tensor_type.shape.dim:
        d.dim_value = -1
    graph = helper.make_graph(nodes, "paddle-infer", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="PaddlePaddle", producer_version="paddle2onnx-style")
    model.ir_version = 7
    onnx.checker.check_model(model)
    image = np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)
    _save("paddle_style", model, {"x": image})


MAKERS: dict[str, Callable[[], None]] = {
    "sklearn": sklearn_models,
    "bert": bert_models,
    "cnn": cnn_models,
    "vad": vad_model,
    "keras": keras_model,
    "paddle": paddle_model,
    "paddle_style": paddle_style_model,
}


def main() -> None:
    for name in sys.argv[1:] or MAKERS:
        MAKERS[name]()


if __name__ == "__main__":
    main()
