"""Planning a segment: which nodes run in one onnxruntime call, what it reads, returns and watches.

A segment covers positions ``start..end-1`` of the run sequence. It returns the values
read after it and, for long segments, the values live at a few cuts (checkpoints, so a
later read recomputes a short stretch); it may recompute the small constants it reads
rather than be fed them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graph_dap.runtime.engine.bounds import Bounds
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.instrument import Instruments
from graph_dap.runtime.engine.store import nbytes
from graph_dap.runtime.engine.watch import WatchPlan, never_faults, watch_plan
from graph_dap.runtime.graph import Lookup, Node

CUTS = 8  # checkpoints kept inside a long segment, to bound recomputation
INLINE_CONSTANT_BYTES = 64 << 10
HEAVY_BYTES = 256 << 20  # weights over which an optimized segment keeps checkpoints (see plan)  # constants up to this size are recomputed in segments, not fed
_ELEMENTWISE = frozenset({"Add", "Sum", "Sub", "Mul", "Div", "Max", "Min"})  # (see SegmentPlanner.parts)


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    nodes: list[Node]  # the positions run
    ran: list[Node]  # they and the constant nodes recomputed with them
    wanted: list[str]  # outputs: values read after the segment, and checkpoints inside it
    watch: WatchPlan | None
    reads: list[str]  # values the segment reads from outside
    cuts: tuple[int, ...] = ()  # the positions whose live values the segment returns as checkpoints (optimized, see plan)


class SegmentPlanner:
    """Plans segments of one run sequence; plans are cached by everything they depend on."""

    def __init__(self, graph: Lookup, seq: Sequence[Node], last_use: Mapping[str, int]) -> None:
        self.graph = graph
        self.seq = seq
        self.last_use = last_use
        self._plans: dict[tuple[Any, ...], SegmentPlan] = {}
        self._parts: dict[tuple[int, int, int], list[int]] = {}
        self._bounds: Bounds | None = None

    def plan(
        self,
        start: int,
        end: int,
        *,
        filt: FaultFilter,
        dtypes: Mapping[str, str],
        budget: int,
        conditions: Callable[[int, set[str]], Iterable[str]],
        constants: Mapping[str, Any] | None,
        version: Any,
        instruments: Instruments | None = None,
        optimized: bool = False,
    ) -> SegmentPlan | None:
        """The plan of ``start..end-1``; None while the watch plan lacks types.

        ``conditions(end, produced)`` names the values a breakpoint condition at ``end``
        reads; ``constants`` are the computed constants when small ones may be recomputed
        in the segment (None: feed them all); ``version`` changes with the breakpoints;
        ``instruments``: control-flow nodes are watched inside too (else they are not in segments
        that watch: the session steps into them).
        """
        key = (start, end, filt, version, constants is not None, optimized)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        nodes = list(self.seq[start:end])
        if filt.active and any(o and o not in dtypes for n in nodes for o in n.outputs):
            return None
        last_use = self.last_use
        produced = {o for n in nodes for o in n.outputs if o}
        wanted = [o for n in nodes for o in n.outputs if o and last_use.get(o, -1) >= end]
        wanted += conditions(end, produced)
        cuts: list[int] = []
        if end - start >= 2 * CUTS and not optimized:
            # Checkpoints cost a quarter of the budget at most. An optimized segment keeps none: making a
            # value an output keeps onnxruntime from fusing it into its reader (its parts are cut where
            # that costs nothing instead, see :meth:`parts`).
            room = budget // 4
            for k in range(1, CUTS):
                cut = start + k * (end - start) // CUTS
                live = [o for n in self.seq[start:cut] for o in n.outputs if o and last_use.get(o, -1) >= cut and o not in wanted]
                cost = sum(self.estimated_bytes(o) for o in live)
                if cost <= room:
                    wanted += live
                    room -= cost
        elif end - start >= 2 * CUTS and self._heavy(nodes):
            # Over large weights (a language model's), an optimized segment keeps the values live at a few cuts where
            # each has two readers or more (materialized anyway: no fusion undone): a fault it finds is then confirmed
            # by the original nodes from the nearest of them, not from its start (half a 0.5 B model's weights in a
            # session of their own, at every run that finds one), and looked for after the last of those cuts whose
            # values are all finite (see Runs.cleared). Not in other segments: each value returned from onnxruntime's
            # blocked layout costs a reorder (7 checkpoints: resnet640's watched run 1.06x, its optimized graph 7
            # ReorderOutput nodes more than the user's).
            room = budget // 4
            for cut in self.parts(start, end, CUTS)[1:-1]:
                live = [o for o in self.live(start, cut) if o not in wanted]
                # (of symbolic size, as a prompt's activations are: small beside the weights; the store evicts them)
                cost = sum(size for size in (self.graph.value_info(o).nbytes for o in live) if size is not None)
                if cost <= room:
                    wanted += live
                    room -= cost
                    cuts.append(cut)
        bounds = self._bounds_over(constants) if optimized and filt.nan and filt.inf else None
        faultless = (lambda n: never_faults(n, constants, dtypes)) if constants is not None else None
        watch = (
            watch_plan(self.graph, nodes, dtypes, filt.never_prune, filt.nan, filt.inf, bounds, faultless, filt.intent.large, filt.nan_excluded)
            if filt.active
            else None
        )
        if watch is not None and instruments is not None:
            for n in nodes:
                if n.enterable and instruments.can(n):
                    inner = instruments.get(n, filt)
                    watch.watched.append(inner.flag)
                    watch.inner[inner.flag] = n
                    watch.rewrites[n.id] = inner
        ran = nodes
        if constants is not None:
            # Small constants computed in the segment, as the whole model computes them:
            # hundreds of feeds (BatchNorm parameters made by ConstantOfShape) cost more than the fills.
            ran = self.with_constants(nodes, constants)
            produced = {o for n in ran for o in n.outputs if o}
        reads = list(dict.fromkeys(i for n in ran for i in n.all_inputs if i not in produced))
        plan = SegmentPlan(nodes, ran, list(dict.fromkeys(wanted)), watch, reads, tuple(cuts))
        self._plans[key] = plan
        return plan

    def parts(self, start: int, end: int, count: int) -> list[int]:
        """Positions that cut ``start..end`` into about ``count`` parts, each where every value live across the
        cut has two readers or more (a residual, a branch: onnxruntime materializes those anyway, so running the
        parts in turn undoes no fusion). The bounds, ``start`` and ``end`` included.

        Where one can be had within half a part of the even cut, none of those values is read by an elementwise
        op: onnxruntime runs a Conv of a model input in its blocked layout (it reorders the input), but an Add or
        Sum of one in the plain layout, and so every residual Sum after it (resnet50 cut inside a stage: each
        identity block's Conv, Sum and Relu unfused, with a reorder each way). Computed once: each continue asks."""
        if (start, end, count) in self._parts:
            return list(self._parts[start, end, count])
        bounds = [start]
        half = (end - start) // (2 * count)
        for k in range(1, count):
            want = start + k * (end - start) // count
            near = sorted(range(max(want - half, bounds[-1] + 1), min(want + half, end)), key=lambda pos: abs(pos - want))
            # Of those, the one with the fewest bytes live across it: onnxruntime reorders each value a part
            # returns out of its blocked layout, and the next part reorders it back.
            clean = [pos for pos in near if self._cut(start, pos, clean=True)]
            cut = min(clean, key=lambda pos: self._live_bytes(start, pos)) if clean else None
            if cut is None:
                cut = next((pos for pos in range(max(want, bounds[-1] + 1), end) if self._cut(start, pos, clean=False)), None)
            if cut is not None:
                bounds.append(cut)
        self._parts[start, end, count] = bounds + [end]
        return bounds + [end]

    def _heavy(self, nodes: Sequence[Node]) -> bool:
        """Whether ``nodes`` read weights of :data:`HEAVY_BYTES` or more (declared sizes)."""
        weights = set(self.graph.initializer_names)
        read = {i for n in nodes for i in n.inputs if i in weights}
        return sum(self.estimated_bytes(i) for i in read) >= HEAVY_BYTES

    def live(self, start: int, pos: int) -> list[str]:
        """The values made by ``start..pos-1`` that are read at ``pos`` or after."""
        return [o for n in self.seq[start:pos] for o in n.outputs if o and self.last_use.get(o, -1) >= pos]

    def _live_bytes(self, start: int, pos: int) -> int:
        return sum(self.estimated_bytes(o) for o in self.live(start, pos))

    def _cut(self, start: int, pos: int, clean: bool) -> bool:
        """Whether the values of ``start..pos-1`` live at ``pos`` all have two readers or more (``clean``: none elementwise)."""
        live = self.live(start, pos)
        readers = [self.graph.consumers(o) for o in live]
        if not live or not all(len(r) >= 2 for r in readers):
            return False
        return not clean or not any(c.op_type in _ELEMENTWISE for r in readers for c in r)

    def _bounds_over(self, constants: Mapping[str, Any] | None) -> Bounds | None:
        """The bounds of the watch (see :mod:`.bounds`) over ``constants``, the weights as computed; none without them."""
        if constants is None:
            return None
        if self._bounds is None or self._bounds.constants is not constants:
            self._bounds = Bounds(self.graph, constants)
        return self._bounds

    def with_constants(self, nodes: list[Node], constants: Mapping[str, Any]) -> list[Node]:
        """``nodes`` preceded by the small constant nodes whose outputs they read (and what those read).

        Large constants (weights) stay fed: computed in the segment, onnxruntime would hold
        a second copy of them while it runs. Except a ConstantOfShape's (the onnx wheel's light
        models make their weights so): the session holds it as a view of its one value, and
        the segment fills it as the whole model does (folded into a pre-packed initializer above
        optimization level ``none``, filled at each run without); and a DequantizeLinear's (a
        quantized model's weights): onnxruntime fuses it with its reader into an integer kernel
        (QLinearConv, QLinearMatMul) as in the whole model; fed as a float weight, the segment would
        run a float kernel, not the user's.
        """
        needed: dict[int, Node] = {}
        frontier = [i for n in nodes for i in n.all_inputs]
        while frontier:
            p = self.graph.producer(frontier.pop())
            if p is None or not p.is_constant or p.order in needed or p.is_constant_op:
                continue  # Constant outputs are embedded like initializers
            refilled = p.op_type in ("ConstantOfShape", "DequantizeLinear")
            if not refilled and any(o and nbytes(constants.get(o)) > INLINE_CONSTANT_BYTES for o in p.outputs):
                continue
            needed[p.order] = p
            frontier.extend(p.all_inputs)
        return [needed[k] for k in sorted(needed)] + nodes

    def estimated_bytes(self, name: str) -> int:
        """Bytes of a value from its inferred type; huge when unknown (never worth a checkpoint)."""
        size = self.graph.value_info(name).nbytes
        return 1 << 62 if size is None else size
