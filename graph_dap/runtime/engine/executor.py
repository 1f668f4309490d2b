"""Running nodes for a session: one node, or several in one onnxruntime call, over its values.

The :class:`Executor` is where a session's runs reach onnxruntime. It splits what a
node reads into *embedded* values (initializers and constant-node outputs, which
onnxruntime pre-packs as in the whole model) and *fed* ones, counts every execution
and call, and learns the dtype of every value it sees (the NaN/Inf watch plan needs them).

Single nodes and recomputations always run without graph optimizations: what they
compute is the original graph's values, exactly. A continue's segments run at the
session's optimization level (``opt_level``, onnxruntime's own default ``all``):
their results are the optimized graph's, which can differ in the last bits.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from graph_dap import log as _log
from graph_dap.kinds import OptLevel, ValueKind
from graph_dap.runtime.engine import ortio
from graph_dap.runtime.engine.assembly import MEMORY_BYTES
from graph_dap.runtime.engine.budget import WeightBudget, weight_bytes
from graph_dap.runtime.engine.fusion import Fusions, whole_model_fusions
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.options import ORT_ERRORS, check_opt_level, ort_message, session_options
from graph_dap.runtime.engine.planning import CUTS
from graph_dap.runtime.engine.segments import SegmentError, SegmentResult, SegmentRunner
from graph_dap.runtime.engine.store import nbytes
from graph_dap.runtime.engine.watch import WatchPlan
from graph_dap.runtime.graph import Graph, Node

Getter = Callable[[str], Any]
_logger = _log.get_logger(__name__)
_NOTES = 8  # stretches that ran without the asked optimizations, noted for the report


def split_reads(
    reads: Iterable[str], embedded: Collection[str], constants: Mapping[str, Any], get: Getter
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``reads`` as (feeds, embedded constants): names in ``embedded`` come from ``constants``, the rest from ``get``.

    As in the whole model, initializers and Constant outputs are embedded in a session
    (onnxruntime pre-packs constant weights, which changes the last bits); the rest is fed.
    """
    feeds: dict[str, Any] = {}
    embed: dict[str, Any] = {}
    for name in dict.fromkeys(reads):
        if name in embedded:
            embed[name] = constants[name]
        else:
            feeds[name] = get(name)
    return feeds, embed


def value_kind(value: Any) -> str:
    """What the watch plan knows of a run-time value: its dtype, ``seq`` or ``other``."""
    if isinstance(value, np.ndarray):
        return str(value.dtype)
    return "seq" if isinstance(value, list) else "other"


