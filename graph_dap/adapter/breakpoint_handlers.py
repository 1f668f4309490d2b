"""Breakpoint requests: listing lines, function specs, data breakpoints, exception filters."""

from __future__ import annotations

from typing import Any

from graph_dap.adapter.breakpoints import BreakpointKind, Wanted, inf_exclusions
from graph_dap.adapter.requests import InvalidRequest, Request, checked, items_of
from graph_dap.adapter.source_handlers import SourceRequests
from graph_dap.adapter.variables import ScopeKind, ScopeRef, TensorRef
from graph_dap.errors import GraphDapError
from graph_dap.kinds import BreakFilter
from graph_dap.names import unquoted
from graph_dap.worker import protocol as p


class BreakpointRequests(SourceRequests):
    """setBreakpoints, setFunctionBreakpoints, dataBreakpointInfo, setDataBreakpoints, setExceptionBreakpoints."""

    async def setBreakpoints_request(self, request: Request) -> dict[str, Any]:
        source = request.arg("source", dict)
        wanted_lines = items_of(request.arg("breakpoints", list, []), dict, "breakpoints")
        if "breakpoints" not in request.arguments and "lines" in request.arguments:
            wanted_lines = [{"line": n} for n in items_of(request.arg("lines", list), int, "lines")]
        listing = self.listing
        ours = listing is not None and listing.matches(source)
        if not ours and str(source.get("path", "")).endswith(".py"):  # a file of the model's Python source
            return {"breakpoints": await self._python_breakpoints(source, wanted_lines)}
        wanted: list[Wanted] = []
        for i, bp in enumerate(wanted_lines):
            line = self._line_in(checked(bp, "line", int, where=f"breakpoints[{i}]"))
            condition = checked(bp, "condition", str, None) or None
            hit_condition = checked(bp, "hitCondition", str, None) or None
            log_message = checked(bp, "logMessage", str, None) or None
            node = listing.node_at_or_after(line) if ours and listing is not None else None
            if not ours:
                wanted.append(Wanted(BreakpointKind.SOURCE, self.breakpoints.new_id(), (), None, "not the graph listing of this session"))
            elif node is None:
                wanted.append(Wanted(BreakpointKind.SOURCE, self.breakpoints.new_id(), (), None, f"no node on or after line {line}"))
            else:
                spec = p.BreakpointSpec(node.id, condition, hit_condition, log_message)
                wanted.append(Wanted(BreakpointKind.SOURCE, self.breakpoints.new_id(), (spec,), node.line))
        if ours:
            self.breakpoints.replace(BreakpointKind.SOURCE, wanted)
            await self._apply_breakpoints()
        src = listing.source() if ours and listing is not None else None
        return {"breakpoints": self._line_bodies(wanted, src)}

    async def setFunctionBreakpoints_request(self, request: Request) -> dict[str, Any]:
        wanted: list[Wanted] = []
        for i, bp in enumerate(items_of(request.arg("breakpoints", list), dict, "breakpoints")):
            where = f"breakpoints[{i}]"
            spec = p.BreakpointSpec(
                checked(bp, "name", str, where=where),
                checked(bp, "condition", str, None, where) or None,
                checked(bp, "hitCondition", str, None, where) or None,
                checked(bp, "logMessage", str, None, where) or None,
            )
            wanted.append(Wanted(BreakpointKind.FUNCTION, self.breakpoints.new_id(), (spec,)))
        self.breakpoints.replace(BreakpointKind.FUNCTION, wanted)
        await self._apply_breakpoints()
        return {"breakpoints": [self.breakpoints.body(w) for w in wanted]}

    async def dataBreakpointInfo_request(self, request: Request) -> dict[str, Any]:
        name = request.arg("name", str)
        reference = request.arg("variablesReference", int, 0)
        container = self.variables.handles.get(reference) if reference else None
        if reference and container is None:
            raise InvalidRequest(f"unknown variablesReference {reference}")
        if isinstance(container, TensorRef) or (isinstance(container, ScopeRef) and container.kind is ScopeKind.ATTRIBUTES):
            return {"dataId": None, "description": "only whole tensors can have data breakpoints"}
        value = name if container is not None else unquoted(name)
        if self.graph is None or value not in self.graph.value_names:
            return {"dataId": None, "description": f"'{value}' is not a value of the graph"}
        return {
            "dataId": value,
            "description": f"{value} (written: its producer ran; read: a consumer is about to run)",
            "accessTypes": ["write", "read", "readWrite"],
            "canPersist": True,
        }

    async def setDataBreakpoints_request(self, request: Request) -> dict[str, Any]:
        worker = self._need_worker()
        wanted: list[Wanted] = []
        for i, bp in enumerate(items_of(request.arg("breakpoints", list), dict, "breakpoints")):
            where = f"breakpoints[{i}]"
            name = checked(bp, "dataId", str, where=where)
            access = checked(bp, "accessType", str, "write", where)
            if access not in ("write", "read", "readWrite"):
                raise InvalidRequest(f"'{where}.accessType' must be read, write or readWrite")
            condition = checked(bp, "condition", str, None, where) or None
            hit = checked(bp, "hitCondition", str, None, where) or None
            try:
                targets = await worker.data_targets(p.NameArgs(name))
            except GraphDapError as error:
                wanted.append(Wanted(BreakpointKind.DATA, self.breakpoints.new_id(), (), None, str(error)))
                continue
            nodes: list[str] = []
            messages: list[str] = []
            for kind, found, why in (("write", targets.write, targets.write_message), ("read", targets.read, targets.read_message)):
                if access in (kind, "readWrite"):
                    nodes += found
                    if not found:
                        messages.append(why)
            specs = tuple(p.BreakpointSpec(n, condition, hit) for n in dict.fromkeys(nodes))
            wanted.append(Wanted(BreakpointKind.DATA, self.breakpoints.new_id(), specs, None, "; ".join(messages)))
        self.breakpoints.replace(BreakpointKind.DATA, wanted)
        await self._apply_breakpoints()
        return {"breakpoints": [self.breakpoints.body(w) for w in wanted]}

    async def setExceptionBreakpoints_request(self, request: Request) -> dict[str, Any]:
        filters = items_of(request.arg("filters", list), str, "filters")
        options = items_of(request.arg("filterOptions", list, []), dict, "filterOptions")
        enabled: list[BreakFilter] = []
        exclude: list[str] = []
        nan_exclude: list[str] = []
        results: list[dict[str, Any]] = []
        for f in filters:
            problem = self._filter_problem(f)
            if not problem:
                enabled.append(BreakFilter(f))
            results.append({"verified": False, "message": problem} if problem else {"verified": True})
        for i, option in enumerate(options):
            fid = checked(option, "filterId", str, where=f"filterOptions[{i}]")
            condition = checked(option, "condition", str, "", f"filterOptions[{i}]")
            problem = self._filter_problem(fid)
            if problem:
                results.append({"verified": False, "message": problem})
                continue
            enabled.append(BreakFilter(fid))
            if condition and fid not in (BreakFilter.INF, BreakFilter.NAN):
                results.append({"verified": False, "message": f"the {fid} filter takes no condition"})
                continue
            if fid == BreakFilter.INF:
                exclude += inf_exclusions(condition)
            elif fid == BreakFilter.NAN:
                nan_exclude += inf_exclusions(condition)  # (the same list of node patterns)
            results.append({"verified": True})
        self.filters.enabled = list(dict.fromkeys(enabled))
        self.filters.inf_exclude = exclude
        self.filters.nan_exclude = nan_exclude
        await self._apply_filters()
        return {"breakpoints": results}

    def _filter_problem(self, filter_id: str) -> str:
        """Why an exception filter cannot be enabled ("" when it can)."""
        if filter_id not in BreakFilter.values():
            return f"unknown filter '{filter_id}'"
        if filter_id == BreakFilter.MISMATCH and self.graph is not None and not self.has_reference:
            return "the mismatch filter needs a reference: give the launch argument 'reference' (a dump, provider:NAME, ...)"
        return ""
