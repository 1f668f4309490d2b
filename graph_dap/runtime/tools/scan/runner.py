"""One worker's side of a scan: the model loaded once, each input run with the watch, its result.

An :class:`InputScanner` holds one :class:`~graph_dap.runtime.session.DebugSession`
and restarts it on each input (the onnxruntime sessions it built are reused). A run
goes at close to plain speed in one segment, watched for NaN/Inf by in-graph sums; a
stop names the first node that produced one (inside a Loop or Scan body: with the
iteration). With a reference, the outputs are compared, and an input whose outputs
differ is run again in lockstep with the reference to find where the difference starts.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graph_dap.errors import GraphDapError, InputError
from graph_dap.kinds import FAULT_FILTERS, VALUE_FILTERS, BreakFilter
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.session import DebugSession
from graph_dap.runtime.stops import Stop, StopReason, node_ref
from graph_dap.runtime.tensor import summarize
from graph_dap.runtime.tools.lockstep import Lockstep, ReferenceSpec
from graph_dap.runtime.tools.metrics import Metric, Tolerance
from graph_dap.runtime.tools.references import ReferenceKind
from graph_dap.runtime.tools.scan.reference import OutputsReference, check_reference, compare_outputs
from graph_dap.runtime.tools.scan.results import BadNode, InputResult, ScanStatus
from graph_dap.runtime.tools.scan.sources import ItemLoader, WorkItem

#: Values kept per worker while a run goes: enough for the outputs; a stop recomputes what it shows.
SCAN_BUDGET_MB = 256.0
_STATUS = {StopReason.NAN: ScanStatus.NAN, StopReason.INF: ScanStatus.INF, StopReason.ERROR: ScanStatus.ERROR, StopReason.FAILED: ScanStatus.ERROR}


@dataclass(frozen=True, slots=True)
class ScanConfig:
    """How every input of a scan runs; the same for each worker, wherever it is."""

    model: str  # the model's path (absolute); with a shipped model, the name it goes by
    break_on: tuple[str, ...] = FAULT_FILTERS
    inf_exclude: tuple[str, ...] = ()
    nan_exclude: tuple[str, ...] = ()
    reference: str | None = None
    tolerance: Tolerance = field(default_factory=Tolerance)
    metric: str = Metric.MAX_ABS
    dims: tuple[tuple[str, int | tuple[int, ...]], ...] = ()  # (a dimension's size, or an input's whole shape)
    providers: tuple[str, ...] = ()
    base_dir: str = ""
    memory_budget_mb: float = SCAN_BUDGET_MB

    def check(self) -> None:
        """The options make sense together (a GraphDapError when not): mismatch needs a reference."""
        bad = [f for f in self.break_on if f not in BreakFilter.values()]
        if bad:
            raise GraphDapError(f"unknown --break-on filter '{bad[0]}'; expected any of {', '.join(BreakFilter)}")
        if BreakFilter.MISMATCH in self.break_on and not self.reference:
            raise GraphDapError("--break-on mismatch needs a --reference (provider:NAME, opt_level:LEVEL or model:OTHER.onnx)")
        if self.reference:
            check_reference(self.reference)

    def to_dict(self) -> dict[str, Any]:
        return {
            "break_on": list(self.break_on),
            "inf_exclude": list(self.inf_exclude),
            "nan_exclude": list(self.nan_exclude),
            "reference": self.reference,
            "tolerance": {**self.tolerance.to_dict(), "rule": self.tolerance.describe()} if self.reference else None,
            "metric": self.metric if self.reference else None,
            "dims": dict(self.dims),
            "providers": list(self.providers),
        }


def worker_name() -> str:
    """``host:pid``: which process ran an input."""
    return f"{socket.gethostname()}:{os.getpid()}"


class InputScanner:
    """Runs inputs of one model under the watch, one after another, and says how each went."""

    def __init__(self, config: ScanConfig, model_bytes: bytes | None = None) -> None:
        config.check()
        self.config = config
        if model_bytes is not None:
            self.graph: Graph = load_graph(onnx.load_from_string(model_bytes), config.model)
        else:
            self.graph = load_graph(config.model)
        self.loader = ItemLoader(self.graph, dict(config.dims))
        self.session: DebugSession | None = None
        self.base_dir = Path(config.base_dir or os.getcwd())
        self.reference = (
            OutputsReference(self.graph, check_reference(config.reference), self.base_dir, config.providers or None, model_bytes)
            if config.reference
            else None
        )
        self.name = worker_name()
        self.tolerance = config.tolerance
        self.quant: Any = None  # a quantized model against its float model: each group's errors per input
        if config.reference and check_reference(config.reference).kind is ReferenceKind.MODEL:
            from graph_dap.runtime.tools.quant.analysis import DEFAULT_RULE
            from graph_dap.runtime.tools.quant.dataset import GroupsPerInput, applies

            path = self.base_dir / check_reference(config.reference).target
            if applies(self.graph, path):
                self.quant = GroupsPerInput(self.graph, path, config.providers or None)
                if not config.tolerance.fail_if and config.tolerance == Tolerance():
                    self.tolerance = Tolerance(fail_if=DEFAULT_RULE)  # an SQNR rule fits a quantized model

    def scan(self, item: WorkItem) -> tuple[InputResult, dict[str, Any] | None]:
        """How ``item`` ran, and its feeds when it failed (to keep it for debugging)."""
        base = InputResult(item.index, item.id, item.label, ScanStatus.CLEAN, worker=self.name)
        try:
            feeds = self.loader.load(item)
        except InputError as e:
            return base.replace(status=ScanStatus.INVALID, message=str(e)), None
        faults = input_faults(feeds)
        began = time.perf_counter()
        try:
            stop = self._run(feeds)
        except (GraphDapError, MemoryError) as e:
            return base.replace(status=ScanStatus.ERROR, message=str(e) or type(e).__name__, seconds=time.perf_counter() - began, input_faults=faults), feeds
        seconds = time.perf_counter() - began
        result = base.replace(seconds=seconds, input_faults=faults)
        if stop.reason is not StopReason.END:
            return _stopped(result, stop), feeds
        assert self.session is not None
        # The outputs as the optimized run left them (what the user's own run gives): showing them exact would
        # recompute the whole model with its original nodes, a second run of every input.
        outputs = self.session.outputs()
        result = result.replace(outputs={k: summarize(v).to_dict() for k, v in outputs.items()})
        if self.reference is None:
            return result, None
        return self._compare(result, feeds, outputs)

    def _run(self, feeds: Mapping[str, Any]) -> Stop:
        watch = [f for f in self.config.break_on if f in VALUE_FILTERS] + [BreakFilter.ERROR]
        if self.session is None:
            self.session = DebugSession(
                self.graph,
                feeds,
                providers=list(self.config.providers) or None,
                break_on=watch,
                inf_exclude=self.config.inf_exclude,
                nan_exclude=self.config.nan_exclude,
                memory_budget_mb=self.config.memory_budget_mb,
                pausable=False,  # never paused: each segment runs whole, however long it takes
                base_dir=self.base_dir,
            )
        else:
            self.session.restart(feeds)
        return self.session.continue_()

    def _compare(self, result: InputResult, feeds: dict[str, Any], outputs: Mapping[str, Any]) -> tuple[InputResult, dict[str, Any] | None]:
        assert self.reference is not None and self.session is not None
        began = time.perf_counter()
        try:
            theirs = self.reference.outputs(feeds)
        except GraphDapError as e:
            return result.replace(status=ScanStatus.ERROR, message=str(e)), feeds
        comparison = compare_outputs(outputs, theirs, self.tolerance, self.config.metric)
        comparison["reference"] = self.reference.label
        born = None
        if self.quant is not None:
            try:
                comparison["groups"], born = self.quant.measure(feeds)
            except GraphDapError as e:
                return result.replace(status=ScanStatus.ERROR, message=str(e)), feeds
        comparison["seconds"] = round(time.perf_counter() - began, 6)
        if comparison["passed"]:
            return result.replace(comparison=comparison), None
        worst = comparison["worst_output"]
        message = f"output '{worst}' differs from the reference ({self.reference.label})"
        if self.quant is not None:
            node, details = self._born(born)
        else:
            node, details = self._first_divergence(comparison)
        if node is not None:
            message += f"; the difference starts at {node.id} ({node.op_type})"
        return result.replace(status=ScanStatus.MISMATCH, message=message, node=node, details=details, comparison=comparison), feeds

    def _first_divergence(self, comparison: dict[str, Any]) -> tuple[BadNode | None, dict[str, Any]]:
        """Run the input again in lockstep with the reference, node by node, to the first divergence."""
        assert self.session is not None and self.config.reference is not None
        spec = ReferenceSpec.make(
            self.config.reference,
            self.config.tolerance.atol,
            self.config.tolerance.rtol,
            [str(c) for c in self.config.tolerance.fail_if],
            self.base_dir,
        )
        self.session.restart()
        lockstep = Lockstep(self.session, spec)
        try:
            stop = lockstep.continue_(check_first=True, stop_on_mismatch=True)
        finally:
            lockstep.close()
        if stop.reason is StopReason.MISMATCH and stop.node is not None:
            return _bad_node(stop.node, stop.path), {"value": stop.value, **stop.details}
        return None, {"note": "no node breaks the tolerance while its inputs are within it (the outputs differ by accumulation)"}

    def _born(self, born: Any) -> tuple[BadNode | None, dict[str, Any]]:
        """A quantized model's mismatch: the first group whose own (local) error breaks the SQNR rule, at its op."""
        if born is None:
            return None, {"note": "no group's local error breaks the rule (the outputs differ by accumulation)"}
        pair = born.group.outputs[0]
        node = self.quant.quant_graph.producer(pair.logical) or born.group.quant_nodes[-1]
        return _bad_node(node, ()), {"group": born.group.name, "value": pair.quant_name, "local_snr": born.local.snr}

    def close(self) -> None:
        self.loader.close()


