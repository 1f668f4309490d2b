"""The DAP wire: Content-Length framing, JSON bodies, and the byte streams under them.

A small implementation of our own rather than debugpy's ``messaging`` module: debugpy's
adapter, fed bad framing, invalid JSON or a huge Content-Length, hangs (and prints a
traceback for a request without a command). This one caps the header block and the body, hands a frame that is not a DAP message back as
:class:`Malformed` (so the server can answer it), and raises :class:`FramingError`
only when the stream can no longer be framed, which ends the connection cleanly.
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import os
import re
import socket
import stat
import sys
from dataclasses import dataclass
from typing import Any, Protocol

from graph_dap.stdio import take_over_stdout, write_all


class MessageType(enum.StrEnum):
    """The three kinds of DAP message (a message's ``type``)."""

    REQUEST = "request"
    RESPONSE = "response"
    EVENT = "event"

MAX_HEADER_BYTES = 8 * 1024
MAX_CONTENT_LENGTH = 16 * 1024 * 1024
#: Arrays and objects nested deeper than this in one message are refused (no DAP message comes near).
MAX_NESTING = 64

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
        message = json.loads(body.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except (UnicodeDecodeError, ValueError) as error:
        return Malformed(f"invalid JSON: {error}", *_request_header(body))
    except RecursionError:
        seq, command = _request_header(body)
        return Malformed(f"the message nests arrays and objects more than {MAX_NESTING} levels deep", seq, command)
    if not isinstance(message, dict):
        return Malformed(f"a message must be a JSON object, got {type(message).__name__}")
    seq = message.get("seq")
    usable_seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and 1 <= seq <= MAX_SEQ else None
    problem = _structure_problem(message, body)
    if problem:
        if message.get("type") != MessageType.REQUEST:
            return Malformed(problem)
        return Malformed(problem, usable_seq, _printable(message.get("command")))
    kind = message.get("type")
    if kind not in tuple(MessageType):
        return Malformed(f"unknown message type {kind!r}", usable_seq if kind is None else None)
    if usable_seq is None:
        return Malformed(f"'seq' must be a positive integer, got {_clip(seq)}")
    if kind == MessageType.REQUEST:
        command = message.get("command")
        if not isinstance(command, str) or not command:
            return Malformed("a request needs a 'command' string", usable_seq, "")
        if "arguments" in message and not isinstance(message["arguments"], dict):
            return Malformed("'arguments' must be an object", usable_seq, command)
    return message


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is out of range (larger than a double)")
    return value


#: The largest ``seq`` taken (JavaScript's largest exact integer: a client's counter never gets there).
MAX_SEQ = 2**53 - 1


def _structure_problem(message: Any, body: bytes) -> str | None:
    """What makes a parsed message unusable: nesting past :data:`MAX_NESTING`, or a lone surrogate in a string.

    A lone surrogate (``"\\ud800"``) is valid JSON but no Unicode text: it cannot be encoded
    again, so an answer echoing it (or a worker call carrying it) would fail. The walk runs
    only when the body could hold either (cheap byte counts first).
    """
    deep = body.count(b"{") + body.count(b"[") > MAX_NESTING
    surrogates = b"\\ud" in body.lower()
    if not (deep or surrogates):
        return None
    stack: list[tuple[Any, int]] = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_NESTING:
                return f"the message nests arrays and objects more than {MAX_NESTING} levels deep"
            for key, item in value.items():
                if surrogates and _has_surrogate(key):
                    return "a property name is not valid Unicode (it holds a lone surrogate)"
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_NESTING:
                return f"the message nests arrays and objects more than {MAX_NESTING} levels deep"
            stack.extend((item, depth + 1) for item in value)
        elif surrogates and isinstance(value, str) and _has_surrogate(value):
            return "a string is not valid Unicode (it holds a lone surrogate)"
    return None


_SEQ = re.compile(rb'"seq"\s*:\s*(\d{1,16})\s*[,}]')
_COMMAND = re.compile(rb'"command"\s*:\s*("(?:[^"\\\\]|\\\\.){0,200}")')


def _request_header(body: bytes) -> tuple[int | None, str | None]:
    """The ``seq`` and ``command`` of a request that cannot be parsed, read from its first bytes, so that it is answered.

    (Best effort: a client puts them before ``arguments``; without a ``seq``, the message is only reported.)
    """
    head = body[:4096]
    seq, command = _SEQ.search(head), _COMMAND.search(head)
    if seq is None or b'"request"' not in head or not 1 <= int(seq.group(1)) <= MAX_SEQ:
        return None, None
    try:
        name = json.loads(command.group(1).decode("utf-8")) if command is not None else ""
    except (UnicodeDecodeError, ValueError):
        name = ""
    return int(seq.group(1)), _printable(name)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _printable(command: Any) -> str:
    """A request's command as an answer can carry it: a string, valid Unicode."""
    if not isinstance(command, str):
        return ""
    return command.encode("utf-8", "replace").decode("utf-8")


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def encode(message: Message) -> bytes:
    """Frame one message. NaN and infinities are refused (ValueError): they are not JSON.

    A string that is not valid Unicode (a lone surrogate) is written escaped (``\\ud800``),
    which every JSON reader takes, rather than failing the message.
    """
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        body = text.encode()
    except UnicodeEncodeError:
        body = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()
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
        try:
            data = encode(message)
        except (ValueError, TypeError, RecursionError) as error:
            # A body that is not JSON (a NaN, an object no encoder knows): a bug, but the
            # request still gets an answer, and an event is dropped rather than the session.
            print(f"graph-dap: cannot encode a {message.get('type')}: {error!r}", file=sys.stderr)
            if message.get("type") != MessageType.RESPONSE:
                return
            data = encode(
                {
                    "seq": self._seq,
                    "type": MessageType.RESPONSE,
                    "request_seq": message.get("request_seq", 0),
                    "success": False,
                    "command": message.get("command", ""),
                    "message": f"internal error in graph-dap: the answer could not be encoded ({error})",
                }
            )
        self._stream.write(data)

    def event(self, event: str, body: dict[str, Any] | None = None) -> None:
        message: Message = {"type": MessageType.EVENT, "event": event}
        if body is not None:
            message["body"] = body
        self.send(message)

    def response(self, request_seq: int, command: str, body: dict[str, Any] | None = None) -> None:
        message: Message = {
            "type": MessageType.RESPONSE,
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
                "type": MessageType.RESPONSE,
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
