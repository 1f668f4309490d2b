"""The stepping state machine: a program counter over a graph's nodes, values, stops.

``DebugSession`` is what a debugger drives: ``continue_``, ``step``, ``step_in``,
``step_out``, ``step_back``, ``goto``, ``run_to``, ``restart`` each return a
:class:`Stop` saying why and where the run stopped. It knows nothing of DAP.

The counter is a stack of :class:`~graph_dap.runtime.frames.Frame` s: the main graph, then a frame for
each If, Loop, Scan or function call being stepped through (a branch, an iteration
of a body, a function's body). Each frame has its own :class:`~graph_dap.runtime.timeline.Timeline`
and :class:`~graph_dap.runtime.values.Values`; the session coordinates them with the breakpoint
table and the engine. A ``continue_`` runs the nodes of a frame up to the next node
that has a breakpoint (or holds one) in one onnxruntime call (a segment), watched
for NaN/Inf by in-graph sums when those filters are on; steps run single nodes.

The session is composed of parts, each owning its state: the values' store and constants, the engine
(``engine/``), the breakpoint table and the break filters (``filters``), the levels of the counter
(``levels``: the frames, entering and finishing bodies and iterations), the runs (``runs``: a node or a
segment at a time, the planners, the sessions built ahead, the parts of long runs), the stops
(``stopping``) and the interrupt of a pause. ``state`` holds them and answers for the values;
``driver`` (``DebugSession``) has the commands and the one run loop.
"""

from graph_dap.runtime.session.driver import DebugSession
from graph_dap.runtime.session.filters import BREAK_FILTERS
from graph_dap.runtime.stops import Stop, StopReason

__all__ = ["BREAK_FILTERS", "DebugSession", "Stop", "StopReason"]
