"""A DAP client for tests, used the way a person uses a debugger.

It drives an adapter over stdio (a subprocess) or TCP, and holds every message in both
directions to the official DAP schema, shipped with the tests (``tests/data/debugAdapterProtocol.json``, 1.71).
The schema has no ``additionalProperties: false``, so property names are checked too:
a misspelled ``variablesReferense`` fails here instead of passing silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "debugAdapterProtocol.json"

TIMEOUT = float(os.environ.get("DAP_TEST_TIMEOUT", "20"))

# Objects whose extra properties the protocol leaves to the implementation.
_OPEN_OBJECTS = {"LaunchRequestArguments", "AttachRequestArguments"}
# graph-dap's own requests (vscode-ext/PROTOCOL.md): held to the schema's generic Request and Response.
CUSTOM_COMMANDS = ("graphDap/tensorView", "graphDap/summaries", "graphDap/runTo", "graphDap/compareTable", "graphDap/profile")
# Properties outside the schema that VS Code reads on purpose (a Variable's context-menu key).
_VSCODE_PROPERTIES = {"__vscodeVariableMenuContext"}


class ProtocolViolation(AssertionError):
    """A message broke the schema (or used a property name the schema does not know)."""


class DapError(Exception):
    """An error response; ``response`` is the whole message."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__(response.get("message", "error"))
        self.response = response


# -- the schema ---------------------------------------------------------------------------


@cache
def schema() -> dict[str, Any]:
    """The DAP schema; a missing or broken file fails loudly (every scenario relies on it)."""
    if not SCHEMA_PATH.is_file():
        raise RuntimeError(f"the DAP schema is missing: {SCHEMA_PATH} (tests/data/README.md says where it comes from)")
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    if "ProtocolMessage" not in loaded.get("definitions", {}):
        raise RuntimeError(f"{SCHEMA_PATH} is not the DAP schema (no ProtocolMessage definition)")
    return loaded


@cache
def _message_definitions() -> dict[tuple[str, str], str]:
    """(kind, command or event) -> definition name, e.g. ("request", "next") -> "NextRequest"."""
    out: dict[tuple[str, str], str] = {}
    for name, d in schema()["definitions"].items():
        for part in d.get("allOf", []):
            props = part.get("properties", {})
            for kind, key in (("request", "command"), ("event", "event")):
                enum = props.get(key, {}).get("enum")
                if enum and name.endswith(kind.capitalize()):
                    out[(kind, enum[0])] = name
            if name.endswith("Response") and name != "ErrorResponse":
                base = name[: -len("Response")]
                req = schema()["definitions"].get(base + "Request")
                if req:
                    for rpart in req.get("allOf", []):
                        enum = rpart.get("properties", {}).get("command", {}).get("enum")
                        if enum:
                            out[("response", enum[0])] = name
    return out


@cache
def _validator(definition: str) -> jsonschema.Draft4Validator:
    root = dict(schema())
    root["$ref"] = f"#/definitions/{definition}"
    return jsonschema.Draft4Validator(root)


def _resolve(node: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    name = None
    while "$ref" in node:
        name = node["$ref"].split("/")[-1]
        node = schema()["definitions"][name]
    return node, name


def _merged(node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """All ``properties`` a schema node declares through allOf/$ref, and whether it is open."""
    node, name = _resolve(node)
    props: dict[str, Any] = {}
    open_ = name in _OPEN_OBJECTS or node.get("additionalProperties") not in (None, False)
    for part in node.get("allOf", []):
        p, o = _merged(part)
        for k, v in p.items():
            props.setdefault(k, []).extend(v)
        open_ = open_ or o
    for k, v in node.get("properties", {}).items():
        props.setdefault(k, []).append(v)
    return props, open_


def unknown_properties(instance: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Paths of properties in ``instance`` that the schema node does not declare."""
    props, open_ = _merged(node)
    node, _ = _resolve(node)
    problems: list[str] = []
    if isinstance(instance, dict):
        if not props and not node.get("allOf") and not open_:
            return problems  # an object the schema leaves free-form
        for key, value in instance.items():
            if key not in props:
                if not open_ and key not in _VSCODE_PROPERTIES:
                    problems.append(f"{path}.{key}")
                continue
            for sub in props[key]:
                problems += unknown_properties(value, sub, f"{path}.{key}")
    elif isinstance(instance, list) and "items" in node:
        for i, item in enumerate(instance):
            problems += unknown_properties(item, node["items"], f"{path}[{i}]")
    return problems


def validate(message: dict[str, Any], direction: str) -> str:
    """Check one message; returns its definition name. Raises ProtocolViolation."""
    kind = message.get("type")
    key = message.get("command") if kind in ("request", "response") else message.get("event")
    if kind == "response" and not message.get("success", True):
        name = "ErrorResponse"
    else:
        name = _message_definitions().get(
            (kind, key), {"request": "Request", "response": "Response", "event": "Event"}.get(kind, "ProtocolMessage")
        )  # type: ignore[arg-type]
        if name in ("Request", "Response", "Event") and not (name != "Event" and key in CUSTOM_COMMANDS):
            raise ProtocolViolation(f"{direction}: {kind} {key!r} is not in the DAP schema: {message}")
    # The schema's RestartArguments.arguments is oneOf two open objects (launch or attach
    # arguments), which any object matches both of: that oneOf can never pass. Take it as anyOf.
    errors = [
        e
        for e in sorted(_validator(name).iter_errors(message), key=lambda e: list(e.path))
        if not (e.validator == "oneOf" and "is valid under each of" in e.message)
    ]
    if errors:
        e = errors[0]
        raise ProtocolViolation(f"{direction}: {name} invalid at {list(e.path)}: {e.message}\n{json.dumps(message)[:2000]}")
    extra = unknown_properties(message, {"$ref": f"#/definitions/{name}"})
    if extra:
        raise ProtocolViolation(
            f"{direction}: {name} has properties the schema does not know: {extra}\n{json.dumps(message)[:2000]}"
        )
    return name


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
        return self.variables(self.scopes()[scope]["variablesReference"])

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


# -- models for the scenarios (built with onnx.helper, checked against onnxruntime) -------


def save_model(
    path: Path,
    nodes: list[Any],
    inputs: list[Any],
    outputs: list[Any],
    initializers: dict[str, Any] | None = None,
    opset: int = 17,
) -> Path:
    import onnx
    from onnx import helper, numpy_helper

    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def save_inputs(path: Path, feeds: dict[str, Any]) -> Path:
    import numpy as np

    np.savez(path, **feeds)
    return path


def reference(model_path: Path, feeds: dict[str, Any]) -> dict[str, Any]:
    """Every value of the model as onnxruntime computes it (each node output made a graph output)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(model_path)
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out and out not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=out))
                known.add(out)
    from graph_dap.runtime.engine.options import session_options

    # graph-dap's global thread pool may be set in this process already: every session must use it
    options = session_options("none")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, feeds), strict=True))
    values.update(feeds)
    values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    return values


