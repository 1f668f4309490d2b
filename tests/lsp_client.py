"""Driving ``graph-dap lsp`` as an editor does, with pytest-lsp's client: open a listing, wait for its diagnostics.

The client also plays the editor's part in live values: it answers the server's
``graphDap/liveSummaries`` requests from ``client.live`` (name -> summary text), as the
VS Code extension answers them from the debug adapter.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import onnx
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities, make_test_lsp_client

from graph_dap.runtime import load_graph, render_listing

SERVER = [sys.executable, "-m", "graph_dap", "lsp"]
TIMEOUT = 60.0


def make_client() -> LanguageClient:
    client = make_test_lsp_client()
    client.live = {}  # type: ignore[attr-defined]
    client.live_asked = []  # type: ignore[attr-defined]

    @client.feature("graphDap/liveSummaries")
    def live_summaries(ls: LanguageClient, params: Any) -> dict[str, Any]:
        names = list(params.names)
        ls.live_asked.append(names)  # type: ignore[attr-defined]
        out = [{"name": n, "text": ls.live[n], "available": True} for n in names if n in ls.live]  # type: ignore[attr-defined]
        return {"summaries": out + [{"name": n, "text": "", "available": False} for n in names if n not in ls.live]}  # type: ignore[attr-defined]

    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_client)


async def start(client: LanguageClient, **options: Any) -> None:
    """``initialize`` as VS Code would, with ``options`` as initializationOptions (camelCase keys)."""
    await client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), initialization_options={"pollInterval": 0.1, **options})
    )


def write_listing(model: onnx.ModelProto | Path, folder: Path, name: str = "model") -> Path:
    """Save ``model`` (when it is a proto) into ``folder`` and write its listing beside it; the listing's path."""
    path = model if isinstance(model, Path) else folder / f"{name}.onnx"
    if not isinstance(model, Path):
        onnx.save(model, str(path))
    listing = path.with_suffix(".onnxtxt")
    listing.write_text(render_listing(load_graph(path)).text)
    return listing


async def wait_for(what: str, test: Callable[[], Any], client: LanguageClient, timeout: float = TIMEOUT) -> Any:
    """Wait (on notifications, not on a clock) until ``test()`` is true; its value."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not (value := test()):
        left = end - loop.time()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {what}")
        try:
            await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), left)
        except TimeoutError:
            pass
    return value


async def open_listing(client: LanguageClient, listing: Path, text: str | None = None) -> tuple[str, list[types.Diagnostic]]:
    """Open a listing file and wait for its first diagnostics: ``(uri, diagnostics)``."""
    uri = listing.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    body = listing.read_text() if text is None else text
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "onnx-listing", 1, body)))
    diagnostics = await wait_for(f"diagnostics of {listing.name}", lambda: uri in client.diagnostics, client)
    return uri, list(client.diagnostics[uri] if diagnostics else [])


async def close(client: LanguageClient, uri: str) -> None:
    """Close a listing, and wait for the server to clear its diagnostics."""
    client.diagnostics[uri] = None  # type: ignore[assignment]
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await wait_for(f"the diagnostics of {uri} cleared", lambda: client.diagnostics.get(uri) is not None, client)


def position_of(listing: Path | str, needle: str, line_has: str | None = None, offset: int = 0) -> types.Position:
    """The position of ``needle`` on the first line (holding ``line_has``, if given) of a listing."""
    text = listing.read_text() if isinstance(listing, Path) else listing
    for k, line in enumerate(text.split("\n")):
        if needle in line and (line_has is None or line_has in line):
            return types.Position(k, line.index(needle) + offset)
    raise AssertionError(f"no line with {needle!r}")


def line_of(listing: Path | str, needle: str) -> int:
    """The 0-based line of the first line that holds ``needle``."""
    return position_of(listing, needle).line


def codes(diagnostics: Sequence[types.Diagnostic]) -> list[tuple[int, str]]:
    return [(d.range.start.line, str(d.code)) for d in diagnostics]
