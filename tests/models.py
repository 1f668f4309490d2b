"""Small models built with onnx.helper for the tests, and onnxruntime as ground truth."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime.engine.options import session_options

F = TensorProto.FLOAT


def make_model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    return m


def tensor(name: str, shape, dtype=F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def chain_model() -> onnx.ModelProto:
    """x -> Conv -> Relu -> Add(bias) -> Mul(scale) -> Sigmoid -> y, plus a side branch."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "b"], ["a"], name="add"),
        helper.make_node("Mul", ["a", "s"], ["m"], name="mul"),
        helper.make_node("Sigmoid", ["m"], ["y"], name="sigmoid"),
        helper.make_node("ReduceSum", ["x"], ["side"], name="side", keepdims=0),
    ]
    inits = [
        init("w", (rng.standard_normal((4, 2, 3, 3)) * 0.5).astype(np.float32)),
        init("b", rng.standard_normal((1, 4, 1, 1)).astype(np.float32)),
        init("s", np.array([1.5], np.float32)),
    ]
    return make_model(nodes, [tensor("x", [1, 2, 8, 8])], [tensor("y", [1, 4, 8, 8]), tensor("side", [])], inits)


def chain_feeds(seed: int = 1) -> dict[str, np.ndarray]:
    """Inputs for :func:`chain_model`: ``x`` drawn from a standard normal."""
    return {"x": np.random.default_rng(seed).standard_normal((1, 2, 8, 8)).astype(np.float32)}


def chain_files(folder: Path, seed: int = 1) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """:func:`chain_model` saved as ``folder/chain.onnx``, its inputs as ``folder/chain_inputs.npz``, and those inputs."""
    path, inputs, feeds = folder / "chain.onnx", folder / "chain_inputs.npz", chain_feeds(seed)
    onnx.save(chain_model(), str(path))
    np.savez(inputs, **feeds)
    return path, inputs, feeds


def ort_values(model: onnx.ModelProto, feeds: dict[str, Any], names: list[str] | None = None) -> dict[str, Any]:
    """What onnxruntime computes for every node output when each is made a graph output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    wanted = names or [o for n in m.graph.node for o in n.output if o]
    for name in wanted:
        if name not in have:
            m.graph.output.append(helper.make_value_info(name, onnx.TypeProto()))
    # graph-dap sets onnxruntime's global thread pool: every session in the process must use it.
    so = session_options("none")
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = [o.name for o in m.graph.output]
    return dict(zip(outs, sess.run(outs, feeds)))


def run_values(model: onnx.ModelProto, feeds: dict[str, Any], names: list[str], level: str = "all") -> dict[str, Any]:
    """``names`` as onnxruntime's run of ``model`` at ``level`` computes them: the model with them as outputs too. For
    a tensor that the optimized graph computes (a fused group's output, say) onnxruntime only adds a reorder of its
    layout, so this is the user's own run's value; a tensor fused inside a kernel would come out unfused."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names if n not in have)
    sess = ort.InferenceSession(m.SerializeToString(), session_options(level), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feeds)))


def as_shown(session: Any, model: onnx.ModelProto, feeds: dict[str, Any], names: list[str], level: str = "all") -> dict[str, Any]:
    """What a stop must show of each of ``names``: the user's run's value (onnxruntime at ``level``, with the value an
    output: :func:`run_values`, all in one run) where the session notes nothing, else (a value recomputed with the
    original nodes) what onnxruntime's original node makes, without optimizations, of its inputs as the stop shows them."""
    ran = [n for n in names if not session.note(n)]
    out = run_values(model, feeds, ran, level) if ran else {}
    inits = {t.name: t for t in model.graph.initializer}
    for name in names:
        if name in out:
            continue
        producer = next(n for n in model.graph.node if name in n.output)
        reads = [i for i in producer.input if i]
        fed = {i: np.asarray(session.value(i)) for i in reads if i not in inits}
        graph = helper.make_graph(
            [producer],
            "one",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for i, v in fed.items()],
            [helper.make_value_info(name, onnx.TypeProto())],
            [inits[i] for i in reads if i in inits],
        )
        one = helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
        sess = ort.InferenceSession(one.SerializeToString(), session_options("none"), providers=["CPUExecutionProvider"])
        out[name] = sess.run([name], fed)[0]
    return out