def nan_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Sub 1 (shift) -> Log (log1: NaN where x < 1) -> Relu -> y; and a Div by zero (inf)."""
    import numpy as np
    from onnx import TensorProto, helper

    feeds = {"x": np.array([[2.0, 0.5, 3.0, -1.0], [1.5, 4.0, 0.25, 2.5]], np.float32)}
    path = save_model(
        folder / "faulty.onnx",
        [
            helper.make_node("Sub", ["x", "one"], ["shifted"], name="shift"),
            helper.make_node("Log", ["shifted"], ["logged"], name="log1"),
            helper.make_node("Relu", ["logged"], ["y"], name="relu1"),
            helper.make_node("Div", ["x", "zeros"], ["ratio"], name="div1"),
            helper.make_node("Add", ["ratio", "x"], ["z"], name="add1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4]),
        ],
        {"one": np.array(1, np.float32), "zeros": np.zeros((2, 4), np.float32)},
    )
    return path, save_inputs(folder / "faulty_inputs.npz", feeds), feeds


def inf_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Div by zeros (div1: +/-Inf) -> Add x (add1: Inf again, from its input) -> z."""
    import numpy as np
    from onnx import TensorProto, helper

    feeds = {"x": np.array([[2.0, -0.5, 3.0], [1.5, 4.0, -0.25]], np.float32)}
    path = save_model(
        folder / "infinite.onnx",
        [
            helper.make_node("Div", ["x", "zeros"], ["ratio"], name="div1"),
            helper.make_node("Add", ["ratio", "x"], ["z"], name="add1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        {"zeros": np.zeros((2, 3), np.float32)},
    )
    return path, save_inputs(folder / "infinite_inputs.npz", feeds), feeds


def error_model(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """x -> Relu -> Reshape to a shape with the wrong element count (fails in onnxruntime)."""
    import numpy as np
    from onnx import TensorProto, helper

    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    path = save_model(
        folder / "broken.onnx",
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu1"),
            helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape1"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        {"shape": np.array([4, 2], np.int64)},
    )
    return path, save_inputs(folder / "broken_inputs.npz", feeds), feeds


def long_model(folder: Path, count: int = 400, size: int = 256) -> Path:
    """A chain of ``count`` MatMul+Tanh pairs on size x size matrices: a continue that takes seconds."""
    import numpy as np
    from onnx import TensorProto, helper

    nodes = []
    prev = "x"
    for i in range(count):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}"))
        prev = f"t{i}"
    w = (np.random.RandomState(1).randn(size, size) / np.sqrt(size)).astype(np.float32)
    return save_model(
        folder / "long.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [size, size])],
        {"w": w},
    )


def wide_model(folder: Path, count: int = 130, rows: int = 250) -> tuple[Path, Path, dict[str, Any]]:
    """``count`` Neg nodes on a rows x 3 tensor: many values (a paged scope), a long first axis."""
    import numpy as np
    from onnx import TensorProto, helper

    feeds = {"x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)}
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"], name=f"neg{i}") for i in range(count)]
    path = save_model(
        folder / "wide.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 3])],
        [helper.make_tensor_value_info(f"v{count - 1}", TensorProto.FLOAT, [rows, 3])],
    )
    return path, save_inputs(folder / "wide_inputs.npz", feeds), feeds


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (those its main thread started), from /proc."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


@contextlib.contextmanager
def listening(
    args: list[str], banner: str, env: dict[str, str] | None = None, stop: str = "terminate", started: list[int] | None = None
) -> Iterator[str]:
    """Run ``python ARGS`` (a server that prints ``BANNER HOST:PORT``) and yield ``HOST:PORT``.

    On exit the server is stopped (``terminate`` or ``kill``) and must not have printed a traceback.
    ``started``: gets the server's pid.
    """
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None
    if started is not None:
        started.append(proc.pid)
    try:
        line = proc.stdout.readline()
        assert line.startswith(banner), line
        yield line.split()[-1]
    finally:
        getattr(proc, stop)()
        proc.wait()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
