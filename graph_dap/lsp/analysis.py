"""One model version as the server serves it: the index, the sign analysis, and each reply built once.

An :class:`Analysis` is made in the background right after a model version is loaded
(:func:`analyse`). Replies that cover the whole listing (document symbols, folding
ranges, semantic tokens, code lenses) are built and serialized once per version and
per setting (:meth:`Analysis.cached`), so that a request costs writing them out.
Positions: the listing's lines are 1-based and its columns characters; the editor's
lines are 0-based and its columns units of its position encoding (UTF-16 by default). :meth:`Analysis.position` and
:meth:`Analysis.range` convert (a no-op for an ASCII listing, the usual case).
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable
from typing import Any, TypeVar

from lsprotocol import types

from graph_dap.lsp.hazards import Hazard, Sign, hazards, signs
from graph_dap.lsp.index import ListingIndex, Span
from graph_dap.lsp.versions import ModelVersion

T = TypeVar("T")


class Analysis:
    """What the server knows of one model version, and its cached replies."""

    def __init__(self, version: ModelVersion, encoding: str = "utf-16") -> None:
        """``encoding``: the editor's position encoding (``utf-16``, ``utf-8`` or ``utf-32``)."""
        self.version = version
        self.encoding = encoding
        self.graph = version.graph
        self.listing = version.listing
        self.index = ListingIndex(version.graph, version.listing)
        self.signs: dict[str, Sign] = signs(version.graph, version.initializers)
        self.hazards: list[Hazard] = hazards(version.graph, version.initializers, self.signs)
        self._ascii = version.listing.text.isascii()
        self._lines = None if self._ascii else version.listing.text.split("\n")
        text = version.listing.text
        self._starts = array("l", [0])
        pos = text.find("\n")
        while pos != -1:
            self._starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        self._cache: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @property
    def text(self) -> str:
        return self.listing.text

    def cached(self, key: Any, build: Callable[[], T]) -> T:
        """``build()``, once per key for this version."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]  # type: ignore[no-any-return]
        value = build()
        with self._lock:
            return self._cache.setdefault(key, value)  # type: ignore[no-any-return]

    # -- positions -------------------------------------------------------------------

    def _width(self, ch: str) -> int:
        """Units of one character in the editor's encoding."""
        if self.encoding == "utf-8":
            return len(ch.encode("utf-8"))
        if self.encoding == "utf-32":
            return 1
        return 2 if ord(ch) > 0xFFFF else 1

    def _units(self, line: int, column: int) -> int:
        """Characters -> the editor's units, on listing line ``line`` (1-based)."""
        if self._lines is None or line - 1 >= len(self._lines):
            return column
        text = self._lines[line - 1][:column]
        return column if text.isascii() else sum(self._width(ch) for ch in text)

    def column_of(self, line: int, units: int) -> int:
        """The editor's units -> characters, on listing line ``line`` (1-based)."""
        if self._lines is None or line - 1 >= len(self._lines):
            return units
        text = self._lines[line - 1]
        if text.isascii():
            return units
        count = 0
        for k, ch in enumerate(text):
            if count >= units:
                return k
            count += self._width(ch)
        return len(text)

    def position(self, line: int, column: int) -> types.Position:
        return types.Position(line - 1, self._units(line, column))

    def range(self, span: Span) -> types.Range:
        return types.Range(self.position(span.line, span.start), self.position(span.line, span.end))

    @property
    def line_count(self) -> int:
        """Lines of the listing (its last line ends with a newline)."""
        return len(self._starts) - 1

    def line_length(self, line: int) -> int:
        """Characters of listing line ``line`` (1-based), without its newline."""
        if not 1 <= line < len(self._starts):
            return 0
        return self._starts[line] - self._starts[line - 1] - 1

    def line_range(self, line: int) -> types.Range:
        """The whole of a listing line."""
        return types.Range(types.Position(line - 1, 0), self.position(line, self.line_length(line)))

