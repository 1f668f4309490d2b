"""The worker: a :class:`DebugSession` behind a msgpack boundary, in its own process.

``python -m graph_dap.runtime.worker`` serves one client over stdin/stdout (stderr
stays free for crash messages); ``graph-dap worker --listen HOST:PORT --token TOKEN``
serves clients over TCP one after another, each with a fresh session, and closes any
connection whose first message does not carry the token. The wire format is described
in :mod:`graph_dap.runtime.worker_client`.

Calls run one at a time on the main thread; ``pause`` is answered by the reading
thread at once, so a pause reaches a ``continue`` that is still running.
"""

from __future__ import annotations

import argparse
import hmac
import os
import queue
import re
import socket
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from . import expr
from .breakpoints import BreakpointSpec
from .errors import ExpressionError, GraphDapError, ModelError
from .files import write_text_atomic
from .listing import render_listing
from .session import DebugSession, Stop, StopReason
from .tensor import TensorSummary, summarize
from .tensor_view import tensor_view
from .worker_client import PROTOCOL_VERSION, parse_address

if TYPE_CHECKING:
    from .lockstep import Divergence, Lockstep

_READ_SIZE = 1 << 16
_PROGRESS_INTERVAL = 0.25  # seconds between progress events during a run
_PAUSE_RETRY = 0.02  # seconds between repeated pause requests to a run that has not stopped
_MAX_CHILDREN = 10_000  # slices summarized per children call
_MAX_READ = 1 << 24  # bytes per read_memory call
_ONNX_TYPES = {"float32": "float", "float64": "double"}
_RUNS = {"run", "start"}
_NAME_LIKE = re.compile(r"^[^\s()\[\],]+$")  # no spaces, calls or subscripts: meant as a value name

Send = Callable[[dict[str, Any]], None]


def _plain(o: Any) -> Any:
    """msgpack's fallback: numpy scalars and arrays, sets, paths as plain data."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def tensor_type(dtype: str, kind: str = "tensor") -> str:
    """ONNX's spelling of a value's type: ``tensor(float)``, ``seq(tensor(int64))``."""
    inner = f"tensor({_ONNX_TYPES.get(dtype, dtype)})"
    return f"seq({inner})" if kind == "sequence" else inner


def number_text(x: Any, hex_: bool = False) -> str:
    """One element as text: integers plainly (or in hex), floats with their dtype's digits."""
    if isinstance(x, np.bool_ | bool):
        return str(bool(x))
    if isinstance(x, np.integer | int):
        return hex(int(x)) if hex_ else str(int(x))
    if isinstance(x, np.floating):
        if x.dtype.itemsize <= 4:
            return f"{float(x):.7g}"
        return repr(float(x))
    if isinstance(x, np.complexfloating):
        return str(complex(x))
    if isinstance(x, bytes):
        return repr(x.decode("utf-8", "replace"))
    return repr(x) if isinstance(x, str) else str(x)


def _stat(v: float | None) -> str:
    return "?" if v is None else f"{v:.7g}"


def summary_wire(name: str, value: Any, stale: bool = False, hex_: bool = False) -> dict[str, Any]:
    """What the adapter shows of one value: its line, type and statistics."""
    s: TensorSummary = summarize(value)
    wire: dict[str, Any] = {
        "name": name,
        "text": s.text(),
        "type": tensor_type(s.dtype, s.kind),
        "dtype": s.dtype,
        "shape": list(s.shape),
        "size": s.size,
        "stale": stale,
        "kind": s.kind,
    }
    if s.kind == "tensor":
        shape = "[" + ",".join(map(str, s.shape)) + "]"
        stats = [("shape", shape), ("dtype", s.dtype)]
        if s.min is not None:
            stats += [("min", _stat(s.min)), ("max", _stat(s.max)), ("mean", _stat(s.mean)), ("std", _stat(s.std))]
        stats += [("nan", str(s.nan)), ("+inf", str(s.posinf)), ("-inf", str(s.neginf)), ("zeros", str(s.zeros))]
        wire["stats"] = stats
        if s.size == 1:
            wire["scalar"] = number_text(np.asarray(value).reshape(-1)[0], hex_)
    return wire


