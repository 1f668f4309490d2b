"""``graph-dap lsp`` driven by pytest-lsp's client as an editor drives it: one scenario per feature.

One server serves this module (its start costs the imports of onnx and onnxruntime);
each test opens its own listing and closes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import pytest_lsp
from lsp_client import CONFIG, close, codes, line_of, open_listing, position_of, start, write_listing
from lsprotocol import types
from models import init, make_model, tensor
from onnx import TensorProto, helper
from pytest_lsp import LanguageClient

from graph_dap.lsp.highlighting import TOKEN_TYPES

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nan_demo.onnx"
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example model and its listing, in a folder of their own."""
    folder = tmp_path_factory.mktemp("example")
    model = folder / "nan_demo.onnx"
    shutil.copy(EXAMPLE, model)
    return write_listing(model, folder)


def _doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def test_hover_on_a_value_shows_its_type_producer_and_consumers(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    at = position_of(example, "norm_var_eps", line_has="= Sqrt(")
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), at))
    text = hover.contents.value
    assert "**norm_var_eps**: `float32[1,8,1,1]`" in text
    assert f"made by `norm/var_eps` (Sub, line {line_of(example, '# norm/var_eps') + 1})" in text
    assert f"read by `norm/std` (Sqrt, line {line_of(example, '# norm/std') + 1})" in text
    assert hover.range.start == at and hover.range.end.character == at.character + len("norm_var_eps")
    await close(client, uri)


async def test_hover_on_an_initializer_shows_its_statistics(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(example, "norm.eps", line_has="= Sub(")))
    text = hover.contents.value
    assert "initializer" in text and "values=[0.2" in text and "= 0.2" in text  # one element: its value
    weight = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(example, "head.weight", line_has="Gemm")))
    import onnx
    from onnx import numpy_helper

    w = next(numpy_helper.to_array(t) for t in onnx.load(str(EXAMPLE)).graph.initializer if t.name == "head.weight")
    assert f"min={float(w.min()):.4g} max={float(w.max()):.4g}" in weight.contents.value and "80 elements" in weight.contents.value
    await close(client, uri)


async def test_hover_on_an_op_type_shows_its_schema_for_the_models_opset(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(example, "Sqrt(", offset=1)))
    text = hover.contents.value
    assert "**Sqrt** — ai.onnx, version 13 (the model imports opset 17)" in text
    assert "**Inputs**" in text and "`X`" in text and "tensor(float)" in text
    conv = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(example, "pads", line_has="# stem/conv")))
    assert "`pads` (ints) of **Conv**" in conv.contents.value and "[1, 1, 1, 1]" in conv.contents.value
    await close(client, uri)


async def test_hover_on_a_node_shows_its_id_attributes_and_python_source(client: LanguageClient, tmp_path: Path):
    relu = helper.make_node("Relu", ["x"], ["y"], name="/h.0/act/Relu")
    trace = (
        'File "/home/me/tinynet.py", line 25, in forward\n    y = F.relu(x)\n'
        'File "/usr/lib/python3/site-packages/torch/nn/functional.py", line 1500, in relu\n    return torch.relu(x)'
    )
    relu.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=trace)
    listing = write_listing(make_model([relu], [tensor("x", [2])], [tensor("y", [2])]), tmp_path)
    uri, _ = await open_listing(client, listing)
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(listing, "/h.0/act/Relu", line_has="= Relu")))
    text = hover.contents.value
    assert "**/h.0/act/Relu**: `Relu`" in text
    assert "**Source**: [/home/me/tinynet.py:25](file:///home/me/tinynet.py#L25) in `forward`" in text
    await close(client, uri)


async def test_an_exported_models_listing_hovers_its_python_line_and_folds_its_modules(client: LanguageClient, tmp_path: Path):
    from source_models import DYNAMO

    model = tmp_path / DYNAMO.name
    shutil.copy(DYNAMO, model)
    listing = write_listing(model, tmp_path)
    uri, _ = await open_listing(client, listing)
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(listing, "node_softmax", line_has="= Softmax")))
    text = hover.contents.value
    assert "**Source**: [/home/exporter/tinymodel/tinymodel.py:18](file:///home/exporter/tinymodel/tinymodel.py#L18) in `Attention.forward`" in text
    assert "att = F.softmax(att, dim=-1)" in text and "module: `blocks.0.attn: Attention`" in text
    ranges = await client.text_document_folding_range_async(types.FoldingRangeParams(_doc(uri)))
    folds = {(r.start_line, r.end_line): r.collapsed_text for r in ranges}
    assert folds[(line_of(listing, "# node_layer_norm "), line_of(listing, "# node_add "))] == "blocks.0: Block"
    await close(client, uri)