def assert_same(a: Any, b: Any, name: str = "") -> None:
    if isinstance(a, list) or isinstance(b, list):
        assert len(a) == len(b), name
        for x, y in zip(a, b):
            assert_same(x, y, name)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{name}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    np.testing.assert_array_equal(a, b, err_msg=name)


def layered_model(n_nodes: int, width: int = 64) -> onnx.ModelProto:
    """A model of about ``n_nodes`` nodes: layers of MatMul, Add, Relu and a normalization
    (``Sqrt(var + eps)``, safe), named ``layer{k}/...`` (module scopes); every 50th layer computes
    ``Sqrt(var - eps)`` instead (a hazard)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], [init("eps", np.array([1e-5], np.float32))]
    x, k = "x", 0
    while len(nodes) + 9 <= n_nodes:
        p = f"layer{k}"
        inits += [
            init(f"{p}.w", (rng.standard_normal((width, width)) * 0.1).astype(np.float32)),
            init(f"{p}.b", np.zeros(width, np.float32)),
        ]
        add_eps = "Sub" if k % 50 == 49 else "Add"
        nodes += [
            helper.make_node("MatMul", [x, f"{p}.w"], [f"{p}.mm"], name=f"{p}/matmul"),
            helper.make_node("Add", [f"{p}.mm", f"{p}.b"], [f"{p}.lin"], name=f"{p}/bias"),
            helper.make_node("Relu", [f"{p}.lin"], [f"{p}.act"], name=f"{p}/relu"),
            helper.make_node("ReduceMean", [f"{p}.act"], [f"{p}.mean"], name=f"{p}/norm/mean", axes=[1], keepdims=1),
            helper.make_node("Sub", [f"{p}.act", f"{p}.mean"], [f"{p}.c"], name=f"{p}/norm/center"),
            helper.make_node("Mul", [f"{p}.c", f"{p}.c"], [f"{p}.sq"], name=f"{p}/norm/square"),
            helper.make_node("ReduceMean", [f"{p}.sq"], [f"{p}.var"], name=f"{p}/norm/var", axes=[1], keepdims=1),
            helper.make_node(add_eps, [f"{p}.var", "eps"], [f"{p}.ve"], name=f"{p}/norm/eps"),
            helper.make_node("Sqrt", [f"{p}.ve"], [f"{p}.std"], name=f"{p}/norm/std"),
        ]
        if len(nodes) < n_nodes:
            nodes.append(helper.make_node("Div", [f"{p}.c", f"{p}.std"], [f"{p}.out"], name=f"{p}/norm/scale"))
            x = f"{p}.out"
        else:
            x = f"{p}.std"
        k += 1
    while len(nodes) < n_nodes:
        out = f"tail{len(nodes)}"
        nodes.append(helper.make_node("Relu", [x], [out], name=f"tail/relu{len(nodes)}"))
        x = out
    return make_model(nodes, [tensor("x", [1, width])], [tensor(x, [1, width])], inits)


def residual_stages(kinds: str, c: int = 16):
    """Residual blocks in a row, ``p`` a projection block (its shortcut a 1x1 Conv), ``i`` an identity block."""
    rng = np.random.default_rng(4)
    nodes, inits, x = [helper.make_node("Relu", ["x"], ["r0"], name="relu0")], [], "r0"

    def conv(src: str, name: str, k: int = 3) -> str:
        inits.append(init(f"{name}.w", (rng.standard_normal((c, c, k, k)) * 0.2).astype(np.float32)))
        nodes.append(helper.make_node("Conv", [src, f"{name}.w"], [name], name=name, pads=[k // 2] * 4))
        return name

    for i, kind in enumerate(kinds):
        nodes.append(helper.make_node("Relu", [conv(x, f"b{i}a")], [f"b{i}r"], name=f"b{i}r"))
        short = conv(x, f"b{i}s", 1) if kind == "p" else x
        nodes.append(helper.make_node("Add", [conv(f"b{i}r", f"b{i}b"), short], [f"b{i}sum"], name=f"b{i}sum"))
        nodes.append(helper.make_node("Relu", [f"b{i}sum"], [f"b{i}out"], name=f"b{i}out"))
        x = f"b{i}out"
    return make_model(nodes, [tensor("x", [1, c, 8, 8])], [tensor(x, [1, c, 8, 8])], inits)


def optimized_nodes(model: onnx.ModelProto, level: str = "all") -> list[onnx.NodeProto]:
    """The nodes of the graph onnxruntime's optimizer makes of ``model`` at ``level``."""
    with tempfile.TemporaryDirectory() as tmp:
        so = session_options(level)
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return list(onnx.load(so.optimized_model_filepath).graph.node)


