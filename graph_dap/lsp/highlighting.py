"""Semantic tokens and inlay hints: colour by meaning, and the types the text does not show.

Semantic tokens come from the listing's tokens: op types are functions (``defaultLibrary``
for the standard domain), values variables, graph inputs and initializers parameters
(initializers ``readonly``), attribute names properties, types types, node ids labels,
the header and trailing ``#`` comments; a value where it is made has ``declaration``.

Inlay hints: after each value that a line reads, its type (the line shows only the
types of what it makes); while a debug session is stopped, and when asked for, the
live statistics after each value the line makes.
"""

from __future__ import annotations

from collections.abc import Mapping

from lsprotocol import types

from graph_dap.lsp.analysis import Analysis
from graph_dap.runtime.listing import Role, Token, TokenKind

TOKEN_TYPES = ["function", "variable", "parameter", "property", "type", "label", "comment", "keyword"]
TOKEN_MODIFIERS = ["declaration", "readonly", "defaultLibrary"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_TYPE = {name: k for k, name in enumerate(TOKEN_TYPES)}
_DECLARATION, _READONLY, _DEFAULT_LIBRARY = 1, 2, 4
_KIND_TYPE = {
    TokenKind.OP: _TYPE["function"],
    TokenKind.VALUE: _TYPE["variable"],
    TokenKind.ATTRIBUTE: _TYPE["property"],
    TokenKind.TYPE: _TYPE["type"],
    TokenKind.NODE_ID: _TYPE["label"],
    TokenKind.COMMENT: _TYPE["comment"],
    TokenKind.KEYWORD: _TYPE["keyword"],
}


def semantic_tokens(a: Analysis) -> list[int]:
    """The whole listing's tokens, encoded as LSP wants (relative lines and starts)."""
    data: list[int] = []
    inputs = set(a.graph.input_names)
    inits = a.version.initializers
    prev_line, prev_start = 0, 0
    for line in sorted(a.listing.line_tokens):
        scope = a.index.scope_at(line)
        for t in a.listing.tokens_at(line):
            kind, mods = _classify(t, scope, inputs, inits)
            start = a.position(line, t.start).character
            length = a.position(line, t.end).character - start
            if length <= 0:
                continue
            lsp_line = line - 1
            delta_line = lsp_line - prev_line
            data += [delta_line, start - prev_start if delta_line == 0 else start, length, kind, mods]
            prev_line, prev_start = lsp_line, start
    return data


def _classify(t: Token, scope: str, inputs: set[str], inits: Mapping[str, object]) -> tuple[int, int]:
    mods = 0
    if t.kind is TokenKind.VALUE:
        kind = _TYPE["variable"]
        if scope == "" and (t.text in inputs or t.text in inits):
            kind = _TYPE["parameter"]
            if t.text in inits:
                mods |= _READONLY
        if t.role is Role.DEF:
            mods |= _DECLARATION
        return kind, mods
    if t.kind is TokenKind.OP and "." not in t.text:
        mods |= _DEFAULT_LIBRARY
    return _KIND_TYPE[t.kind], mods


def type_hints(a: Analysis, first: int, last: int) -> list[types.InlayHint]:
    """Types after the values read on listing lines ``first..last`` (1-based, inclusive)."""
    out: list[types.InlayHint] = []
    for line in range(max(first, 1), last + 1):
        tokens = a.listing.tokens_at(line)
        if not tokens or a.listing.node_at(line) is None and a.index.scope_at(line) == "":
            continue  # header lines show their types
        scope = a.index.scope_at(line)
        for t in tokens:
            if t.kind is not TokenKind.VALUE or t.role is not Role.USE:
                continue
            ref = a.index.resolve(t.text, scope)
            if not ref.top_level:
                continue
            info = a.graph.value_info(t.text)
            if info.dtype is None and info.shape is None:
                continue
            out.append(
                types.InlayHint(
                    position=a.position(line, t.end),
                    label=f": {info.type_text()}",
                    kind=types.InlayHintKind.Type,
                    padding_left=False,
                )
            )
    return out


def live_hint(a: Analysis, line: int, token: Token, summary: str) -> types.InlayHint:
    """A live summary after the value a line makes (its statistics; the type is on the line)."""
    stats = summary.split(" ", 1)[1] if " " in summary and summary.split(" ", 1)[0].endswith("]") else summary
    return types.InlayHint(
        position=a.position(line, _after_type(a, line, token)),
        label=f" {stats}",
        kind=types.InlayHintKind.Parameter,
        padding_left=True,
    )


def _after_type(a: Analysis, line: int, token: Token) -> int:
    tokens = a.listing.tokens_at(line)
    k = tokens.index(token)
    if k + 1 < len(tokens) and tokens[k + 1].kind is TokenKind.TYPE:
        return tokens[k + 1].end
    return token.end


def made_on(a: Analysis, first: int, last: int) -> list[tuple[int, Token]]:
    """The values made on top-level node lines ``first..last``: ``(line, token)``."""
    out = []
    for line in range(max(first, 1), last + 1):
        if a.listing.node_at(line) is None:
            continue
        out += [(line, t) for t in a.listing.tokens_at(line) if t.kind is TokenKind.VALUE and t.role is Role.DEF]
    return out
