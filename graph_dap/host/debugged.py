"""The mixed-mode handler: the program's runs, debugged in the adapter's session when a graph breakpoint or filter applies.

Each session's model is announced when it is created (the adapter writes its listing and
resolves the graph breakpoints for it). A run is handed to the adapter when the config
says so: every run (``stopOnSessionRun``, a ``reference``), a run of a model with a
graph breakpoint, a run whose fast watch flags a NaN or Inf, a run that onnxruntime fails
in a node (the ``error`` filter). The adapter debugs it in a graph-dap runtime of its
own and answers with the outputs the graph reached (after any ``setVariable``), which
the call returns to the program. Meanwhile the calling thread waits; once the graph
stops, it waits stopped in the Python debugger, at the caller's line (:mod:`.suspend`).
Every other run goes to onnxruntime untouched.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from graph_dap.host import hook
from graph_dap.host import protocol as hp
from graph_dap.host.identity import ModelIdentity, opt_level_of, providers_of
from graph_dap.host.link import Link, Pending
from graph_dap.host.suspend import PythonDebugger
from graph_dap.host.watch import Watcher
from graph_dap.kinds import VALUE_FILTERS, BreakFilter, RunAction, StopReason

#: How long a session's creation waits for the adapter to take its model (listing, breakpoints).
MODEL_TIMEOUT = 120.0


class DebuggedHandler(hook.Handler):
    """The program's runs in a mixed debug session, through ``link`` to the adapter; files go to ``folder``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.config = hp.Config()
        self.link: Link | None = None
        self.debugger = PythonDebugger.find()
        self._debuggable: dict[str, bool] = {}
        self._files = itertools.count(1)

    def configure(self, config: hp.Config) -> None:
        """A config from the adapter: what applies to runs from now on."""
        self.config = config
        self.on_error = BreakFilter.ERROR in config.filters
        self.engaged = config.stop_every or config.every_run or bool(config.armed) or bool(set(VALUE_FILTERS) & set(config.filters))

    # -- sessions -----------------------------------------------------------------------------

    def loaded(self, session: Any, model: ModelIdentity | None) -> None:
        if model is None or self.link is None:
            return
        if model.key in self._debuggable:
            return
        announced = hp.ModelLoaded(model.key, model.file(self.folder), model.name, providers_of(session), opt_level_of(session))
        ack = self.link.call(hp.CallName.MODEL, announced, hp.ModelAck, MODEL_TIMEOUT)
        self._debuggable[model.key] = ack is not None and ack.debuggable

    # -- runs ---------------------------------------------------------------------------------

    def run(self, call: hook.Call) -> Any:
        model = call.model
        config = self.config
        if model is None or not self._debuggable.get(model.key, False):
            return call.original()
        if config.stop_every or config.every_run:
            return self._debug(call, "every")
        if model.key in config.armed:
            # a call its breakpoints cannot stop in (a decode step not asked for) comes back: watched as any other
            return self._debug(call, StopReason.BREAKPOINT, otherwise=functools.partial(self._unarmed, call))
        return self._unarmed(call)

    def _unarmed(self, call: hook.Call) -> Any:
        """A run no breakpoint stops in: watched by the filters nan/inf (debugged when flagged), else onnxruntime's."""
        config = self.config
        watching: list[str] = [f for f in VALUE_FILTERS if f in config.filters]
        if watching:
            watcher = self._watcher(call, watching, config.inf_exclude, config.nan_exclude)
            if watcher is not None:
                try:
                    results, flagged = watcher.run(call)
                except hook._ORT_FAILURES as error:
                    if self.on_error and hook.is_node_failure(error):
                        return self._debug(call, StopReason.ERROR, error)
                    raise
                return self._debug(call, "/".join(watching)) if flagged else results
        try:
            return call.original()
        except hook._ORT_FAILURES as error:
            if self.on_error and hook.is_node_failure(error):
                return self._debug(call, StopReason.ERROR, error)
            raise

    def failed(self, call: hook.Call, error: BaseException) -> Any:
        if call.model is None or not self._debuggable.get(call.model.key, False):
            raise error
        return self._debug(call, StopReason.ERROR, error)

    def _watcher(self, call: hook.Call, filters: list[str], inf_exclude: tuple[str, ...], nan_exclude: tuple[str, ...]) -> Watcher | None:
        """The session's watcher for these filters, built on first use (None when its model cannot be watched)."""
        key = f"watcher:{filters!r}:{inf_exclude!r}:{nan_exclude!r}"
        state = call.bound.state
        if key not in state:
            assert call.model is not None
            try:
                state[key] = Watcher(call.session, call.model, filters, inf_exclude, nan_exclude)
            except Exception as error:  # noqa: BLE001 - a model the watch cannot rewrite runs unwatched
                state[key] = None
                self.note(f"{call.model.name}: runs are not watched for {'/'.join(filters)}: {error}")
        watcher: Watcher | None = state[key]
        return watcher

    def _debug(self, call: hook.Call, why: str, error: BaseException | None = None, otherwise: Callable[[], Any] | None = None) -> Any:
        """Hand the call to the adapter, wait (stopped in the Python debugger once the graph stops), apply its result
        (``otherwise``: how the call runs when the adapter leaves it to the program; onnxruntime's own run if None)."""
        from graph_dap.files import save_npz_atomic

        assert call.model is not None and self.link is not None
        feeds = os.path.join(self.folder, f"feeds-{next(self._files)}.npz")
        save_npz_atomic(feeds, call.numpy_feeds())
        thread = threading.current_thread()
        dap_thread = self.debugger.dap_thread_id(thread) if self.debugger is not None else 0
        request = hp.RunCall(
            call.number,
            call.model.key,
            feeds,
            thread.name,
            dap_thread,
            call.stack(),
            why,
            str(error) if error is not None else "",
        )
        pending = self.link.start(hp.CallName.RUN, request, hp.RunResult)
        try:
            self._wait(pending, thread, call.caller)
        finally:
            _remove(feeds)
        result: hp.RunResult | None = pending.result
        if result is None or result.action is RunAction.PLAIN:
            if error is not None:
                raise error
            return otherwise() if otherwise is not None else call.original()
        if result.action is RunAction.RAISE:
            if error is not None:
                raise error
            return call.original()  # onnxruntime's own error (the graph failed in graph-dap's runtime)
        return self._outputs(call, result.outputs)

    def _wait(self, pending: Pending, thread: threading.Thread, frame: FrameType | None) -> None:
        """Wait for the result; when the adapter asks, wait stopped in the Python debugger (resumed by the result)."""
        debugger = self.debugger
        while not pending.done.is_set():
            pending.suspend_asked.wait()
            if pending.done.is_set() or debugger is None or frame is None:
                pending.done.wait()
                return
            with pending.lock:
                if pending.done.is_set():
                    return
                pending.suspend_asked.clear()
                debugger.mark(thread)
                pending.on_finish = functools.partial(debugger.resume, thread)
            try:
                debugger.wait(thread, frame)
            except Exception:  # noqa: BLE001 - pydevd's internals moved: the thread just waits
                traceback.print_exc(file=sys.stderr)
                self.debugger = debugger = None
            with pending.lock:
                pending.on_finish = None
                pending.suspend_asked.clear()  # a suspend asked for while it was stopped is met already

    def _outputs(self, call: hook.Call, path: str) -> Any:
        """The call's results from the adapter's ``.npz`` (outputs it could not hold come from onnxruntime)."""
        import numpy as np

        with np.load(path, allow_pickle=False) as archive:
            outputs = {name: archive[name] for name in archive.files}
        _remove(path)
        missing = [n for n in call.names if n not in outputs]
        if missing:
            plain = hook.run_internal(call.session, missing, call.numpy_feeds(), call.run_options)
            outputs.update(zip(missing, plain))
        return call.results(outputs)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