async def test_definition_goes_to_the_producer_or_the_header(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    use = position_of(example, "norm_var_eps", line_has="= Sqrt(")
    loc = await client.text_document_definition_async(types.DefinitionParams(_doc(uri), use))
    producer = position_of(example, "norm_var_eps:", line_has="# norm/var_eps")
    assert loc.uri == uri and loc.range.start == producer
    init_loc = await client.text_document_definition_async(types.DefinitionParams(_doc(uri), position_of(example, "norm.eps", line_has="= Sub(")))
    assert init_loc.range.start == position_of(example, "norm.eps", line_has="# init")
    input_loc = await client.text_document_definition_async(types.DefinitionParams(_doc(uri), position_of(example, "image,", line_has="Conv")))
    assert input_loc.range.start == position_of(example, "image", line_has="# input")
    await close(client, uri)


async def test_references_and_highlights_are_every_consumer(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    at = position_of(example, "norm_centered", line_has="# norm/center")
    refs = await client.text_document_references_async(types.ReferenceParams(types.ReferenceContext(False), _doc(uri), at))
    square, scale = line_of(example, "# norm/square"), line_of(example, "# norm/scale")
    assert [r.range.start.line for r in refs] == [square, square, scale]  # Mul(norm_centered, norm_centered), Div
    with_decl = await client.text_document_references_async(types.ReferenceParams(types.ReferenceContext(True), _doc(uri), at))
    assert with_decl[0].range.start == at and len(with_decl) == 4
    marks = await client.text_document_document_highlight_async(types.DocumentHighlightParams(_doc(uri), at))
    assert [(m.range.start.line, m.kind) for m in marks] == [(at.line, types.DocumentHighlightKind.Write)] + [
        (line, types.DocumentHighlightKind.Read) for line in (square, square, scale)
    ]
    out = await client.text_document_references_async(
        types.ReferenceParams(types.ReferenceContext(False), _doc(uri), position_of(example, "probs", line_has="# head/softmax"))
    )
    assert [r.range.start.line for r in out] == [line_of(example, "# output probs")]  # a graph output: its declaration
    await close(client, uri)


async def test_document_symbols_are_the_nodes_grouped_by_module_scope(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(_doc(uri)))
    (graph,) = symbols
    assert graph.name == "nan_demo" and graph.kind == types.SymbolKind.Module
    scopes = {s.name: s for s in graph.children}
    assert list(scopes) == ["stem", "block", "norm", "pool", "gap", "flatten", "head"]
    norm = scopes["norm"]
    assert norm.kind == types.SymbolKind.Namespace
    assert [c.name for c in norm.children] == ["norm/mean", "norm/center", "norm/square", "norm/var", "norm/var_eps", "norm/std", "norm/scale"]
    std = norm.children[5]
    assert std.detail == "Sqrt -> float32[1,8,1,1]" and std.kind == types.SymbolKind.Operator
    assert std.selection_range.start == position_of(example, "norm/std", line_has="# norm/std")
    assert norm.range.start.line == line_of(example, "# norm/mean") and norm.range.end.line == line_of(example, "# norm/scale")
    assert scopes["pool"].kind == types.SymbolKind.Function  # a node without a scope
    await close(client, uri)


async def test_subgraph_nodes_are_in_the_outline_and_their_values_resolve_by_scope(client: LanguageClient, tmp_path: Path):
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner_relu"), helper.make_node("Add", ["t", "x"], ["r"])], "then", [], [tensor("r", [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "else", [], [tensor("t", [2])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="test"),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other),
    ]
    model = make_model(nodes, [tensor("x", [2])], [tensor("y", [2])], [init("zero", np.array(0, np.float32))])
    listing = write_listing(model, tmp_path)
    uri, _ = await open_listing(client, listing)
    (graph,) = await client.text_document_document_symbol_async(types.DocumentSymbolParams(_doc(uri)))
    branch = graph.children[-1]
    assert branch.name == "branch" and branch.kind == types.SymbolKind.Struct
    # inner nodes by their ids: the name when unique in the model, else {enclosing id}/{attribute}/{op}_{index}
    assert [(b.name, [c.name for c in b.children]) for b in branch.children] == [
        ("else_branch", ["branch/else_branch/Neg_0"]),
        ("then_branch", ["inner_relu", "branch/then_branch/Add_1"]),
    ]
    text = listing.read_text()
    add_line = line_of(text, "= Add(t, x)")
    t_use = types.Position(add_line, text.split("\n")[add_line].index("Add(t") + 4)
    loc = await client.text_document_definition_async(types.DefinitionParams(_doc(uri), t_use))
    assert loc.range.start.line == line_of(text, "# inner_relu")  # the then_branch's t, not the else_branch's
    x_use = types.Position(add_line, text.split("\n")[add_line].index(", x)") + 2)
    outer = await client.text_document_definition_async(types.DefinitionParams(_doc(uri), x_use))
    assert outer.range.start == position_of(text, "x", line_has="# input")
    refs = await client.text_document_references_async(
        types.ReferenceParams(types.ReferenceContext(False), _doc(uri), position_of(text, "x", line_has="# input"))
    )
    assert line_of(text, "= Neg(x)") in [r.range.start.line for r in refs]  # read from inside a subgraph
    await close(client, uri)


async def test_workspace_symbols_find_nodes_and_values_across_listings(client: LanguageClient, example: Path, tmp_path: Path):
    other = write_listing(make_model([helper.make_node("Relu", ["x"], ["norm_act"], name="norm_relu")], [tensor("x", [2])], [tensor("norm_act", [2])]), tmp_path)
    uri1, _ = await open_listing(client, example)
    uri2, _ = await open_listing(client, other)
    found = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="NORM_"))
    by_name = {s.name: s for s in found}
    assert {"norm_var_eps", "norm_relu", "norm_act"} <= set(by_name)
    assert by_name["norm_relu"].location.uri == uri2 and by_name["norm_var_eps"].location.uri == uri1
    assert by_name["norm_var_eps"].kind == types.SymbolKind.Variable and by_name["norm_relu"].kind == types.SymbolKind.Function
    await close(client, uri1)
    await close(client, uri2)