def _bad_node(node: Any, path: tuple[Any, ...]) -> BadNode:
    return BadNode.from_dict(node_ref(node, path))


def _stopped(result: InputResult, stop: Stop) -> InputResult:
    status = _STATUS.get(stop.reason)
    if status is None:  # no breakpoints are set: any other stop is a bug of ours, reported as one
        return result.replace(status=ScanStatus.ERROR, message=f"the run stopped for an unexpected reason ({stop.reason.value}): {stop.message}")
    node = _bad_node(stop.node, stop.path) if stop.node is not None else None
    details = dict(stop.details)
    if "inputs" in details:  # an error's summaries of the node's inputs: text already
        details["inputs"] = dict(details["inputs"])
    return result.replace(status=status, message=stop.message, node=node, tensor=stop.value, details=details)


def input_faults(feeds: Mapping[str, Any]) -> dict[str, str]:
    """The graph inputs that already hold NaN or Inf (the model is then not where it starts)."""
    out: dict[str, str] = {}
    for name, v in feeds.items():
        if not isinstance(v, np.ndarray) or v.dtype.kind not in "fc" or v.size == 0:
            continue
        if np.isfinite(v.min()) and np.isfinite(v.max()):
            continue
        out[name] = "nan" if np.isnan(v).any() else "inf"
    return out
