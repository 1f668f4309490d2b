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

The class is built in layers, each a module: ``state`` (what a session holds: frames, values,
breakpoints, filters; reading and setting values; its stops), ``levels`` (stepping into and out of
control-flow bodies and iterations), ``continues`` (running positions as segments, and building the
next continue's sessions while stopped) and ``driver`` (``DebugSession``: the commands and the one
run loop).
"""

from graph_dap.runtime.session.driver import DebugSession
from graph_dap.runtime.session.state import BREAK_FILTERS
from graph_dap.runtime.stops import Stop, StopReason

__all__ = ["BREAK_FILTERS", "DebugSession", "Stop", "StopReason"]
