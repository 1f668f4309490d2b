"""The fast NaN/Inf watch of a program's runs: its model with in-graph sums, in a session made like the program's.

A watched run is one onnxruntime call of the model with the sums of
:func:`~graph_dap.runtime.tools.watched.watched_model` as one more output; the program
gets that call's outputs. Only a run whose sums are flagged goes to graph-dap's
debugger. The watched session copies the program's session options that change how the
model runs (optimization level, threads, execution mode and order, arenas, determinism),
not those that write files (an optimized model, a profile), and uses its providers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_dap.host import hook
from graph_dap.host.identity import ModelIdentity
from graph_dap.kinds import BreakFilter

#: SessionOptions attributes a watched session takes from the program's session.
_COPIED = (
    "graph_optimization_level",
    "intra_op_num_threads",
    "inter_op_num_threads",
    "execution_mode",
    "execution_order",
    "enable_cpu_mem_arena",
    "enable_mem_pattern",
    "enable_mem_reuse",
    "use_deterministic_compute",
    "use_per_session_threads",
    "log_severity_level",
)


def options_like(session: Any) -> Any:
    """New SessionOptions with the program's session's settings that change how the model runs."""
    import onnxruntime as ort

    theirs = session.get_session_options()
    ours = ort.SessionOptions()
    for name in _COPIED:
        try:
            setattr(ours, name, getattr(theirs, name))
        except (AttributeError, TypeError, ValueError):
            pass
    return ours


def providers_like(session: Any) -> list[Any]:
    """The program's session's providers, with their options."""
    providers = list(session.get_providers())
    try:
        options = session.get_provider_options()
    except AttributeError:
        return providers
    return [(p, dict(options.get(p, {}))) for p in providers]


class Watcher:
    """The watch of one session's runs for the filters ``nan``/``inf`` (``inf_exclude``, ``nan_exclude``: nodes whose
    Inf, NaN is expected; what the model makes on purpose, its attention masks, is left alone without them)."""

    def __init__(
        self, session: Any, model: ModelIdentity, filters: Sequence[str], inf_exclude: Sequence[str], nan_exclude: Sequence[str] = ()
    ) -> None:
        import onnx

        from graph_dap.runtime.engine.faults import FaultFilter
        from graph_dap.runtime.engine.masks import intended
        from graph_dap.runtime.loading import load_graph
        from graph_dap.runtime.tools.watched import watched_model

        graph = load_graph(model.path) if model.path is not None else load_graph(onnx.load_from_string(model.data or b""))
        intent = intended(graph)
        filt = FaultFilter(BreakFilter.NAN in filters, BreakFilter.INF in filters, tuple(inf_exclude), tuple(nan_exclude), intent)
        self.watch = watched_model(graph, filt)
        self.session: Any = None
        if self.watch.sentinel is not None:
            from graph_dap.runtime.weights import FOLDER_OPTION

            data = self.watch.model.SerializeToString()
            options = options_like(session)
            folder = graph.weights.data_folder  # the watched model references the program's external data
            if folder is not None:
                options.add_session_config_entry(FOLDER_OPTION, str(folder))
            self.session = hook.internal_session(data, options, providers_like(session))

    def run(self, call: hook.Call) -> tuple[Any, bool]:
        """The call's results from the watched model, and whether its sums flag a NaN or Inf."""
        if self.session is None:
            return call.original(), False
        names = call.names
        ort_values = call.kind is hook.CallKind.ORT_VALUES
        results = hook.run_internal(self.session, [*names, self.watch.sentinel], call.feeds, call.run_options, ort_values)
        sums = results[-1].numpy() if ort_values else results[-1]
        return list(results[:-1]), self.watch.flagged(sums)
