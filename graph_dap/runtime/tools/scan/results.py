"""What a scan finds: one :class:`InputResult` per input, and the aggregates over them.

Results are plain data that cross process boundaries (pickled to a local worker's
driver, or through Ray's object store) and are written to ``scan.json`` as dicts.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graph_dap.runtime.stops import PathStep, path_text
from graph_dap.runtime.tools.metrics import HIGHER_IS_WORSE


class ScanStatus(enum.StrEnum):
    """How an input ended; all but ``clean`` are failures. ``scan.json`` writes them as their values."""

    CLEAN = "clean"
    NAN = "nan"
    INF = "inf"
    ERROR = "error"  # onnxruntime failed on a node, or the input could not be fed
    MISMATCH = "mismatch"  # an output breaks the tolerance of the reference
    INVALID = "invalid"  # the input could not be read or does not fit the model
    CRASH = "crash"  # the worker running it died


#: Every status an input can end with, in the order reports count them.
STATUSES = tuple(ScanStatus)
FAILED = frozenset(STATUSES[1:])
#: Statuses of inputs that never ran.
NOT_RUN = frozenset({ScanStatus.INVALID, ScanStatus.CRASH})


@dataclass(frozen=True, slots=True)
class BadNode:
    """Where an input first went wrong: the node, as :func:`~graph_dap.runtime.stops.node_ref` names it (inside
    bodies: with the enclosing levels and the iterations)."""

    id: str
    op_type: str
    index: int
    path: tuple[dict[str, Any], ...] = ()  # {"node", "attribute", "iteration"}, outermost first
    name: str = ""  # its own name in the model ('' when it has none)

    @property
    def where(self) -> str:
        """``loop > body (iteration 3) > tanh``; the node id alone in the main graph."""
        steps = tuple(PathStep(s["node"], s["attribute"], s.get("iteration")) for s in self.path)
        return f"{path_text(steps)} > {self.id}" if steps else self.id

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "op_type": self.op_type, "index": self.index, "path": [dict(s) for s in self.path], "where": self.where}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BadNode:
        return cls(str(d["id"]), str(d["op_type"]), int(d["index"]), tuple(dict(s) for s in d.get("path", ())), str(d.get("name", "")))


@dataclass(frozen=True, slots=True)
class InputResult:
    """How one input ran: its status, the first bad node, the tensor and counts there, the outputs, the time."""

    index: int
    id: str
    source: str
    status: ScanStatus
    message: str = ""
    node: BadNode | None = None
    tensor: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # output name -> TensorSummary.to_dict()
    input_faults: dict[str, str] = field(default_factory=dict)  # graph input -> "nan"/"inf" it already holds
    comparison: dict[str, Any] | None = None  # with a reference: per output, and the worst
    seconds: float = 0.0
    worker: str = ""
    attempts: int = 1
    failing_file: str | None = None  # DIR/failing/<id>.npz, relative to DIR

    @property
    def failed(self) -> bool:
        return self.status in FAILED

    def replace(self, **changes: Any) -> InputResult:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d.update(changes)
        return InputResult(**d)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "source": self.source,
            "status": self.status,
            "message": self.message,
            "node": None if self.node is None else self.node.to_dict(),
            "tensor": self.tensor,
            "details": json_safe(self.details),
            "outputs": json_safe(self.outputs),
            "input_faults": dict(self.input_faults),
            "comparison": json_safe(self.comparison),
            "seconds": round(self.seconds, 6),
            "worker": self.worker,
            "attempts": self.attempts,
            "failing_file": self.failing_file,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InputResult:
        if d["status"] not in STATUSES:
            raise ValueError(f"unknown status {d['status']!r}; expected one of {', '.join(STATUSES)}")
        return cls(
            index=int(d["index"]),
            id=str(d["id"]),
            source=str(d.get("source", "")),
            status=ScanStatus(str(d["status"])),
            message=str(d.get("message", "")),
            node=BadNode.from_dict(d["node"]) if d.get("node") else None,
            tensor=d.get("tensor"),
            details=dict(d.get("details") or {}),
            outputs=dict(d.get("outputs") or {}),
            input_faults=dict(d.get("input_faults") or {}),
            comparison=d.get("comparison"),
            seconds=float(d.get("seconds", 0.0)),
            worker=str(d.get("worker", "")),
            attempts=int(d.get("attempts", 1)),
            failing_file=d.get("failing_file"),
        )


def json_safe(value: Any) -> Any:
    """numpy scalars as numbers, tuples as lists, non-finite floats as "nan"/"inf"/"-inf" (JSON has none)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    return value


def metric_value(v: Any) -> float:
    """A metric as JSON holds it ("inf", "nan" as strings) back as a float."""
    return float(v) if isinstance(v, (int, float, str)) else math.nan


# -- aggregates ------------------------------------------------------------------------


def counts(results: Iterable[InputResult]) -> dict[str, int]:
    """How many inputs ended with each status (every status listed)."""
    c = Counter(r.status for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def first_bad_nodes(results: Iterable[InputResult]) -> list[dict[str, Any]]:
    """How many inputs fail first at each node, most first; each with its statuses and the inputs' ids."""
    groups: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.node is None or not r.failed:
            continue
        g = groups.setdefault(
            r.node.id, {"node": r.node.id, "op_type": r.node.op_type, "index": r.node.index, "count": 0, "statuses": Counter(), "inputs": []}
        )
        g["count"] += 1
        g["statuses"][r.status] += 1
        g["inputs"].append(r.id)
    out = sorted(groups.values(), key=lambda g: (-g["count"], g["index"], g["node"]))
    for g in out:
        g["statuses"] = dict(g["statuses"])
    return out


def slowest(results: Sequence[InputResult], k: int = 10) -> list[dict[str, Any]]:
    """The ``k`` inputs that took longest, slowest first."""
    ran = [r for r in results if r.status not in NOT_RUN]
    return [{"id": r.id, "seconds": round(r.seconds, 6), "status": r.status} for r in sorted(ran, key=lambda r: -r.seconds)[:k]]


def worst(results: Sequence[InputResult], metric: str, k: int = 10) -> list[dict[str, Any]]:
    """With a reference: the ``k`` inputs whose worst output is furthest from it by ``metric``."""
    scored = []
    for r in results:
        if not r.comparison or metric not in r.comparison.get("worst_metrics", {}):
            continue
        v = metric_value(r.comparison["worst_metrics"][metric])
        key = -v if metric in HIGHER_IS_WORSE else v
        scored.append((-math.inf if math.isnan(key) else key, r))  # NaN (non-finite on one side only) sorts first
    scored.sort(key=lambda t: t[0])
    return [
        {"id": r.id, "metric": metric, "value": json_safe(metric_value(r.comparison["worst_metrics"][metric])), "output": r.comparison.get("worst_output"), "status": r.status}
        for _, r in scored[:k]
        if r.comparison is not None
    ]