def _write_listing(model_path: Path | None, text: str) -> str | None:
    """Write ``<model>.onnxtxt`` beside the model when its folder is writable."""
    if model_path is None:
        return None
    target = model_path.with_suffix(".onnxtxt")
    try:
        if target.exists() and target.read_text(encoding="utf-8") == text:
            return str(target)
        write_text_atomic(target, text)
    except OSError:
        return None
    return str(target)


class WorkerService:
    """Answers calls by name (``rpc_<method>``) on one DebugSession."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.session: DebugSession | None = None
        self._temps: dict[int, Any] = {}
        self._next_temp = 0
        self._lock = threading.Lock()
        self._last_run = 0  # id of the last run request received (by the reading thread)
        self._done_run = 0  # id of the last run request answered
        self._pause_for = -1  # id of the run a pause is meant for
        self._paused = threading.Event()  # a pause for the run in progress, seen between nodes
        self._last_progress = 0.0
        self.lockstep: Lockstep | None = None  # the comparison with a reference, when the launch names one
        self._mismatch = False  # stop at a divergence from the reference
        self._repeat: dict[str, Any] | None = None  # the timings of the last run's iterations

    # -- plumbing --------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request to one response; every failure becomes an ``error`` reply."""
        request_id = message.get("id")
        method = message.get("method")
        args = message.get("args") or {}
        handler = getattr(self, f"rpc_{method}", None) if isinstance(method, str) else None
        try:
            if handler is None or not isinstance(args, dict):
                raise GraphDapError(f"unknown worker method {method!r}")
            try:
                result = handler(**args)
            finally:
                if method in _RUNS:
                    with self._lock:
                        self._done_run = max(self._done_run, request_id if isinstance(request_id, int) else 0)
        except GraphDapError as e:
            return {"id": request_id, "error": {"type": type(e).__name__, "message": str(e)}}
        except MemoryError:
            return {"id": request_id, "error": {"type": "MemoryError", "message": "the worker ran out of memory"}}
        except TypeError as e:
            return {"id": request_id, "error": {"type": "TypeError", "message": f"bad arguments to {method}: {e}"}}
        except Exception as e:  # noqa: BLE001 - a bug must not take the worker down
            traceback.print_exc(file=sys.stderr)
            return {"id": request_id, "error": {"type": type(e).__name__, "message": f"internal error in the worker: {e!r}"}}
        return {"id": request_id, "result": result}

    def received(self, message: dict[str, Any]) -> None:
        """From the reading thread: note a run request as it arrives, before it is queued."""
        if message.get("method") in _RUNS and isinstance(message.get("id"), int):
            with self._lock:
                self._last_run = max(self._last_run, message["id"])

    def pause(self) -> bool:
        """From the reading thread: stop the run in progress (or queued) before its next node."""
        with self._lock:
            if self._last_run <= self._done_run or self.session is None:
                return False
            self._pause_for = self._last_run
        self._pause_now(self.session)
        threading.Thread(target=self._keep_pausing, args=(self._pause_for,), daemon=True).start()
        return True

    def _pause_now(self, session: DebugSession) -> None:
        self._paused.set()
        session.pause()

    def _keep_pausing(self, run: int) -> None:
        # The session clears its pause flag when a run starts: a pause that came just
        # before that is lost. Ask again until that run has answered.
        session = self.session
        while session is not None and self._done_run < run:
            time.sleep(_PAUSE_RETRY)
            if self._done_run < run:
                self._pause_now(session)

    def close(self) -> None:
        """Let go of what the session holds outside memory (a reference's files and folders)."""
        lockstep, self.lockstep = self.lockstep, None
        if lockstep is not None:
            try:
                lockstep.close()
            except Exception:  # noqa: BLE001 - closing must not fail the shutdown
                traceback.print_exc(file=sys.stderr)

    def _on_progress(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last_progress >= _PROGRESS_INTERVAL:
            self._last_progress = now
            self._send({"event": "progress", "body": {"done": done, "total": total}})

    def _on_log(self, line: str) -> None:
        self._send({"event": "log", "body": {"text": line}})

    @property
    def s(self) -> DebugSession:
        if self.session is None:
            raise GraphDapError("no model is loaded")
        return self.session

    def _value(self, name: str, temp: int | None = None) -> Any:
        if temp is not None:
            if temp not in self._temps:
                raise GraphDapError("that result is gone: evaluate the expression again")
            return self._temps[temp]
        return self.s.value(name)

    # -- loading ---------------------------------------------------------------------

    def rpc_load(
        self,
        model: str,
        inputs: Any = None,
        dims: dict[str, int] | None = None,
        providers: list[str] | None = None,
        skip_constants: bool = True,
        memory_budget_mb: float | None = None,
        base_dir: str | None = None,
        reference: str | dict[str, Any] | None = None,
        tolerance: dict[str, Any] | None = None,
        write_listing: bool = True,
    ) -> dict[str, Any]:
        """Load a model (and open its reference); ``write_listing``: write ``<model>.onnxtxt`` beside it."""
        path = Path(model).expanduser()
        if base_dir and not path.is_absolute():
            path = Path(base_dir) / path
        if not path.exists():
            raise ModelError(f"model not found: {path}")
        from .graph import load_graph

        graph = load_graph(path)
        if isinstance(inputs, dict):
            inputs = {k: self._input_array(graph, k, v, base_dir) for k, v in inputs.items()}
        elif isinstance(inputs, str) and base_dir and not Path(inputs).is_absolute():
            inputs = str(Path(base_dir) / inputs)
        spec = dump = None
        notes: list[str] = []
        if reference is not None:
            from .lockstep import ReferenceSpec

            tol = tolerance or {}
            spec = ReferenceSpec.make(reference, tol.get("atol"), tol.get("rtol"), tol.get("fail_if"), base_dir)
            dump, inputs, notes = spec.open_dump(graph, inputs)
        try:
            session = DebugSession(
                graph,
                inputs,
                dims=dims,
                providers=providers,
                skip_constants=skip_constants,
                memory_budget_mb=memory_budget_mb,
                on_log=self._on_log,
                on_progress=self._on_progress,
            )
        except BaseException:
            if dump is not None:
                dump.close()
            raise
        lockstep = None
        if spec is not None:
            from .lockstep import Lockstep

            lockstep = Lockstep(session, spec, dump, notes)  # closes its source if it fails
        self.close()  # the previous model's reference
        self.session, self.lockstep = session, lockstep
        self._temps.clear()
        self._mismatch = False
        listing = render_listing(graph)
        statics = {n.id for n in graph.nodes if n.is_static and skip_constants}
        nodes = [
            {
                "id": n.id,
                "index": n.index,
                "op_type": n.op_type,
                "domain": n.domain,
                "inputs": list(n.all_inputs),
                "outputs": [o for o in n.outputs if o],
                "attributes": [(k, self._attribute_text(v)) for k, v in n.attributes.items()],
                "line": listing.line_of(n.id) or 0,
                "has_subgraphs": n.has_subgraphs,
                "static": n.id in statics,
            }
            for n in graph.nodes
        ]
        return {
            "name": graph.name,
            "model_path": str(path),
            "nodes": nodes,
            "inputs": list(graph.input_names),
            "outputs": list(graph.output_names),
            "initializers": list(graph.initializer_names),
            "listing": listing.text,
            "listing_path": _write_listing(path, listing.text) if write_listing else None,
            "value_names": graph.value_names(),
            "functions": list(expr.FUNCTIONS),
        }

    @staticmethod
    def _input_array(graph: Any, name: str, value: Any, base_dir: str | None) -> Any:
        if isinstance(value, str):
            p = Path(value)
            if base_dir and not p.is_absolute():
                p = Path(base_dir) / p
            try:
                return np.load(p, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise GraphDapError(f"input '{name}': cannot read {p}: {e}") from None
        dtype = graph.value_info(name).dtype if graph.has_value(name) else None
        try:
            return np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise GraphDapError(f"input '{name}': {e}") from None

    @staticmethod
    def _attribute_text(v: Any) -> str:
        text = str(v) if not isinstance(v, str) else repr(v)
        return text if len(text) <= 200 else text[:197] + "..."

    # -- running ---------------------------------------------------------------------

    def _stop(self, stop: Stop | Divergence) -> dict[str, Any]:
        s = self.s
        self._temps.clear()
        where = {
            "pc": s.pc.id if s.pc else None,
            "last_node": s.last_node.id if s.last_node else None,
        }
        if not isinstance(stop, Stop):  # a divergence from the reference
            return {
                "reason": "mismatch",
                "node": stop.node.id,
                **where,
                "tensor": stop.value,
                "message": stop.message,
                "details": stop.details(),
                "breakpoint_ids": [],
            }
        details = dict(stop.details)
        if stop.reason is StopReason.END:
            if self._repeat is not None:
                details["repeat"] = self._repeat
            if self.lockstep is not None:
                details["comparison"] = self.lockstep.summary()
        return {
            "reason": stop.reason.value,
            "node": stop.node.id if stop.node else None,
            **where,
            "tensor": stop.tensor,
            "message": stop.message,
            "details": details,
            "breakpoint_ids": list(stop.breakpoint_ids),
        }

    def rpc_start(self) -> dict[str, Any]:
        self._paused.clear()
        self._repeat = None
        return self._stop(self.lockstep.start() if self.lockstep else self.s.start())

    def rpc_run(self, command: str, target: str | None = None, iterations: int = 1) -> dict[str, Any]:
        """Move the run; ``to_end`` (noDebug) runs the model ``iterations`` times."""
        s = self.s
        ls = self.lockstep
        self._paused.clear()
        self._repeat = None
        stop: Stop | Divergence
        if command == "resume":
            stop = self._resume()
        elif command in ("continue", "step_out"):  # no subgraph frames: out of the top graph is to the end
            stop = self._continue()
        elif command in ("step", "step_in"):
            stop = ls.step(self._mismatch) if ls else s.step()
        elif command == "step_back":
            stop = s.step_back()
        elif command == "reverse_continue":
            stop = s.reverse_continue()
        elif command == "restart":
            stop = self._restart()
        elif command == "goto" and target is not None:
            stop = s.goto(target)
        elif command == "run_to" and target is not None:
            stop = self._run_to(target)
        elif command == "to_end":  # noDebug: no breakpoints, no filters
            s.set_breakpoints([])
            s.set_break_on([])
            self._mismatch = False
            stop = self._to_end(max(1, int(iterations)))
        else:
            raise GraphDapError(f"unknown run command {command!r}")
        return self._stop(stop)

    def _continue(self, check_first: bool = False) -> Stop | Divergence:
        if self.lockstep is None:
            return self.s.continue_(check_first=check_first)
        return self.lockstep.continue_(check_first=check_first, stop_on_mismatch=self._mismatch, paused=self._paused.is_set)

    def _run_to(self, target: str) -> Stop | Divergence:
        s, ls = self.s, self.lockstep
        pc = s.pc
        seq = [n.id for n in s.sequence]
        if ls is None or pc is None or target not in seq or seq.index(target) <= seq.index(pc.id):
            return s.run_to(target)  # its errors, or "reached" when already there
        return ls.continue_(until=target, stop_on_mismatch=self._mismatch, paused=self._paused.is_set)

    def _restart(self) -> Stop:
        if self.lockstep is not None:
            self.lockstep.reset()
        stop = self.s.restart()
        if self.lockstep is not None and stop.reason is StopReason.ENTRY:
            stop = self.lockstep.start()
        return stop

    def _resume(self) -> Stop | Divergence:
        """Continue, checking the breakpoints of the node at the program counter first.

        A plain ``continue_`` steps off a breakpoint it stopped at; a run that starts the
        model, or resumes after a pause, must not skip the breakpoints of its first node.
        """
        first = self.lockstep.start() if self.lockstep else self.s.start()
        if first.reason is not StopReason.ENTRY:
            return first
        return self._continue(check_first=True)

    def _to_end(self, iterations: int) -> Stop | Divergence:
        """Run to the end ``iterations`` times (restarting between), like ``graph-dap run --repeat N``."""
        s = self.s
        times: list[float] = []
        first: dict[str, Any] | None = None
        identical = True
        stop: Stop | Divergence = Stop(StopReason.END, None)
        for i in range(iterations):
            started = time.perf_counter()
            if i:
                restarted = self._restart()
                if restarted.reason is not StopReason.ENTRY:
                    stop = restarted
                    break
            stop = self._continue()
            times.append((time.perf_counter() - started) * 1000.0)
            if not isinstance(stop, Stop) or stop.reason is not StopReason.END or stop.node is not None:
                break
            outputs = s.outputs()
            if first is None:
                first = {k: _copy(v) for k, v in outputs.items()}
            elif identical:
                identical = all(_same(outputs.get(k), v) for k, v in first.items())
        if iterations > 1:
            completed = isinstance(stop, Stop) and stop.reason is StopReason.END and stop.node is None
            self._repeat = {
                "requested": iterations,
                "runs": len(times),
                "times_ms": [round(t, 3) for t in times],
                "median_ms": round(statistics.median(times), 3) if times else None,
                "outputs_identical": identical if len(times) > 1 and completed else None,
            }
        return stop

    def rpc_where(self) -> dict[str, Any]:
        """The current position, as a pause stop (after a run failed)."""
        return self._stop(Stop(StopReason.PAUSE, self.s.pc, "stopped"))

    # -- breakpoints -----------------------------------------------------------------

    def rpc_set_breakpoints(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        bps = self.s.set_breakpoints(
            [BreakpointSpec(d["spec"], d.get("condition"), d.get("hit_condition"), d.get("log_message")) for d in specs]
        )
        return [{"id": b.id, "verified": b.verified, "message": b.message, "nodes": list(b.node_ids)} for b in bps]

    def rpc_set_break_on(self, filters: list[str], inf_exclude: list[str] | None = None) -> None:
        """The session's filters (nan, inf, error), and ``mismatch``: stop at a divergence from the reference."""
        if "mismatch" in filters and self.lockstep is None:
            raise GraphDapError("the mismatch filter needs a reference: give the launch argument 'reference'")
        self._mismatch = "mismatch" in filters
        self.s.set_break_on([f for f in filters if f != "mismatch"])
        self.s.inf_exclude = tuple(inf_exclude or ())

    def rpc_data_targets(self, name: str) -> dict[str, Any]:
        """Nodes to stop before for a data breakpoint: after the producer ran (write), before a reader (read)."""
        s = self.s
        g = s.graph
        if not g.has_value(name):
            raise GraphDapError(f"no value '{name}' in the graph")
        seq = s.sequence
        positions = {n.id: i for i, n in enumerate(seq)}
        producer = g.producer(name)
        write: list[str] = []
        write_message = ""
        if producer is None:
            write_message = f"'{name}' is a graph input or initializer: no node writes it"
        elif producer.id not in positions:
            write_message = f"'{name}' is computed once at load by constant node {producer.label}"
        elif positions[producer.id] + 1 >= len(seq):
            write_message = f"'{name}' is written by the last node, {producer.label}: the run ends there"
        else:
            write = [seq[positions[producer.id] + 1].id]
        read = [n.id for n in g.consumers(name) if n.id in positions]
        read_message = "" if read else f"no node that runs reads '{name}'"
        return {"write": write, "write_message": write_message, "read": read, "read_message": read_message}

    # -- values ----------------------------------------------------------------------

    def rpc_values(self) -> dict[str, Any]:
        s = self.s
        return {"computed": s.computed_values(), "stale": [n for n in s.computed_values() if s.is_stale(n)]}

    def rpc_summaries(self, names: list[str], hex: bool = False) -> list[dict[str, Any]]:
        s = self.s
        out: list[dict[str, Any]] = []
        for name in names:
            if s.has_value(name):
                out.append(summary_wire(name, s.value(name), s.is_stale(name), hex))
                continue
            info = s.graph.value_info(name)
            producer = s.graph.producer(name)
            why = f"not computed yet ({producer.label} has not run)" if producer else "not computed yet"
            out.append(
                {
                    "name": name,
                    "text": f"{info.type_text()} {why}" if info.dtype else why,
                    "type": tensor_type(info.dtype or "?", info.kind),
                    "dtype": info.dtype or "?",
                    "shape": [],
                    "size": 0,
                    "available": False,
                }
            )
        return out

    def _array(self, name: str, temp: int | None, index: Sequence[int]) -> np.ndarray:
        value = self._value(name, temp)
        if isinstance(value, list):
            value = value[index[0]] if index else value
            index = index[1:]
            if isinstance(value, list):
                raise GraphDapError("a sequence has no elements to show here")
        a = np.asarray(value)
        try:
            return a[tuple(index)] if index else a
        except IndexError as e:
            raise GraphDapError(f"bad index {list(index)}: {e}") from None

    def rpc_children(
        self, name: str, index: list[int], start: int = 0, count: int = 0, temp: int | None = None, hex: bool = False
    ) -> dict[str, Any]:
        """Slices of ``value[index]`` along its first axis: summaries, or numbers at the last axis."""
        value = self._value(name, temp)
        if isinstance(value, list) and not index:
            elements = [
                {"index": i, **summary_wire(f"[{i}]", v)}
                for i, v in enumerate(value[start : start + (count or len(value))], start)
            ]
            return {"items": elements, "total": len(value)}
        a = self._array(name, temp, index)
        if a.ndim == 0:
            return {"items": [], "total": 0}
        total = int(a.shape[0])
        stop = min(total, start + (count or total), start + _MAX_CHILDREN)
        items: list[dict[str, Any]] = []
        for i in range(max(start, 0), stop):
            sub = a[i]
            if sub.ndim == 0:
                items.append({"index": i, "scalar": number_text(sub[()], hex), "dtype": str(a.dtype)})
            else:
                items.append({"index": i, **summary_wire(f"[{i}]", sub, hex_=hex)})
        return {"items": items, "total": total}

    def rpc_slice_summary(self, name: str, index: list[int], temp: int | None = None, hex: bool = False) -> dict[str, Any]:
        return summary_wire(name, self._array(name, temp, index), hex_=hex)

    def rpc_read_memory(self, name: str, offset: int, count: int, temp: int | None = None) -> dict[str, Any]:
        a = np.ascontiguousarray(self._array(name, temp, []))
        if a.dtype.kind in "OUS":
            raise GraphDapError(f"'{name}' holds {a.dtype} data, which has no raw bytes to show")
        raw = a.reshape(-1).view(np.uint8)
        size = int(raw.size)
        begin = max(0, min(offset, size))
        end = max(begin, min(size, offset + min(count, _MAX_READ)))
        return {"data": raw[begin:end].tobytes(), "size": size, "start": begin}

    def rpc_evaluate(self, expression: str, clipboard: bool = False, hex: bool = False) -> dict[str, Any]:
        s = self.s
        text = expression.strip()
        name = text[1:-1] if len(text) > 1 and text[0] == text[-1] == "`" else text
        if s.graph.has_value(name):
            s.value(name)  # raises "not computed yet" with the producer's name
            result: dict[str, Any] = {"value": name, "summary": summary_wire(name, s.value(name), s.is_stale(name), hex)}
            if clipboard:
                result["text"] = self._full_text(s.value(name))
            return result
        value = s.evaluate(text)
        if isinstance(value, np.ndarray | list) and not (isinstance(value, np.ndarray) and value.size == 1 and value.ndim == 0):
            self._next_temp += 1
            self._temps[self._next_temp] = value
            result = {"temp": self._next_temp, "summary": summary_wire(text, value, hex_=hex)}
            if clipboard:
                result["text"] = self._full_text(value)
            return result
        if isinstance(value, np.generic | int | float | bool | complex) or (isinstance(value, np.ndarray) and value.ndim == 0):
            scalar = np.asarray(value).reshape(())[()]
            return {
                "text": number_text(scalar, hex),
                "type": type(scalar).__name__ if not isinstance(scalar, np.generic) else str(scalar.dtype),
            }
        return {"text": expr.format_value(value, 100_000 if clipboard else 1_000), "type": type(value).__name__}

    @staticmethod
    def _full_text(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(WorkerService._full_text(v) for v in value) + "]"
        with np.printoptions(threshold=100_000, linewidth=120):
            return np.array2string(np.asarray(value), separator=", ")

    def rpc_set_value(self, name: str, expression: str, index: list[int] | None = None) -> dict[str, Any]:
        s = self.s
        new = s.evaluate(expression)
        if index:
            current = np.array(s.value(name), copy=True)
            target = current[tuple(index)]
            new_arr = np.asarray(new)
            if new_arr.dtype.kind not in "biufc" or (new_arr.ndim and not np.can_cast(new_arr.dtype, current.dtype, "same_kind")):
                raise GraphDapError(f"cannot store {new_arr.dtype} values into '{name}' ({current.dtype})")
            try:
                current[tuple(index)] = new_arr
            except (ValueError, TypeError) as e:
                shape = list(np.shape(target))
                raise GraphDapError(f"'{name}'{list(index)} is {current.dtype}{shape}: {e}") from None
            stale = s.set_value(name, current)
            part = current[tuple(index)]
        else:
            stale = s.set_value(name, new)
            part = s.value(name)
        if np.ndim(part) == 0:
            return {"scalar": number_text(np.asarray(part)[()]), "stale": stale, "summary": None}
        return {"summary": summary_wire(name, part), "stale": stale}

    def rpc_outputs(self) -> list[dict[str, Any]]:
        return [summary_wire(name, v) for name, v in self.s.outputs().items()]

    def rpc_tensor_view(self, name: str, index: list[int] | None = None, max_size: int = 256) -> dict[str, Any]:
        """A 2-D slice of a value (or of what an expression gives), downsampled here, with its statistics."""
        s = self.s
        text = name.strip()
        plain = text[1:-1] if len(text) > 1 and text[0] == text[-1] == "`" else text
        if s.graph.has_value(plain):
            value = s.value(plain)  # raises "not computed yet" with the producer's name
        else:
            try:
                value = s.evaluate(text)
            except ExpressionError as e:
                unknown = re.match(r"unknown value '(.*)'$", str(e))
                if unknown or _NAME_LIKE.match(text):
                    raise GraphDapError(f"no value named '{unknown[1] if unknown else plain}' (not computed yet?)") from None
                raise
        return tensor_view(name, value, index, max_size)

    def rpc_compare_table(self) -> dict[str, Any]:
        """The comparison with the reference so far, as ``graph-dap compare --json`` prints it."""
        if self.lockstep is None:
            raise GraphDapError("there is no reference to compare with: give the launch argument 'reference'")
        return self.lockstep.to_dict()

    def rpc_profile(self, repeat: int = 3) -> dict[str, Any]:
        """The model run whole ``repeat`` times under onnxruntime's profiler, as ``graph-dap profile --json``."""
        from .profile import profile_model

        s = self.s
        return profile_model(s.graph, s.inputs, repeat=repeat, providers=s.runner.providers).to_dict()

    def rpc_shutdown(self) -> None:
        self.close()


# -- serving ------------------------------------------------------------------------------


def _copy(v: Any) -> Any:
    return [np.array(x, copy=True) for x in v] if isinstance(v, list) else np.array(v, copy=True)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None:
        return False
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def serve(read: Callable[[int], bytes], write: Callable[[bytes], None], on_eof: Callable[[], None] | None = None) -> None:
    """Answer requests from ``read`` on ``write`` until the stream ends or ``shutdown``."""
    packer_lock = threading.Lock()
    packer = msgpack.Packer(use_bin_type=True, default=_plain)

    def send(message: dict[str, Any]) -> None:
        data = packer.pack(message)
        with packer_lock:
            try:
                write(data)
            except (BrokenPipeError, ConnectionError, OSError):
                pass

    service = WorkerService(send)
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def reader() -> None:
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 26)
        try:
            while True:
                data = read(_READ_SIZE)
                if not data:
                    break
                unpacker.feed(data)
                for message in unpacker:
                    if not isinstance(message, dict):
                        continue
                    if message.get("method") == "pause":
                        send({"id": message.get("id"), "result": {"paused": service.pause()}})
                    else:
                        service.received(message)
                        inbox.put(message)
        except (OSError, ValueError, msgpack.UnpackException) as e:
            print(f"graph-dap worker: bad input from the client: {e}", file=sys.stderr)
        service.pause()
        if on_eof is not None:
            service.close()
            on_eof()
        inbox.put(None)

    threading.Thread(target=reader, name="worker-reader", daemon=True).start()
    while (message := inbox.get()) is not None:
        reply = service.handle(message)
        if message.get("method") == "shutdown":
            send(reply)
            break
        send(reply)
    service.close()


def _serve_stdio() -> int:
    proto_in = sys.stdin.fileno()
    proto_out = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the stream

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(proto_out, view) :]

    serve(lambda n: os.read(proto_in, n), write, on_eof=lambda: os._exit(0))
    return 0


def serve_tcp(host: str, port: int, token: str, ready: Callable[[int], None] | None = None, once: bool = False) -> None:
    """Serve adapters over TCP one after another; a connection without ``token`` gets nothing."""
    listener = socket.create_server((host, port))
    bound = listener.getsockname()[1]
    if ready is not None:
        ready(bound)
    expected = token.encode()
    while True:
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not _handshake(conn, expected):
                continue
            conn.sendall(msgpack.packb({"hello": "graph-dap-worker", "version": PROTOCOL_VERSION, "pid": os.getpid()}))

            def read(n: int, c: socket.socket = conn) -> bytes:
                try:
                    return c.recv(n)
                except OSError:
                    return b""

            serve(read, conn.sendall)
        if once:
            break


def _handshake(conn: socket.socket, expected: bytes, timeout: float = 5.0) -> bool:
    conn.settimeout(timeout)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=4096)
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return False
            unpacker.feed(data)
            for hello in unpacker:
                token = hello.get("token") if isinstance(hello, dict) else None
                conn.settimeout(None)
                return isinstance(token, str) and hmac.compare_digest(token.encode(), expected)
    except (OSError, ValueError, msgpack.UnpackException):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """``graph-dap worker [--listen HOST:PORT --token TOKEN]``; without --listen, serve stdio."""
    parser = argparse.ArgumentParser(prog="graph-dap worker", description="Run a graph-dap runtime worker.")
    parser.add_argument("--listen", metavar="HOST:PORT", help="serve adapters over TCP (default host 127.0.0.1)")
    parser.add_argument("--token", help="secret that adapters must present (or set GRAPH_DAP_WORKER_TOKEN)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not args.listen:
        return _serve_stdio()
    token = args.token or os.environ.get("GRAPH_DAP_WORKER_TOKEN")
    if not token:
        print("graph-dap worker: --listen needs --token (or GRAPH_DAP_WORKER_TOKEN)", file=sys.stderr)
        return 2
    try:
        host, port = parse_address(args.listen)
    except GraphDapError as e:
        print(f"graph-dap worker: {e}", file=sys.stderr)
        return 2

    def ready(bound: int) -> None:
        print(f"graph-dap worker listening on {host}:{bound}", flush=True)

    try:
        serve_tcp(host, port, token, ready)
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        print(f"graph-dap worker: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
