"""Quantized detectors against their float models: pairing, the three errors, a planted bad layer, sensitivity; and what it costs.

    python benchmarks/bench_quant.py [--models det640,mobile640,paddle_det] [--repeat 3] [--calibration 4]

The models are convolutional detectors at 1x3x640x640: yolo640 (built here: YOLOv8-like, Conv+SiLU
with the BatchNormalization folded as exporters write it, residual blocks, an SPPF, an upsampling
neck, Sigmoid heads, at YOLOv8n's widths; yolo640s the same at YOLOv8s's, twice as wide), and those of benchmarks/ (det640: the text-detection-like FPN of models.py,
Conv+BatchNormalization+Relu; mobile640: conv_models.py's MobileNet-like blocks,
Conv+BatchNormalization+HardSwish), and a third-party one, paddle_det (PaddleOCR's PP-OCRv4 text
detector from the rapidocr-onnxruntime wheel, fetched with pip download, input ``x``), quantized here by onnxruntime's ``quantize_static`` (QDQ and
QOperator, per-channel weights, calibrated on ``--calibration`` seeded random images; paddle_det, a text
detector, on document-like pages drawn here, normalized as its rapidocr wheel does: on random noise
its probability map is zero everywhere and calibration gives its Sigmoid a range of 1e-4). Where
the quantized model has a defect of its own (a group whose local SQNR is under 10 dB before any
planting), it is quantized again with that group's nodes excluded, as graph-dap's report says, and
the row names it: a planted layer is to be found in an otherwise sound model. Their
BatchNormalization parameters are renamed first: quantize_static names an activation's scale
``{tensor}_scale``, and det640's ``stage0.b.bn_scale`` (the BN's gamma) then collides with the
scale of ``stage0.b.bn`` and the quantized model does not run.

Measured per model and format, in one process, medians of ``--repeat`` runs:
- the share of the float model's computed tensors paired (and folded), the weights compared;
- the layer whose own quantization error is worst (lowest quantization-only SQNR): its rank by local error;
- a planted bad layer (the output scale of the group at half depth made 16x coarser): its rank
  by local error and by sensitivity;
- ``compare`` of every group against the plain runs of the two models (``InferenceSession.run``,
  graph-dap's session options, at level none, the quantized model's float simulation that
  graph-dap measures, and at ORT_ENABLE_ALL for scale);
- ``--sensitivity`` over N groups against N plain runs of the quantized model (level none), per input, over
  ``--sens-inputs`` inputs (their energies added; the planted layer's rank on the first input alone beside it);
- memory: the values the comparison held at its peak, next to all the model's activations;
- the kernels at level all: groups read from onnxruntime's optimized model (dequantized from fused
  integer nodes, put back from NHWC), how many part from the simulation by more than a step, and the
  optimizer the bisection names.
The table goes to stdout and benchmarks/results/quant.md.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "tests"))  # quant_models; after this folder, whose models.py is the benchmarks'


def yolo(size: int = 640, width: int = 1) -> onnx.ModelProto:
    """A YOLOv8-like detector: Conv+SiLU (BatchNormalization folded, as exported), C2f-like blocks with residuals,
    an SPPF of max pools, an upsampling neck with Concat, and two heads, each one tensor of boxes in pixels beside
    class probabilities (as YOLOv8 writes its output), concatenated. ``width`` multiplies the channels: 1 has
    YOLOv8n's (16 to 256), 2 YOLOv8s's (32 to 512)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(x: str, cin: int, cout: int, k: int, stride: int, name: str, act: bool = True) -> str:
        w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"{name}.weight"))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}.bias"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [f"{name}.conv"], name=f"{name}/conv",
                                      pads=[k // 2] * 4, strides=[stride] * 2))  # fmt: skip
        if not act:
            return f"{name}.conv"
        nodes.append(helper.make_node("Sigmoid", [f"{name}.conv"], [f"{name}.sig"], name=f"{name}/sigmoid"))
        nodes.append(helper.make_node("Mul", [f"{name}.conv", f"{name}.sig"], [f"{name}.out"], name=f"{name}/mul"))
        return f"{name}.out"

    def block(x: str, c: int, name: str) -> str:
        h = conv(conv(x, c, c, 3, 1, f"{name}.cv1"), c, c, 3, 1, f"{name}.cv2")
        nodes.append(helper.make_node("Add", [x, h], [f"{name}.sum"], name=f"{name}/add"))
        return f"{name}.sum"

    w = width
    x = conv("image", 3, 16 * w, 3, 2, "stem")
    feats = []
    for i, (cin, c) in enumerate([(16 * w, 32 * w), (32 * w, 64 * w), (64 * w, 128 * w), (128 * w, 256 * w)]):
        x = block(conv(x, cin, c, 3, 2, f"down{i}"), c, f"stage{i}")
        feats.append((x, c))
    y = conv(x, 256 * w, 128 * w, 1, 1, "sppf.cv1")
    pools = [y]
    for i in range(3):
        nodes.append(helper.make_node("MaxPool", [pools[-1]], [f"sppf.pool{i}"], name=f"sppf/pool{i}", kernel_shape=[5, 5], pads=[2] * 4))
        pools.append(f"sppf.pool{i}")
    nodes.append(helper.make_node("Concat", pools, ["sppf.cat"], name="sppf/concat", axis=1))
    top = conv("sppf.cat", 512 * w, 128 * w, 1, 1, "sppf.cv2")
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up2"))
    inits.append(numpy_helper.from_array(np.array([1, 12, -1], np.int64), "flat_shape"))
    outs = []
    for i, (f, c) in ((2, feats[2]), (1, feats[1])):
        nodes.append(helper.make_node("Resize", [top, "", "up2"], [f"neck.up{i}"], name=f"neck/up{i}", mode="nearest"))
        nodes.append(helper.make_node("Concat", [f"neck.up{i}", f], [f"neck.cat{i}"], name=f"neck/concat{i}", axis=1))
        cout = (64 if i == 1 else 128) * w
        top = conv(f"neck.cat{i}", 128 * w + c, cout, 3, 1, f"neck.c{i}")
        # YOLOv8's head: boxes in pixels (here scaled by the stride) beside class probabilities in [0, 1], one tensor
        box = conv(top, cout, 4, 1, 1, f"head{i}.box", act=False)
        inits.append(numpy_helper.from_array(np.array(8.0 * 2**i * 4, np.float32), f"head{i}.stride"))
        nodes.append(helper.make_node("Mul", [box, f"head{i}.stride"], [f"head{i}.pixels"], name=f"head{i}/stride"))
        cls = conv(top, cout, 8, 1, 1, f"head{i}.cls", act=False)
        nodes.append(helper.make_node("Sigmoid", [cls], [f"head{i}.prob"], name=f"head{i}/sigmoid"))
        nodes.append(helper.make_node("Concat", [f"head{i}.pixels", f"head{i}.prob"], [f"head{i}.det"], name=f"head{i}/concat", axis=1))
        nodes.append(helper.make_node("Reshape", [f"head{i}.det", "flat_shape"], [f"head{i}.flat"], name=f"head{i}/reshape"))
        outs.append(f"head{i}.flat")
    nodes.append(helper.make_node("Concat", outs, ["detections"], name="detect/concat", axis=2))
    n = (size // 16) ** 2 + (size // 8) ** 2
    graph = helper.make_graph(nodes, "yolo", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("detections", TensorProto.FLOAT, [1, 12, n])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


#: The input of each model ("image" when not named here).
INPUT_NAMES = {"paddle_det": "x"}


def paddle_det() -> onnx.ModelProto:
    """The PaddleOCR PP-OCRv4 text detector from the rapidocr-onnxruntime wheel (paddle2onnx: Conv+BatchNormalization
    folded, HardSwish written as Add+Clip+Mul+Div, squeeze-excitation blocks, an FPN with Resize and ConvTranspose) at
    opset 13, its Constant nodes made initializers: onnxruntime's QOperator quantizer reads a Conv's bias as an initializer only, and
    fails on a Constant node's output (``'NoneType' object has no attribute 'data_type'`` in quantize_bias_static)."""
    from bench_user_run import paddle_det as fetch
    from onnx import numpy_helper

    m = onnx.load(str(fetch()))
    kept = []
    for n in m.graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            m.graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(n.attribute[0].t), n.output[0]))
        else:
            kept.append(n)
    del m.graph.node[:]
    m.graph.node.extend(kept)
    # opset 12 as shipped: quantize_static writes per-channel DequantizeLinear (axis, opset 13) into it all the same,
    # and the quantized model does not load ("Unrecognized attribute: axis")
    return onnx.version_converter.convert_version(m, 13)


def float_model(name: str, folder: Path) -> Path:
    from conv_models import mobile
    from models import det_fpn

    m = {
        "det640": lambda: det_fpn(640),
        "mobile640": lambda: mobile(640),
        "yolo640": lambda: yolo(640),
        "yolo640s": lambda: yolo(640, width=2),
        "paddle_det": paddle_det,
    }[name]()
    values = {o for n in m.graph.node for o in n.output} | {i.name for i in m.graph.input}
    renames = {}
    for t in m.graph.initializer:
        for suffix in ("_scale", "_zero_point"):
            if t.name.endswith(suffix) and t.name[: -len(suffix)] in values:
                renames[t.name] = t.name + "_param"
    for t in m.graph.initializer:
        t.name = renames.get(t.name, t.name)
    for n in m.graph.node:
        n.input[:] = [renames.get(i, i) for i in n.input]
    path = folder / f"{name}.onnx"
    onnx.save(m, str(path))
    if name in PREPROCESS:  # before any session: it makes its own, with threads of its own (refused beside a global pool)
        from onnxruntime.quantization.shape_inference import quant_pre_process

        quant_pre_process(str(path), str(path.with_name(f"{name}_pre.onnx")), skip_symbolic_shape=True)
    return path


#: Models quantized as onnxruntime's quantizer asks ("Please consider to run pre-processing before quantization"):
#: through ``quant_pre_process`` first (found by qplant). Without it, paddle_det's two BatchNormalizations after a Conv
#: stay apart and quantize_static quantizes each one's bias as a Conv's (int32, scale = input scale x gamma's scale):
#: at p2o.BatchNormalization.1 that scale is 1.28 and every bias (-0.44 to 0.38) becomes 0, a real bad layer worse
#: than the planted one. Pre-processing folds it into the Conv. (Its symbolic shape inference fails on paddle2onnx's
#: dynamic dimensions, "Incomplete symbolic shape inference": skipped.)
PREPROCESS = {"paddle_det"}


def images(n: int, seed: int, name: str = "image") -> list[dict[str, np.ndarray]]:
    if name == "x":  # paddle_det's input: a text detector sees pages of text
        return pages(n, seed, name)
    return [{name: np.random.default_rng(seed + i).random((1, 3, 640, 640)).astype(np.float32)} for i in range(n)]


def pages(n: int, seed: int, name: str, size: int = 640) -> list[dict[str, np.ndarray]]:
    """Document-like pictures: lines of dark glyphs (strokes on a 5x7 grid) on a light page, normalized as the
    rapidocr-onnxruntime wheel the detector comes from normalizes its input ((pixel/255 - 0.5)/0.5, its config.yaml's
    Det). On them its probability map marks about an eighth of the page as text (1.0 at its peak), as on a real page;
    on random noise it stays under 1e-5."""
    out = []
    for i in range(n):
        rng = np.random.default_rng(seed + i)
        page = np.full((size, size, 3), rng.uniform(200, 250), np.float32) + rng.normal(0, 4, (size, size, 3)).astype(np.float32)
        y = int(rng.integers(10, 40))
        while y < size - 40:
            h = int(rng.integers(14, 36))  # glyph height in pixels
            w = max(int(h * 0.6), 4)
            x, end, ink = int(rng.integers(5, size // 3)), int(rng.integers(size // 2, size - 5)), rng.uniform(0, 70)
            while x + w < end:
                if rng.random() >= 0.15:  # else a space
                    glyph = np.zeros((7, 5), bool)
                    for _ in range(int(rng.integers(2, 4))):  # bars and diagonals
                        kind = int(rng.integers(0, 4))
                        diagonal = np.minimum(np.arange(7) * 5 // 7, 4)
                        if kind == 0:
                            glyph[:, rng.integers(0, 5)] = True
                        elif kind == 1:
                            glyph[rng.integers(0, 7), :] = True
                        else:
                            glyph[np.arange(7), diagonal if kind == 2 else 4 - diagonal] = True
                    cell = np.kron(glyph, np.ones((h // 7 + 1, w // 5 + 1), bool))[:h, : w - 1]
                    region = page[y : y + cell.shape[0], x : x + cell.shape[1]]
                    region[cell[: region.shape[0], : region.shape[1]]] = ink
                x += w
            y += h + int(rng.integers(8, 40))
        img = (np.clip(page, 0, 255) / 255.0 - 0.5) / 0.5
        out.append({name: img.transpose(2, 0, 1)[None].astype(np.float32)})
    return out


def quantize(path: Path, fmt: str, calibration: int, input_name: str = "image", exclude: list[str] | None = None) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from quant_models import shared_thread_pool

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(images(calibration, 0, input_name))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    out = path.with_name(f"{path.stem}_{fmt.lower()}.onnx")
    pre = path.with_name(f"{path.stem}_pre.onnx")  # float_model's, where there is one
    with shared_thread_pool():
        quantize_static(str(pre if pre.exists() else path), str(out), Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True, nodes_to_exclude=exclude or [])
    return out


def plain_session(path: Path, level: str) -> Any:
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    return ort.InferenceSession(str(path), session_options(level), providers=["CPUExecutionProvider"])


def timed(sess: Any, feeds: dict[str, Any]) -> float:
    """One plain run's seconds (after a warm-up run)."""
    sess.run(None, feeds)
    t = time.perf_counter()
    sess.run(None, feeds)
    return time.perf_counter() - t


def plant(quant: Path, result: Any) -> tuple[Path, int]:
    """A copy of the quantized model whose group at half depth has a 16x coarser output scale; that group's index."""
    view = result.pairing.quant_view
    graph = view.graph

    def scale_of(g: Any) -> str:
        from graph_dap.runtime.tools.quant.view import QUANT_OPS

        producer = graph.producer(g.group.outputs[0].quant_name)
        spec = QUANT_OPS.get(producer.op_type)
        return producer.inputs[spec.out_params[0] if spec and spec.out_params else 1]

    def own(g: Any) -> bool:
        """In QDQ, a scale only this tensor's Q/DQ read (quantize_static gives tensors that must agree one scale)."""
        if graph.producer(g.group.outputs[0].quant_name).op_type != "DequantizeLinear":
            return True
        members = set(view.members.get(g.group.outputs[0].logical, []))
        users = [n for n in graph.nodes if scale_of(g) in n.inputs]
        return all(n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.inputs[0] in members for n in users)

    candidates = [
        g for g in result.groups
        if g.params is not None and g.group.ops != "input" and g.params.per_tensor and graph.producer(g.group.outputs[0].quant_name)
        and graph.producer(g.group.outputs[0].quant_name).op_type in ("DequantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul")
        and own(g)
    ]  # fmt: skip
    target = candidates[len(candidates) // 2]
    scale = scale_of(target)
    m = onnx.load(str(quant))
    for i, t in enumerate(m.graph.initializer):
        if t.name == scale:
            m.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * np.float32(16), scale))
    out = quant.with_name(f"{quant.stem}_planted.onnx")
    onnx.save(m, str(out))
    return out, target.group.index


def measure(name: str, fmt: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from graph_dap.runtime.tools.quant.analysis import compare_quantized
    from graph_dap.runtime.tools.quant.kernels import compare_kernels
    from graph_dap.runtime.tools.quant.sensitivity import run_sensitivity
    from graph_dap.runtime.tools.quant.stream import demanded_bytes

    f = folder / f"{name}.onnx"
    input_name = INPUT_NAMES.get(name, "image")
    q = quantize(f, fmt, args.calibration, input_name)
    feeds = images(1, 1000, input_name)[0]
    defects = [g for g in compare_quantized(q, f, feeds).groups if g.local.snr < 10]  # the quantizer's own, before planting
    excluded = [n for g in defects for n in g.group.node_names()]
    if excluded:
        q = quantize(f, fmt, args.calibration, input_name, excluded)
    sessions = {(p, level): plain_session(p, level) for p in (f, q) for level in ("none", "all")}
    ratios: dict[str, list[float]] = {"none": [], "all": []}
    times = []
    for _ in range(args.repeat):  # side by side: the plain runs, then the comparison, each time
        plain = {level: sum(timed(sessions[(p, level)], feeds) for p in (f, q)) for level in ("none", "all")}
        t = time.perf_counter()
        result = compare_quantized(q, f, feeds)
        times.append(time.perf_counter() - t)
        for level in ratios:
            ratios[level].append(times[-1] / plain[level])
    if args.compare_only:
        return {"model": name, "format": fmt, "groups": len(result.groups), "compare_s": statistics.median(times),
                "ratio_none": statistics.median(ratios["none"]), "ratio_all": statistics.median(ratios["all"])}  # fmt: skip
    counts = result.pairing.counts()
    ranked = [g.group.index for g in result.ranked]
    own = min((g for g in result.groups if g.quant_only is not None), key=lambda g: g.quant_only.snr)
    kernels = compare_kernels(result, feeds)
    planted, index = plant(q, result)
    bad = compare_quantized(planted, f, feeds)
    one = run_sensitivity(bad, feeds)
    sens = run_sensitivity(bad, data=images(args.sens_inputs, 1000, input_name))  # the compare's input and the next ones
    total_bytes = demanded_bytes(result.pairing.float_view.graph, dict.fromkeys(result.pairing.float_activations(), 1), feeds) or 0
    return {
        "model": name,
        "format": fmt,
        "float_nodes": len(result.pairing.float_view.graph.nodes),
        "quant_nodes": len(result.pairing.quant_view.graph.nodes),
        "paired": f"{counts['float_paired']}/{counts['float_activations']} ({100 * counts['float_paired'] / counts['float_activations']:.1f}%)"
        + (f" + {counts['float_folded']} folded" if counts["float_folded"] else ""),
        "weights": f"{counts['weights_paired']}/{counts['float_weights']}",
        "excluded": ", ".join(f"{g.group.name} ({g.local.snr:.1f} dB)" for g in defects) or "-",
        "groups": len(result.groups),
        "own_worst": f"{own.group.name} ({own.quant_only.snr:.1f} dB): rank {ranked.index(own.group.index) + 1}",
        "planted_local": [g.group.index for g in bad.ranked].index(index) + 1,
        "planted_first": bad.first_divergence is not None and bad.first_divergence.group.index == index,
        "planted_sens": [r.index for r in sens.ranked].index(index) + 1,
        "planted_sens_one": [r.index for r in one.ranked].index(index) + 1,
        "sens_inputs": sens.inputs,
        "planted_name": bad.groups[index].group.name,
        "compare_s": statistics.median(times),
        "ratio_none": statistics.median(ratios["none"]),
        "ratio_all": statistics.median(ratios["all"]),
        "sens_runs": sens.runs,
        "sens_groups": len(sens.ranked),
        "sens_s": sens.seconds,
        "sens_plain_s": sens.plain_seconds,
        "kernels": f"{len(kernels.rows)} ({sum(1 for r in kernels.rows if r.params is not None)} dequantized"
        + (f", {sum(1 for r in kernels.rows if r.layout)} from {'/'.join(sorted({r.layout for r in kernels.rows if r.layout}))}" if any(r.layout for r in kernels.rows) else "")
        + f"); part > 1 step: {len(kernels.parted)}; outputs {kernels.output_divergence:.3g} apart"
        + (f"; {', '.join(kernels.responsible)}" if kernels.responsible else ""),
        "held_mb": max(result.memory.values()) / 2**20,
        "all_mb": total_bytes / 2**20,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| model | format | nodes float / quantized | float tensors paired | weights compared | quantizer's defects kept in float | groups | worst own error: rank by local error | "
        "planted 16x layer: rank by local error / first divergence / rank by sensitivity over the inputs (on the first alone) | compare s | vs plain runs of both (none / all) | "
        "sensitivity: inputs, models run, s | vs N plain runs per input (level none) | values held at peak MB (all activations MB) | "
        "kernels at level all: groups read at fused outputs |"
    )
    out = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        out.append(
            f"| {r['model']} | {r['format']} | {r['float_nodes']} / {r['quant_nodes']} | {r['paired']} | {r['weights']} | {r['excluded']} | {r['groups']} | "
            f"{r['own_worst']} | {r['planted_name']}: {r['planted_local']} / {'yes' if r['planted_first'] else 'no'} / {r['planted_sens']} ({r['planted_sens_one']}) | "
            f"{r['compare_s']:.2f} | {r['ratio_none']:.2f}x / {r['ratio_all']:.2f}x | "
            f"{r['sens_inputs']}, {r['sens_runs']}, {r['sens_s']:.2f} | {r['sens_s'] / (r['sens_groups'] * r['sens_inputs'] * r['sens_plain_s']):.2f}x | "
            f"{r['held_mb']:.0f} ({r['all_mb']:.0f}) | {r['kernels']} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="yolo640,det640,mobile640")
    p.add_argument("--formats", default="QDQ,QOperator")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--calibration", type=int, default=4)
    p.add_argument("--sens-inputs", type=int, default=4, help="the inputs sensitivity is measured over (energies added)")
    p.add_argument("--compare-only", action="store_true", help="time compare only: no kernels, planting or sensitivity; no table file")
    args = p.parse_args()
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-quant-") as tmp:
        folder = Path(tmp)
        names = args.models.split(",")
        for name in names:  # first: quant_pre_process's onnxruntime session fails once graph-dap's global thread pool
            float_model(name, folder)  # exists, and then it skips its optimizations (the BatchNormalization fold) silently
        for name in names:
            for fmt in args.formats.split(","):
                rows.append(measure(name, fmt, folder, args))
                print(rows[-1], flush=True)
    if args.compare_only:
        for r in rows:
            print(f"| {r['model']} | {r['format']} | {r['groups']} | {r['compare_s']:.2f} | {r['ratio_none']:.2f}x / {r['ratio_all']:.2f}x |")
        return
    text = table(rows)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quant.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