def segment_own_nodes(segment: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The nodes of the graph onnxruntime's optimizer makes of a watched ``segment`` that its own outputs need: not
    the watch's (onnxruntime may rewrite a watch's pool to read a blocked layout, so its outputs are not all ``__g...``)."""
    nodes = optimized_nodes(segment)
    producer = {o: n for n in nodes for o in n.output}
    needed: set[int] = set()
    frontier = [o.name for o in segment.graph.output if not o.name.startswith("__g")]
    while frontier:
        n = producer.get(frontier.pop())
        if n is not None and id(n) not in needed:
            needed.add(id(n))
            frontier.extend(n.input)
    return [n for n in nodes if id(n) in needed]


def assert_exact(got: Any, want: Any, what: str) -> None:
    """The same dtype, shape and values, bit for bit (NaN where NaN)."""
    a, b = np.asarray(got), np.asarray(want)
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), what


def whole_plan(session: Any) -> Any:
    """The plan of ``session``'s whole run (stopped at entry) as an optimized continue with its own filters."""
    plan = session.planner.plan(
        0, len(session.sequence), filt=session.filters.watch, dtypes=session.executor.dtypes, budget=session.store.budget,
        conditions=lambda a, b: [], constants=session.store.fixed, version=0, optimized=True,
    )  # fmt: skip
    assert plan is not None
    return plan


# -- models on disk for the DAP scenarios ------------------------------------------------------


def save_model(
    path: Path,
    nodes: list[Any],
    inputs: list[Any],
    outputs: list[Any],
    initializers: dict[str, Any] | None = None,
    opset: int = 17,
) -> Path:
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def save_inputs(path: Path, feeds: dict[str, Any]) -> Path:
    np.savez(path, **feeds)
    return path


def reference(model_path: Path, feeds: dict[str, Any]) -> dict[str, Any]:
    """Every value of the model as onnxruntime computes it (each node output made a graph output)."""
    model = onnx.load(model_path)
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out and out not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=out))
                known.add(out)
    # graph-dap's global thread pool may be set in this process already: every session must use it
    options = session_options("none")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, feeds), strict=True))
    values.update(feeds)
    values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    return values


