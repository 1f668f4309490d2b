"""``graph-dap run-script``: run a program, and at the first ``run`` call that meets a break, report it and exit 1.

:func:`run_script` starts ``python -m graph_dap.host --script OPTIONS -- program.py ARGS`` and returns its
exit status: 1 after a break, 0 when the program ends without one, the program's own status otherwise.
In the program's process, :class:`ScriptHandler` checks each run: the fast watch (``nan``/``inf``), the
``--break`` specs (resolved against each model the program loads: a run of a model where one lands is a
candidate), onnxruntime failing in a node (``error``). A candidate call is run by ``graph-dap run`` on its
model and feeds (the same report, text or ``--json``); when that stops, the report, the call's number and
the caller's Python stack are printed and the program ends with status 1. When it completes (a flagged sum
that was an overflow), the program goes on.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graph_dap.host import hook
from graph_dap.host.identity import ModelIdentity, providers_of
from graph_dap.host.watch import Watcher
from graph_dap.kinds import FAULT_FILTERS, VALUE_FILTERS, BreakFilter, StopReason
from graph_dap.paths import child_environment

EXIT_BREAK = 1


@dataclass(frozen=True, slots=True)
class ScriptOptions:
    """What ``run-script`` breaks on, and how it reports."""

    filters: tuple[str, ...] = (BreakFilter.ERROR.value,)
    breaks: tuple[str, ...] = ()
    inf_exclude: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()  # override of each session's own
    json: bool = False
    nan_exclude: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ScriptOptions:
        data = json.loads(text)
        return cls(
            tuple(data.get("filters", ())),
            tuple(data.get("breaks", ())),
            tuple(data.get("inf_exclude", ())),
            tuple(data.get("providers", ())),
            bool(data.get("json", False)),
            tuple(data.get("nan_exclude", ())),
        )


def run_script(program: Sequence[str], options: ScriptOptions, python: str = sys.executable) -> int:
    """Run ``program`` (``script.py ARGS`` or ``-m module ARGS``) under the script handler; its exit status."""
    env = child_environment()
    command = [python, "-m", "graph_dap.host", "--script", options.to_json(), "--", *program]
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130


@dataclass(slots=True)
class _Model:
    """What the handler knows of one model: the specs that land in it, and a file ``graph-dap run`` can load."""

    breaks: list[str] = field(default_factory=list)
    file: str | None = None


class ScriptHandler(hook.Handler):
    """In the program's process: find the first call that meets a break, report it, end the program."""

    def __init__(self, options: ScriptOptions) -> None:
        self.options = options
        self.engaged = bool(options.breaks) or bool(set(VALUE_FILTERS) & set(options.filters))
        self.on_error = BreakFilter.ERROR in options.filters
        self._models: dict[str, _Model] = {}
        self._folder = tempfile.mkdtemp(prefix="graph-dap-run-script-")
        atexit.register(shutil.rmtree, self._folder, True)

    @classmethod
    def from_json(cls, text: str) -> ScriptHandler:
        return cls(ScriptOptions.from_json(text))

    def loaded(self, session: Any, model: ModelIdentity | None) -> None:
        if model is None or model.key in self._models:
            return
        file = model.file(self._folder)
        known = self._models[model.key] = _Model(file=file)
        if self.options.breaks:
            known.breaks = _landing(file, self.options.breaks)

    def run(self, call: hook.Call) -> Any:
        model = call.model
        if model is None:
            return call.original()
        known = self._models.get(model.key) or _Model()
        if known.breaks:
            self._check(call, known, StopReason.BREAKPOINT)
            return call.original()
        watching = [f for f in VALUE_FILTERS if f in self.options.filters]
        if watching:
            key = "script-watcher"
            if key not in call.bound.state:
                try:
                    call.bound.state[key] = Watcher(call.session, model, watching, self.options.inf_exclude, self.options.nan_exclude)
                except Exception as error:  # noqa: BLE001 - a model the watch cannot rewrite runs unwatched
                    call.bound.state[key] = None
                    self.note(f"{model.name}: runs are not watched: {error}")
            watcher: Watcher | None = call.bound.state[key]
            if watcher is not None:
                try:
                    results, flagged = watcher.run(call)
                except hook._ORT_FAILURES as error:
                    return self.failed(call, error)
                if flagged:
                    self._check(call, known, "/".join(watching))
                return results
        try:
            return call.original()
        except hook._ORT_FAILURES as error:
            if not (self.on_error and hook.is_node_failure(error)):
                raise
            return self.failed(call, error)

    def failed(self, call: hook.Call, error: BaseException) -> Any:
        model = call.model
        if model is not None:
            self._check(call, self._models.get(model.key) or _Model(), StopReason.ERROR)
        raise error

    def _check(self, call: hook.Call, known: _Model, why: str) -> None:
        """Run the call with ``graph-dap run``; when it stops, report and end the program (status 1)."""
        from graph_dap.files import save_npz_atomic

        assert call.model is not None
        file = known.file or call.model.file(self._folder)
        feeds = os.path.join(self._folder, f"call-{call.number}.npz")
        save_npz_atomic(feeds, call.numpy_feeds())
        filters = ",".join(f for f in self.options.filters if f in FAULT_FILTERS)
        command = [sys.executable, "-m", "graph_dap", "run", file, "--inputs", feeds, "--break-on", filters]
        for spec in known.breaks:
            command += ["--break", spec]
        for pattern in self.options.inf_exclude:
            command += ["--inf-exclude", pattern]
        for pattern in self.options.nan_exclude:
            command += ["--nan-exclude", pattern]
        for provider in self.options.providers or providers_of(call.session):
            command += ["--provider", provider]
        if self.options.json:
            command.append("--json")
        env = child_environment()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode == 0:
            return  # the run completed: no break (a sum that overflowed, a breakpoint's condition...)
        if done.returncode != EXIT_BREAK:
            self.note(f"call {call.number} of {call.model.name} could not be checked: {done.stderr.strip() or done.stdout.strip()}")
            return
        self._report(call, done.stdout, why)

    def _report(self, call: hook.Call, report: str, why: str) -> None:
        assert call.model is not None
        stack = call.stack()
        if self.options.json:
            data = json.loads(report.strip().splitlines()[-1])
            data["call"] = call.number
            data["model"] = call.model.path
            data["python_stack"] = [{"path": f.path, "line": f.line, "function": f.function} for f in stack]
            text = json.dumps(data)
        else:
            lines = [report.rstrip("\n"), f"in call {call.number} of {call.model.name} ({why}), called from:"]
            lines += [f"  {f.path}:{f.line} in {f.function}" for f in stack]
            text = "\n".join(lines)
        sys.stderr.flush()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        shutil.rmtree(self._folder, ignore_errors=True)
        os._exit(EXIT_BREAK)  # now: the program's other threads do not get to run on


def _landing(file: str, specs: Sequence[str]) -> list[str]:
    """The specs that name a stoppable node of the model in ``file`` (resolved as the runtime does)."""
    from graph_dap.errors import GraphDapError
    from graph_dap.runtime.breakpoints import resolve_spec
    from graph_dap.runtime.frames import run_sequence
    from graph_dap.runtime.loading import load_graph

    try:
        graph = load_graph(file)
    except GraphDapError:
        return []
    stoppable = {n.id for scope in graph.scopes.values() for n in run_sequence(scope, True)}
    out = []
    for spec in specs:
        try:
            nodes, _ = resolve_spec(graph, spec, stoppable)
        except GraphDapError:
            continue
        if nodes:
            out.append(spec)
    return out
