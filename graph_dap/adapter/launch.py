"""The launch configuration: :class:`LaunchArgs`, read and checked from a ``launch`` request's arguments.

The keys are those of ``vscode-ext/PROTOCOL.md`` (camelCase, as launch.json writes
them); unknown keys (``type``, ``request``, ``name``, VS Code's private ones) are
ignored. A missing or mistyped argument raises :class:`InvalidRequest`; a value of the
right type that cannot be used (``iterations: 0``) raises :class:`UserError`, which the
client shows.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from graph_dap.adapter.requests import MAX_INTEGER, InvalidRequest, Request, UserError, checked, items_of
from graph_dap.adapter.sources import PathMapping
from graph_dap.kinds import BreakFilter, FaultStops, OptLevel
from graph_dap.worker.protocol import LoadArgs, RunCommand, Tolerance

DEFAULT_PROVIDERS = ("CPUExecutionProvider",)


@dataclass(frozen=True, slots=True)
class LaunchArgs:
    """What a launch asks for: the model and its inputs, how to run it, where the worker is."""

    model: str
    stop_on_entry: bool = False
    no_debug: bool = False
    skip_constants: bool = True
    providers: tuple[str, ...] = DEFAULT_PROVIDERS
    dims: dict[str, int | list[int]] = field(default_factory=dict)
    memory_budget_mb: float | None = None
    opt_level: OptLevel = OptLevel.ALL  # onnxruntime's graph optimizations for a continue's segments (what is shown is unoptimized)
    worker: str | None = None  # HOST:PORT of a remote worker
    token: str | None = None  # the remote worker's token
    cwd: str | None = None  # what relative paths are resolved against
    python: str | None = None  # the local worker's interpreter
    listing_path: str | None = None  # where the extension wrote the listing, when the model's folder is not writable
    iterations: int | None = None  # noDebug runs, and the profile's
    inputs: str | dict[str, Any] | None = None
    reference: str | dict[str, Any] | None = None
    tolerance: Tolerance | None = None
    path_mappings: tuple[PathMapping, ...] = ()  # where the stack traces' folders are here
    break_on: tuple[BreakFilter, ...] = ()  # exception filters the launch turns on, besides the client's
    inf_exclude: tuple[str, ...] = ()  # nodes whose Inf is expected, besides the inf filter's condition
    fault_stops: FaultStops = FaultStops.NEW  # after a NaN/Inf stop: new faults only (made from finite inputs), or every node holding one
    nan_exclude: tuple[str, ...] = ()  # nodes whose NaN is expected, besides the nan filter's condition
    call_number: int | None = None  # a program launch's run call (its graph session): ``call`` in conditions

    @classmethod
    def parse(cls, request: Request) -> LaunchArgs:
        """The arguments of a ``launch`` (or of a ``restart``'s new configuration), checked."""
        given = request.arguments
        typed: dict[str, Any] = {
            "model": request.arg("model", str),
            "stop_on_entry": request.arg("stopOnEntry", bool, False),
            "no_debug": request.arg("noDebug", bool, False),
            "skip_constants": request.arg("skipConstants", bool, True),
            "providers": parse_providers(given.get("providers")),
            "dims": request.arg("dims", dict, {}),
            "memory_budget_mb": request.arg("memoryBudgetMB", float, None),
            "opt_level": opt_level(request.arg("optLevel", str, OptLevel.ALL)),
            "worker": request.arg("worker", str, None),
            "token": request.arg("token", str, None),
            "cwd": request.arg("cwd", str, None),
            "python": request.arg("python", str, None),
            "listing_path": request.arg("listingPath", str, None) or None,
            "iterations": request.arg("iterations", int, None),
            "fault_stops": fault_stops(request.arg("faultStops", str, FaultStops.NEW)),
            "call_number": request.arg("callNumber", int, None),
        }
        inputs = given.get("inputs")
        if inputs is not None and not isinstance(inputs, str | dict):
            raise InvalidRequest("'arguments.inputs' must be a path or an object of input name -> value")
        reference = given.get("reference")
        if reference is not None and not isinstance(reference, str | dict):
            raise InvalidRequest(
                "'arguments.reference' must be a string: a dump (.npz), provider:NAME, opt_level:LEVEL or model:OTHER.onnx"
            )
        typed["break_on"] = tuple(_filter(f) for f in items_of(request.arg("breakOn", list, []), str, "breakOn"))
        typed["inf_exclude"] = tuple(items_of(request.arg("infExclude", list, []), str, "infExclude"))
        typed["nan_exclude"] = tuple(items_of(request.arg("nanExclude", list, []), str, "nanExclude"))
        args = cls(
            **typed,
            inputs=inputs,
            reference=reference or None,
            tolerance=parse_tolerance(given.get("tolerance")),
            path_mappings=_path_mappings(given.get("pathMappings"), typed["cwd"] or os.getcwd()),
        )
        args._check()
        return args

    def _check(self) -> None:
        if self.tolerance is not None and self.reference is None:
            raise UserError("'tolerance' needs a 'reference' to compare with")
        if self.iterations is not None and self.iterations < 1:
            raise UserError("iterations must be at least 1")
        for key, value in self.dims.items():
            # an input's name with a list: its whole shape (dimensions without a name, or -1)
            for size in value if isinstance(value, list) else [value]:
                if not isinstance(size, int) or isinstance(size, bool):
                    raise UserError(f"dims: '{key}' must be an integer (a dimension's size) or a list of them (an input's shape), got {value!r}")
                if not 0 <= size <= MAX_INTEGER:
                    raise UserError(f"dims: '{key}' must be a size from 0 to 2**53 - 1, got {size}")
        if self.worker and not self.token:
            raise UserError("'worker' needs the 'token' the worker was started with")
        if self.memory_budget_mb is not None and self.memory_budget_mb <= 0:
            raise UserError("memoryBudgetMB must be positive")
        if BreakFilter.MISMATCH in self.break_on and self.reference is None:
            raise UserError("breakOn: the mismatch filter needs a 'reference' to compare with")

    @property
    def base_dir(self) -> str:
        """What relative paths are resolved against: ``cwd``, else the adapter's working directory."""
        return self.cwd or os.getcwd()

    @property
    def listing_file(self) -> str | None:
        """``listingPath`` made absolute, if one was given."""
        if self.listing_path and not os.path.isabs(self.listing_path):
            return os.path.join(self.base_dir, self.listing_path)
        return self.listing_path

    @property
    def first_run(self) -> RunCommand:
        """How a launch (or a restart) starts: to the end (noDebug), at entry, or to the first stop."""
        if self.no_debug:
            return RunCommand.TO_END
        return RunCommand.START if self.stop_on_entry else RunCommand.RESUME

    def load_args(self) -> LoadArgs:
        """The worker's ``load`` for this configuration."""
        return LoadArgs(
            model=self.model,
            inputs=self.inputs,
            dims={k: tuple(v) if isinstance(v, list) else v for k, v in self.dims.items()},
            providers=self.providers,
            skip_constants=self.skip_constants,
            memory_budget_mb=self.memory_budget_mb,
            opt_level=self.opt_level,
            base_dir=self.base_dir,
            reference=self.reference,
            tolerance=self.tolerance if self.reference is not None else None,
            write_listing=not self.listing_file,
            fault_stops=self.fault_stops,
            call_number=self.call_number,
        )

    def restarted_with(self, new: LaunchArgs) -> tuple[LaunchArgs, bool]:
        """The configuration after a ``restart`` that brings ``new`` (the worker stays), and whether the model must be loaded again."""
        reload = any(getattr(new, f) != getattr(self, f) for f in _RELOAD_FIELDS)
        return dataclasses.replace(new, worker=self.worker, token=self.token), reload


#: What a restart must load the model again for, when it changes.
_RELOAD_FIELDS = (
    "model", "inputs", "dims", "providers", "skip_constants", "opt_level", "cwd", "reference", "tolerance", "listing_path",
    "break_on", "inf_exclude", "fault_stops", "nan_exclude",
)


def is_program_launch(arguments: dict[str, Any]) -> bool:
    """Whether a launch asks for a program (a mixed session) rather than a model."""
    return arguments.get("program") is not None or arguments.get("module") is not None


def opt_level(given: str) -> OptLevel:
    """``optLevel``, checked: one of onnxruntime's optimization levels."""
    if given not in OptLevel.values():
        raise UserError(f"optLevel '{given}' is not an optimization level; expected one of {', '.join(OptLevel.values())}")
    return OptLevel(given)


def fault_stops(given: str) -> FaultStops:
    """``faultStops``, checked: after a NaN/Inf stop, which nodes stop again."""
    if given not in FaultStops.values():
        raise UserError(f"faultStops must be 'new' (a NaN or Inf made anew) or 'every' (every node holding one), got {given!r}")
    return FaultStops(given)


def _filter(given: str) -> BreakFilter:
    if given not in BreakFilter.values():
        raise UserError(f"breakOn: unknown filter '{given}'; expected any of {', '.join(BreakFilter.values())}")
    return BreakFilter(given)


def parse_providers(given: Any) -> tuple[str, ...]:
    """A list of execution providers (a lone string is one provider)."""
    if given is None or given == []:
        return DEFAULT_PROVIDERS
    if isinstance(given, str):
        return (given,)
    if not isinstance(given, list):
        raise InvalidRequest(f"'arguments.providers' must be an array, got {type(given).__name__}")
    return tuple(items_of(given, str, "providers"))


def _path_mappings(given: Any, base_dir: str) -> tuple[PathMapping, ...]:
    """``[{"localRoot", "remoteRoot"}]`` as debugpy takes them; a relative ``localRoot`` is under ``cwd``."""
    if given is None:
        return ()
    if not isinstance(given, list):
        raise InvalidRequest("'arguments.pathMappings' must be an array of {localRoot, remoteRoot}")
    out = []
    for i, item in enumerate(items_of(given, dict, "pathMappings")):
        where = f"pathMappings[{i}]"
        local = checked(item, "localRoot", str, where=where)
        remote = checked(item, "remoteRoot", str, where=where)
        if not local or not remote:
            raise UserError(f"{where}: localRoot and remoteRoot must not be empty")
        out.append(PathMapping(os.path.join(base_dir, os.path.expanduser(local)), remote))
    return tuple(out)


def parse_tolerance(given: Any) -> Tolerance | None:
    """``{atol, rtol}`` (and ``failIf``), or a list of fail-if conditions (``cosine<0.999``)."""
    if given is None:
        return None
    if isinstance(given, list):
        return Tolerance(fail_if=tuple(items_of(given, str, "tolerance")))
    if not isinstance(given, dict):
        raise InvalidRequest("'arguments.tolerance' must be {atol, rtol} or a list of conditions like 'cosine<0.999'")
    tolerance = Tolerance(
        checked(given, "atol", float, None, "tolerance"),
        checked(given, "rtol", float, None, "tolerance"),
        tuple(items_of(checked(given, "failIf", list, [], "tolerance"), str, "tolerance.failIf")),
    )
    for key, value in (("atol", tolerance.atol), ("rtol", tolerance.rtol)):
        if value is not None and value < 0:
            raise UserError(f"tolerance: {key} must not be negative")
    return tolerance
