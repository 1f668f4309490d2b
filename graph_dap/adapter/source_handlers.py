"""The model's Python source in the debugger: frames under the node, their Module scope, breakpoints on ``.py`` lines.

For a model exported with stack traces, the frame of the node in the listing is followed by
one frame per Python frame of its stack, innermost first (``Attention.forward`` at
``model.py:25``), each with the file here when :class:`~.sources.SourceFiles` finds it and
``presentationHint: "subtle"`` for torch's own; for a model whose module paths survive only
in node names, by one frame per module scope, without a source. Their ids are
``SOURCE_FRAME_ID + k``; they show the values of the node's level, and a "Module" scope.
A breakpoint on a line of one of the model's files becomes the runtime's ``PATH:LINE``
spec, in the stack traces' own spelling of the path.
"""

from __future__ import annotations

import os
from typing import Any

from graph_dap.adapter.breakpoints import BreakpointKind, Wanted
from graph_dap.adapter.core import SOURCE_FRAME_ID, AdapterCore
from graph_dap.adapter.requests import checked
from graph_dap.adapter.sources import SourceFiles
from graph_dap.adapter.variables import ScopeKind, ScopeRef
from graph_dap.kinds import SourceKind, StopReason
from graph_dap.paths import split_path
from graph_dap.worker import protocol as p

_MAX_PRODUCED = 200  # nodes listed in a Module scope


def _name(path: str) -> str:
    parts = split_path(path)
    return parts[-1] if parts else path


