"""The DAP wire: Content-Length framing, JSON bodies, and the byte streams under them.

A small implementation of our own rather than debugpy's ``messaging`` module: debugpy's
adapter, fed bad framing, invalid JSON or a huge Content-Length, hangs (and prints a
traceback for a request without a command). This one caps the header block and the body, hands a frame that is not a DAP message back as
:class:`Malformed` (so the server can answer it), and raises :class:`FramingError`
only when the stream can no longer be framed, which ends the connection cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import sys
from dataclasses import dataclass
from typing import Any, Protocol

from graph_dap.stdio import take_over_stdout, write_all

MAX_HEADER_BYTES = 8 * 1024
MAX_CONTENT_LENGTH = 16 * 1024 * 1024

Message = dict[str, Any]


class FramingError(Exception):
    """The byte stream cannot be split into messages any more: close the connection."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """A well-framed body that is not a valid DAP message.

    ``seq`` and ``command`` are set when the body was a request that can still be
    answered (it had a usable ``seq``).
    """

    reason: str
    seq: int | None = None
    command: str | None = None


class FrameParser:
    """Incremental parser: feed bytes in, take whole messages out (sans-IO)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None

    def feed(self, data: bytes) -> list[Message | Malformed]:
        """Add bytes; return the messages they complete. Raises :class:`FramingError`."""
        self._buffer += data
        out: list[Message | Malformed] = []
        while True:
            if self._length is None:
                end = self._buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buffer) > MAX_HEADER_BYTES:
                        raise FramingError("header block too long or not terminated by CRLF CRLF")
                    return out
                if end > MAX_HEADER_BYTES:
                    raise FramingError("header block too long")
                self._length = _content_length(bytes(self._buffer[:end]))
                del self._buffer[: end + 4]
            if len(self._buffer) < self._length:
                return out
            body = bytes(self._buffer[: self._length])
            del self._buffer[: self._length]
            self._length = None
            out.append(decode_body(body))

    @property
    def pending(self) -> bool:
        """Whether a partial message is buffered (EOF now would cut it)."""
        return bool(self._buffer) or self._length is not None


def _content_length(block: bytes) -> int:
    length: int | None = None
    for raw in block.split(b"\r\n"):
        name, sep, value = raw.partition(b":")
        if not sep:
            raise FramingError(f"bad header line {raw[:80]!r}")
        if name.strip().lower() != b"content-length":
            continue  # DAP allows other headers; ignore them
        text = value.strip()
        if not text.isdigit():
            raise FramingError(f"bad Content-Length {text[:40]!r}")
        length = int(text)
    if length is None:
        raise FramingError("missing Content-Length header")
    if length > MAX_CONTENT_LENGTH:
        raise FramingError(f"Content-Length {length} exceeds the limit of {MAX_CONTENT_LENGTH} bytes")
    return length


def decode_body(body: bytes) -> Message | Malformed:
    """Parse one body; anything that is not a DAP message object becomes :class:`Malformed`."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        return Malformed(f"invalid JSON: {error}")
    if not isinstance(message, dict):
        return Malformed(f"a message must be a JSON object, got {type(message).__name__}")
    seq = message.get("seq")
    usable_seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1 else None
    kind = message.get("type")
    if kind not in ("request", "response", "event"):
        return Malformed(f"unknown message type {kind!r}", usable_seq if kind is None else None)
    if usable_seq is None:
        return Malformed(f"'seq' must be a positive integer, got {seq!r}")
    if kind == "request":
        command = message.get("command")
        if not isinstance(command, str) or not command:
            return Malformed("a request needs a 'command' string", usable_seq, "")
        if "arguments" in message and not isinstance(message["arguments"], dict):
            return Malformed("'arguments' must be an object", usable_seq, command)
    return message


def encode(message: Message) -> bytes:
    """Frame one message. NaN and infinities are refused: they are not JSON."""
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class ByteStream(Protocol):
    """What a channel reads from and writes to."""

    async def read(self) -> bytes:
        """Some bytes, or b"" at the end of the stream."""
        ...

    def write(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


def set_nodelay(sock: socket.socket | None) -> None:
    """Turn Nagle's algorithm off: it holds small packets back, and each request is answered ~44 ms late.

    (Stock debugpy, whose pydevd does not set TCP_NODELAY, answers that late.)
    """
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class SocketStream:
    """A TCP connection as a :class:`ByteStream`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        set_nodelay(writer.get_extra_info("socket"))

    async def read(self) -> bytes:
        try:
            return await self._reader.read(65536)
        except (ConnectionError, OSError):
            return b""

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class StdioStream:
    """The process's stdin and stdout as a :class:`ByteStream`.

    Takes stdout over (:func:`graph_dap.stdio.take_over_stdout`): stray prints from
    anywhere in the process go to stderr instead of corrupting the DAP stream.
    """

    def __init__(self) -> None:
        self._in = sys.stdin.fileno()
        self._out = take_over_stdout()
        self._reader: asyncio.StreamReader | None = None
        self._opened = False

    async def _open(self) -> asyncio.StreamReader | None:
        mode = os.fstat(self._in).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            return None  # a regular file: read() reads it in a thread
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_CONTENT_LENGTH)
        pipe = os.fdopen(self._in, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return reader

    async def read(self) -> bytes:
        if not self._opened:
            self._opened = True
            self._reader = await self._open()
        if self._reader is None:
            return await asyncio.to_thread(os.read, self._in, 65536)
        return await self._reader.read(65536)

    def write(self, data: bytes) -> None:
        try:
            write_all(self._out, data)
        except BrokenPipeError:
            pass

    async def close(self) -> None:
        try:
            os.close(self._out)
        except OSError:
            pass


class Channel:
    """Messages over a byte stream: numbering outgoing ones, parsing incoming ones."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self._parser = FrameParser()
        self._inbox: list[Message | Malformed] = []
        self._seq = 0
        self.closed = False

    async def receive(self) -> Message | Malformed | None:
        """The next message, or None at the end of the stream. Raises :class:`FramingError`."""
        while not self._inbox:
            if self.closed:
                return None
            data = await self._stream.read()
            if not data:
                return None
            self._inbox.extend(self._parser.feed(data))
        return self._inbox.pop(0)

    def send(self, message: Message) -> None:
        """Number and write one message (a no-op once closed)."""
        if self.closed:
            return
        self._seq += 1
        message["seq"] = self._seq
        self._stream.write(encode(message))

    def event(self, event: str, body: dict[str, Any] | None = None) -> None:
        message: Message = {"type": "event", "event": event}
        if body is not None:
            message["body"] = body
        self.send(message)

    def response(self, request_seq: int, command: str, body: dict[str, Any] | None = None) -> None:
        message: Message = {
            "type": "response",
            "request_seq": request_seq,
            "success": True,
            "command": command,
        }
        if body is not None:
            message["body"] = body
        self.send(message)

    def error(self, request_seq: int, command: str, text: str, show: bool = False) -> None:
        """A ``success: false`` response whose ``message`` says what went wrong."""
        error: dict[str, Any] = {"id": 1, "format": text}
        if show:
            error["showUser"] = True
        self.send(
            {
                "type": "response",
                "request_seq": request_seq,
                "success": False,
                "command": command,
                "message": text,
                "body": {"error": error},
            }
        )

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._stream.close()