async def test_folding_ranges_fold_the_header_and_module_scopes(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    ranges = await client.text_document_folding_range_async(types.FoldingRangeParams(_doc(uri)))
    spans = {(r.start_line, r.end_line, r.kind) for r in ranges}
    assert (line_of(example, "# input"), line_of(example, "# output"), "comment") in spans
    assert (line_of(example, "# norm/mean"), line_of(example, "# norm/scale"), "region") in spans
    await close(client, uri)


async def test_semantic_tokens_classify_ops_values_initializers_attributes_and_comments(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    tokens = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(_doc(uri)))
    text = example.read_text().split("\n")
    decoded, line, start = {}, 0, 0
    data = tokens.data
    for k in range(0, len(data), 5):
        line = line + data[k]
        start = start + data[k + 1] if data[k] == 0 else data[k + 1]
        decoded[(line, start)] = (text[line][start : start + data[k + 2]], TOKEN_TYPES[data[k + 3]], data[k + 4])
    sqrt = line_of(example, "# norm/std")
    row = {t: (kind, mods) for (ln, _), (t, kind, mods) in decoded.items() if ln == sqrt}
    assert row["Sqrt"] == ("function", 4)  # defaultLibrary
    assert row["norm_std"] == ("variable", 1)  # declaration
    assert row["norm_var_eps"] == ("variable", 0)
    assert row["float32[1,8,1,1]"][0] == "type" and row["norm/std"][0] == "label" and row["#"][0] == "comment"
    sub = line_of(example, "# norm/var_eps")
    assert {t: (k, m) for (ln, _), (t, k, m) in decoded.items() if ln == sub}["norm.eps"] == ("parameter", 2)  # readonly
    conv = line_of(example, "# stem/conv")
    assert {t: k for (ln, _), (t, k, _) in decoded.items() if ln == conv}["pads"] == "property"
    assert decoded[(0, 0)][1] == "comment"
    await close(client, uri)


async def test_inlay_hints_show_the_types_of_what_a_line_reads(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    sqrt = line_of(example, "# norm/std")
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(_doc(uri), types.Range(types.Position(sqrt, 0), types.Position(sqrt, 200)))
    )
    at = position_of(example, "norm_var_eps)", line_has="# norm/std")
    assert [(h.position, h.label) for h in hints] == [(types.Position(sqrt, at.character + len("norm_var_eps")), ": float32[1,8,1,1]")]
    await close(client, uri)


async def test_code_actions_run_to_here_and_break_on_the_op_type(client: LanguageClient, example: Path):
    uri, _ = await open_listing(client, example)
    sqrt = line_of(example, "# norm/std")
    acts = await client.text_document_code_action_async(
        types.CodeActionParams(_doc(uri), types.Range(types.Position(sqrt, 3), types.Position(sqrt, 3)), types.CodeActionContext(diagnostics=[]))
    )
    got = [(a.title, a.command, a.arguments[0]) for a in acts]
    model = str((example.parent / "nan_demo.onnx").resolve())
    assert got == [
        ("Run to norm/std", "graphDap.runToNode", {"model": model, "node": "norm/std", "uri": uri, "line": sqrt}),
        ("Break on every Sqrt", "graphDap.breakOnOpType", {"opType": "Sqrt"}),
    ]
    header = await client.text_document_code_action_async(
        types.CodeActionParams(_doc(uri), types.Range(types.Position(0, 0), types.Position(0, 0)), types.CodeActionContext(diagnostics=[]))
    )
    assert not header
    await close(client, uri)


async def test_the_examples_sqrt_of_sub_is_a_warning_on_its_line(client: LanguageClient, example: Path):
    uri, found = await open_listing(client, example)
    sqrt, div = line_of(example, "# norm/std"), line_of(example, "# norm/scale")
    assert codes(found) == [(sqrt, "nan-sqrt"), (div, "inf-div")]
    warning = found[0]
    assert warning.severity == types.DiagnosticSeverity.Warning and warning.source == "graph-dap"
    assert "Sqrt of 'norm_var_eps' = Sub(norm_var, norm.eps)" in warning.message and "epsilon is usually added" in warning.message
    assert warning.range.start == position_of(example, "norm_var_eps)", line_has="# norm/std")
    await close(client, uri)


async def test_a_listing_without_a_header_or_without_its_model_says_so(client: LanguageClient, tmp_path: Path):
    stray = tmp_path / "stray.onnxtxt"
    stray.write_text("y = Relu(x)\n")
    uri, found = await open_listing(client, stray)
    assert codes(found) == [(0, "not-a-listing")] and "# graph-dap listing of MODEL" in found[0].message
    await close(client, uri)
    orphan = tmp_path / "gone.onnxtxt"
    orphan.write_text(f"# graph-dap listing of gone.onnx\n# model {tmp_path / 'gone.onnx'}\n")
    uri, found = await open_listing(client, orphan)
    assert codes(found) == [(0, "load-failed")] and found[0].message == f"model not found: {tmp_path / 'gone.onnx'}"
    await close(client, uri)


async def test_a_model_that_fails_the_checker_has_the_error_on_its_node(client: LanguageClient, tmp_path: Path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"), helper.make_node("Conv", ["a"], ["y"], name="bad_conv")]
    listing = write_listing(make_model(nodes, [tensor("x", [1, 1, 4, 4])], [tensor("y", [1, 1, 4, 4])]), tmp_path)
    uri, found = await open_listing(client, listing)
    checker = [d for d in found if d.code == "onnx-checker"]
    assert [d.range.start.line for d in checker] == [line_of(listing, "# bad_conv")]
    assert checker[0].severity == types.DiagnosticSeverity.Error and "input size 1 not in range [min=2, max=3]" in checker[0].message
    await close(client, uri)


async def test_type_mismatches_unused_values_and_missing_kernels(client: LanguageClient, tmp_path: Path):
    nodes = [
        helper.make_node("Add", ["x", "n"], ["s"], name="mixed_add"),
        helper.make_node("Identity", ["n"], ["spare"], name="unused_copy"),
        helper.make_node("Sqrt", ["n"], ["r"], name="int_sqrt"),
    ]
    model = make_model(nodes, [tensor("x", [2]), tensor("n", [2], TensorProto.INT64)], [tensor("s", [2]), tensor("r", [2], TensorProto.INT64)])
    listing = write_listing(model, tmp_path)
    uri, found = await open_listing(client, listing)
    by_code = {str(d.code): d for d in found}
    assert by_code["type-mismatch"].range.start.line == line_of(listing, "# mixed_add")
    assert "inconsistent type tensor(int64)" in by_code["type-mismatch"].message
    unused = by_code["unused-value"]
    assert unused.range.start == position_of(listing, "spare") and list(unused.tags) == [types.DiagnosticTag.Unnecessary]
    kernel = by_code["no-kernel"]
    assert kernel.range.start.line == line_of(listing, "# int_sqrt") and kernel.severity == types.DiagnosticSeverity.Error
    assert kernel.message.startswith("CPUExecutionProvider has no Sqrt kernel for T=tensor(int64)")
    await close(client, uri)
