"""Models for the benchmarks: the light models, a det-like FPN of real size, an exported transformer."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The light models and their inputs are defined once, with the tests (appended: this folder's
# ``models`` stays this module).
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from light import light_inputs, light_models  # noqa: E402, F401  (re-exported for run.py and bench_dap.py)


def det_fpn(size: int) -> onnx.ModelProto:
    """A text-detection-like network (ResNet-ish backbone, FPN, upsampled head) at ``size`` x ``size``.

    Its intermediate values add up to gigabytes at 1280x1280, like PaddleOCR's det model.
    """
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(x: str, cin: int, cout: int, k: int, stride: int, name: str, act: bool = True, bn: bool = False) -> str:
        w = numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32), f"{name}.weight")
        b = numpy_helper.from_array(np.zeros(cout, np.float32), f"{name}.bias")
        inits.extend([w, b])
        out = f"{name}.out"
        nodes.append(helper.make_node("Conv", [x, w.name, b.name], [out], name=f"{name}/conv", pads=[k // 2] * 4, strides=[stride, stride]))
        if bn:
            for p, v in (("scale", 1.0), ("shift", 0.0), ("mean", 0.0), ("var", 1.0)):
                inits.append(numpy_helper.from_array(np.full(cout, v, np.float32), f"{name}.bn_{p}"))
            nodes.append(helper.make_node("BatchNormalization", [out] + [f"{name}.bn_{p}" for p in ("scale", "shift", "mean", "var")],
                                          [f"{name}.bn"], name=f"{name}/bn"))
            out = f"{name}.bn"
        if act:
            nodes.append(helper.make_node("Relu", [out], [f"{name}.act"], name=f"{name}/relu"))
            out = f"{name}.act"
        return out

    x = conv("image", 3, 32, 3, 2, "stem", bn=True)
    feats = []
    cin = 32
    for i, c in enumerate([32, 64, 128, 256]):
        stride = 1 if i == 0 else 2
        a = conv(x, cin, c, 3, stride, f"stage{i}.a", bn=True)
        b = conv(a, c, c, 3, 1, f"stage{i}.b", act=False, bn=True)
        short = conv(x, cin, c, 1, stride, f"stage{i}.short", act=False)
        nodes.append(helper.make_node("Add", [b, short], [f"stage{i}.sum"], name=f"stage{i}/add"))
        nodes.append(helper.make_node("Relu", [f"stage{i}.sum"], [f"stage{i}.out"], name=f"stage{i}/relu"))
        x, cin = f"stage{i}.out", c
        feats.append((x, c))
    lat = [conv(f, c, 64, 1, 1, f"fpn.lat{i}", act=False) for i, (f, c) in enumerate(feats)]
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up2"))
    top = lat[3]
    merged = [top]
    for i in (2, 1, 0):
        nodes.append(helper.make_node("Resize", [top, "", "up2"], [f"fpn.up{i}"], name=f"fpn/up{i}", mode="nearest"))
        nodes.append(helper.make_node("Add", [lat[i], f"fpn.up{i}"], [f"fpn.td{i}"], name=f"fpn/td{i}"))
        top = f"fpn.td{i}"
        merged.insert(0, top)
    outs = []
    for i, m in enumerate(merged):
        p = conv(m, 64, 32, 3, 1, f"fpn.out{i}")
        if i:
            scale = float(2**i)
            inits.append(numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), f"up{i}x"))
            nodes.append(helper.make_node("Resize", [p, "", f"up{i}x"], [f"fpn.p{i}"], name=f"fpn/p{i}", mode="nearest"))
            p = f"fpn.p{i}"
        outs.append(p)
    nodes.append(helper.make_node("Concat", outs, ["fuse"], name="fuse/concat", axis=1))
    h = conv("fuse", 128, 32, 3, 1, "head.a", bn=True)
    h = conv(h, 32, 1, 1, 1, "head.b", act=False)
    inits.append(numpy_helper.from_array(np.array([1, 1, 4, 4], np.float32), "up4"))
    nodes.append(helper.make_node("Resize", [h, "", "up4"], ["head.up"], name="head/up", mode="linear"))
    nodes.append(helper.make_node("Sigmoid", ["head.up"], ["prob"], name="head/sigmoid"))
    graph = helper.make_graph(nodes, f"det_fpn_{size}", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def tiny_gpt(path: Path) -> Path | None:
    """Export a small GPT with torch's dynamo exporter (masks built with -inf); None without torch."""
    if path.exists():
        return path
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        return None

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, seq: int) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.heads = heads
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class TinyGPT(nn.Module):
        def __init__(self, vocab: int = 2048, d: int = 256, layers: int = 4, heads: int = 4, seq: int = 128) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.h = nn.ModuleList(Block(d, heads, seq) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t))
            for blk in self.h:
                x = blk(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    model = TinyGPT().eval()
    idx = torch.randint(0, 2048, (1, 128))
    path.parent.mkdir(parents=True, exist_ok=True)
    prog = torch.onnx.export(model, (idx,), dynamo=True)
    prog.save(str(path), external_data=False)
    return path


def module_transformer(layers: int, d: int = 8, seq: int = 4) -> onnx.ModelProto:
    """An encoder as PyTorch's TorchScript exporter names it (``/encoder/layer.3/attention/self/query/MatMul``):
    about 60 nodes a layer (Constant shapes, LayerNorm and GELU written out), tiny weights.

    The graph view's 10,000-node benchmark model (``layers=166``): module scopes come from the node
    names, as they do for real exports without PyTorch's metadata.
    """
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def weight(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name))
        return name

    def scalar(name: str, value: float) -> str:
        inits.append(numpy_helper.from_array(np.array([value], np.float32), name))
        return name

    def op(kind: str, scope: str, inputs: list[str], tag: str = "", **attrs: object) -> str:
        name = f"{scope}/{kind}{tag}"
        out = f"{name}_output_0"
        nodes.append(helper.make_node(kind, inputs, [out], name=name, **attrs))
        return out

    def const(scope: str, values: list[int], tag: str) -> str:
        name = f"{scope}/Constant{tag}"
        out = f"{name}_output_0"
        nodes.append(helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(np.array(values, np.int64))))
        return out

    def linear(x: str, scope: str, din: int, dout: int) -> str:
        y = op("MatMul", scope, [x, weight(f"{scope[1:].replace('/', '.')}.weight", din, dout)])
        return op("Add", scope, [y, weight(f"{scope[1:].replace('/', '.')}.bias", dout)])

    def layer_norm(x: str, scope: str) -> str:
        mean = op("ReduceMean", scope, [x], axes=[-1])
        centered = op("Sub", scope, [x, mean])
        sq = op("Pow", scope, [centered, scalar(f"{scope[1:].replace('/', '.')}.two", 2.0)])
        var = op("ReduceMean", scope, [sq], "_1", axes=[-1])
        eps = op("Add", scope, [var, scalar(f"{scope[1:].replace('/', '.')}.eps", 1e-5)])
        std = op("Sqrt", scope, [eps])
        normed = op("Div", scope, [centered, std])
        scaled = op("Mul", scope, [normed, weight(f"{scope[1:].replace('/', '.')}.weight", d)])
        return op("Add", scope, [scaled, weight(f"{scope[1:].replace('/', '.')}.bias", d)], "_1")

    x = "hidden"
    heads = 2
    for i in range(layers):
        s = f"/encoder/layer.{i}"
        att = f"{s}/attention/self"
        qkv = []
        for part in ("query", "key", "value"):
            y = linear(x, f"{att}/{part}", d, d)
            shape = const(f"{att}/{part}", [1, seq, heads, d // heads], "")
            y = op("Reshape", f"{att}/{part}", [y, shape])
            qkv.append(op("Transpose", f"{att}/{part}", [y], perm=[0, 2, 1, 3]))
        kt = op("Transpose", att, [qkv[1]], perm=[0, 1, 3, 2])
        scores = op("MatMul", att, [qkv[0], kt])
        scores = op("Div", att, [scores, scalar(f"encoder.layer.{i}.scale", 2.0)])
        scores = op("Add", att, [scores, "mask"])
        probs = op("Softmax", att, [scores], axis=-1)
        ctx = op("MatMul", att, [probs, qkv[2]], "_1")
        ctx = op("Transpose", att, [ctx], "_1", perm=[0, 2, 1, 3])
        ctx = op("Reshape", att, [ctx, const(att, [1, seq, d], "_1")])
        out = linear(ctx, f"{s}/attention/output/dense", d, d)
        x = layer_norm(op("Add", f"{s}/attention/output", [out, x]), f"{s}/attention/output/LayerNorm")
        h = linear(x, f"{s}/intermediate/dense", d, 4 * d)
        g = f"{s}/intermediate/intermediate_act_fn"
        e = op("Erf", g, [op("Div", g, [h, scalar(f"encoder.layer.{i}.sqrt2", 1.4142135)])])
        h = op("Mul", g, [op("Mul", g, [h, op("Add", g, [e, scalar(f"encoder.layer.{i}.one", 1.0)])]), scalar(f"encoder.layer.{i}.half", 0.5)], "_1")
        out = linear(h, f"{s}/output/dense", 4 * d, d)
        x = layer_norm(op("Add", f"{s}/output", [out, x]), f"{s}/output/LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/pooler/Identity"))
    graph = helper.make_graph(
        nodes, f"module_transformer_{layers}",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, seq, d]), helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, seq, seq])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, seq, d])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
