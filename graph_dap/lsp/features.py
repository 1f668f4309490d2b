"""The LSP features, one handler each: convert the request, ask the analysis, build the reply.

:func:`create_server` makes a :class:`~graph_dap.lsp.server.ListingServer` with every
feature registered. Positions arrive 0-based in UTF-16 units; the analysis converts.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from graph_dap.lsp import actions, highlighting, hover, outline
from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.highlighting import LEGEND
from graph_dap.lsp.index import Span
from graph_dap.lsp.live import DEBUG_STATE
from graph_dap.lsp.server import ListingServer, _file_path
from graph_dap.lsp.wire import RawResult


def _at(a: Analysis, position: types.Position) -> tuple[int, int]:
    """Listing line (1-based) and column (characters) of an editor position."""
    line = position.line + 1
    return line, a.column_of(line, position.character)


def create_server() -> ListingServer:
    """A listing server with all its features registered."""
    server = ListingServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: ListingServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ListingServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ListingServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ListingServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.closed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: ListingServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: ListingServer, params: types.DidChangeWatchedFilesParams) -> None:
        from pathlib import Path

        ls.check_models({Path(_file_path(c.uri)).resolve() for c in params.changes if c.uri.startswith("file:")})

    @server.feature(DEBUG_STATE)
    def debug_state(ls: ListingServer, params: Any) -> None:
        ls.debug_state(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: ListingServer, params: types.HoverParams) -> types.Hover | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        line, col = _at(a, params.position)
        token = a.listing.token_at(line, col)
        which = hover.hover_token(a, line, token)
        if which is None:
            return None
        node = a.index.node_on(line)
        text: str | None
        if which is hover.HoverKind.VALUE:
            hit = a.index.value_at(line, col)
            if hit is None:
                return None
            token, ref = hit
            live = None
            if ref.top_level and ls.live.stopped(a.version.path):
                live = (await ls.live.summaries(a.version.path, [ref.name])).get(ref.name)
            text = hover.value_markdown(a, ref, live)
        elif which is hover.HoverKind.OP:
            assert token is not None
            inner = a.index.inner_nodes.get(line)
            text = hover.op_markdown(a, token, node, inner.op_type if inner else None)
        elif which is hover.HoverKind.ATTRIBUTE:
            assert token is not None
            text = hover.attribute_markdown(a, token, node)
        else:
            assert node is not None
            text = hover.node_markdown(a, node)
        if text is None:
            return None
        rng = a.range(Span(line, token.start, token.end)) if token is not None else a.line_range(line)
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=rng)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(ls: ListingServer, params: types.DefinitionParams) -> types.Location | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        hit = a.index.value_at(*_at(a, params.position))
        if hit is None:
            return None
        span = a.index.definition(hit[1])
        return types.Location(uri=params.text_document.uri, range=a.range(span)) if span else None

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    async def references(ls: ListingServer, params: types.ReferenceParams) -> list[types.Location] | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        hit = a.index.value_at(*_at(a, params.position))
        if hit is None:
            return None
        uri = params.text_document.uri
        spans = a.index.uses(hit[1])
        if params.context.include_declaration:
            d = a.index.definition(hit[1])
            spans = ([d] if d else []) + spans
        return [types.Location(uri=uri, range=a.range(s)) for s in spans]

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    async def document_highlight(ls: ListingServer, params: types.DocumentHighlightParams) -> list[types.DocumentHighlight] | None:
        a = await ls.ready(params.text_document.uri)
        return outline.highlights(a, *_at(a, params.position)) if a else None

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls: ListingServer, params: types.DocumentSymbolParams) -> RawResult | None:
        a = await ls.ready(params.text_document.uri)
        return ls.symbols(a) if a else None

    @server.feature(types.WORKSPACE_SYMBOL)
    def workspace_symbol(ls: ListingServer, params: types.WorkspaceSymbolParams) -> list[types.WorkspaceSymbol]:
        served = [(uri, d.analysis) for uri, d in ls.docs.items() if d.analysis is not None]
        return outline.workspace_symbols(served, params.query)  # type: ignore[arg-type]

    @server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
    async def folding_range(ls: ListingServer, params: types.FoldingRangeParams) -> RawResult | None:
        a = await ls.ready(params.text_document.uri)
        return ls.folding(a) if a else None

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def semantic_tokens_full(ls: ListingServer, params: types.SemanticTokensParams) -> RawResult | None:
        a = await ls.ready(params.text_document.uri)
        return ls.semantic_tokens(a) if a else None

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(ls: ListingServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        first, last = params.range.start.line + 1, params.range.end.line + 1
        out = highlighting.type_hints(a, first, last) if ls.settings.type_hints else []
        if ls.settings.live_inlay_hints and ls.live.stopped(a.version.path):
            made = highlighting.made_on(a, first, last)
            live = await ls.live.summaries(a.version.path, [t.text for _, t in made])
            out += [highlighting.live_hint(a, line, t, live[t.text]) for line, t in made if t.text in live]
            out.sort(key=lambda h: (h.position.line, h.position.character))
        return out

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
    async def code_action(ls: ListingServer, params: types.CodeActionParams) -> list[types.Command] | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        return actions.code_actions(a, params.text_document.uri, params.range.start.line + 1, params.range.end.line + 1)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def code_lens(ls: ListingServer, params: types.CodeLensParams) -> RawResult | list[types.CodeLens] | None:
        a = await ls.ready(params.text_document.uri)
        if a is None:
            return None
        return ls.lenses(a, params.text_document.uri) if ls.settings.code_lens else []

    return server



