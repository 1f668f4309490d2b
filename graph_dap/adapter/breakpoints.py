"""The breakpoints a client asked for, by kind, and their runtime specs.

DAP sets line, function and data breakpoints separately and each request replaces
its kind (line breakpoints: those of one source file: the listing, or a Python file of the
model's source); the runtime takes one list. The book keeps them by group, sends their
union, and maps the runtime's breakpoint ids back to the client's, so that a stop
says which breakpoints it hit and which kind they were. :class:`BreakFilters` holds
the exception filters.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_dap.kinds import BreakFilter
from graph_dap.worker.protocol import BreakOnArgs, BreakpointResult, BreakpointSpec


class BreakpointKind(enum.StrEnum):
    """The kinds of breakpoint DAP sets, each with its own request."""

    SOURCE = "source"  # on a line: of the listing, or of a Python file of the model's source
    FUNCTION = "function"
    DATA = "data"


KINDS = tuple(BreakpointKind)
STOP_REASONS = {BreakpointKind.SOURCE: "breakpoint", BreakpointKind.FUNCTION: "function breakpoint", BreakpointKind.DATA: "data breakpoint"}
#: The stop reason of a breakpoint on a line of the model's Python source. Not "breakpoint": at a
#: "breakpoint" VS Code shows the top frame that has a source (the node's, in the listing) even when
#: it is de-emphasized; at any other reason, the first frame that is not: the breakpoint's own line.
PYTHON_REASON = "source breakpoint"


@dataclass(frozen=True, slots=True)
class Wanted:
    """One client breakpoint: its DAP id and the runtime specs it stands for."""

    kind: BreakpointKind
    dap_id: int
    specs: tuple[BreakpointSpec, ...]
    line: int | None = None  # for line breakpoints: the line of the node it landed on (a Python file's: the line asked for)
    message: str = ""  # why it cannot be verified, when that is known before asking the runtime
    file: str = ""  # for a breakpoint on a Python file: the file as the model's stack traces name it


@dataclass(slots=True)
class BreakpointBook:
    """Every breakpoint of the session, and what the runtime made of them."""

    wanted: dict[str, list[Wanted]] = field(default_factory=lambda: {k: [] for k in KINDS})  # by group: a kind, or "source:PATH"
    _next_id: int = 1
    _owner: dict[int, Wanted] = field(default_factory=dict)  # runtime id -> client breakpoint
    _results: dict[int, tuple[bool, str]] = field(default_factory=dict)  # DAP id -> verified, message

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def replace(self, kind: BreakpointKind, wanted: list[Wanted], source: str = "") -> None:
        """Replace one group: a kind's breakpoints, or (``source``) the line breakpoints of one Python file."""
        self.wanted[f"{kind}:{source}" if source else kind] = wanted

    def _all(self) -> list[Wanted]:
        return [w for group in self.wanted.values() for w in group]

    def specs(self) -> list[BreakpointSpec]:
        """The runtime specs of every group, in a stable order."""
        return [spec for w in self._all() for spec in w.specs]

    def resolve(self, results: Sequence[BreakpointResult]) -> None:
        """Take the runtime's answers, in the order of :meth:`specs`."""
        owners = [w for w in self._all() for _ in w.specs]
        self._owner = {}
        verdicts: dict[int, list[BreakpointResult]] = {}
        for owner, result in zip(owners, results, strict=True):
            self._owner[result.id] = owner
            verdicts.setdefault(owner.dap_id, []).append(result)
        self._results = {}
        for w in self._all():
            answers = verdicts.get(w.dap_id, [])
            if not answers:
                self._results[w.dap_id] = (False, w.message or "no node to stop at")
                continue
            verified = [a for a in answers if a.verified]
            if verified:  # a verified answer may say what it bound to (a Python line: how many nodes)
                message = verified[0].message if len(answers) == 1 else ""
            else:
                message = next((a.message for a in answers if a.message), "not verified")
            self._results[w.dap_id] = (bool(verified), message)

    def body(self, w: Wanted, source: dict[str, Any] | None = None) -> dict[str, Any]:
        """The DAP ``Breakpoint`` for one client breakpoint."""
        verified, message = self._results.get(w.dap_id, (False, w.message or "pending"))
        bp: dict[str, Any] = {"id": w.dap_id, "verified": verified}
        if message:
            bp["message"] = message
        if source is not None and w.line is not None:
            bp["source"] = source
            bp["line"] = w.line
        return bp

    def python_line(self, runtime_ids: tuple[int, ...]) -> tuple[str, int] | None:
        """The stack-trace file and line of a Python-source breakpoint among those hit, if one is."""
        for i in runtime_ids:
            w = self._owner.get(i)
            if w is not None and w.file and w.line is not None:
                return w.file, w.line
        return None

    def hit(self, runtime_ids: tuple[int, ...]) -> tuple[str, list[int]]:
        """The DAP stop reason and client ids for breakpoints the runtime says it hit (:data:`PYTHON_REASON` when all are on Python files)."""
        owners = [self._owner[i] for i in runtime_ids if i in self._owner]
        ids = list(dict.fromkeys(w.dap_id for w in owners))
        kinds = {w.kind for w in owners}
        if owners and all(w.file for w in owners if w.kind is BreakpointKind.SOURCE) and kinds == {BreakpointKind.SOURCE}:
            return PYTHON_REASON, ids
        for kind in KINDS:
            if kind in kinds:
                return STOP_REASONS[kind], ids
        return "breakpoint", ids


def inf_exclusions(condition: str) -> list[str]:
    """The node patterns of the inf filter's condition (``op:Where, *mask*``; ``;`` separates too)."""
    return [p.strip() for p in condition.replace(";", ",").split(",") if p.strip()]


@dataclass(slots=True)
class BreakFilters:
    """The exception filters the client enabled, and the nodes whose Inf (NaN) the inf (nan) filter ignores."""

    enabled: list[BreakFilter] = field(default_factory=lambda: [BreakFilter.ERROR])
    inf_exclude: list[str] = field(default_factory=list)
    nan_exclude: list[str] = field(default_factory=list)

    def worker_args(
        self, has_reference: bool, launch_on: Sequence[BreakFilter] = (), launch_exclude: Sequence[str] = (), launch_nan: Sequence[str] = ()
    ) -> BreakOnArgs:
        """The filters the worker can honour (``mismatch`` only with a reference): the client's and the launch's ``breakOn``."""
        enabled = dict.fromkeys([*self.enabled, *launch_on])
        exclude = dict.fromkeys([*self.inf_exclude, *launch_exclude])
        nan = dict.fromkeys([*self.nan_exclude, *launch_nan])
        return BreakOnArgs(tuple(f for f in enabled if f is not BreakFilter.MISMATCH or has_reference), tuple(exclude), tuple(nan))