class SourceRequests(AdapterCore):
    """What the frame, scope and breakpoint handlers do for the model's Python source."""

    def _files(self) -> SourceFiles:
        """The loaded model's Python files here: pathMappings, the path itself, or a search of the workspace and the model's folder."""
        graph = self.graph
        assert graph is not None
        if self.source_files is None or self.source_files[0] is not graph:
            launch = self.launch
            roots = (launch.base_dir if launch else os.getcwd(), os.path.dirname(graph.model_path))
            self.source_files = (graph, SourceFiles(launch.path_mappings if launch else (), roots))
        return self.source_files[1]

    async def _stop_source(self) -> p.NodeSourceInfo | None:
        """The source of the node that frame 0 shows at this stop (asked once per stop)."""
        stop = self.run.stop
        node = self._frame_node(0)
        if stop is None or node is None or self.worker is None:
            return None
        if self.node_source is None or self.node_source[0] is not stop:
            self.node_source = (stop, await self.worker.source(node.id))
        return self.node_source[1]

    def _source_frame(self, frame_id: int) -> p.SourceFrameInfo | None:
        """The Python (or module) frame a frame id names at this stop, if it names one."""
        held = self.node_source
        k = frame_id - SOURCE_FRAME_ID
        if held is None or held[0] is not self.run.stop or not 0 <= k < len(held[1].frames):
            return None
        return held[1].frames[k]

    async def _source_frames(self, frames: list[dict[str, Any]]) -> None:
        """Put the DAP frames of the node's Python frames (or module scopes), innermost first, under frame 0.

        At a stop on a breakpoint in a Python file, the frames above that line's have their
        sources de-emphasized, so that a client shows the user's line, where the breakpoint is
        (the stop's reason is then ``PYTHON_REASON``: VS Code passes over such frames only then).
        """
        info = await self._stop_source()
        if info is None or info.kind is SourceKind.NONE:
            return
        out = self._frames_of(info)
        stop = self.run.stop
        at = self.breakpoints.python_line(stop.breakpoint_ids) if stop is not None and stop.reason is StopReason.BREAKPOINT else None
        k = next((k for k, f in enumerate(info.frames) if at is not None and (f.path, f.line) == at), None)
        if k is not None and "source" in out[k]:
            for frame in [frames[0], *out[:k]]:
                if "source" in frame:
                    frame["source"] = {**frame["source"], "presentationHint": "deemphasize"}
        frames[1:1] = out

    def _frames_of(self, info: p.NodeSourceInfo) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k, f in enumerate(info.frames):
            frame: dict[str, Any] = {"id": SOURCE_FRAME_ID + k, "name": f.name, "line": 0, "column": 0}
            if info.kind is SourceKind.PYTHON:
                local = self._files().local(f.path)
                frame["line"] = self._line_out(f.line)
                frame["column"] = 1
                if local is not None:
                    frame["source"] = {"name": _name(local), "path": local}
                    if f.library:
                        frame["source"]["presentationHint"] = "deemphasize"
                else:
                    frame["name"] = f"{f.name}  {_name(f.path)}:{f.line} (not found on this machine)"
                if f.library:
                    frame["presentationHint"] = "subtle"
            out.append(frame)
        return out

    def _module_scope(self, frame_id: int) -> dict[str, Any] | None:
        """The "Module" scope of a Python or module frame; None for other frames."""
        f = self._source_frame(frame_id)
        if f is None:
            return None
        held = self.node_source
        assert held is not None
        ref = ScopeRef(ScopeKind.MODULE, held[1].node, 0, frame_id - SOURCE_FRAME_ID)
        count = len(_module_facts(f)) + min(len(f.produced), _MAX_PRODUCED)
        return {"name": "Module", "variablesReference": self.variables.handles.create(ref), "namedVariables": count, "expensive": False}

    async def _module_variables(self, ref: ScopeRef) -> list[dict[str, Any]]:
        """The module's path and class, the line, then each node this line produced with its first output."""
        f = self._source_frame(SOURCE_FRAME_ID + (ref.source or 0))
        if f is None or self.listing is None:
            return []
        out = [{"name": k, "value": v, "variablesReference": 0} for k, v in _module_facts(f, self._files())]
        nodes = [self.listing.nodes[n] for n in f.produced[:_MAX_PRODUCED] if n in self.listing.nodes]
        firsts = [n.outputs[0] for n in nodes if n.outputs]
        worker = self._need_stopped()
        summaries = {s.name: s for s in await worker.summaries(p.SummariesArgs(tuple(dict.fromkeys(firsts)), False, 0))} if firsts else {}
        for n in nodes:
            first = summaries.get(n.outputs[0]) if n.outputs else None
            value = f"{first.name}: {first.text}" if first is not None else "no outputs"
            handle = self.variables.handles.create(ScopeRef(ScopeKind.LAST, n.id, 0)) if n.outputs else 0
            var: dict[str, Any] = {"name": n.label, "value": value, "variablesReference": handle}
            if handle:
                var["namedVariables"] = len(n.outputs)
            out.append(var)
        return out

    async def _python_breakpoints(self, source: dict[str, Any], wanted_lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """setBreakpoints on a file of the model's Python source: each line becomes the runtime's ``PATH:LINE``."""
        path = source.get("path")
        graph = self.graph
        remote = None
        reason = ""
        if not isinstance(path, str) or not path:
            reason = "only files with a path can hold breakpoints on the model's source"
        elif graph is None:
            reason = "no model is loaded: launch first"
        elif not graph.source_files:
            reason = "this model carries no Python stack traces (export it with torch.onnx.export(..., dynamo=True))"
        else:
            remote = self._files().remote_for(path, graph.source_files)
            if remote is None:
                names = ", ".join(dict.fromkeys(_name(f) for f in graph.source_files[:5]))
                reason = f"no node of this model comes from {os.path.basename(path)}: its stack traces name {names} (set pathMappings if they were moved)"
        wanted: list[Wanted] = []
        for i, bp in enumerate(wanted_lines):
            line = self._line_in(checked(bp, "line", int, where=f"breakpoints[{i}]"))
            if remote is None:
                wanted.append(Wanted(BreakpointKind.SOURCE, self.breakpoints.new_id(), (), line, reason))
                continue
            spec = p.BreakpointSpec(
                f"{remote}:{line}",
                checked(bp, "condition", str, None) or None,
                checked(bp, "hitCondition", str, None) or None,
                checked(bp, "logMessage", str, None) or None,
            )
            wanted.append(Wanted(BreakpointKind.SOURCE, self.breakpoints.new_id(), (spec,), line, file=remote))
        self.breakpoints.replace(BreakpointKind.SOURCE, wanted, source=str(path))
        if graph is not None:
            await self._apply_breakpoints()
        return self._line_bodies(wanted, source)


def _module_facts(f: p.SourceFrameInfo, files: SourceFiles | None = None) -> list[tuple[str, str]]:
    facts = [("module", "(model)" if f.module == "" else f.module or "unknown"), ("class", f.cls or "unknown")]
    if f.path:
        facts.append(("line", f"{_name(f.path)}:{f.line}" + (f"  {f.code}" if f.code else "")))
        local = files.local(f.path) if files is not None else None
        facts.append(("file", local or f"{f.path} (not found on this machine)"))
    return facts
