"""What moves the worker's run: the session itself, or the session compared in lockstep with a reference.

:class:`Driver` is the driving interface of a run (start, step, continue, run to, restart,
the filters); the service holds one and sends every run command to it
(:data:`graph_dap.worker.service.COMMANDS`). :class:`SessionDriver` drives a
:class:`~graph_dap.runtime.session.DebugSession`; :class:`LockstepDriver` drives the same
session through a :class:`~graph_dap.runtime.tools.lockstep.Lockstep`, which runs the main
graph node by node and also stops at the first divergence from the reference (the
``mismatch`` filter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from graph_dap.errors import CompareError
from graph_dap.kinds import BreakFilter, StopReason
from graph_dap.runtime.session import DebugSession, Stop

if TYPE_CHECKING:
    from graph_dap.runtime.tools.lockstep import Lockstep

__all__ = ["Driver", "LockstepDriver", "SessionDriver"]

_NO_REFERENCE = "there is no reference to compare with: give the launch argument 'reference'"


class Driver(Protocol):
    """How a run moves; every method returns the stop it came to."""

    session: DebugSession

    def start(self) -> Stop:
        """To the entry (the constants computed), or nowhere when started already."""
        ...

    def resume(self) -> Stop:
        """Continue, checking the breakpoints of the node at the program counter first."""
        ...

    def continue_(self, check_first: bool = False) -> Stop: ...

    def step(self) -> Stop: ...

    def step_in(self) -> Stop: ...

    def step_out(self) -> Stop: ...

    def step_back(self) -> Stop: ...

    def reverse_continue(self) -> Stop: ...

    def goto(self, target: str) -> Stop: ...

    def run_to(self, target: str) -> Stop: ...

    def restart(self) -> Stop: ...

    def run_whole(self) -> Stop:
        """From the entry to the end in one go, as the user's own run (noDebug's iterations)."""
        ...

    def set_filters(self, filters: Sequence[BreakFilter]) -> None:
        """The break filters (nan, inf, error, and ``mismatch`` where there is a reference)."""
        ...

    def summary(self) -> tuple[str, ...]:
        """What the end of a run adds: the comparison's lines (none without a reference)."""
        ...

    def compare_table(self) -> dict[str, Any]:
        """The comparison so far, as ``graph-dap compare --json`` prints it (CompareError without a reference)."""
        ...

    def close(self) -> None:
        """Let go of what it holds outside memory (a reference's files and folders)."""
        ...


class SessionDriver:
    """The session's own driving."""

    def __init__(self, session: DebugSession) -> None:
        self.session = session

    def start(self) -> Stop:
        return self.session.start()

    def resume(self) -> Stop:
        """A plain continue steps off a breakpoint it stopped at; a run that starts the model, or resumes
        after a pause, must not skip the breakpoints of its first node."""
        first = self.start()
        if first.reason is not StopReason.ENTRY:
            return first
        return self.continue_(check_first=True)

    def continue_(self, check_first: bool = False) -> Stop:
        return self.session.continue_(check_first=check_first)

    def step(self) -> Stop:
        return self.session.step()

    def step_in(self) -> Stop:
        return self.session.step_in()

    def step_out(self) -> Stop:
        return self.session.step_out()

    def step_back(self) -> Stop:
        return self.session.step_back()

    def reverse_continue(self) -> Stop:
        return self.session.reverse_continue()

    def goto(self, target: str) -> Stop:
        return self.session.goto(target)

    def run_to(self, target: str) -> Stop:
        return self.session.run_to(target)

    def restart(self) -> Stop:
        return self.session.restart()

    def run_whole(self) -> Stop:
        """The whole model in one onnxruntime session at the launch's level."""
        return self.session.run_to_end()

    def set_filters(self, filters: Sequence[BreakFilter]) -> None:
        if BreakFilter.MISMATCH in filters:
            raise CompareError("the mismatch filter needs a reference: give the launch argument 'reference'")
        self.session.set_break_on(filters)

    def summary(self) -> tuple[str, ...]:
        return ()

    def compare_table(self) -> dict[str, Any]:
        raise CompareError(_NO_REFERENCE)

    def close(self) -> None:
        pass


class LockstepDriver(SessionDriver):
    """The session compared with a reference as it moves: through the main graph node by node, observing each node
    that runs; ``mismatch`` stops at the first divergence. ``paused``: whether a pause came (seen between nodes)."""

    def __init__(self, session: DebugSession, lockstep: Lockstep, paused: Callable[[], bool]) -> None:
        super().__init__(session)
        self.lockstep = lockstep
        self._paused = paused
        self.mismatch = False  # stop at a divergence from the reference

    def start(self) -> Stop:
        return self.lockstep.start()

    def continue_(self, check_first: bool = False) -> Stop:
        return self.lockstep.continue_(check_first=check_first, stop_on_mismatch=self.mismatch, paused=self._paused)

    def step(self) -> Stop:
        return self.lockstep.step(self.mismatch)

    def step_in(self) -> Stop:
        return self.step()  # the lockstep runs the main graph: no body to step into

    def step_out(self) -> Stop:
        return self.continue_()

    def run_to(self, target: str) -> Stop:
        s = self.session
        current = s.current
        seq = [n.id for n in s.sequence]
        if current is None or target not in seq or seq.index(target) <= seq.index(current.id):
            return s.run_to(target)  # its errors, or "reached" when already there
        return self.lockstep.continue_(until=target, stop_on_mismatch=self.mismatch, paused=self._paused)

    def restart(self) -> Stop:
        self.lockstep.reset()
        stop = self.session.restart()
        return self.lockstep.start() if stop.reason is StopReason.ENTRY else stop

    def run_whole(self) -> Stop:
        """Node by node, compared (not the whole model at once)."""
        return self.continue_()

    def set_filters(self, filters: Sequence[BreakFilter]) -> None:
        self.mismatch = BreakFilter.MISMATCH in filters
        self.session.set_break_on([f for f in filters if f is not BreakFilter.MISMATCH])

    def summary(self) -> tuple[str, ...]:
        return tuple(self.lockstep.summary())

    def compare_table(self) -> dict[str, Any]:
        return self.lockstep.to_dict()

    def close(self) -> None:
        self.lockstep.close()
