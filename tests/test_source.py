"""Source frames and module scopes of exported models: stack traces, the user's frame, executions of a line."""

from __future__ import annotations

import onnx
from onnx import helper
from source_models import DYNAMO, REMOTE, TORCHSCRIPT, line_of

from graph_dap.runtime.graph import Graph
from graph_dap.runtime.graph.source import name_modules, parse_line_spec, parse_stack_trace
from graph_dap.runtime.loading import load_graph


def test_a_dynamo_node_has_its_python_frames_innermost_first_torch_frames_marked() -> None:
    g = load_graph(DYNAMO)
    source = g.sources.of("node_MatMul_1")
    assert source is not None
    got = [(f.qualname, f.location, f.library, f.module) for f in source.frames]
    assert got == [
        ("Linear.forward", "linear.py:134", True, "blocks.0.attn.qkv"),
        ("Attention.forward", f"tinymodel.py:{line_of('self.qkv(x).chunk')}", False, "blocks.0.attn"),
        ("Block.forward", f"tinymodel.py:{line_of('return x + self.attn(h)')}", False, "blocks.0"),
        ("TinyModel.forward", f"tinymodel.py:{line_of('x = block(x)')}", False, ""),
    ]
    assert source.user_frame is source.frames[1]
    assert source.user_frame.code == "q, k, v = self.qkv(x).chunk(3, dim=-1)"
    assert source.user_frame.to_dict() == {"path": REMOTE, "line": line_of("self.qkv(x).chunk"), "function": "forward"}
    assert [m.text() for m in source.modules] == ["(model): TinyModel", "blocks.0: Block", "blocks.0.attn: Attention", "blocks.0.attn.qkv: Linear"]
    assert g.sources.files == (REMOTE,)
    assert g.sources.of("node_Split_15") is None  # the optimizer's Split carries no metadata


def test_a_torchscript_node_has_module_scopes_from_its_name_and_no_frames() -> None:
    g = load_graph(TORCHSCRIPT)
    source = g.sources.of("/blocks.0/attn/qkv/MatMul")
    assert source is not None and source.derived and source.frames == ()
    assert [m.path for m in source.modules] == ["blocks.0", "blocks.0.attn", "blocks.0.attn.qkv"]
    assert not g.sources.has_frames and g.sources.of("Identity_16") is None
    assert [m.path for m in name_modules("model/dense/MatMul")] == ["model", "model/dense"]
    assert name_modules("/Constant") == [] and name_modules("conv1") == []


def test_a_line_made_of_several_nodes_runs_once_per_layer() -> None:
    g = load_graph(DYNAMO)
    s = g.sources
    loop = line_of("x = block(x)")
    runs = s.executions(REMOTE, loop, g.main.nodes)
    assert [len(r) for r in runs] == [11, 11]  # the two blocks: the Splits without metadata are not counted
    assert [r[0].id for r in runs] == ["node_layer_norm", "node_layer_norm_1"]
    attention = s.executions(REMOTE, line_of("return x + self.attn(h)"), g.main.nodes)
    assert [len(r) for r in attention] == [10, 10]  # the attention's nodes and the residual Add, per block
    assert s.executions(REMOTE, line_of("class Block"), g.main.nodes) == []
    produced = s.produced(g.node("node_softmax"), 1)  # Block.forward's line: the whole residual branch of block 0
    assert produced[0].id == "node_MatMul_1" and produced[-1].id == "node_add" and len(produced) == 10
    assert [n.id for n in s.produced(g.node("node_softmax"), 0)] == ["node_softmax"]


def test_files_match_by_path_or_by_its_tail_and_line_specs_parse() -> None:
    s = load_graph(DYNAMO).sources
    assert s.match_files("tinymodel.py") == [REMOTE] and s.match_files("tinymodel/tinymodel.py") == [REMOTE]
    assert s.match_files("other/tinymodel.py") == [] and s.match_files("model.py") == []
    spec = parse_line_spec("C:\\work\\model.py:25")
    assert spec is not None and (spec.file, spec.line) == ("C:\\work\\model.py", 25)
    assert parse_line_spec("onnx::MatMul_80") is None and parse_line_spec(":25") is None


def test_frames_outside_modules_and_windows_paths() -> None:
    trace = (
        'File "C:\\\\Users\\\\me\\\\net.py", line 9, in forward\n    y = helper(x)\n'
        '  File "C:\\\\Users\\\\me\\\\net.py", line 3, in helper\n    return x.relu()\n'
        '  File "C:\\\\py\\\\Lib\\\\site-packages\\\\torch\\\\_tensor.py", line 40, in relu\n    ...'
    )
    frames = parse_stack_trace(trace)
    assert [(f.file_name, f.line, f.function, f.library) for f in frames] == [
        ("net.py", 9, "forward", False), ("net.py", 3, "helper", False), ("_tensor.py", 40, "relu", True)
    ]  # fmt: skip
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=trace)
    node.metadata_props.add(key="namespace", value=": net.Net/relu: aten.relu.default")
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    g = Graph(helper.make_model(helper.make_graph([node], "g", [x], [y])))
    source = g.sources.of("relu")
    assert source is not None
    assert [(f.qualname, f.module) for f in source.frames] == [("relu", ""), ("helper", ""), ("Net.forward", "")]
    assert source.user_frame is not None and source.user_frame.function == "helper"


def test_the_listing_ends_node_lines_with_their_source_line_and_folds_module_scopes() -> None:
    from graph_dap.runtime.listing import TokenKind, render_listing

    listing = render_listing(load_graph(DYNAMO))
    lines = listing.text.splitlines()
    softmax = listing.line_of("node_softmax")
    assert lines[softmax - 1].endswith(f")  # node_softmax  # tinymodel.py:{line_of('F.softmax')}")
    ids = [t.text for t in listing.tokens_at(softmax) if t.kind is TokenKind.NODE_ID]
    assert ids == ["node_softmax"]  # the source comment is a comment, not part of the id
    assert lines[listing.line_of("node_Split_15") - 1].endswith("# node_Split_15")  # no metadata, no source
    blocks = {(m.module, m.depth): (m.start, m.end, m.label) for m in listing.modules}
    assert blocks[("blocks.0", 0)] == (listing.line_of("node_layer_norm"), listing.line_of("node_add"), "blocks.0: Block")
    attn = blocks[("blocks.0.attn", 1)]
    assert (attn[0], attn[1]) == (listing.line_of("node_MatMul_1"), listing.line_of("node_linear_1"))
    assert ("blocks.1.attn.proj", 2) in blocks and ("", 0) not in blocks
    ts = render_listing(load_graph(TORCHSCRIPT))
    assert ts.text.splitlines()[ts.line_of("/blocks.0/attn/Softmax") - 1].endswith("# /blocks.0/attn/Softmax")
    first = next(m for m in ts.modules if m.module == "blocks.0")
    assert (first.start, first.end, first.label) == (ts.line_of("/blocks.0/ln/LayerNormalization"), ts.line_of("/blocks.0/Add"), "blocks.0")
