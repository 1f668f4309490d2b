"""The wrapper around ``onnxruntime.InferenceSession``: every session is known by its model, every run counted.

:func:`install` patches the class itself (so every way of reaching it sees the wrapper):

- ``__init__`` tells the mode's :class:`Handler` which model the session runs (:meth:`Handler.loaded`);
- ``run`` and ``run_with_ort_values`` count the call (per model, from 1). While nothing
  applies (the handler is not ``engaged``), the call goes to onnxruntime as it is; an
  error in a node is handed to :meth:`Handler.failed` when the handler asks for errors.
  Otherwise the handler decides (:meth:`Handler.run`): onnxruntime as it is, the fast
  watch, or graph-dap's debugger.
- ``run_with_iobinding`` runs untouched: an IOBinding's inputs stay on their device and
  cannot be read back through onnxruntime's API, so such runs are never debugged (the
  console says so once). ``run_async`` is not wrapped either.
"""

from __future__ import annotations

import enum
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from graph_dap.host.identity import ModelIdentity, identify
from graph_dap.host.protocol import PyFrame

_RUN: Callable[..., Any] | None = None  # onnxruntime's own methods, once installed
_RUN_ORT_VALUES: Callable[..., Any] | None = None
_RUN_IOBINDING: Callable[..., Any] | None = None
_INIT: Callable[..., Any] | None = None
_counters: dict[str, Iterator[int]] = {}
_counters_lock = threading.Lock()
_ORT_FAILURES: tuple[type[BaseException], ...] = (RuntimeError,)
_HOST_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Handler:
    """What a mode does with the program's sessions and runs (see :mod:`.debugged`, :mod:`.script`, :mod:`.capture`)."""

    #: Some run may need graph-dap: every run goes through :meth:`run` (else straight to onnxruntime).
    engaged: bool = False
    #: A run that fails in a node is handed to :meth:`failed` (else onnxruntime's error goes to the program).
    on_error: bool = False

    def loaded(self, session: Any, model: ModelIdentity | None) -> None:
        """A session was created for ``model`` (None: made without a path or bytes)."""

    def run(self, call: Call) -> Any:
        """A run while engaged: return what ``run`` returns to the program."""
        return call.original()

    def failed(self, call: Call, error: BaseException) -> Any:
        """A run that onnxruntime failed in a node (only with ``on_error``)."""
        raise error

    def note(self, text: str) -> None:
        """A line for the user (the debug console, or stderr)."""
        print(f"graph-dap: {text}", file=sys.stderr, flush=True)


_HANDLER = Handler()


@dataclass(slots=True)
class Bound:
    """What graph-dap keeps on a session: its model, the counter of its model's calls, the mode's own state."""

    model: ModelIdentity | None
    calls: Iterator[int]
    state: dict[str, Any] = field(default_factory=dict)


class CallKind(enum.StrEnum):
    """Which of onnxruntime's run methods the program called."""

    RUN = "run"  # InferenceSession.run
    ORT_VALUES = "ort_values"  # InferenceSession.run_with_ort_values


