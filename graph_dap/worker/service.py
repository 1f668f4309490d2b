"""The worker's service: the calls of :mod:`graph_dap.worker.protocol` on one :class:`DebugSession`.

:class:`WorkerService` loads a model (and its reference, for a comparison in lockstep),
moves the run through its one :class:`~graph_dap.worker.drivers.Driver` (each run command
is a row of :data:`COMMANDS`) and sets breakpoints; the calls that look at values are
those of the :class:`~graph_dap.worker.values.ValueCalls` it owns. Each ``rpc_<method>``
takes the call's arguments dataclass and returns its result dataclass. Calls run one at a
time on the main thread; ``pause`` comes from the reading thread (see
:mod:`graph_dap.worker.server`) while a run goes on, and lands between two nodes.
"""

from __future__ import annotations

import errno
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_dap import errors
from graph_dap.errors import (
    DumpError,
    GraphDapError,
    InputError,
    ModelError,
    NotLoadedError,
    ProfileError,
    ProtocolError,
    ValueNotFoundError,
)
from graph_dap.files import path_problem, write_text_atomic
from graph_dap.kinds import StopReason
from graph_dap.runtime.breakpoints import BreakpointSpec
from graph_dap.runtime.listing import render_listing
from graph_dap.runtime.session import DebugSession, Stop
from graph_dap.runtime.tools.repeat import repeat_runs, repeat_text
from graph_dap.worker import protocol as p
from graph_dap.worker import wire
from graph_dap.worker.drivers import Driver, LockstepDriver, SessionDriver
from graph_dap.worker.values import ValueCalls

if TYPE_CHECKING:
    from graph_dap.runtime.graph import Graph
    from graph_dap.runtime.tools.quant.forms import QuantValues

_PROGRESS_INTERVAL = 0.25  # seconds between progress events during a run
IDLE_S = 0.2  # a stop this long without a request: the client is looking, prepare the next continue (see idle)

Send = Callable[[dict[str, Any]], None]
RunCommand = p.RunCommand

#: How each run command moves the driver (``to_end`` is the service's own: :meth:`WorkerService._to_end`).
COMMANDS: dict[RunCommand, Callable[[Driver, p.RunArgs], Stop]] = {
    RunCommand.START: lambda d, a: d.start(),
    RunCommand.RESUME: lambda d, a: d.resume(),
    RunCommand.CONTINUE: lambda d, a: d.continue_(),
    RunCommand.STEP: lambda d, a: d.step(),
    RunCommand.STEP_IN: lambda d, a: d.step_in(),
    RunCommand.STEP_OUT: lambda d, a: d.step_out(),
    RunCommand.STEP_BACK: lambda d, a: d.step_back(),
    RunCommand.REVERSE_CONTINUE: lambda d, a: d.reverse_continue(),
    RunCommand.RESTART: lambda d, a: d.restart(),
    RunCommand.GOTO: lambda d, a: d.goto(a.target or ""),
    RunCommand.RUN_TO: lambda d, a: d.run_to(a.target or ""),
}


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


def _method(message: dict[str, Any]) -> p.Method[Any, Any] | None:
    name = message.get("method")
    return p.METHODS.get(name) if isinstance(name, str) else None


def error_kind(error: GraphDapError) -> str:
    """The name of the nearest class of :mod:`graph_dap.errors` that ``error`` is: what the adapter raises again."""
    return next(c.__name__ for c in type(error).__mro__ if c.__module__ == errors.__name__)


