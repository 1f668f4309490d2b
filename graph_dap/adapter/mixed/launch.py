"""A mixed session's launch: ``program`` (or ``module``) and its ``args``, ``cwd``, ``env``, plus the graph arguments
that apply to every model run. Every other key is debugpy's and goes to it as it is (``justMyCode``, ``console``,
``stopOnEntry``, ``python``...).

The program is started by debugpy as ``python -m graph_dap.host --connect ADDR -- program.py ARGS`` (the host's
frames hidden from the Python debugger by a ``rules`` entry), in ``cwd`` (default: the program's folder), with
graph-dap on its ``PYTHONPATH`` and the host's token in its environment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_dap.adapter.launch import opt_level, parse_providers, parse_tolerance
from graph_dap.adapter.requests import InvalidRequest, Request, UserError, items_of
from graph_dap.host import protocol as hp
from graph_dap.kinds import FAULT_FILTERS, BreakFilter, OptLevel
from graph_dap.paths import PACKAGE, python_path
from graph_dap.worker.protocol import Tolerance

#: Launch keys that are graph-dap's in a mixed session (the rest is debugpy's).
OURS = frozenset(
    {
        "program", "module", "args", "cwd", "env", "noDebug", "stopOnSessionRun", "providers", "memoryBudgetMB",
        "reference", "tolerance", "model", "adapterToken", "worker", "token", "type", "request", "optLevel",
        "infExclude", "nanExclude",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProgramLaunch:
    """What a ``program`` launch asks for."""

    program: str | None
    module: str | None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: dict[str, str | None] = field(default_factory=dict)
    no_debug: bool = False
    stop_on_session_run: bool = False
    providers: tuple[str, ...] | None = None  # None: each session's own
    memory_budget_mb: float | None = None
    reference: str | dict[str, Any] | None = None
    tolerance: Tolerance | None = None
    opt_level: OptLevel | None = None  # None: each session's own
    inf_exclude: tuple[str, ...] = ()  # nodes whose Inf is expected in every model, besides the inf filter's condition
    nan_exclude: tuple[str, ...] = ()  # nodes whose NaN is expected in every model, besides the nan filter's condition
    debugpy: dict[str, Any] = field(default_factory=dict)  # the keys that are debugpy's

    @classmethod
    def parse(cls, request: Request) -> ProgramLaunch:
        """The arguments of a ``program`` (or ``module``) launch, checked."""
        given = request.arguments
        program = request.arg("program", str, None)
        module = request.arg("module", str, None)
        if (program is None) == (module is None):
            raise UserError("give either 'program' (a script) or 'module' (a module name), not both")
        raw_args = given.get("args")
        if raw_args is None:
            args: tuple[str, ...] = ()
        elif isinstance(raw_args, list):
            args = tuple(items_of(raw_args, str, "args"))
        else:
            raise InvalidRequest("'arguments.args' must be an array of strings")
        env = request.arg("env", dict, {})
        for key, value in env.items():
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"'arguments.env.{key}' must be a string or null")
        if given.get("worker"):
            raise UserError("a program launch runs its graphs on local workers: 'worker' is for model launches")
        providers = parse_providers(given.get("providers")) if given.get("providers") else None
        reference = given.get("reference")
        level = request.arg("optLevel", str, None)
        if reference is not None and not isinstance(reference, str | dict):
            raise InvalidRequest("'arguments.reference' must be a string: a dump (.npz), provider:NAME, opt_level:LEVEL or model:OTHER.onnx")
        launch = cls(
            program=program,
            module=module,
            args=args,
            cwd=request.arg("cwd", str, None),
            env=dict(env),
            no_debug=request.arg("noDebug", bool, False),
            stop_on_session_run=request.arg("stopOnSessionRun", bool, False),
            providers=providers,
            memory_budget_mb=request.arg("memoryBudgetMB", float, None),
            reference=reference or None,
            tolerance=parse_tolerance(given.get("tolerance")),
            opt_level=None if level is None else opt_level(level),
            inf_exclude=tuple(items_of(request.arg("infExclude", list, []), str, "infExclude")),
            nan_exclude=tuple(items_of(request.arg("nanExclude", list, []), str, "nanExclude")),
            debugpy={k: v for k, v in given.items() if k not in OURS},
        )
        launch._check()
        return launch

    def _check(self) -> None:
        if self.program is not None and not os.path.isfile(self.program_path):
            raise UserError(f"program not found: {self.program_path}")
        if self.cwd is not None and not os.path.isdir(self.cwd):
            raise UserError(f"cwd is not a folder: {self.cwd}")
        if self.memory_budget_mb is not None and self.memory_budget_mb <= 0:
            raise UserError("memoryBudgetMB must be positive")
        if self.tolerance is not None and self.reference is None:
            raise UserError("'tolerance' needs a 'reference' to compare with")

    @property
    def program_path(self) -> str:
        """The program's script, made absolute against ``cwd``."""
        assert self.program is not None
        return self.program if os.path.isabs(self.program) else os.path.join(self.cwd or os.getcwd(), self.program)

    @property
    def name(self) -> str:
        """How the program is named: its script's file name, or its module."""
        return os.path.basename(self.program) if self.program is not None else str(self.module)

    def debugpy_launch(self, address: str, token: str, folder: str) -> dict[str, Any]:
        """debugpy's launch: the host running the program, in its folder, with graph-dap on the path."""
        target = [self.program_path] if self.program is not None else ["-m", str(self.module)]
        env = dict(self.env)
        env["PYTHONPATH"] = python_path({"PYTHONPATH": env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))})
        env[hp.TOKEN_ENV] = token
        cwd = self.cwd or (os.path.dirname(self.program_path) if self.program is not None else os.getcwd())
        rules = [{"path": os.path.join(PACKAGE, "**"), "include": False}, {"module": "graph_dap", "include": False}]
        user_rules = self.debugpy.get("rules")
        launch: dict[str, Any] = {
            "console": "internalConsole",
            "subProcess": False,
            **self.debugpy,
            "module": "graph_dap.host",
            "args": ["--connect", address, "--folder", folder, "--", *target, *self.args],
            "cwd": cwd,
            "env": env,
            "rules": rules + (user_rules if isinstance(user_rules, list) else []),
            "noDebug": self.no_debug,
        }
        return launch

    def graph_filters(self, enabled: list[BreakFilter]) -> list[BreakFilter]:
        """The graph filters a run uses: ``mismatch`` only with a reference."""
        return [f for f in enabled if f is not BreakFilter.MISMATCH or self.reference is not None]

    def config(
        self, filters: list[BreakFilter], inf_exclude: Sequence[str], armed: tuple[str, ...], nan_exclude: Sequence[str] = ()
    ) -> hp.Config:
        """What the host applies to runs: the exclusions of the filters' conditions and of the launch together."""
        if self.no_debug:
            return hp.Config()
        return hp.Config(
            stop_every=self.stop_on_session_run,
            every_run=self.reference is not None,
            filters=tuple(f for f in filters if f in FAULT_FILTERS),
            inf_exclude=tuple(dict.fromkeys([*self.inf_exclude, *inf_exclude])),
            armed=armed,
            nan_exclude=tuple(dict.fromkeys([*self.nan_exclude, *nan_exclude])),
        )

    def graph_launch(self, loaded: hp.ModelLoaded, feeds: str, listing_path: str | None, call: int) -> dict[str, Any]:
        """The launch of one run's graph session: the call's model, number and feeds, the program's providers and level."""
        launch: dict[str, Any] = {
            "model": loaded.path,
            "inputs": feeds,
            "callNumber": call,
            "providers": list(self.providers or loaded.providers),
            "optLevel": self.opt_level or loaded.opt_level,
            "stopOnEntry": self.stop_on_session_run,
        }
        if listing_path:
            launch["listingPath"] = listing_path
        if self.memory_budget_mb is not None:
            launch["memoryBudgetMB"] = self.memory_budget_mb
        if self.inf_exclude:
            launch["infExclude"] = list(self.inf_exclude)
        if self.nan_exclude:
            launch["nanExclude"] = list(self.nan_exclude)
        if self.reference is not None:
            launch["reference"] = self.reference
            if self.tolerance is not None:
                launch["tolerance"] = {"atol": self.tolerance.atol, "rtol": self.tolerance.rtol, "failIf": list(self.tolerance.fail_if)}
        return launch
