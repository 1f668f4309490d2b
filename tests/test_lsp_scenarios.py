"""``graph-dap lsp`` over a session's life: a model that changes on disk, live values while a
debug session is stopped, settings, a 10,000-node model, loading progress, and the command line."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import pytest_lsp
from light import LIGHT_MODELS
from lsp_client import CONFIG, SERVER, close, codes, line_of, open_listing, position_of, start, wait_for, write_listing
from lsprotocol import types
from models import layered_model, make_model, tensor
from onnx import helper
from pytest_lsp import LanguageClient

from graph_dap.lsp.versions import load_version
from graph_dap.runtime import load_graph, render_listing

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nan_demo.onnx"


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def _doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def _relu_sqrt(sub: bool) -> onnx.ModelProto:
    """x -> Relu -> (Sub or Add) eps -> Sqrt: the hazard comes and goes with ``sub``."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="act"),
        helper.make_node("Sub" if sub else "Add", ["a", "eps"], ["v"], name="shift"),
        helper.make_node("Sqrt", ["v"], ["y"], name="root"),
    ]
    from models import init

    return make_model(nodes, [tensor("x", [4])], [tensor("y", [4])], [init("eps", np.array([1e-3], np.float32))])


@pytest.mark.asyncio
async def test_a_model_that_changes_on_disk_refreshes_its_listing_and_diagnostics(client: LanguageClient, tmp_path: Path):
    await start(client)
    listing = write_listing(_relu_sqrt(sub=False), tmp_path)
    uri, found = await open_listing(client, listing)
    assert found == []
    old = listing.read_text()
    onnx.save(_relu_sqrt(sub=True), str(tmp_path / "model.onnx"))
    # The server notices, rewrites the listing file (it held the old rendering), and says the open text is stale.
    found = await wait_for("the stale-listing warning", lambda: codes(client.diagnostics.get(uri) or []) == [(0, "stale-listing")], client)
    new = listing.read_text()
    assert new != old and new == render_listing(load_graph(tmp_path / "model.onnx")).text
    # The editor reloads the file, as VS Code does for an unmodified document: the new model's diagnostics.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2), [types.TextDocumentContentChangeWholeDocument(text=new)]
        )
    )
    found = await wait_for("the hazard of the new model", lambda: codes(client.diagnostics.get(uri) or []) == [(line_of(new, "# root"), "nan-sqrt")], client)
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(new, "v", line_has="# shift")))
    assert "made by `shift` (Sub" in hover.contents.value


@pytest.mark.asyncio
async def test_a_listing_edited_away_from_its_model_is_stale_and_serves_nothing(client: LanguageClient, tmp_path: Path):
    await start(client)
    listing = write_listing(_relu_sqrt(sub=False), tmp_path)
    text = listing.read_text().replace("= Add(", "= Mul(")
    uri, found = await open_listing(client, listing, text=text)
    assert codes(found) == [(0, "stale-listing")] and "does not match model.onnx" in found[0].message
    assert await client.text_document_hover_async(types.HoverParams(_doc(uri), position_of(text, "v", line_has="# shift"))) is None
    assert listing.read_text() != text  # the file is not touched: it does not hold a rendering the server made


@pytest.mark.asyncio
async def test_live_values_while_a_debug_session_is_stopped(client: LanguageClient, tmp_path: Path):
    await start(client, liveInlayHints=True)
    shutil.copy(EXAMPLE, tmp_path / "nan_demo.onnx")
    listing = write_listing(tmp_path / "nan_demo.onnx", tmp_path)
    uri, _ = await open_listing(client, listing)
    at = position_of(listing, "norm_std", line_has="# norm/std")
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), at))
    assert "**live**" not in hover.contents.value and client.live_asked == []  # no session: nothing asked
    # The editor reports a stopped session and answers with what its adapter said.
    client.live["norm_std"] = "float32[1,8,1,1] min=0.1 max=0.6 mean=0.3 nan=5"
    client.protocol.notify("graphDap/debugState", {"model": str(tmp_path / "nan_demo.onnx"), "state": "stopped"})
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), at))
    assert "**live**: `float32[1,8,1,1] min=0.1 max=0.6 mean=0.3 nan=5`" in hover.contents.value
    assert client.live_asked == [["norm_std"]]
    line = at.line
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(_doc(uri), types.Range(types.Position(line, 0), types.Position(line, 200))))
    assert [h.label for h in hints] == [" min=0.1 max=0.6 mean=0.3 nan=5", ": float32[1,8,1,1]"]
    assert client.live_asked == [["norm_std"]]  # answers are kept until the session moves on
    client.protocol.notify("graphDap/debugState", {"model": str(tmp_path / "nan_demo.onnx"), "state": "running"})
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), at))
    assert "**live**" not in hover.contents.value and len(client.live_asked) == 1