class WorkerService:
    """Answers the protocol's calls (``rpc_<method>``, its own and its :attr:`values`') on one DebugSession."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.session: DebugSession | None = None
        self.driver: Driver | None = None  # what moves the run: the session, or its comparison with a reference
        self.values = ValueCalls(lambda: self.s, lambda event: self._send(p.event_message(event)), self._quant_values)
        self._quant: tuple[QuantValues | None] | None = None  # the loaded model's quantized values, once looked for
        self.calls: dict[str, Callable[[Any], Any]] = {
            name[len("rpc_") :]: getattr(owner, name) for owner in (self, self.values) for name in dir(owner) if name.startswith("rpc_")
        }
        self._answered = threading.Lock()  # guards the run ids and the pause between them
        self._last_run = 0  # id of the last run request received (by the reading thread)
        self._done_run = 0  # id of the last run request answered
        self._paused = threading.Event()  # a pause for the run in progress (or queued), until it answers
        self._last_progress = 0.0
        self._prepare = False  # a stop whose next continue is not prepared yet (see idle)
        self._repeat: p.Repeat | None = None  # the timings of the last run's iterations

    # -- plumbing --------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request to one response; every failure becomes an ``error`` reply with the error's kind."""
        request_id = message.get("id")
        name = message.get("method")
        method = _method(message)
        try:
            if method is None:
                raise ProtocolError(f"unknown worker method {name!r}")
            args = p.decode(method.args, message.get("args") or {}, f"the arguments of {method.name}")
            try:
                result = self.calls[method.name](args)
            finally:
                if method.moves_run and isinstance(request_id, int):
                    self._answer(request_id)
            return p.result_message(request_id, method, result)
        except GraphDapError as e:
            return p.error_message(request_id, error_kind(e), str(e))
        except MemoryError:
            return p.error_message(request_id, errors.WorkerMemoryError.__name__, "the worker ran out of memory")
        except Exception as e:  # noqa: BLE001 - a bug must not take the worker down; its traceback goes to stderr
            traceback.print_exc(file=sys.stderr)
            return p.error_message(request_id, errors.InternalError.__name__, f"internal error in the worker: {e!r}")

    def received(self, message: dict[str, Any]) -> None:
        """From the reading thread: note a run request as it arrives, before it is queued."""
        method = _method(message)
        if method is not None and method.moves_run and isinstance(message.get("id"), int):
            with self._answered:
                self._last_run = max(self._last_run, message["id"])

    def rpc_pause(self, _: p.NoArgs) -> p.Paused:
        """From the reading thread, at once: see :meth:`pause`."""
        return p.Paused(self.pause())

    def pause(self) -> bool:
        """Stop the run in progress (or queued) before its next node; False when there is none.

        The session keeps a pause until a run takes it or returns its stop, so a pause that comes just
        before a queued run starts still stops that run; one that comes as a run answers is forgotten
        with the answer (:meth:`_answer`), not left for the next run."""
        with self._answered:
            session = self.session
            if self._last_run <= self._done_run or session is None:
                return False
            self._paused.set()
            session.pause()
        return True

    def _answer(self, run: int) -> None:
        """Run request ``run`` has answered: a pause not taken was for it."""
        with self._answered:
            self._done_run = max(self._done_run, run)
            if self._done_run >= self._last_run:
                self._paused.clear()
                if self.session is not None:
                    self.session.interrupt.clear()

    def close(self) -> None:
        """Let go of what the session holds outside memory (a reference's files and folders)."""
        driver, self.driver = self.driver, None
        if driver is not None:
            try:
                driver.close()
            except (OSError, GraphDapError):  # closing must not fail the shutdown
                traceback.print_exc(file=sys.stderr)

    def _on_progress(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last_progress >= _PROGRESS_INTERVAL:
            self._last_progress = now
            self._send(p.event_message(p.ProgressEvent(done, total)))

    def _on_log(self, line: str) -> None:
        self._send(p.event_message(p.LogEvent(line)))

    @property
    def s(self) -> DebugSession:
        if self.session is None:
            raise NotLoadedError("no model is loaded")
        return self.session

    @property
    def d(self) -> Driver:
        if self.driver is None:
            raise NotLoadedError("no model is loaded")
        return self.driver

    # -- loading ---------------------------------------------------------------------

    def rpc_load(self, a: p.LoadArgs) -> p.GraphInfo:
        """Load a model (and open its reference); ``write_listing``: write ``<model>.onnxtxt`` beside it."""
        base_dir = a.base_dir
        path = Path(a.model).expanduser()
        if base_dir and not path.is_absolute():
            path = Path(base_dir) / path
        problem = path_problem(path)
        if problem is not None:
            raise ModelError(f"model not found: {path}" if problem == "not found" else f"cannot open the model {str(path)[:300]}: {problem}")
        from graph_dap.runtime.loading import load_graph

        graph = load_graph(path)
        inputs: Any = a.inputs
        if isinstance(inputs, dict):
            inputs = {k: self._input_array(graph, k, v, base_dir) for k, v in inputs.items()}
        elif isinstance(inputs, str) and base_dir and not Path(inputs).is_absolute():
            inputs = str(Path(base_dir) / inputs)
        spec = dump = None
        notes: list[str] = []
        if a.reference is not None:
            from graph_dap.runtime.tools.lockstep import ReferenceSpec

            tol = a.tolerance or p.Tolerance()
            spec = ReferenceSpec.make(a.reference, tol.atol, tol.rtol, list(tol.fail_if), base_dir)
            dump, inputs, notes = spec.open_dump(graph, inputs)
        try:
            session = DebugSession(
                graph,
                inputs,
                dims=dict(a.dims),
                providers=list(a.providers) or None,
                skip_constants=a.skip_constants,
                memory_budget_mb=a.memory_budget_mb,
                opt_level=a.opt_level,
                fault_stops=a.fault_stops,
                on_log=self._on_log,
                on_progress=self._on_progress,
            )
        except BaseException:
            if dump is not None:
                dump.close()
            raise
        driver: Driver = SessionDriver(session)
        if spec is not None:
            from graph_dap.runtime.tools.lockstep import Lockstep

            driver = LockstepDriver(session, Lockstep(session, spec, dump, notes), self._paused.is_set)  # closes its source if it fails
        if a.call_number is not None:
            session.breakpoint_table.names["call"] = np.int64(a.call_number)
        self.close()  # the previous model's reference
        self.session, self.driver = session, driver
        self._quant = None  # (made again for this model when a client looks)
        self.values.forget_temps()
        listing = render_listing(graph)
        listing_path = _write_listing(path, listing.text) if a.write_listing else None
        return wire.graph_info(graph, str(path), listing, listing_path, a.skip_constants)

    def _quant_values(self) -> QuantValues | None:
        """The loaded model's quantized values (and, with a float model as the reference, their float tensors); None for
        a float model. Made once per model, when a client first looks."""
        session = self.session
        if session is None:
            return None
        if self._quant is None:
            from graph_dap.runtime.tools.quant.forms import quant_values

            lockstep = self.driver.lockstep if isinstance(self.driver, LockstepDriver) else None
            comparison = lockstep.quant if lockstep is not None else None
            self._quant = (quant_values(session.graph, comparison, list(session.runner.providers)),)
        return self._quant[0]

    @staticmethod
    def _input_array(graph: Graph, name: str, value: Any, base_dir: str | None) -> Any:
        if isinstance(value, str):
            path = Path(value)
            if base_dir and not path.is_absolute():
                path = Path(base_dir) / path
            try:
                return np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise InputError(f"input '{name}': cannot read {path}: {e}") from None
        dtype = graph.value_info(name).dtype if graph.has_value(name) else None
        try:
            return np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise InputError(f"input '{name}': {e}") from None

    # -- running ---------------------------------------------------------------------

    def _stop(self, stop: Stop) -> p.StopInfo:
        """A stop for the wire; at the end, with the timings of the iterations and the comparison's summary."""
        self.values.forget_temps()
        if stop.reason not in (StopReason.END, StopReason.FAILED):
            self._prepare = True  # once the client has looked (see idle)
            return wire.stop_info(self.s, stop)
        return wire.stop_info(self.s, stop, self._repeat, self.d.summary())

    def idle(self) -> None:
        """No request came for a while (:data:`IDLE_S`) after a stop: build, in the background, what the next continue
        from it runs first, so that pressing continue only runs it. Not at once at the stop: a client that steps asks for
        the next step within milliseconds, and planning and optimizing the rest of the model at every step would slow
        each one down (60-200 ms a step on the PaddleOCR recognizer against 1 ms for the step itself)."""
        if self._prepare and self.session is not None:
            self._prepare = False
            self.session.prepare_next()

    def rpc_run(self, a: p.RunArgs) -> p.StopInfo:
        """Move the run; ``to_end`` (noDebug) runs the model ``iterations`` times."""
        driver = self.d
        self._repeat = None
        self._prepare = False
        self._last_progress = time.monotonic()  # (progress only for a run that lasts: none for a step)
        command = a.command
        if command in (RunCommand.GOTO, RunCommand.RUN_TO) and a.target is None:
            raise ProtocolError(f"the run command {command.value} needs a target")
        if command is RunCommand.TO_END:  # noDebug: no breakpoints, no filters
            self.s.set_breakpoints([])
            driver.set_filters([])
            return self._stop(self._to_end(driver, max(1, a.iterations)))
        return self._stop(COMMANDS[command](driver, a))

    def _to_end(self, driver: Driver, iterations: int) -> Stop:
        """Run to the end ``iterations`` times (restarting between), like ``graph-dap run --repeat N``."""

        def run(i: int) -> Stop:
            if i:
                restarted = driver.restart()
                if restarted.reason is not StopReason.ENTRY:
                    return restarted
            return driver.run_whole()

        stop, repeats = repeat_runs(iterations, run, self.s.outputs)
        if iterations > 1:
            report = repeats.to_dict(stop.completed)
            self._repeat = p.Repeat(
                report["requested"],
                report["runs"],
                tuple(report["times_ms"]),
                report["median_ms"],
                report["outputs_identical"],
                repeat_text(report),
            )
        return stop

    def rpc_where(self, _: p.NoArgs) -> p.StopInfo:
        """The current position, as a pause stop (after a run failed)."""
        return self._stop(Stop(StopReason.PAUSE, self.s.current, "stopped"))

    # -- breakpoints -----------------------------------------------------------------

    def rpc_set_breakpoints(self, a: p.BreakpointsArgs) -> tuple[p.BreakpointResult, ...]:
        bps = self.s.set_breakpoints([BreakpointSpec(b.spec, b.condition, b.hit_condition, b.log_message) for b in a.specs])
        return tuple(p.BreakpointResult(b.id, b.verified, b.message, tuple(b.node_ids)) for b in bps)

    def rpc_set_break_on(self, a: p.BreakOnArgs) -> None:
        """The session's filters (nan, inf, error), and ``mismatch``: stop at a divergence from the reference."""
        self.d.set_filters(a.filters)
        self.s.inf_exclude = a.inf_exclude
        self.s.nan_exclude = a.nan_exclude

    def rpc_data_targets(self, a: p.NameArgs) -> p.DataTargets:
        """Nodes to stop before for a data breakpoint: after the producer ran (write), before a reader (read)."""
        name = a.name
        s = self.s
        g = s.graph
        producers = g.producers(name)  # inside If/Loop/Scan bodies too: sibling branches may reuse a name
        if not producers and not any(scope.has_value(name) for scope in g.scopes.values()):
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        write: list[str] = []
        why: list[str] = []
        for producer in producers:
            seq = s.sequence_of(producer)
            positions = {n.id: i for i, n in enumerate(seq)}
            if producer.id not in positions:
                why.append(f"'{name}' is computed once at load by constant node {producer.label}")
            elif positions[producer.id] + 1 >= len(seq):
                where = "the run ends there" if not producer.path else "its body ends there"
                why.append(f"'{name}' is written by the last node of its graph, {producer.label}: {where}")
            else:
                write.append(seq[positions[producer.id] + 1].id)
        if not producers:
            why.append(f"'{name}' is a graph input or initializer: no node writes it")
        write_message = "" if write else "; ".join(why)
        read = tuple(n.id for n in g.all_nodes() if name in n.all_inputs and n in s.sequence_of(n))
        read_message = "" if read else f"no node that runs reads '{name}'"
        return p.DataTargets(tuple(write), write_message, read, read_message)

    def rpc_compare_table(self, _: p.NoArgs) -> dict[str, Any]:
        """The comparison with the reference so far, as ``graph-dap compare --json`` prints it."""
        return self.d.compare_table()

    def rpc_profile(self, a: p.ProfileArgs) -> dict[str, Any]:
        """The model run whole ``repeat`` times under onnxruntime's profiler, as ``graph-dap profile --json``."""
        from graph_dap.runtime.tools.profile import profile_model

        if not 1 <= a.repeat <= p.MAX_PROFILE_REPEAT:
            raise ProfileError(f"a profile takes 1 to {p.MAX_PROFILE_REPEAT} runs, got {a.repeat}")
        s = self.s
        return profile_model(s.graph, s.inputs, repeat=a.repeat, providers=s.runner.providers).to_dict()

    def rpc_source(self, a: p.NameArgs) -> p.NodeSourceInfo:
        """Where a node came from in the model's Python source: its frames, or its module scopes."""
        graph = self.s.graph
        return wire.node_source(graph, graph.node(a.name))

    def rpc_save_outputs(self, a: p.SaveOutputsArgs) -> p.SavedOutputs:
        """The graph outputs computed so far, written to ``a.path`` (those that are not tensors are left out)."""
        from graph_dap.files import save_npz_atomic

        if not a.path:
            raise DumpError("no path to write the outputs to: give a file name")
        outputs = self.s.outputs()
        tensors = {k: v for k, v in outputs.items() if isinstance(v, np.ndarray)}
        try:
            save_npz_atomic(a.path, tensors)
        except OSError as error:  # a folder, a missing folder, a full disk: say so, as a dump does
            full = " (the disk is full)" if error.errno == errno.ENOSPC else ""
            raise DumpError(f"cannot write the outputs to {a.path}: {error.strerror or error}{full}") from None
        missing = tuple(n for n in self.s.graph.output_names if n not in tensors)
        return p.SavedOutputs(tuple(tensors), missing)

    def rpc_shutdown(self, _: p.NoArgs) -> None:
        self.close()
