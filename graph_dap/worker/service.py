"""The worker's service: calls by name on one :class:`DebugSession`, answered on the main thread.

:class:`WorkerService` loads a model (and its reference, for a comparison in lockstep),
moves the run and sets breakpoints; the calls that look at values are its mixin
:class:`~graph_dap.worker.values.ValueCalls`. ``pause`` comes from the reading
thread (see :mod:`graph_dap.worker.server`) while a run goes on, between two nodes.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_dap.errors import GraphDapError, ModelError
from graph_dap.files import write_text_atomic
from graph_dap.runtime.breakpoints import BreakpointSpec
from graph_dap.runtime.listing import render_listing
from graph_dap.runtime.session import DebugSession, Stop, StopReason
from graph_dap.runtime.tools.repeat import Repeats, repeat_text
from graph_dap.worker.values import ValueCalls
from graph_dap.worker.wire import graph_wire, stop_wire

if TYPE_CHECKING:
    from graph_dap.runtime.tools.lockstep import Divergence, Lockstep

_PROGRESS_INTERVAL = 0.25  # seconds between progress events during a run
_PAUSE_RETRY = 0.02  # seconds between repeated pause requests to a run that has not stopped
#: Methods that move the run: a pause is meant for the latest of them.
RUN_METHODS = frozenset({"run", "start"})

Send = Callable[[dict[str, Any]], None]


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


class WorkerService(ValueCalls):
    """Answers calls by name (``rpc_<method>``) on one DebugSession."""

    def __init__(self, send: Send) -> None:
        super().__init__()
        self._send = send
        self.session: DebugSession | None = None
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
                if method in RUN_METHODS:
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
        if message.get("method") in RUN_METHODS and isinstance(message.get("id"), int):
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
        from graph_dap.runtime.loading import load_graph

        graph = load_graph(path)
        if isinstance(inputs, dict):
            inputs = {k: self._input_array(graph, k, v, base_dir) for k, v in inputs.items()}
        elif isinstance(inputs, str) and base_dir and not Path(inputs).is_absolute():
            inputs = str(Path(base_dir) / inputs)
        spec = dump = None
        notes: list[str] = []
        if reference is not None:
            from graph_dap.runtime.tools.lockstep import ReferenceSpec

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
            from graph_dap.runtime.tools.lockstep import Lockstep

            lockstep = Lockstep(session, spec, dump, notes)  # closes its source if it fails
        self.close()  # the previous model's reference
        self.session, self.lockstep = session, lockstep
        self.forget_temps()
        self._mismatch = False
        listing = render_listing(graph)
        listing_path = _write_listing(path, listing.text) if write_listing else None
        return graph_wire(graph, str(path), listing, listing_path, skip_constants)

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

    # -- running ---------------------------------------------------------------------

    def _stop(self, stop: Stop | Divergence) -> dict[str, Any]:
        """A stop for the wire; at the end, with the timings of the iterations and the comparison's summary."""
        self.forget_temps()
        end: dict[str, Any] = {}
        if isinstance(stop, Stop) and stop.reason is StopReason.END:
            if self._repeat is not None:
                end["repeat"] = self._repeat
            if self.lockstep is not None:
                end["comparison"] = self.lockstep.summary()
        return stop_wire(self.s, stop, end)

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
        repeats = Repeats(iterations)
        stop: Stop | Divergence = Stop(StopReason.END, None)
        for i in range(iterations):
            started = time.perf_counter()
            if i:
                restarted = self._restart()
                if restarted.reason is not StopReason.ENTRY:
                    stop = restarted
                    break
            stop = self._continue()
            completed = _completed(stop)
            repeats.record((time.perf_counter() - started) * 1000.0, self.s.outputs() if completed else None)
            if not completed:
                break
        if iterations > 1:
            self._repeat = repeats.to_dict(_completed(stop))
            self._repeat["text"] = repeat_text(self._repeat)
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

    def rpc_compare_table(self) -> dict[str, Any]:
        """The comparison with the reference so far, as ``graph-dap compare --json`` prints it."""
        if self.lockstep is None:
            raise GraphDapError("there is no reference to compare with: give the launch argument 'reference'")
        return self.lockstep.to_dict()

    def rpc_profile(self, repeat: int = 3) -> dict[str, Any]:
        """The model run whole ``repeat`` times under onnxruntime's profiler, as ``graph-dap profile --json``."""
        from graph_dap.runtime.tools.profile import profile_model

        s = self.s
        return profile_model(s.graph, s.inputs, repeat=repeat, providers=s.runner.providers).to_dict()

    def rpc_shutdown(self) -> None:
        self.close()


def _completed(stop: Stop | Divergence) -> bool:
    """Whether a run reached the end of the graph (an error at the last node ends it too, but does not complete it)."""
    return isinstance(stop, Stop) and stop.reason is StopReason.END
