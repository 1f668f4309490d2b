"""What ``graph-dap run`` says of a stop: the report as JSON, and as text."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from graph_dap.kinds import OptLevel, StopReason

if TYPE_CHECKING:
    from graph_dap.runtime import DebugSession, Stop


class RunStatus(enum.StrEnum):
    """How ``graph-dap run`` ended (the report's ``status``)."""

    COMPLETED = "completed"  # the run reached the end of the graph
    STOPPED = "stopped"  # at a breakpoint or a fault the filters catch
    FAILED = "failed"  # a node failed with the error filter off


#: How the text report names the reason of a stop, where it is not the reason's own word.
_REASON_TEXT = {StopReason.NAN: "NaN", StopReason.INF: "Inf", StopReason.ERROR: "node error"}


def stop_report(session: DebugSession, stop: Stop) -> dict[str, Any]:
    """``run --json``: the stop as :meth:`Stop.to_dict` gives it, with a status and the summaries of what it is about."""
    from graph_dap.runtime import summarize
    from graph_dap.runtime.graph.source import source_fields

    completed = stop.completed
    node = stop.node
    summaries: dict[str, Any] = {}
    if node is not None:
        for name in list(node.all_inputs) + [o for o in node.outputs if o]:
            if session.has_value(name):
                summaries[name] = summarize(session.value(name)).to_dict()
    else:  # as the run computed them (at its optimization level, as a plain run does)
        for name, v in session.outputs().items():
            summaries[name] = summarize(v).to_dict()
    d = stop.to_dict()
    reason = None if completed else d["reason"]
    status = RunStatus.COMPLETED if completed else RunStatus.FAILED if stop.reason is StopReason.FAILED else RunStatus.STOPPED
    out = {
        "status": status,
        "reason": reason,
        **{k: d[k] for k in ("node", "tensor", "message", "details")},
        "summaries": summaries,
        "opt_level": session.executor.level_report(),
    }
    if node is not None:
        fields = source_fields(session.graph.sources, [node.id])
        out["node"] = {**out["node"], **fields}  # as compare's rows and profile's nodes carry them
        out.update(fields)
    return out


def stop_text(session: DebugSession, stop: Stop, report: dict[str, Any]) -> str:
    from graph_dap.runtime import summarize
    from graph_dap.runtime.stops import path_text
    node = stop.node
    lines: list[str] = []
    level = report["opt_level"]
    if report["status"] == RunStatus.COMPLETED:
        lines.append(f"completed: {len(session.sequence)} nodes ran")
        how = "" if level["asked"] == OptLevel.NONE else " (as the run computed them" + (f", at optimization level {level['asked']})" if level["kept"] else ")")
        lines.append(f"outputs{how}:")
        for name, v in session.outputs().items():
            lines.append(f"  {name}: {summarize(v).text()}")
        return "\n".join(lines + level_lines(level))
    assert node is not None
    why = _REASON_TEXT.get(report["reason"], str(report["reason"]))
    lines.append(f"stopped ({why}) at {node.id} ({node.op_type})")
    if stop.path:
        scope = session.graph.scope_of(node)
        lines.append(f"  in:    {path_text(stop.path)} > {node.id}")
        lines.append(f"  where: node {node.order + 1} of {len(scope.nodes)} in run order there, index {node.index} in its graph")
    else:
        lines.append(f"  where: node {node.order + 1} of {len(session.graph.nodes)} in run order, index {node.index} in the file")
    if stop.message:
        lines.append(f"  why:   {stop.message}")
    source = session.graph.sources.of(node)
    frame = source.user_frame if source is not None else None
    if frame is not None:
        lines.append(f"  source: {frame.location} in {frame.qualname}" + (f": {frame.code}" if frame.code else ""))
    if source is not None and source.module is not None:
        lines.append(f"  module: {source.module.text()}")
    lines.append("  inputs:")
    for name in node.all_inputs:
        text = summarize(session.value(name)).text() if session.has_value(name) else "(not computed)"
        lines.append(f"    {name}: {text}")
    if stop.reason in (StopReason.NAN, StopReason.INF):
        lines.append("  outputs:")
        for name in node.outputs:
            if name and session.has_value(name):
                lines.append(f"    {name}: {summarize(session.value(name)).text()}")
    return "\n".join(lines + level_lines(level))


def level_lines(level: dict[str, Any]) -> list[str]:
    """What the report says when a continue did not run at the optimization level asked (see ``Executor.level_report``)."""
    if level["kept"]:
        return []
    return [f"note: not all of the run was at optimization level {level['asked']}:"] + [f"  {line}" for line in level["unoptimized"]]


def json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    return str(o)
