"""The listing's header and its maps: node lines, tokens (where each name stands), subgraph blocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime import load_graph, render_listing
from graph_dap.runtime.listing import Role, TokenKind, read_header

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nan_demo.onnx"


def _if_model() -> onnx.ModelProto:
    then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Add", ["t", "x"], ["r"], name="inner_add")],
        "then",
        [],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])],
    )
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["r2"])], "else", [], [helper.make_tensor_value_info("r2", TensorProto.FLOAT, [2])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other),
    ]
    g = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_header_names_the_model_and_declares_inputs_initializers_and_outputs():
    listing = render_listing(load_graph(EXAMPLE))
    lines = listing.text.splitlines()
    header = read_header(listing.text)
    assert header is not None and header.title == "nan_demo.onnx" and header.model_path == str(EXAMPLE.resolve())
    assert lines[listing.declarations["image"] - 1] == "# input  image: float32[1,3,32,32]"
    assert lines[listing.declarations["norm.eps"] - 1] == "# init   norm.eps: float32[1]"
    assert lines[listing.declarations["probs"] - 1] == "# output probs: float32[1,10]"
    assert read_header("y = Relu(x)\n") is None


def test_every_token_is_the_text_it_names_and_node_lines_have_their_values():
    graph = load_graph(EXAMPLE)
    listing = render_listing(graph)
    lines = listing.text.split("\n")
    for number, tokens in listing.line_tokens.items():
        line = lines[number - 1]
        ends = [t.end for t in tokens]
        assert ends == sorted(ends) and all(t.start < t.end for t in tokens)
        for t in tokens:
            assert line[t.start : t.end] == t.text or t.kind is TokenKind.COMMENT
    for node in graph.nodes:
        tokens = listing.tokens_at(listing.line_of(node.id))
        assert [t.text for t in tokens if t.kind is TokenKind.VALUE and t.role is Role.DEF] == [o for o in node.outputs if o]
        assert [t.text for t in tokens if t.kind is TokenKind.VALUE and t.role is Role.USE] == [i for i in node.inputs if i]
        assert [t.text for t in tokens if t.kind is TokenKind.OP] == [node.op_type]
        assert [t.text for t in tokens if t.kind is TokenKind.NODE_ID] == [node.id]
    sqrt = listing.line_of("norm/std")
    assert [t.text for t in listing.tokens_at(sqrt) if t.kind is TokenKind.TYPE] == ["float32[1,8,1,1]"]
    conv = listing.tokens_at(listing.line_of("stem/conv"))
    assert [t.text for t in conv if t.kind is TokenKind.ATTRIBUTE] == ["pads"]
    at = listing.token_at(sqrt, lines[sqrt - 1].index("norm_var_eps") + 3)
    assert at is not None and at.text == "norm_var_eps" and at.role is Role.USE


def test_subgraphs_are_blocks_with_their_own_tokens():
    listing = render_listing(load_graph(_if_model()))
    lines = listing.text.split("\n")
    assert [b.scope for b in listing.blocks] == ["branch/else_branch", "branch/then_branch"]
    then = listing.blocks[1]
    assert lines[then.start - 1].strip() == "then_branch() {" and lines[then.end - 1].strip() == "}"
    assert listing.block_at(then.start + 1) is then and listing.block_at(listing.line_of("branch")) is None
    inner = listing.tokens_at(then.start + 2)  # r = Add(t, x)  # inner_add
    assert [(t.kind, t.text, t.role) for t in inner if t.kind is TokenKind.VALUE] == [
        (TokenKind.VALUE, "r", Role.DEF),
        (TokenKind.VALUE, "t", Role.USE),
        (TokenKind.VALUE, "x", Role.USE),
    ]
    returns = listing.tokens_at(then.end - 1)
    assert [(t.kind, t.text) for t in returns] == [(TokenKind.KEYWORD, "return"), (TokenKind.VALUE, "r")]


def test_the_text_is_unchanged_by_the_maps():
    """The token maps are computed alongside: every node line reads as before, ``OUTS = Op<attrs>(INS)  # id``."""
    graph = load_graph(EXAMPLE)
    listing = render_listing(graph)
    lines = listing.text.split("\n")
    assert lines[listing.line_of("norm/std") - 1] == "norm_std: float32[1,8,1,1] = Sqrt(norm_var_eps)  # norm/std"
    assert lines[listing.line_of("stem/conv") - 1] == "stem_out: float32[1,8,32,32] = Conv<pads=[1,1,1,1]>(image, stem.weight, stem.bias)  # stem/conv"