class Executor:
    """Runs nodes of one graph through onnxruntime, embedding ``embedded`` values and feeding the rest."""

    def __init__(self, graph: Graph, providers: Sequence[str] | None, opt_level: str, embedded: Collection[str]) -> None:
        self.graph = graph
        self.opt_level = check_opt_level(opt_level)
        # One budget for every session of the model: together they hold its weights about once (see :mod:`.budget`),
        # and a recomputation between two of a segment's checkpoints beside it (a fault confirmed by the original
        # nodes does not let the run's session go, to be built again at the next continue).
        total = graph.weights.total_bytes
        self.budget = WeightBudget(total + total // CUTS)
        self.runner = NodeRunner(graph, providers, OptLevel.NONE, self.budget)
        self.exact = SegmentRunner(graph, self.runner.providers, OptLevel.NONE, self.budget)  # recomputations: the original graph's values
        # Whether sessions of a segment's parts fit beside the segment's own. A model whose weights fill the
        # budget still runs its continues at ``opt_level``: the level is the user's, never the budget's.
        self.roomy = 2 * graph.weights.total_bytes <= self.budget.limit
        self.segments = SegmentRunner(graph, self.runner.providers, self.opt_level, self.budget) if self.opt_level != OptLevel.NONE else self.exact
        self.unoptimized: list[str] = []  # what a continue ran node by node without the asked optimizations, and why
        self._whole: ort.InferenceSession | None = None
        self._fusions: list[Fusions | None] = []  # (computed once, when first asked for)
        self._fusions_lock = threading.Lock()
        self.embedded = frozenset(embedded)
        self._executions: Counter[str] = Counter()
        self._segments_ran: list[Sequence[Node]] = []  # counted into executions when they are read
        self.ort_calls = 0
        self.dtypes: dict[str, str] = {}  # value -> dtype, or "seq"/"other"/the declared kind
        for v in graph.value_names():
            info = graph.value_info(v)
            if info.kind != ValueKind.TENSOR:
                self.dtypes[v] = info.kind
            elif info.dtype:
                self.dtypes[v] = info.dtype
        self._dropout_masks()

    def _dropout_masks(self) -> None:
        """The dtype of a Dropout's mask, which onnx's shape inference leaves untyped in old opsets
        (inception_v1, vgg19): without it the first watched continue would run node by node to learn it."""
        version = self.graph.opsets.get("ai.onnx", 0)
        for n in self.graph.nodes:
            if n.op_type == "Dropout" and n.domain in ("", "ai.onnx") and len(n.outputs) > 1 and n.outputs[1]:
                source = self.dtypes.get(n.inputs[0]) if n.inputs else None
                mask = "bool" if version >= 10 else source
                if mask and n.outputs[1] not in self.dtypes:
                    self.dtypes[n.outputs[1]] = mask

    def computed_constants(self, computed: Mapping[str, Any]) -> None:
        """The constants the session computed once at start: optimized segments embed the large ones
        from memory (see :attr:`.SegmentRunner.from_memory`; a ConstantOfShape's they fill themselves),
        and the budget makes room for them, folded or handed over."""
        if not self.optimized:
            return
        large = {k for k, v in computed.items() if nbytes(v) >= MEMORY_BYTES}
        self.segments.from_memory = frozenset(large)
        self.budget.limit = max(self.budget.limit, self.graph.weights.total_bytes + weight_bytes(computed[k] for k in large))

    @property
    def executions(self) -> Counter[str]:
        """How many times each node ran (by id). Segments are counted in when it is read: a continue
        through densenet121 would count 1,746 ids each time (0.13 ms)."""
        if self._segments_ran:
            ran, self._segments_ran = self._segments_ran, []
            for nodes in ran:
                self._executions.update(n.id for n in nodes)
        return self._executions

    def _count(self, nodes: Sequence[Node]) -> None:
        self._segments_ran.append(nodes)
        if len(self._segments_ran) >= 256:  # (a long session that never reads them)
            self.executions  # noqa: B018

    @property
    def providers(self) -> list[str]:
        return self.runner.providers

    def split(
        self, reads: Iterable[str], get: Getter, constants: Mapping[str, Any], embedded: Collection[str] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``reads`` as (feeds, embedded constants), by :func:`split_reads`; ``embedded`` defaults to the model's."""
        return split_reads(reads, self.embedded if embedded is None else embedded, constants, get)

    def execute(
        self,
        node: Node,
        get: Getter,
        constants: Mapping[str, Any],
        version: int,
        count: bool = True,
        embedded: Collection[str] | None = None,
    ) -> dict[str, Any]:
        """``node``'s outputs by name; ``count=False`` for a look ahead that is not a step."""
        feeds, embed = self.split(node.all_inputs, get, constants, embedded)
        if count:
            self.executions[node.id] += 1
        self.ort_calls += 1
        outs = self.runner.run(node, feeds, embed, version)
        for k, v in outs.items():
            self.dtypes.setdefault(k, value_kind(v))
        return outs

    def run_nodes(
        self,
        nodes: Sequence[Node],
        wanted: Sequence[str],
        get: Getter,
        constants: Mapping[str, Any],
        version: int,
        embedded: Collection[str] | None = None,
    ) -> dict[str, Any]:
        """Outputs ``wanted`` of ``nodes`` (in run order) in one call; node by node where a segment cannot be built."""
        if len(nodes) == 1:
            return self.execute(nodes[0], get, constants, version, embedded=embedded)
        produced = {o for n in nodes for o in n.outputs if o}
        reads = [i for n in nodes for i in n.all_inputs if i not in produced]
        feeds, embed = self.split(reads, get, constants, embedded)
        try:
            result = self.exact.run(nodes, feeds, embed, wanted, version=version)
        except SegmentError as e:
            # Node by node, which names the node that fails.
            _logger.info("%d nodes in one call failed in onnxruntime (%s); running them node by node", len(nodes), e)
            local: dict[str, Any] = {}

            def inner(name: str) -> Any:
                return local[name] if name in local else get(name)

            for n in nodes:
                local.update(self.execute(n, inner, constants, version, embedded=embedded))
            return {k: local[k] for k in wanted}
        self.ort_calls += 1
        self._count(nodes)
        return result.values

    def run_whole(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The graph outputs of the whole model run in one onnxruntime session at ``opt_level``, as a
        plain ``InferenceSession`` runs it (the model file itself when it has one). SegmentError when it fails."""
        if self._whole is None:
            graph = self.graph
            source: Any = str(graph.path) if graph.path is not None and graph.path.is_file() else graph.model.SerializeToString()
            try:
                self._whole = ort.InferenceSession(source, session_options(self.opt_level, graph.weights.data_folder), providers=self.providers)
            except ORT_ERRORS as e:
                raise SegmentError(ort_message(e)) from None
        names = list(self.graph.output_names)
        try:
            results = ortio.run(self._whole, names, inputs)
        except ORT_ERRORS as e:
            raise SegmentError(ort_message(e)) from None
        except ortio.FeedError as e:
            raise SegmentError(str(e)) from None
        self.ort_calls += 1
        return dict(zip(names, results))

    def fusions(self) -> Fusions | None:
        """Where onnxruntime's optimized graph of the whole model, at the continues' level, computes each value
        (None at level ``none``, or for a model too large to optimize a second time only to say so)."""
        with self._fusions_lock:
            if not self._fusions:
                level = self.segments.opt_level
                self._fusions.append(whole_model_fusions(self.graph, level, self.providers) if self.optimized else None)
            return self._fusions[0]

    def ran_unoptimized(self, nodes: Sequence[Node], why: str) -> None:
        """A continue ran ``nodes`` one by one without optimizations instead of in one call at ``opt_level``: noted,
        so that the run's report and the debugger's end-of-run message say so (:meth:`level_report`)."""
        if not self.optimized or not nodes or len(self.unoptimized) >= _NOTES:
            return
        what = f"{nodes[0].id}" if len(nodes) == 1 else f"{nodes[0].id} .. {nodes[-1].id} ({len(nodes)} nodes)"
        self.unoptimized.append(f"{what} ran node by node without optimizations: {why}")

    def level_report(self) -> dict[str, Any]:
        """The optimization level asked and whether every continue ran at it: ``{asked, kept, unoptimized}``."""
        return {"asked": str(self.opt_level), "kept": not self.unoptimized, "unoptimized": list(self.unoptimized)}

    @property
    def optimized(self) -> bool:
        """Whether a continue's segments run through onnxruntime's optimizer (their values are then approximate)."""
        return self.segments is not self.exact

    def run_segment(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        embedded: Mapping[str, Any],
        wanted: Sequence[str],
        watch: WatchPlan | None,
        run_options: ort.RunOptions,
        version: int,
    ) -> SegmentResult:
        """A planned segment (see :mod:`.planning`) in one call, at the session's optimization level;
        raises SegmentError when onnxruntime cannot."""
        result = self.segments.run(nodes, feeds, embedded, wanted, watch, run_options, version)
        self.ort_calls += 1
        self._count(nodes)
        return result