@pytest.mark.asyncio
async def test_code_lenses_when_asked_for(client: LanguageClient, tmp_path: Path):
    await start(client, codeLens=True)
    listing = write_listing(_relu_sqrt(sub=False), tmp_path)
    uri, _ = await open_listing(client, listing)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(_doc(uri)))
    root = line_of(listing, "# root")
    on_root = [(lens.command.title, lens.command.command) for lens in lenses if lens.range.start.line == root]
    assert on_root == [("▶ Run to here", "graphDap.runToNode"), ("Break on every Sqrt", "graphDap.breakOnOpType")]
    assert len(lenses) == 6


@pytest.mark.asyncio
async def test_the_chosen_providers_decide_the_kernel_check(client: LanguageClient, tmp_path: Path):
    await start(client, providers=["NoSuchExecutionProvider"])
    nodes = [helper.make_node("Sqrt", ["n"], ["r"], name="int_sqrt")]
    listing = write_listing(make_model(nodes, [tensor("n", [2], onnx.TensorProto.INT64)], [tensor("r", [2], onnx.TensorProto.INT64)]), tmp_path)
    uri, found = await open_listing(client, listing)
    assert "no-kernel" not in [c for _, c in codes(found)]  # a provider this onnxruntime does not have: no claim
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"graphDap": {"providers": ["CPUExecutionProvider"]}}))
    await wait_for("the kernel check", lambda: "no-kernel" in [c for _, c in codes(client.diagnostics.get(uri) or [])], client)


@pytest.mark.asyncio
async def test_a_10000_node_listing(client: LanguageClient, tmp_path: Path):
    await start(client)
    listing = write_listing(layered_model(10_000), tmp_path)
    uri, found = await open_listing(client, listing)
    assert {c for _, c in codes(found)} == {"nan-sqrt", "inf-div"}
    assert len([c for _, c in codes(found) if c == "nan-sqrt"]) == 20  # every 50th of the 1,000 layers
    assert len(client.progress_reports) == 1  # the load reported its progress
    (report,) = client.progress_reports.values()
    assert [type(r).__name__ for r in report] == ["WorkDoneProgressBegin", "WorkDoneProgressEnd"]
    (graph,) = await client.text_document_document_symbol_async(types.DocumentSymbolParams(_doc(uri)))
    assert len(graph.children) == 1000  # the layers, each a module scope
    assert sum(len(n.children) for layer in graph.children for n in layer.children if n.name == "norm") == 7 * 1000
    at = position_of(listing, "layer500.ve", line_has="= Sqrt(")
    hover = await client.text_document_hover_async(types.HoverParams(_doc(uri), at))
    assert "**layer500.ve**: `float32[1,1]`" in hover.contents.value
    refs = await client.text_document_references_async(types.ReferenceParams(types.ReferenceContext(False), _doc(uri), position_of(listing, "eps", line_has="# init")))
    assert len(refs) == 1000
    # closed and opened again, the model unchanged: served from the analysis kept, not loaded again
    await close(client, uri)
    again_uri, again = await open_listing(client, listing)
    assert again_uri == uri and codes(again) == codes(found)
    assert len(client.progress_reports) == 1  # no second load


def test_the_servers_listing_is_the_command_lines(tmp_path: Path):
    """The server renders the graph it keeps (large initializers without data): the same text as graph-dap listing."""
    for path in [EXAMPLE, *list(LIGHT_MODELS.values())[:3]]:
        version = load_version(Path(path))
        assert not hasattr(version, "message"), version
        assert version.listing.text == render_listing(load_graph(path)).text, path
        large = [t for t in version.graph.model.graph.initializer if len(t.dims) and not (t.raw_data or t.float_data)]
        assert all(t.name in version.initializers for t in large)


def test_the_command_line_serves_tcp_on_loopback(tmp_path: Path):
    proc = subprocess.Popen([*SERVER, "--tcp", "--port", "0"], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith("graph-dap lsp listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])

        async def talk() -> types.InitializeResult:
            from pygls.lsp.client import LanguageClient as Plain

            c = Plain("test", "1")
            await c.start_tcp("127.0.0.1", port)
            result = await c.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
            await c.shutdown_async(None)
            c.exit(None)
            await c.stop()
            return result

        result = asyncio.run(asyncio.wait_for(talk(), 60))
        assert result.server_info.name == "graph-dap-lsp" and result.capabilities.hover_provider
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    bad = subprocess.run([sys.executable, "-m", "graph_dap", "lsp", "--tcp", "--stdio"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == "graph-dap lsp: give --stdio or --tcp, not both"
