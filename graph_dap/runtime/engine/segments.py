"""Running many nodes in one onnxruntime call, optionally watched for NaN and Inf.

A *segment* is a set of nodes (a contiguous run, or the ancestors of some values)
built into one model whose inputs are the values it reads from outside and whose
outputs are exactly what the caller needs afterwards. Constants and initializers
are embedded so onnxruntime can pre-pack weights as it does for the whole model;
weights in external data stay there, referenced, and onnxruntime reads the file itself.

Watching adds, right after each watched tensor's producer, ``ReduceSum`` to a
scalar (above optimization level ``none``, a float32 image is pooled by
``GlobalAveragePool`` first, see :func:`.watch.pooled_first`); all scalars are concatenated into
one small extra output, the sentinel, and the bounds' checks are computed from them after the run
(see :mod:`.sentinel`). A sum is non-finite iff the tensor holds NaN or Inf, except that a sum of
large finite values can overflow: hits are always confirmed on the exact tensor.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from graph_dap import log as _log
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine import cache, fidelity, ortio
from graph_dap.runtime.engine.assembly import add_memory, assemble_model, signature
from graph_dap.runtime.engine.budget import COUNTED_BYTES, WeightBudget, weight_bytes
from graph_dap.runtime.engine.fidelity import may_fuse
from graph_dap.runtime.engine.options import ORT_ERRORS, ort_message, session_options
from graph_dap.runtime.engine.sentinel import Readout
from graph_dap.runtime.engine.watch import WatchPlan, pooled_first, summed
from graph_dap.runtime.graph import Graph, Node

SENTINEL = "__graph_dap_sentinel"
WARM_UP_DELAY_S = 0.3  # how long a session built ahead waits before it warms up (see SegmentRunner.prepare)
WARM_UP_RUNS = 2  # onnxruntime's runs of a session reach their speed at the third (see SegmentRunner.prepare)
_logger = _log.get_logger(__name__)


@dataclass(slots=True)
class SegmentResult:
    values: dict[str, Any]
    watched: list[str]  # the watched tensors, in the order of ``sums``
    sums: np.ndarray | None  # one float32 sum per watched tensor
    watch: WatchPlan | None = None  # the watch the segment ran: the plan's, or one that leaves its fusions (see .fidelity)


# the session, what it fetches, how its sentinel reads, what it reads in place, the watch it runs (see .fidelity)
_Entry = tuple[ort.InferenceSession, list[str], Readout, list[Any], "WatchPlan | None"]


class SegmentRunner:
    """Builds and caches one session per (node set, outputs, watch plan, input types).

    Sessions can be built ahead, in another thread (:meth:`prepare`), while the debugger is
    stopped: a run of the same segment then waits for that build instead of starting its own.
    Above optimization level ``none`` the optimized graph is also kept on disk (:mod:`.cache`).
    """

    def __init__(self, graph: Graph, providers: list[str], opt_level: str, budget: WeightBudget | None = None) -> None:
        """``budget``: shared with the other runners of the model, so their sessions hold its weights about once."""
        self.graph = graph
        self.providers = providers
        self.opt_level = opt_level
        self.budget = budget
        self._sessions: dict[tuple[Any, ...], Future[_Entry]] = {}
        self._lock = threading.Lock()
        self.sessions_built = 0
        self.sessions_from_disk = 0
        # Constants the session computed once (a weight stored transposed, say): embedded, they are handed
        # to onnxruntime from memory (see :func:`.models.add_memory`), not written into the model.
        self.from_memory: frozenset[str] = frozenset()
        self._warming: dict[tuple[Any, ...], ort.RunOptions] = {}  # warm-up runs in flight, by session key
        self._claimed: set[tuple[Any, ...]] = set()  # sessions built ahead that a run has asked for
        self._prepared = False

    def clear(self) -> None:
        with self._lock:
            if self.budget is not None:
                for key in self._sessions:
                    self.budget.release(self._sessions, key)
            self._sessions.clear()

    @staticmethod
    def key(nodes: Sequence[Node], feeds: Mapping[str, Any], outputs: Iterable[str], watch: WatchPlan | None, version: int) -> tuple[Any, ...]:
        return (
            tuple(n.id for n in nodes),
            tuple(dict.fromkeys(outputs)),
            tuple(watch.watched) if watch else (),
            tuple(sorted(watch.scales.items())) if watch else (),  # (the bounds' checks: read with the session)
            tuple((k, signature(v)) for k, v in sorted(feeds.items())),
            version,
        )

    def built(self, key: tuple[Any, ...]) -> bool:
        """Whether the session of ``key`` is built (or being built)."""
        with self._lock:
            return key in self._sessions

    def _entry(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outs: list[str],
        watch: WatchPlan | None,
        version: int,
        key: tuple[Any, ...] | None = None,
    ) -> _Entry:
        key = self.key(nodes, feeds, outs, watch, version) if key is None else key
        with self._lock:
            future = self._sessions.get(key)
            mine = future is None
            if future is None:
                future = self._sessions[key] = Future()
        if not mine:
            if self.budget is not None:
                self.budget.used(self._sessions, key)
            return future.result()  # built, or being built by another thread: wait for it
        folded = self._folded_bytes(nodes)
        if self.budget is not None:
            self.budget.reserve(self._sessions, key, weight_bytes(constants.values()) + folded)
        try:
            entry = self._build(nodes, feeds, constants, outs, watch, folded)
        except BaseException as e:
            with self._lock:
                self._sessions.pop(key, None)
            if self.budget is not None:
                self.budget.release(self._sessions, key)
            future.set_exception(e)
            raise
        future.set_result(entry)
        return entry

    def _folded_bytes(self, nodes: Sequence[Node]) -> int:
        """The bytes of the large ConstantOfShape outputs a segment computes: onnxruntime folds them into
        initializers it holds (above optimization level ``none``; without, they are filled at each run)."""
        if self.opt_level == OptLevel.NONE:
            return 0
        total = 0
        for n in nodes:
            if n.is_constant and n.op_type == "ConstantOfShape":
                size = self.graph.value_info(n.outputs[0]).nbytes if n.outputs and n.outputs[0] else None
                total += size if size is not None and size >= COUNTED_BYTES else 0
        return total

    def _build(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outs: list[str],
        watch: WatchPlan | None,
        folded: int,
        check: bool = True,
    ) -> _Entry:
        """``folded``: the bytes of the weights it fills (see :meth:`_folded_bytes`). ``check``: a watched segment
        that may fuse is checked against its optimized graph without the watch (see :mod:`.fidelity`)."""
        memory: dict[str, np.ndarray] = {}
        model, readout = self.build_model(nodes, feeds, constants, outs, watch, memory)
        data = model.SerializeToString()
        so = self._options()
        held = add_memory(so, memory)
        saving: tuple[Path, Path] | None = None
        source: Any = data
        cacheable = self._cacheable(data, memory, folded)
        checked = check and cacheable and watch is not None and bool(watch.watched) and not watch.inner and may_fuse(nodes)
        scratch = tempfile.TemporaryDirectory(prefix="graph-dap-watched-") if checked else None
        optimized: Path | None = None  # where the optimized graph the session runs is saved
        if cacheable:
            entry = cache.key(data, self.opt_level, self.providers)
            hit = cache.lookup(entry)
            if hit is not None:
                so = self._options(OptLevel.NONE)  # the optimizer's graph as it made it: the same kernels on the same graph
                source = optimized = hit
            else:
                saving = cache.target(entry)
                if saving is not None:
                    so.optimized_model_filepath = str(saving[0])
                elif scratch is not None:
                    optimized = Path(scratch.name) / "watched.onnx"
                    so.optimized_model_filepath = str(optimized)
        try:
            try:
                sess = ort.InferenceSession(str(source) if isinstance(source, Path) else source, so, providers=self.providers)
            except ORT_ERRORS as e:
                if saving is not None:
                    saving[0].unlink(missing_ok=True)
                raise SegmentError(ort_message(e)) from None
            if saving is not None:
                cache.commit(*saving)
                optimized = saving[1] if saving[1].is_file() else None
            if checked and watch is not None and optimized is not None:
                regarded = self._regard(nodes, feeds, constants, outs, watch, optimized)
                if regarded is not watch:
                    return self._build(nodes, feeds, constants, outs, regarded, folded, check=False)
        finally:
            if scratch is not None:
                scratch.cleanup()
        if isinstance(source, Path):
            self.sessions_from_disk += 1
        self.sessions_built += 1
        fetch = outs + ([SENTINEL] if readout.watched else [])
        return sess, fetch, readout, held, watch

    def _cacheable(self, data: bytes, memory: Mapping[str, Any], folded: int) -> bool:
        """Whether a segment's optimized graph is kept on disk. Not with external data, nor with constants
        from memory: the key would not see their data change, and the optimizer's model would hold every
        weight. Nor with weights a ConstantOfShape fills: the optimizer's model would hold them folded
        (zfnet512: reading its 300 MB back took longer than folding them again)."""
        return (
            self.opt_level != OptLevel.NONE
            and len(data) <= cache.MAX_ENTRY_BYTES
            and not self.graph.weights.has_external
            and not memory
            and not folded
        )

    def _regard(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outs: list[str],
        watch: WatchPlan,
        optimized: Path,
    ) -> WatchPlan:
        """``watch``, or the watch that leaves the optimized graph's fusions alone when it undid one (see :mod:`.fidelity`)."""
        try:
            plain = self._optimized_plain(nodes, feeds, constants, outs)
            if fidelity.same_kernels(onnx.load(str(optimized), load_external_data=False), plain):
                return watch
        except (SegmentError, OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as e:  # type: ignore[attr-defined]
            _logger.info("the watched segment's fusions could not be checked (%s)", e)
            return watch
        regarded = fidelity.regard(self.graph.scope_of(nodes[0]), nodes, watch, fidelity.computed(plain))
        if regarded is not watch:
            _logger.info(
                "the watch undid fusions: %s left to the watched tensors downstream",
                ", ".join(w for w in watch.watched if w not in regarded.watched),
            )
        return regarded

    def _optimized_plain(self, nodes: Sequence[Node], feeds: Mapping[str, Any], constants: Mapping[str, Any], outs: list[str]) -> onnx.ModelProto:
        """The graph onnxruntime's optimizer makes of a segment without its watch (kept on disk as segments are)."""
        model, _ = self.build_model(nodes, feeds, constants, outs, None)
        data = model.SerializeToString()
        entry = cache.key(data, self.opt_level, self.providers)
        hit = cache.lookup(entry)
        if hit is not None:
            return onnx.load(str(hit), load_external_data=False)
        with tempfile.TemporaryDirectory(prefix="graph-dap-plain-") as tmp:
            saving = cache.target(entry)
            path = saving[0] if saving is not None else Path(tmp) / "plain.onnx"
            so = self._options()
            so.optimized_model_filepath = str(path)
            try:
                ort.InferenceSession(data, so, providers=self.providers)
            except ORT_ERRORS as e:
                path.unlink(missing_ok=True)
                raise SegmentError(ort_message(e)) from None
            optimized = onnx.load(str(path), load_external_data=False)
            if saving is not None:
                cache.commit(*saving)
            return optimized

    def prepare(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Iterable[str],
        watch: WatchPlan | None = None,
        version: int = 0,
        warm_up: bool = False,
    ) -> threading.Thread | None:
        """Build the session of a segment in the background (None when it is built already).

        ``warm_up``: ``feeds`` are the values the run will be fed, not placeholders: the session also
        runs :data:`WARM_UP_RUNS` times on them, its results dropped. onnxruntime's first run of a session
        is slower than the next ones (it sizes its memory arena and plans its buffers: resnet50 168 ms
        against 65), and so is its second (it lays its buffers out by the plan the first one recorded: the
        first continue after one warm-up run took det640 246-287 ms, after two 174-188, its plain run 160). The
        warm-up waits :data:`WARM_UP_DELAY_S` first, is skipped when a run has asked for the session
        meanwhile, and is stopped by the run that asks for it while it is in flight.
        """
        outs = list(dict.fromkeys(outputs))
        key = self.key(nodes, feeds, outs, watch, version)
        if self.built(key):
            return None
        self._prepared = True

        def build() -> None:
            try:
                sess, fetch, _, held, _ = self._entry(nodes, feeds, constants, outs, watch, version)
            except SegmentError as e:  # the run that needs it says so, or runs node by node
                _logger.info("building a segment ahead failed: %s", e)
                return
            if warm_up:
                # Not at once: a continue sent right after the stop (a script's, not a person's) needs
                # the cores for its own run; a person takes longer than this to press it.
                time.sleep(WARM_UP_DELAY_S)
                options = ort.RunOptions()
                with self._lock:
                    if key in self._claimed:
                        return  # a run needs it now: a warm-up beside it would only slow it down
                    self._warming[key] = options
                try:
                    for _ in range(WARM_UP_RUNS):
                        ortio.run(sess, fetch, feeds, options)
                        if key in self._claimed:
                            break
                except ORT_ERRORS + (ortio.FeedError,):
                    pass  # stopped by the run that needs it, or a failure that run will report
                finally:
                    self._warming.pop(key, None)
            del held

        thread = threading.Thread(target=build, name="graph-dap-prepare", daemon=True)
        thread.start()
        return thread

    def run(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Iterable[str],
        watch: WatchPlan | None = None,
        run_options: ort.RunOptions | None = None,
        version: int = 0,
    ) -> SegmentResult:
        """Run ``nodes`` (in run order); ``constants`` are embedded, ``feeds`` fed."""
        outs = list(dict.fromkeys(outputs))
        key = self.key(nodes, feeds, outs, watch, version)
        if self._prepared:
            with self._lock:
                self._claimed.add(key)
                warming = self._warming.get(key)
            if warming is not None:
                warming.terminate = True  # this run is the one that counts
        sess, fetch, readout, _, ran = self._entry(nodes, feeds, constants, outs, watch, version, key)

        try:
            results = ortio.run(sess, fetch, feeds, run_options)
        except ORT_ERRORS as e:
            raise SegmentError(ort_message(e)) from None
        except ortio.FeedError as e:
            raise SegmentError(str(e)) from None
        values = dict(zip(outs, results[: len(outs)]))
        return SegmentResult(values, readout.watched, readout.sums(results[-1]) if readout.watched else None, ran)

    def optimized_model(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Sequence[str],
        watch: WatchPlan | None,
    ) -> onnx.ModelProto:
        """The graph onnxruntime's optimizer makes of a segment (to say which fused node computed what)."""
        memory: dict[str, np.ndarray] = {}
        model, _ = self.build_model(nodes, feeds, constants, list(dict.fromkeys(outputs)), watch, memory)
        with tempfile.TemporaryDirectory(prefix="graph-dap-optimized-") as tmp:
            so = self._options()
            held = add_memory(so, memory)
            so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
            try:
                ort.InferenceSession(model.SerializeToString(), so, providers=self.providers)
            except ORT_ERRORS as e:
                raise SegmentError(ort_message(e)) from None
            del held
            return onnx.load(so.optimized_model_filepath, load_external_data=False)

    def _options(self, level: str | None = None) -> ort.SessionOptions:
        weights = self.graph.weights
        so = session_options(self.opt_level if level is None else level, weights.data_folder)
        so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
        return so

    def build_model(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Sequence[str],
        watch: WatchPlan | None,
        memory: dict[str, np.ndarray] | None = None,
    ) -> tuple[onnx.ModelProto, Readout]:
        """The segment's model and how its sentinel reads (see :mod:`.sentinel`); the constants
        of :attr:`from_memory` it embeds go into ``memory`` (when given) instead of the model."""
        produced = {o for n in nodes for o in n.outputs if o}
        reads = list(dict.fromkeys(i for n in nodes for i in n.all_inputs if i not in produced))
        inits: list[onnx.TensorProto] = []
        watch_set = set(watch.watched) if watch is not None else set()
        checked = watch.checked if watch is not None else set()
        rewrites = watch.rewrites if watch is not None else {}
        node_protos: list[onnx.NodeProto] = []
        sums: list[str] = []
        watched: list[str] = []
        pixels_of: dict[str, int] = {}  # a checked tensor -> the pixels its pool divided its sum by
        scope = self.graph.scope_of(nodes[0])
        if watch:
            inits.append(numpy_helper.from_array(np.array([1], np.int64), "__graph_dap_shape1"))
        for n in nodes:
            inner = rewrites.get(n.id)
            if inner is not None:  # a control-flow node watched inside: its flag is one more sum
                node_protos.extend(inner.protos)
                sums.append(inner.flag)
                watched.append(inner.flag)
            else:
                node_protos.append(n.proto)
            for o in n.outputs:
                if o in watch_set:
                    i = len(sums)
                    s, c, r = f"__gd_sum{i}", f"__gd_cast{i}", f"__gd_r{i}"
                    assert watch is not None
                    made, source = summed(o, watch, "", None, f"__gd_w{i}")  # (a check's source is never large: not scaled)
                    node_protos.extend(made)
                    info = self.graph.info_at(scope.path, o)
                    pixels = math.prod(d for d in (info.shape or ())[2:] if isinstance(d, int))
                    if self.opt_level != OptLevel.NONE and pooled_first(info) and not (o in checked and pixels > 2**24):  # (see bounds.LIMIT)
                        node_protos.append(helper.make_node("GlobalAveragePool", [source], [f"__gd_gap{i}"]))
                        source = f"__gd_gap{i}"
                    else:
                        pixels = 1
                    node_protos.append(helper.make_node("ReduceSum", [source], [s], keepdims=0))
                    node_protos.append(helper.make_node("Cast", [s], [c], to=TensorProto.FLOAT))
                    node_protos.append(helper.make_node("Reshape", [c, "__graph_dap_shape1"], [r]))
                    pixels_of[o] = pixels
                    sums.append(r)
                    watched.append(o)
        # Values the segment is fed, of any sign, that a check reads: sum(|y|), after the watched tensors' sums.
        fed = sorted(checked - produced)
        for k, y in enumerate(fed):
            node_protos += [
                helper.make_node("ReduceL1", [y], [f"__gd_l1_{k}"], keepdims=0),
                helper.make_node("Cast", [f"__gd_l1_{k}"], [f"__gd_l1f{k}"], to=TensorProto.FLOAT),
                helper.make_node("Reshape", [f"__gd_l1f{k}", "__graph_dap_shape1"], [f"__gd_fed{k}"]),
            ]
            sums.append(f"__gd_fed{k}")
            pixels_of[y] = 1
        at = {name: k for k, name in enumerate([*watched, *fed])}
        checks = []
        for o, check in (watch.scales.items() if watch is not None else ()):
            if o in at:  # a bound's check (see .bounds): A * sum + A' * sum' ... + B, each sum times its pool's pixels
                read = [(o, check.scale), *check.terms]
                checks.append((at[o], [(at[y], a * pixels_of[y]) for y, a in read], check.offset))
        readout = Readout.of(watched, len(fed), sorted(checks))
        if sums:
            node_protos.append(helper.make_node("Concat", sums, [SENTINEL], axis=0))
        outs = list(outputs) + ([SENTINEL] if sums else [])
        holders = [n for n in nodes if n.has_subgraphs or n.calls is not None]
        declared_for = {r for n in holders for r in n.all_inputs}
        declared = {r: self.graph.info_at(scope.path, r) for r in reads}
        model = assemble_model(
            self.graph.model,
            node_protos,
            "segment",
            feeds,
            constants,
            reads,
            outs,
            inits,
            opsets=scope.opsets,
            declared=declared,
            declared_for=declared_for,
            reference=self.graph.weights.reference,
            memory=memory,
            from_memory=self.from_memory,
        )
        return model, readout


class SegmentError(Exception):
    """onnxruntime could not build or run a segment; the caller falls back to single nodes."""