def nan_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Sub 1 (shift) -> Log (log1: NaN where x < 1) -> Relu -> y; and a Div by zero (inf)."""
    feeds = {"x": np.array([[2.0, 0.5, 3.0, -1.0], [1.5, 4.0, 0.25, 2.5]], np.float32)}
    path = save_model(
        folder / "faulty.onnx",
        [
            helper.make_node("Sub", ["x", "one"], ["shifted"], name="shift"),
            helper.make_node("Log", ["shifted"], ["logged"], name="log1"),
            helper.make_node("Relu", ["logged"], ["y"], name="relu1"),
            helper.make_node("Div", ["x", "zeros"], ["ratio"], name="div1"),
            helper.make_node("Add", ["ratio", "x"], ["z"], name="add1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4]),
        ],
        {"one": np.array(1, np.float32), "zeros": np.zeros((2, 4), np.float32)},
    )
    return path, save_inputs(folder / "faulty_inputs.npz", feeds), feeds


def inf_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Div by zeros (div1: +/-Inf) -> Add x (add1: Inf again, from its input) -> z."""
    feeds = {"x": np.array([[2.0, -0.5, 3.0], [1.5, 4.0, -0.25]], np.float32)}
    path = save_model(
        folder / "infinite.onnx",
        [
            helper.make_node("Div", ["x", "zeros"], ["ratio"], name="div1"),
            helper.make_node("Add", ["ratio", "x"], ["z"], name="add1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        {"zeros": np.zeros((2, 3), np.float32)},
    )
    return path, save_inputs(folder / "infinite_inputs.npz", feeds), feeds


def error_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Relu -> Reshape to a shape with the wrong element count (fails in onnxruntime)."""
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    path = save_model(
        folder / "broken.onnx",
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu1"),
            helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        {"shape": np.array([4, 2], np.int64)},
    )
    return path, save_inputs(folder / "broken_inputs.npz", feeds), feeds


def long_model(folder: Path, count: int = 400, size: int = 256) -> Path:
    """A chain of ``count`` MatMul+Tanh pairs on size x size matrices: a continue that takes seconds."""
    nodes = []
    prev = "x"
    for i in range(count):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}"))
        prev = f"t{i}"
    w = (np.random.RandomState(1).randn(size, size) / np.sqrt(size)).astype(np.float32)
    return save_model(
        folder / "long.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [size, size])],
        {"w": w},
    )


def running_model(folder: Path, count: int = 300) -> Path:
    """:func:`long_model` on 1024 x 1024 matrices: a run of seconds (about 20 ms a pair on 2 cores, 6 s for
    the 300 pairs) in few nodes, for a test that acts while a run goes on (pauses it, sets breakpoints, kills
    its worker). 4,000 pairs of 256 x 256 ran for as long, but their 8,000 nodes took seconds to load, list
    and plan at each launch and continue."""
    return long_model(folder, count=count, size=1024)


def wide_model(folder: Path, count: int = 130, rows: int = 250) -> tuple[Path, Path, dict[str, Any]]:
    """``count`` Neg nodes on a rows x 3 tensor: many values (a paged scope), a long first axis."""
    feeds = {"x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)}
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"], name=f"neg{i}") for i in range(count)]
    path = save_model(
        folder / "wide.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 3])],
        [helper.make_tensor_value_info(f"v{count - 1}", TensorProto.FLOAT, [rows, 3])],
    )
    return path, save_inputs(folder / "wide_inputs.npz", feeds), feeds


def zipmap_model(labels: list[str] | None = None) -> onnx.ModelProto:
    """x[2,3] -> Softmax scores -> ArgMax ``label``, and skl2onnx's ZipMap of the scores, ``probs``: a sequence of
    maps, keyed 0, 1, 2 or by ``labels``."""
    classes = {"classlabels_strings": labels} if labels else {"classlabels_int64s": [0, 1, 2]}
    kind = TensorProto.STRING if labels else TensorProto.INT64
    item = helper.make_map_type_proto(kind, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    seq = helper.make_value_info("probs", helper.make_sequence_type_proto(item))
    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], axis=1, name="softmax"),
        helper.make_node("ArgMax", ["p"], ["label"], axis=1, keepdims=0, name="argmax"),
        helper.make_node("ZipMap", ["p"], ["probs"], domain="ai.onnx.ml", name="zipmap", **classes),
    ]
    g = helper.make_graph(
        nodes,
        "zip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [2]), seq],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 8
    return m
