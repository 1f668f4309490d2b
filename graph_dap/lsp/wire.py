"""Replies serialized once: a pygls protocol that writes a :class:`RawResult` as it is.

A reply to a large listing (10,000 document symbols) takes longer to turn into JSON
than to build. The server builds such replies once per model version, serializes
them with :func:`raw`, and hands the :class:`RawResult` back for every request; the
protocol below writes its JSON into the response without converting it again.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any

from pygls.protocol import LanguageServerProtocol

from graph_dap.tasks import background


@dataclass(frozen=True, slots=True)
class RawResult:
    """A result already in JSON (ASCII: characters are bytes, as the framing counts them)."""

    json: str


def raw(protocol: LanguageServerProtocol, result: Any) -> RawResult:
    """Serialize an lsprotocol result (or plain data) once."""
    data = protocol._converter.unstructure(result)
    return RawResult(json.dumps(data, separators=(",", ":"), ensure_ascii=True))


class ListingProtocol(LanguageServerProtocol):
    """pygls's LSP protocol, plus responses whose result is a :class:`RawResult`."""

    def _send_response(self, msg_id: Any, result: Any | None = None, error: Any | None = None) -> None:
        if error is not None or not isinstance(result, RawResult):
            super()._send_response(msg_id, result=result, error=error)
            return
        self._result_types.pop(msg_id, None)
        body = f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{result.json}}}'
        if self.writer is None:
            return
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        written = self.writer.write((header + body if self._include_headers else body).encode(self.CHARSET))
        if inspect.isawaitable(written):
            background(written)
