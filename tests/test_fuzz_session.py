"""A hypothesis state machine drives a live DAP session through random sequences of what a person does.

launch, breakpoints, continue, next, stepBack, goto, pause, evaluate, setVariable, variables
paging, restart and disconnect, in any order: each request is answered within 5 s, a run
it starts ends in a ``stopped`` or ``terminated`` event within 5 s, every message is valid
under the schema, and the adapter never prints a traceback. Examples and steps come from
``GRAPH_DAP_FUZZ_EXAMPLES`` (a few in CI; RELIABILITY.md has the long run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dap_client import DapClient, DapError
from dap_fuzz import ANSWER_TIMEOUT, EXAMPLES, PLAUSIBLE, fuzz_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test
from models import chain_files as chain_model

_EXPRESSIONS = st.one_of(
    st.sampled_from(PLAUSIBLE),
    st.sampled_from(["`x`.max()", "c * 2", "x[0, 0]", "np.mean(x)", "`x`.tolist()", "x.shape", "abs(", "__import__('os')"]),
    st.text(max_size=20),
)
_INTEGERS = st.one_of(st.integers(-2, 40), st.sampled_from([2**31, 2**53 - 1, 2**53]))


class DapSession(RuleBasedStateMachine):
    """One adapter per example; the rules are requests, each checked as it is answered."""

    folder: Path

    def __init__(self) -> None:
        super().__init__()
        self.client = DapClient.stdio()
        self.client.initialize()
        self.launched = False
        self.ended = False
        self.gone = False

    # -- helpers ---------------------------------------------------------------------------

    def ask(self, command: str, **arguments: Any) -> dict[str, Any] | None:
        """The body of the answer, or None for an error answer; either must come within 5 s."""
        try:
            return self.client.request(command, arguments, timeout=ANSWER_TIMEOUT)
        except DapError as error:
            message = error.response["message"]
            assert message and "internal error" not in message and "Traceback" not in message, message
            return None

    def settle(self, before: int) -> None:
        """After a request that moved the run: it stops or ends within 5 s."""
        if self._wait_any(before, ("stopped", "terminated")) == "terminated":
            self.ended = True

    def _wait_any(self, before: int, names: tuple[str, ...]) -> str:
        deadline = time.monotonic() + ANSWER_TIMEOUT
        cond = self.client._cond
        with cond:
            while True:
                for e in self.client.events[before:]:
                    if e["event"] in names:
                        return e["event"]
                left = deadline - time.monotonic()
                assert left > 0 and not self.client.closed, f"no {names} in {ANSWER_TIMEOUT} s: {[e['event'] for e in self.client.events[before:]]}"
                cond.wait(left)

    def move(self, command: str, **arguments: Any) -> None:
        before = len(self.client.events)
        if self.ask(command, **arguments) is not None:
            self.settle(before)

    # -- rules -----------------------------------------------------------------------------

    @initialize(stop_on_entry=st.booleans(), breakpoints=st.lists(st.sampled_from(PLAUSIBLE), max_size=3))
    def launch(self, stop_on_entry: bool, breakpoints: list[str]) -> None:
        model, inputs, _ = chain_model(self.folder)
        before = len(self.client.events)
        self.client.launch(str(model), inputs=str(inputs), stopOnEntry=stop_on_entry, breakpoints=breakpoints)
        self.launched = True
        self.settle(before)

    @precondition(lambda self: not self.gone)
    @rule(names=st.lists(st.sampled_from(PLAUSIBLE), max_size=4))
    def function_breakpoints(self, names: list[str]) -> None:
        self.ask("setFunctionBreakpoints", breakpoints=[{"name": n} for n in names])

    @precondition(lambda self: not self.gone)
    @rule(lines=st.lists(_INTEGERS, max_size=4), condition=st.one_of(st.none(), _EXPRESSIONS))
    def line_breakpoints(self, lines: list[int], condition: str | None) -> None:
        source = {"name": "chain.onnxtxt", "path": str(self.folder / "chain.onnxtxt")}
        bps = [{"line": n} | ({"condition": condition} if condition is not None else {}) for n in lines]
        self.ask("setBreakpoints", source=source, breakpoints=bps)

    @precondition(lambda self: not self.gone)
    @rule(filters=st.lists(st.sampled_from(["nan", "inf", "error", "mismatch", "bogus"]), max_size=3, unique=True))
    def exception_breakpoints(self, filters: list[str]) -> None:
        self.ask("setExceptionBreakpoints", filters=filters)

    @precondition(lambda self: not self.gone)
    @rule(command=st.sampled_from(["continue", "next", "stepBack", "reverseContinue", "stepIn", "stepOut"]))
    def run(self, command: str) -> None:
        self.move(command, threadId=1)

    @precondition(lambda self: not self.gone)
    @rule(line=_INTEGERS)
    def goto(self, line: int) -> None:
        source = {"name": "chain.onnxtxt", "path": str(self.folder / "chain.onnxtxt")}
        targets = self.ask("gotoTargets", source=source, line=line)
        if targets and targets["targets"]:
            self.move("goto", threadId=1, targetId=targets["targets"][0]["id"])

    @precondition(lambda self: not self.gone)
    @rule()
    def pause(self) -> None:
        self.ask("pause", threadId=1)

    @precondition(lambda self: not self.gone)
    @rule(expression=_EXPRESSIONS, context=st.sampled_from(["repl", "watch", "hover", "clipboard"]))
    def evaluate(self, expression: str, context: str) -> None:
        self.ask("evaluate", expression=expression, context=context, frameId=1)

    @precondition(lambda self: not self.gone)
    @rule(reference=_INTEGERS, name=st.sampled_from(PLAUSIBLE), value=_EXPRESSIONS)
    def set_variable(self, reference: int, name: str, value: str) -> None:
        self.ask("setVariable", variablesReference=reference, name=name, value=value)

    @precondition(lambda self: not self.gone)
    @rule(start=st.one_of(st.none(), _INTEGERS), count=st.one_of(st.none(), _INTEGERS))
    def variables(self, start: int | None, count: int | None) -> None:
        scopes = self.ask("scopes", frameId=1)
        references = [s["variablesReference"] for s in scopes["scopes"]] if scopes else [1]
        paging = {k: v for k, v in (("start", start), ("count", count)) if v is not None}
        for reference in references:
            page = self.ask("variables", variablesReference=reference, **paging)
            for v in (page or {}).get("variables", [])[:2]:
                if v.get("variablesReference"):
                    self.ask("variables", variablesReference=v["variablesReference"], **paging)

    @precondition(lambda self: not self.gone)
    @rule()
    def stack_trace(self) -> None:
        self.ask("stackTrace", threadId=1)

    @precondition(lambda self: not self.gone)
    @rule()
    def restart(self) -> None:
        before = len(self.client.events)
        if self.ask("restart") is not None:
            self.ended = False
            self.settle(before)

    @precondition(lambda self: not self.gone)
    @rule()
    def disconnect(self) -> None:
        self.ask("disconnect", terminateDebuggee=True)
        self.client.wait_closed(ANSWER_TIMEOUT)
        self.gone = True

    @precondition(lambda self: self.gone)
    @rule(stop_on_entry=st.booleans())
    def new_session(self, stop_on_entry: bool) -> None:
        """After a disconnect: the old adapter ended cleanly; a new one takes the next launch."""
        self._finish()
        self.client = DapClient.stdio()
        self.client.initialize()
        self.gone = self.ended = False
        self.launch(stop_on_entry, [])

    # -- what must always hold ---------------------------------------------------------------

    @invariant()
    def valid_and_alive(self) -> None:
        self.client.check()  # every message valid under the schema
        assert self.client.process is not None
        if not self.gone:
            assert self.client.process.poll() is None
            assert self.ask("threads") is not None

    def teardown(self) -> None:
        self._finish()

    def _finish(self) -> None:
        self.client.disconnect()
        assert "Traceback" not in self.client.stderr_text(), self.client.stderr_text()[-3000:]
        assert self.client.process is not None and self.client.process.poll() == 0


def test_random_sessions(tmp_path: Path) -> None:
    DapSession.folder = tmp_path
    examples, steps = (1, 15) if EXAMPLES <= 30 else (max(EXAMPLES // 25, 2), 25)  # CI: one session; long: EXAMPLES/25 of 25 steps
    run_state_machine_as_test(DapSession, settings=fuzz_settings(examples=examples, stateful_step_count=steps))