@dataclass(slots=True)
class Call:
    """One ``run`` or ``run_with_ort_values`` call of the program (``kind``)."""

    session: Any
    bound: Bound
    number: int
    output_names: Any
    feeds: Any
    run_options: Any
    kind: CallKind
    caller: FrameType | None

    @property
    def model(self) -> ModelIdentity | None:
        return self.bound.model

    def original(self) -> Any:
        """The call as the program made it, in onnxruntime."""
        method = _RUN if self.kind is CallKind.RUN else _RUN_ORT_VALUES
        assert method is not None
        return method(self.session, self.output_names, self.feeds, self.run_options)

    @property
    def names(self) -> list[str]:
        """The outputs asked for, in order (all of the model's when none were named)."""
        if self.output_names:
            return list(self.output_names)
        return [o.name for o in self.session.get_outputs()]

    def stack(self, limit: int = 64) -> tuple[PyFrame, ...]:
        """The calling thread's Python frames from the caller outwards, innermost first, without graph-dap's and runpy's."""
        out: list[PyFrame] = []
        frame = self.caller
        while frame is not None and len(out) < limit:
            path = frame.f_code.co_filename
            if not (path.startswith(_HOST_DIR) or os.path.basename(path) == "runpy.py" or path.startswith("<frozen runpy")):
                out.append(PyFrame(path, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        return tuple(out)

    def numpy_feeds(self) -> dict[str, Any]:
        """The inputs as numpy arrays (OrtValues are copied to the host)."""
        import numpy as np

        out: dict[str, Any] = {}
        for name, value in dict(self.feeds).items():
            numpy = getattr(value, "numpy", None)
            out[name] = numpy() if callable(numpy) and not isinstance(value, np.ndarray) else np.asarray(value)
        return out

    def results(self, outputs: dict[str, Any]) -> list[Any]:
        """What the call returns, from ``outputs`` by name: arrays for ``run``, OrtValues for ``run_with_ort_values``."""
        values = [outputs[n] for n in self.names]
        if self.kind is CallKind.RUN:
            return values
        import onnxruntime as ort

        return [ort.OrtValue.ortvalue_from_numpy(v) for v in values]


def is_node_failure(error: BaseException) -> bool:
    """Whether onnxruntime failed while running a node (not on bad feeds or names, which graph-dap cannot help with)."""
    text = str(error)
    return "while running" in text and " node" in text


def _counter(model: ModelIdentity | None) -> Iterator[int]:
    key = model.key if model is not None else ""
    with _counters_lock:
        found = _counters.get(key)
        if found is None:
            found = _counters[key] = itertools.count(1)
        return found


def _bind(session: Any) -> Bound:
    """The session's :class:`Bound`, made on first use for one that ``__init__`` did not see."""
    bound = session.__dict__.get("_graph_dap")
    if bound is None:
        model = identify(session)
        bound = session.__dict__["_graph_dap"] = Bound(model, _counter(model))
    return bound


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    assert _INIT is not None
    _INIT(self, *args, **kwargs)
    bound = _bind(self)
    try:
        _HANDLER.loaded(self, bound.model)
    except Exception as error:  # noqa: BLE001 - graph-dap must never break the program's session
        _HANDLER.note(f"cannot follow this session's model: {error}")


def _run(self: Any, output_names: Any, input_feed: Any, run_options: Any = None) -> Any:
    bound = self.__dict__.get("_graph_dap") or _bind(self)
    number = next(bound.calls)
    handler = _HANDLER
    if handler.engaged:
        return handler.run(Call(self, bound, number, output_names, input_feed, run_options, CallKind.RUN, sys._getframe(1)))
    assert _RUN is not None
    try:
        return _RUN(self, output_names, input_feed, run_options)
    except _ORT_FAILURES as error:
        if not handler.on_error or not is_node_failure(error):
            raise
        call = Call(self, bound, number, output_names, input_feed, run_options, CallKind.RUN, sys._getframe(1))
        return handler.failed(call, error)


def _run_with_ort_values(self: Any, output_names: Any, input_dict_ort_values: Any, run_options: Any = None) -> Any:
    bound = self.__dict__.get("_graph_dap") or _bind(self)
    number = next(bound.calls)
    handler = _HANDLER
    call = Call(self, bound, number, output_names, input_dict_ort_values, run_options, CallKind.ORT_VALUES, sys._getframe(1))
    if handler.engaged:
        return handler.run(call)
    try:
        return call.original()
    except _ORT_FAILURES as error:
        if not handler.on_error or not is_node_failure(error):
            raise
        return handler.failed(call, error)


_iobinding_noted = False


def _run_with_iobinding(self: Any, iobinding: Any, run_options: Any = None) -> Any:
    global _iobinding_noted
    if _HANDLER.engaged and not _iobinding_noted:
        _iobinding_noted = True
        _HANDLER.note("IOBinding runs (run_with_iobinding) are not debugged: their inputs stay on the device; run and run_with_ort_values are")
    assert _RUN_IOBINDING is not None
    return _RUN_IOBINDING(self, iobinding, run_options)


def install(handler: Handler) -> bool:
    """Wrap ``onnxruntime.InferenceSession`` for ``handler`` (once per process); False when onnxruntime is missing."""
    global _HANDLER, _RUN, _RUN_ORT_VALUES, _RUN_IOBINDING, _INIT, _ORT_FAILURES
    _HANDLER = handler
    if _RUN is not None:
        return True
    try:
        import onnxruntime as ort
        from onnxruntime.capi import onnxruntime_pybind11_state as state
    except ImportError:
        return False
    _ORT_FAILURES = (RuntimeError,) + tuple(v for v in vars(state).values() if isinstance(v, type) and issubclass(v, Exception))
    cls = ort.InferenceSession
    _INIT, _RUN, _RUN_ORT_VALUES, _RUN_IOBINDING = cls.__init__, cls.run, cls.run_with_ort_values, cls.run_with_iobinding
    cls.__init__ = _init  # type: ignore[method-assign]
    cls.run = _run  # type: ignore[method-assign]
    cls.run_with_ort_values = _run_with_ort_values  # type: ignore[method-assign]
    cls.run_with_iobinding = _run_with_iobinding  # type: ignore[method-assign]
    return True


class _WhenImported:
    """A ``sys.meta_path`` finder that installs the wrapper right after the program imports onnxruntime."""

    def __init__(self, chosen: Handler) -> None:
        self.handler = chosen

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "onnxruntime":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        chosen = self.handler

        def exec_then_install(module: Any) -> None:
            exec_module(module)
            install(chosen)

        loader.exec_module = exec_then_install  # type: ignore[method-assign]
        return spec


def install_when_imported(chosen: Handler) -> None:
    """Install the wrapper for ``chosen`` now if onnxruntime is imported already, else as soon as it is."""
    global _HANDLER
    _HANDLER = chosen
    if "onnxruntime" in sys.modules:
        install(chosen)
    else:
        sys.meta_path.insert(0, _WhenImported(chosen))


def handler() -> Handler:
    """The handler installed (a plain :class:`Handler` before :func:`install`)."""
    return _HANDLER


def internal_session(model: bytes, options: Any, providers: Any) -> Any:
    """An ``InferenceSession`` of graph-dap's own (a watched copy of a model): the program's handler never sees it."""
    import onnxruntime as ort

    assert _INIT is not None
    session = ort.InferenceSession.__new__(ort.InferenceSession)
    _INIT(session, model, options, providers)
    return session


def run_internal(session: Any, output_names: Any, feeds: Any, run_options: Any = None, ort_values: bool = False) -> Any:
    """Run a session with onnxruntime's own method, not the wrapper."""
    method = _RUN_ORT_VALUES if ort_values else _RUN
    assert method is not None
    return method(session, output_names, feeds, run_options)
