"""A DAP client for tests, used the way a person uses a debugger.

It drives an adapter over stdio (a subprocess) or TCP, and holds every message in both
directions to the official DAP schema (:mod:`dap_schema`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dap_schema import ProtocolViolation, validate
from processes import ROOT

TIMEOUT = float(os.environ.get("DAP_TEST_TIMEOUT", "20"))


class DapError(Exception):
    """An error response; ``response`` is the whole message."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__(response.get("message", "error"))
        self.response = response


# -- framing ------------------------------------------------------------------------------


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frames(read: Callable[[int], bytes]) -> Iterator[dict[str, Any]]:
    """Messages from a byte source until it ends."""
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            chunk = read(65536)
            if not chunk:
                return
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        while len(buffer) < length:
            chunk = read(65536)
            if not chunk:
                return
            buffer += chunk
        body, buffer = buffer[:length], buffer[length:]
        yield json.loads(body)


def _drain(stream: Any, into: list[bytes]) -> None:
    for line in iter(stream.readline, b""):
        into.append(line)
    stream.close()


# -- the client ---------------------------------------------------------------------------


class DapClient:
    """One connection to an adapter. Every message is validated; violations fail the test."""

    #: Set False (benchmarks against other adapters) to skip the schema checks.
    checks_schema = True

    def __init__(self, read: Callable[[int], bytes], write: Callable[[bytes], None], close: Callable[[], None]) -> None:
        self._write = write
        self._close = close
        self._seq = 0
        self._lock = threading.Lock()
        self._responses: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self.events: list[dict[str, Any]] = []
        self._cursors: dict[str, int] = {}  # per event name: how far wait_for_event has read
        self.violations: list[str] = []
        self.closed = False
        self.received: list[dict[str, Any]] = []
        self._stderr: list[bytes] = []
        self._stderr_reader: threading.Thread | None = None  # for an adapter process: reads its stderr to the end
        self._reader = threading.Thread(target=self._read_loop, args=(read,), daemon=True)
        self._reader.start()

    # -- transports --

    @classmethod
    def stdio(cls, argv: list[str] | None = None, env: dict[str, str] | None = None, cwd: str | None = None) -> DapClient:
        """Start the adapter (``python -m graph_dap.adapter`` by default) and talk over its stdio."""
        argv = argv or [sys.executable, "-m", "graph_dap.adapter"]
        environment = dict(os.environ, **(env or {}))
        environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, cwd=cwd
        )
        assert proc.stdin and proc.stdout

        def write(data: bytes) -> None:
            proc.stdin.write(data)  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]

        def close() -> None:
            for stream in (proc.stdin,):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass

        client = cls(proc.stdout.read1, write, close)  # type: ignore[attr-defined]
        client.process = proc
        client._stderr_reader = threading.Thread(target=_drain, args=(proc.stderr, client._stderr), daemon=True)
        client._stderr_reader.start()
        return client

    @classmethod
    def tcp(cls, host: str, port: int, timeout: float = TIMEOUT) -> DapClient:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def close() -> None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

        def read(n: int) -> bytes:
            try:
                return sock.recv(n)
            except OSError:
                return b""

        client = cls(read, sock.sendall, close)
        client.sock = sock
        return client

    process: subprocess.Popen[bytes] | None = None
    sock: socket.socket | None = None

    # -- plumbing --

    def _read_loop(self, read: Callable[[int], bytes]) -> None:
        try:
            for message in read_frames(read):
                if self.checks_schema:
                    try:
                        validate(message, "adapter -> client")
                    except ProtocolViolation as v:
                        self.violations.append(str(v))
                with self._cond:
                    self.received.append(message)
                    if message.get("type") == "response":
                        self._responses[message["request_seq"]] = message
                    elif message.get("type") == "event":
                        self.events.append(message)
                    self._cond.notify_all()
        except Exception as error:  # noqa: BLE001 - a bad frame is a test failure, reported below
            self.violations.append(f"unreadable output from the adapter: {error!r}")
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        self._write(data)

    def send(self, command: str, arguments: dict[str, Any] | None = None, check: bool = True) -> int:
        with self._lock:
            self._seq += 1
            message: dict[str, Any] = {"seq": self._seq, "type": "request", "command": command}
            if arguments is not None:
                message["arguments"] = arguments
            if check and self.checks_schema:
                validate(message, "client -> adapter")
            self._write(frame(message))
            return self._seq

    def response(self, seq: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while seq not in self._responses:
                left = deadline - time.monotonic()
                if self.closed:
                    raise EOFError(f"adapter closed the connection before answering request {seq}")
                if left <= 0:
                    raise TimeoutError(f"no response to request {seq} in {timeout} s")
                self._cond.wait(left)
            return self._responses.pop(seq)

    def request(self, command: str, arguments: dict[str, Any] | None = None, timeout: float = TIMEOUT, **kw: Any) -> Any:
        """Send a request and return its body; an error response raises :class:`DapError`."""
        if kw:
            arguments = dict(arguments or {}, **kw)
        response = self.response(self.send(command, arguments), timeout)
        self.check()
        assert response["command"] == command, response
        if not response["success"]:
            raise DapError(response)
        return response.get("body", {})

    def wait_for_event(
        self, name: str, timeout: float = TIMEOUT, where: Callable[[dict[str, Any]], bool] | None = None
    ) -> dict[str, Any]:
        """The next event called ``name`` (after those of that name already waited for); its body."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(self._cursors.get(name, 0), len(self.events)):
                    e = self.events[i]
                    if e["event"] == name and (where is None or where(e.get("body", {}))):
                        self._cursors[name] = i + 1
                        return e.get("body", {})
                left = deadline - time.monotonic()
                if self.closed:
                    raise EOFError(
                        f"adapter closed the connection while waiting for '{name}'; events: {[e['event'] for e in self.events]}"
                    )
                if left <= 0:
                    raise TimeoutError(f"no '{name}' event in {timeout} s; events: {[e['event'] for e in self.events]}")
                self._cond.wait(left)

    def events_named(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e.get("body", {}) for e in self.events if e["event"] == name]

    def wait_closed(self, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the adapter did not close the connection")
                self._cond.wait(left)

    def check(self) -> None:
        if self.violations:
            raise ProtocolViolation("\n".join(self.violations))

    def close(self) -> None:
        self._close()
        if self.process is not None:
            try:
                self.process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stdout:
                self.process.stdout.close()
        if self._stderr_reader is not None:
            self._stderr_reader.join(TIMEOUT)  # every line the process wrote, before anyone reads them

    def stderr_text(self) -> str:
        """What the adapter process wrote on stderr so far."""
        return b"".join(self._stderr).decode(errors="replace")

    # -- a user's session --

    def initialize(self, **extra: Any) -> dict[str, Any]:
        args = {
            "clientID": "graph-dap-tests",
            "adapterID": "graph-dap",
            "linesStartAt1": True,
            "columnsStartAt1": True,
            "pathFormat": "path",
            "supportsVariableType": True,
            "supportsVariablePaging": True,
            "supportsProgressReporting": True,
            "supportsInvalidatedEvent": True,
            "supportsMemoryReferences": True,
        }
        args.update(extra)
        return self.request("initialize", args)

    def launch(
        self,
        model: str,
        breakpoints: list[str] | None = None,
        exceptions: list[str] | None = None,
        lines: list[int] | None = None,
        **launch_args: Any,
    ) -> dict[str, Any]:
        """launch, then (once ``initialized``) configure breakpoints and configurationDone."""
        seq = self.send("launch", {"model": model, **launch_args})
        response = self.response(seq)
        self.check()
        if not response["success"]:
            raise DapError(response)
        self.wait_for_event("initialized")
        if lines is not None:
            self.request("setBreakpoints", source=self.listing_source(), breakpoints=[{"line": n} for n in lines])
        if breakpoints is not None:
            self.request("setFunctionBreakpoints", breakpoints=[{"name": b} for b in breakpoints])
        if exceptions is not None:
            self.request("setExceptionBreakpoints", filters=exceptions)
        self.request("configurationDone")
        return response.get("body", {})

    def start(self, model: str, **launch_args: Any) -> dict[str, Any]:
        """initialize + launch + configurationDone."""
        self.initialize()
        return self.launch(model, **launch_args)

    def listing_source(self) -> dict[str, Any]:
        """The Source of the graph listing (from the top frame when stopped)."""
        return self.stack_trace()[0]["source"]

    def source_text(self, source: dict[str, Any]) -> str:
        """A Source's text as a client gets it: by ``sourceReference`` when it is > 0, else from the file."""
        ref = source.get("sourceReference") or 0
        if ref > 0:
            return self.request("source", source=source, sourceReference=ref)["content"]
        return Path(source["path"]).read_text(encoding="utf-8")

    def wait_for_stop(self, reason: str | None = None, timeout: float = TIMEOUT) -> dict[str, Any]:
        body = self.wait_for_event("stopped", timeout)
        if reason is not None:
            assert body["reason"] == reason, body
        return body

    def stack_trace(self, **kw: Any) -> list[dict[str, Any]]:
        return self.request("stackTrace", threadId=1, **kw)["stackFrames"]

    def top_frame(self) -> dict[str, Any]:
        return self.stack_trace()[0]

    def scopes(self, frame_id: int | None = None) -> dict[str, dict[str, Any]]:
        if frame_id is None:
            frame_id = self.top_frame()["id"]
        return {s["name"]: s for s in self.request("scopes", frameId=frame_id)["scopes"]}

    def variables(self, reference: int, **kw: Any) -> dict[str, dict[str, Any]]:
        return {v["name"]: v for v in self.request("variables", variablesReference=reference, **kw)["variables"]}

    def scope_variables(self, scope: str) -> dict[str, dict[str, Any]]:
        """A scope's variables as a client that takes ``invalidated`` shows them: while some come without their
        statistics ("... being computed"), asked again once the adapter says they are ready."""
        got = self.variables(self.scopes()[scope]["variablesReference"])
        while any(str(v.get("value", "")).endswith("being computed") for v in got.values()):
            self.wait_for_event("invalidated")
            got = self.variables(self.scopes()[scope]["variablesReference"])
        return got

    def evaluate(self, expression: str, context: str = "repl", **kw: Any) -> dict[str, Any]:
        return self.request("evaluate", expression=expression, context=context, frameId=self.top_frame()["id"], **kw)

    def step(self, command: str = "next", reason: str = "step") -> dict[str, Any]:
        self.request(command, threadId=1)
        return self.wait_for_stop(reason)

    def wait_for_end(self, timeout: float = TIMEOUT) -> None:
        self.wait_for_event("terminated", timeout)

    def output(self) -> str:
        return "".join(e.get("output", "") for e in self.events_named("output"))

    def disconnect(self) -> None:
        try:
            self.request("disconnect", terminateDebuggee=True)
        except (EOFError, DapError):
            pass
        self.close()
        self.check()
