"""Comparing a run with a reference value by value, while it executes, and naming where they part ways.

Both sides advance in lockstep over the model's nodes in run order; each side's
values are dropped as soon as they are compared (or no later node needs them),
so memory stays bounded. A reference is a :class:`Source`: a dump read lazily
(:class:`DumpSource`), the same model on another provider (:class:`RunnerSource`),
another model matched by value name (:class:`ModelSource`), or the model as
onnxruntime optimizes it (:class:`OptimizedSource`, which can only show the
values the optimized graph still names).

The *first divergence* is the earliest node, in run order, whose outputs break
the tolerance while all of its compared inputs are within it: the origin of a
difference, not its propagation.
"""

from __future__ import annotations

import math
import operator
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from . import log as _log
from .dump import Dump, NodeStream, model_hash
from .engine import NodeRunner, check_providers, session_options
from .errors import GraphDapError
from .graph import Graph, Node, load_graph
from .inputs import InputsArg, resolve_inputs

__all__ = [
    "METRICS",
    "Comparison",
    "CompareError",
    "Condition",
    "DumpSource",
    "ModelSource",
    "OptimizedSource",
    "Reference",
    "Row",
    "RunnerSource",
    "Source",
    "Tolerance",
    "Verdict",
    "compare_arrays",
    "compare_model",
    "make_source",
    "parse_reference",
]

METRICS = ("max_abs", "max_rel", "mse", "cosine", "snr")
_CHUNK = 1 << 20
DEFAULT_ATOL, DEFAULT_RTOL = 1e-5, 1e-4
_log_ = _log.get_logger(__name__)


class CompareError(GraphDapError):
    """A comparison cannot be set up (bad reference, bad tolerance, nothing in common)."""


# -- tolerance and metrics -----------------------------------------------------------

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)\s*$")


@dataclass(frozen=True, slots=True)
class Condition:
    """``metric op threshold``: a value fails when this holds (``cosine<0.999``, ``max_abs>1e-3``)."""

    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Condition:
        m = _CONDITION.match(text)
        if not m or m.group(1) not in METRICS:
            raise CompareError(
                f"fail condition '{text}' is not understood; expected METRIC<VALUE or METRIC>VALUE "
                f"with METRIC one of {', '.join(METRICS)} (e.g. cosine<0.999, max_abs>1e-3)"
            )
        return cls(m.group(1), m.group(2), float(m.group(3)))

    def holds(self, metrics: Mapping[str, float]) -> bool:
        v = metrics.get(self.metric)
        if v is None or math.isnan(v):
            return True  # a metric that cannot be computed (NaN where the reference has none) fails
        return _OPS[self.op](v, self.threshold)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """When a value passes: like ``numpy.allclose(run, ref, rtol, atol)`` (NaN equal to NaN), unless
    ``fail_if`` conditions are given, in which case a value fails when any of them holds."""

    atol: float = 1e-5  # DEFAULT_ATOL
    rtol: float = 1e-4  # DEFAULT_RTOL
    fail_if: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not (self.atol >= 0 and self.rtol >= 0):
            raise CompareError(f"tolerances must be non-negative numbers, got atol={self.atol}, rtol={self.rtol}")

    @classmethod
    def make(cls, atol: float | None = None, rtol: float | None = None, fail_if: Iterable[str | Condition] = ()) -> Tolerance:
        conds = tuple(c if isinstance(c, Condition) else Condition.parse(c) for c in fail_if)
        return cls(DEFAULT_ATOL if atol is None else float(atol), DEFAULT_RTOL if rtol is None else float(rtol), conds)

    def describe(self) -> str:
        if self.fail_if:
            return "a value fails when " + " or ".join(str(c) for c in self.fail_if)
        return f"|run - ref| <= {self.atol:g} + {self.rtol:g} * |ref| everywhere (numpy.allclose; NaN matches NaN)"

    def to_dict(self) -> dict[str, Any]:
        return {"atol": self.atol, "rtol": self.rtol, "fail_if": [str(c) for c in self.fail_if]}


@dataclass(frozen=True, slots=True)
class ArrayComparison:
    """How one run value compares with its reference."""

    passed: bool
    metrics: dict[str, float]
    mismatches: int  # elements outside atol/rtol
    size: int
    note: str = ""


def compare_arrays(a: Any, b: Any, tolerance: Tolerance = Tolerance()) -> ArrayComparison:
    """Compare ``a`` (the run) with ``b`` (the reference), in chunks: bounded extra memory.

    max_abs = max|a-b|; max_rel = max |a-b|/|b|; mse = mean (a-b)^2; cosine = a.b/(|a||b|)
    and snr = 10 log10(sum b^2 / sum (a-b)^2) dB over the elements finite on both sides.
    """
    if isinstance(a, list) or isinstance(b, list):
        return _compare_sequences(a, b, tolerance)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return ArrayComparison(
            False, {}, int(max(a.size, b.size)), int(a.size), f"shape {_shape(a.shape)} vs reference {_shape(b.shape)}"
        )
    note = f"dtype {a.dtype} vs reference {b.dtype}" if a.dtype != b.dtype else ""
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        same = bool(np.array_equal(a, b))
        mism = 0 if same else int(np.count_nonzero(a != b))
        return ArrayComparison(same, {}, mism, int(a.size), note or "compared for equality")
    if a.dtype.kind in "biu" and b.dtype.kind in "biu" and np.array_equal(a, b):
        return ArrayComparison(True, _perfect(), 0, int(a.size), note)
    acc = _Acc()
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    for start in range(0, flat_a.size, _CHUNK):
        acc.add(flat_a[start : start + _CHUNK], flat_b[start : start + _CHUNK], tolerance)
    metrics = acc.metrics(int(a.size))
    if tolerance.fail_if:
        passed = not any(c.holds(metrics) for c in tolerance.fail_if)
    else:
        passed = acc.mismatches == 0
    return ArrayComparison(passed, metrics, acc.mismatches, int(a.size), note)


def _perfect() -> dict[str, float]:
    return {"max_abs": 0.0, "max_rel": 0.0, "mse": 0.0, "cosine": 1.0, "snr": math.inf}


def _compare_sequences(a: Any, b: Any, tolerance: Tolerance) -> ArrayComparison:
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
        la = len(a) if isinstance(a, list) else "a tensor"
        lb = len(b) if isinstance(b, list) else "a tensor"
        return ArrayComparison(False, {}, 1, 0, f"sequence of {la} vs reference {lb}")
    parts = [compare_arrays(x, y, tolerance) for x, y in zip(a, b)]
    worst: dict[str, float] = {}
    for p in parts:
        for k, v in p.metrics.items():
            worst[k] = v if k not in worst else (min(worst[k], v) if k in ("cosine", "snr") else max(worst[k], v))
    return ArrayComparison(
        all(p.passed for p in parts),
        worst,
        sum(p.mismatches for p in parts),
        sum(p.size for p in parts),
        "sequence: worst element",
    )


class _Acc:
    """Running sums of the metrics over chunks."""

    def __init__(self) -> None:
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.sum_sq = 0.0
        self.dot = 0.0
        self.aa = 0.0
        self.bb = 0.0
        self.noise = 0.0
        self.mismatches = 0

    def add(self, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> None:
        cplx = a.dtype.kind == "c" or b.dtype.kind == "c"
        ft = np.complex128 if cplx else np.float64
        x, y = a.astype(ft, copy=False), b.astype(ft, copy=False)
        with np.errstate(all="ignore"):
            special = (np.isnan(x) & np.isnan(y)) | (np.isinf(x) & np.isinf(y) & (x == y))
            finite = np.isfinite(x) & np.isfinite(y)
            diff = np.abs(x - y)
            diff[special] = 0.0
            diff[np.isnan(diff)] = np.inf
            ref = np.abs(y)
            bad = np.where(finite, diff > tol.atol + tol.rtol * ref, ~special)
            self.mismatches += int(np.count_nonzero(bad))
            if diff.size:
                self.max_abs = max(self.max_abs, float(diff.max()))
                rel = np.where(diff == 0, 0.0, diff / ref)
                rel[np.isnan(rel)] = np.inf
                self.max_rel = max(self.max_rel, float(rel.max()))
            self.sum_sq += float(np.sum(diff * diff))
            if finite.any():
                xf, yf, df = x[finite], y[finite], diff[finite]
                self.dot += float(np.real(np.vdot(yf, xf)))
                self.aa += float(np.real(np.vdot(xf, xf)))
                self.bb += float(np.real(np.vdot(yf, yf)))
                self.noise += float(np.sum(df * df))

    def metrics(self, size: int) -> dict[str, float]:
        if size == 0:
            return _perfect()
        if self.aa == 0 and self.bb == 0:
            cosine = 1.0
        elif self.aa == 0 or self.bb == 0:
            cosine = 0.0
        else:
            cosine = max(-1.0, min(1.0, self.dot / math.sqrt(self.aa * self.bb)))
        if self.noise == 0:
            snr = math.inf
        elif self.bb == 0:
            snr = -math.inf
        else:
            snr = 10 * math.log10(self.bb / self.noise)
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "mse": self.sum_sq / size, "cosine": cosine, "snr": snr}


def _shape(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape)) if len(shape) else "scalar"


# -- sources: where a side's values come from --------------------------------------


class Source(Protocol):
    """One side of a comparison: the values of a node's outputs, asked for in run order."""

    label: str

    def outputs(self, node: Node) -> Mapping[str, Any]:
        """Values of ``node``'s outputs that this side has (possibly none)."""
        ...

    def value_names(self) -> set[str]:
        """Every value name this side can give."""
        ...

    def input_values(self) -> Mapping[str, Any]:
        """The graph inputs this side ran with, where it knows them."""
        ...

    def close(self) -> None: ...


class RunnerSource:
    """The model run node by node (one-node sessions) on the given providers; forward in run order,
    starting over when asked for a node it has passed."""

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        providers: Sequence[str] | None = None,
        opt_level: str = "none",
        label: str | None = None,
    ) -> None:
        self.graph = graph
        self.runner = NodeRunner(graph, providers, opt_level)
        self.inputs = dict(inputs)
        self.stream = NodeStream(graph, self.inputs, self.runner)
        self.label = label or f"{_model_label(graph)} node by node on {', '.join(self.runner.providers)}"

    def outputs(self, node: Node) -> Mapping[str, Any]:
        return self.stream.run_to(node.order)

    def value_names(self) -> set[str]:
        return {o for n in self.graph.nodes for o in n.outputs if o}

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self.stream.reset()


class DumpSource:
    """Values read from a dump, one array at a time, by value name."""

    def __init__(self, dump: Dump | str | os.PathLike[str]) -> None:
        self.dump = dump if isinstance(dump, Dump) else Dump(dump)
        self.label = self.dump.describe()

    def outputs(self, node: Node) -> Mapping[str, Any]:
        return {o: self.dump.get(o) for o in node.outputs if o and self.dump.has(o)}

    def value_names(self) -> set[str]:
        return set(self.dump.names) - set(self.dump.input_names)

    def input_values(self) -> Mapping[str, Any]:
        return {n: self.dump.get(n) for n in self.dump.input_names if self.dump.has(n)}

    def close(self) -> None:
        self.dump.close()


class ModelSource:
    """Another model's values, matched by value name, run node by node in its own order.

    Values are produced as the other model runs and held only until asked for; a
    value asked for again after it was handed out starts the other model over.
    """

    def __init__(
        self,
        other: Graph,
        inputs: Mapping[str, Any],
        wanted: Iterable[str],
        providers: Sequence[str] | None = None,
        opt_level: str = "none",
    ) -> None:
        self.graph = other
        missing = [v.name for v in other.inputs if v.name not in inputs]
        if missing:
            raise CompareError(
                f"the other model's input '{missing[0]}' has no counterpart among this model's inputs "
                f"({', '.join(inputs) or 'none'}); both models must take inputs of the same names"
            )
        feeds = resolve_inputs(other, {v.name: inputs[v.name] for v in other.inputs})
        self.inputs = feeds
        self._outputs = {o for n in other.nodes for o in n.outputs if o}
        self._initializers = {t.name: t for t in other.model.graph.initializer}
        self.wanted = set(wanted) & (self._outputs | set(self._initializers))
        self.stream = NodeStream(other, feeds, NodeRunner(other, providers, opt_level))
        self._buffer: dict[str, Any] = {}
        self.label = f"{_model_label(other)} node by node on {', '.join(self.stream.runner.providers)}, matched by value name"

    def _produce(self, name: str) -> Any:
        if name in self._buffer:
            return self._buffer.pop(name)
        for attempt in range(2):
            while not self.stream.at_end:
                _, outs = self.stream.next()
                for k, v in outs.items():
                    if k in self.wanted:
                        self._buffer[k] = v
                if name in self._buffer:
                    return self._buffer.pop(name)
            if attempt == 0:
                self.stream.reset()
                self._buffer.clear()
        raise CompareError(f"the other model did not produce '{name}'")

    def outputs(self, node: Node) -> Mapping[str, Any]:
        out: dict[str, Any] = {}
        for o in node.outputs:
            if not o or o not in self.wanted:
                continue
            if o in self._initializers:
                out[o] = numpy_helper.to_array(self._initializers[o])
            else:
                out[o] = self._produce(o)
        return out

    def value_names(self) -> set[str]:
        return set(self._outputs)

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self._buffer.clear()
        self.stream.reset()


class OptimizedSource:
    """The whole model as onnxruntime optimizes it at ``opt_level``: only the values that the optimized
    graph still computes under their original names can be compared (fused values do not exist there).

    The optimized model (saved by onnxruntime) is run whole with those values added as outputs, in
    chunks of at most ``budget_bytes`` of outputs each, so memory stays bounded: one full run per chunk.
    """

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        opt_level: str = "all",
        providers: Sequence[str] | None = None,
        budget_bytes: int = 256 << 20,
    ) -> None:
        from .profile import optimize_model

        self.graph = graph
        self.opt_level = opt_level
        self.providers = check_providers(providers)
        self.inputs = dict(inputs)
        self._tmp = tempfile.TemporaryDirectory(prefix="graph-dap-opt-")
        self.model_path = optimize_model(graph, opt_level, self.providers, Path(self._tmp.name))
        self._model = onnx.load(str(self.model_path), load_external_data=False)
        produced = {o for n in self._model.graph.node for o in n.output if o}
        produced |= {o.name for o in self._model.graph.output}
        originals = [o for n in graph.nodes for o in n.outputs if o]
        self.surviving = [o for o in originals if o in produced]
        self.total_values = len(originals)
        self._chunk_of: dict[str, int] = {}
        self._chunks: list[list[str]] = []
        used = budget_bytes + 1
        for name in self.surviving:
            size = _estimated_bytes(graph, name)
            if used + size > budget_bytes and (not self._chunks or self._chunks[-1]):
                self._chunks.append([])
                used = 0
            self._chunks[-1].append(name)
            self._chunk_of[name] = len(self._chunks) - 1
            used += size
        self._current = -1
        self._values: dict[str, Any] = {}
        self.runs = 0
        self.label = (
            f"{_model_label(graph)} optimized by onnxruntime at level '{opt_level}' on {', '.join(self.providers)}, "
            f"run whole; its graph keeps {len(self.surviving)} of the model's {len(originals)} value names"
        )

    def _run_chunk(self, i: int) -> None:
        names = self._chunks[i]
        m = onnx.ModelProto()
        m.CopyFrom(self._model)
        have = {o.name for o in m.graph.output}
        used = {x for n in m.graph.node for x in n.input}
        keep_inputs = [v for v in m.graph.input if v.name in used or v.name in self.inputs]
        del m.graph.input[:]
        m.graph.input.extend(keep_inputs)
        m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names if n not in have)
        path = self.model_path.with_name(f"chunk_{i}.onnx")
        onnx.save(m, str(path))
        try:
            sess = ort.InferenceSession(str(path), session_options("none"), providers=self.providers)
            feeds = {v.name: self.inputs[v.name] for v in keep_inputs if v.name in self.inputs}
            outs = sess.run(names, feeds)
        except Exception as e:
            raise CompareError(
                f"onnxruntime failed on the model optimized at level '{self.opt_level}': {str(e).splitlines()[0]}"
            ) from None
        finally:
            path.unlink(missing_ok=True)
        self._values = dict(zip(names, outs))
        self._current = i
        self.runs += 1
        _log_.debug("optimized side: chunk %d of %d (%d values)", i + 1, len(self._chunks), len(names))

    def outputs(self, node: Node) -> Mapping[str, Any]:
        out: dict[str, Any] = {}
        for o in node.outputs:
            i = self._chunk_of.get(o) if o else None
            if i is None:
                continue
            if i != self._current:
                self._run_chunk(i)
            out[o] = self._values[o]
        return out

    def value_names(self) -> set[str]:
        return set(self.surviving)

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self._values = {}
        self._tmp.cleanup()


def _estimated_bytes(graph: Graph, name: str) -> int:
    info = graph.value_info(name)
    if info.shape is None or info.dtype is None or any(not isinstance(d, int) for d in info.shape):
        return 4 << 20
    try:
        itemsize = np.dtype(info.dtype).itemsize if info.dtype != "bfloat16" else 2
    except TypeError:
        itemsize = 8
    return math.prod(int(d) for d in info.shape if isinstance(d, int)) * itemsize


def _model_label(graph: Graph) -> str:
    return graph.path.name if graph.path else f"model '{graph.name}'"


# -- naming a reference ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reference:
    """What to compare against: ``dump`` (a path), ``provider`` (a name), ``model`` (a path) or ``opt_level``."""

    kind: str
    target: str

    KINDS = ("dump", "provider", "model", "opt_level")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise CompareError(f"unknown reference kind '{self.kind}'; expected one of {', '.join(self.KINDS)}")
        if not self.target:
            raise CompareError(f"reference '{self.kind}' needs a value")


def parse_reference(spec: str | Mapping[str, Any] | Reference) -> Reference:
    """A reference from a launch argument: ``"run.npz"``, ``"dump:run.npz"``, ``"provider:CUDA"``,
    ``"opt_level:all"`` (or ``opt:all``), ``"model:other.onnx"``, or ``{"dump": "run.npz"}``-style dicts."""
    if isinstance(spec, Reference):
        return spec
    if isinstance(spec, Mapping):
        items = [(k, v) for k, v in spec.items() if k in ("dump", "provider", "model", "opt_level", "optLevel")]
        if len(items) != 1 or not isinstance(items[0][1], str):
            raise CompareError('a reference is one of {"dump": PATH}, {"provider": NAME}, {"model": PATH}, {"opt_level": LEVEL}')
        k, v = items[0]
        return Reference("opt_level" if k == "optLevel" else k, v)
    text = str(spec).strip()
    kind, sep, rest = text.partition(":")
    aliases = {
        "dump": "dump",
        "provider": "provider",
        "model": "model",
        "opt": "opt_level",
        "opt_level": "opt_level",
        "opt-level": "opt_level",
    }
    if sep and kind in aliases:
        return Reference(aliases[kind], rest.strip())
    if text.lower().endswith(".npz"):
        return Reference("dump", text)
    if text.lower().endswith(".onnx"):
        return Reference("model", text)
    raise CompareError(
        f"reference '{text}' is not understood; give a dump (.npz), model:OTHER.onnx, provider:NAME or opt_level:LEVEL"
    )


def make_source(
    graph: Graph,
    inputs: Mapping[str, Any],
    reference: Reference,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    providers: Sequence[str] | None = None,
) -> Source:
    """The :class:`Source` a reference names, for ``graph`` run on ``inputs``."""
    from .engine import OPT_LEVELS

    base = Path(base_dir) if base_dir else Path.cwd()
    if reference.kind == "dump":
        return DumpSource(base / reference.target)
    if reference.kind == "provider":
        return RunnerSource(graph, inputs, [reference.target])
    if reference.kind == "model":
        other = load_graph(base / reference.target)
        return ModelSource(other, inputs, {o for n in graph.nodes for o in n.outputs if o}, providers)
    level = reference.target.lower()
    if level not in OPT_LEVELS:
        raise CompareError(f"unknown optimization level '{reference.target}'; expected one of {', '.join(OPT_LEVELS)}")
    if level == "none":
        return RunnerSource(graph, inputs, providers, label=f"{_model_label(graph)} unoptimized, node by node")
    return OptimizedSource(graph, inputs, level, providers)


# -- the comparison ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One compared value."""

    node: Node
    value: str
    shape: tuple[int, ...] | None
    dtype: str
    passed: bool
    metrics: dict[str, float]
    mismatches: int
    origin: bool = False  # this node is where a difference starts: it fails, its compared inputs pass
    note: str = ""

    def describe(self, metrics: Sequence[str] = METRICS) -> str:
        """``max_abs=0.01 max_rel=1.6 ...`` (or why there are no metrics)."""
        return _metrics_text(self, metrics)

    def to_dict(self, metrics: Sequence[str] = METRICS) -> dict[str, Any]:
        n = self.node
        return {
            "index": n.index,
            "order": n.order,
            "node": {"name": n.id, "op_type": n.op_type, "index": n.index},
            "value": self.value,
            "shape": None if self.shape is None else list(self.shape),
            "dtype": self.dtype,
            "metrics": {k: _json_number(self.metrics[k]) for k in metrics if k in self.metrics},
            "mismatches": self.mismatches,
            "pass": self.passed,
            "origin": self.origin,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`Comparison.observe` found at one node."""

    node: Node
    rows: tuple[Row, ...]
    failed: bool
    origin: bool  # the node's outputs fail while its compared inputs pass
    first: bool  # and no earlier node (in run order) has been found to be an origin

    @property
    def message(self) -> str:
        bad = next((r for r in self.rows if not r.passed), None)
        if bad is None:
            return f"{self.node.label}: {len(self.rows)} value(s) within tolerance"
        what = "first divergence" if self.first else "divergence" if self.origin else "propagated difference"
        return f"{what} at {self.node.label}: '{bad.value}' {_metrics_text(bad)}"


def _metrics_text(row: Row, metrics: Sequence[str] = METRICS) -> str:
    if not row.metrics:
        return row.note or "differs"
    parts = [f"{k}={_metric_num(k, row.metrics[k])}" for k in metrics if k in row.metrics]
    return " ".join(parts) + (f" ({row.note})" if row.note else "")


class Comparison:
    """Compares the values of a run, node by node, with a reference :class:`Source`.

    Call :meth:`observe` after each node runs (in any order: a debugger may step
    back or restart; a later observation of a value replaces the earlier one).
    """

    def __init__(
        self,
        graph: Graph,
        reference: Source,
        tolerance: Tolerance = Tolerance(),
        metrics: Sequence[str] = METRICS,
        run_label: str = "",
    ) -> None:
        bad = [m for m in metrics if m not in METRICS]
        if bad:
            raise CompareError(f"unknown metric '{bad[0]}'; expected any of {', '.join(METRICS)}")
        self.graph = graph
        self.reference = reference
        self.tolerance = tolerance
        self.metrics = tuple(metrics) or METRICS
        self.run_label = run_label
        self.notes: list[str] = []
        self.input_mismatches: list[str] = []
        self._rows: dict[str, Row] = {}
        self._status: dict[str, bool] = {}
        self._origins: dict[int, Node] = {}

    def reset(self) -> None:
        """Forget every observation (a restarted run)."""
        self._rows.clear()
        self._status.clear()
        self._origins.clear()
        self.input_mismatches.clear()

    def check_inputs(self, inputs: Mapping[str, Any]) -> list[str]:
        """Compare the graph inputs with those the reference ran with; the names that differ."""
        ref = self.reference.input_values()
        self.input_mismatches = []
        for name, value in inputs.items():
            if name in ref:
                ok = compare_arrays(value, ref[name], Tolerance(0.0, 0.0)).passed
                self._status[name] = ok
                if not ok:
                    self.input_mismatches.append(name)
        if self.input_mismatches:
            self.notes.append(
                f"the reference ran with other inputs ({', '.join(self.input_mismatches)}): "
                "differences start there, so no node is named as the first divergence"
            )
        return list(self.input_mismatches)

    def observe(self, node: Node, outputs: Mapping[str, Any]) -> Verdict:
        """Compare ``node``'s outputs (as the run computed them) with the reference's."""
        ref = self.reference.outputs(node)
        compared: list[tuple[str, Any, ArrayComparison]] = []
        for name in node.outputs:
            if not name or name not in outputs or name not in ref:
                continue
            result = compare_arrays(outputs[name], ref[name], self.tolerance)
            compared.append((name, outputs[name], result))
        failed = any(not r.passed for _, _, r in compared)
        inputs_ok = all(self._status.get(i, True) for i in node.all_inputs)
        origin = failed and inputs_ok
        if origin:
            self._origins[node.order] = node
        else:
            self._origins.pop(node.order, None)
        first = origin and min(self._origins) == node.order
        rows = []
        for name, value, r in compared:
            shape = None if isinstance(value, list) else tuple(np.shape(value))
            dtype = f"seq({value[0].dtype if value else '?'})" if isinstance(value, list) else str(np.asarray(value).dtype)
            row = Row(node, name, shape, dtype, r.passed, r.metrics, r.mismatches, origin and not r.passed, r.note)
            self._rows[name] = row
            self._status[name] = r.passed
            rows.append(row)
        if rows and _log_.level >= _log.DEBUG:
            _log_.debug("%s: %s", node.id, "; ".join(f"{r.value} {'pass' if r.passed else 'FAIL'}" for r in rows))
        return Verdict(node, tuple(rows), failed, origin, first)

    @property
    def rows(self) -> list[Row]:
        """Every compared value, in run order."""
        pos = {n.order: {o: i for i, o in enumerate(n.outputs)} for n in self.graph.nodes}
        return sorted(self._rows.values(), key=lambda r: (r.node.order, pos[r.node.order].get(r.value, 0)))

    @property
    def first_divergence(self) -> Row | None:
        """The first failing value of the earliest origin node, or None."""
        if not self._origins:
            return None
        order = min(self._origins)
        return next((r for r in self._rows.values() if r.node.order == order and not r.passed), None)

    @property
    def failed(self) -> int:
        return sum(1 for r in self._rows.values() if not r.passed)

    def matching(self, run_names: set[str]) -> dict[str, int]:
        """How many values the two sides share by name, and how many each has alone."""
        ref_names = self.reference.value_names() - set(self.graph.input_names) - set(self.graph.initializer_names)
        return {
            "matched": len(run_names & ref_names),
            "unmatched_run": len(run_names - ref_names),
            "unmatched_reference": len(ref_names - run_names),
        }

    def to_dict(self, run_names: set[str] | None = None) -> dict[str, Any]:
        """The table, as the CLI's ``--json`` prints it and a debug adapter returns it."""
        first = self.first_divergence
        names = run_names if run_names is not None else {o for n in self.graph.nodes for o in n.outputs if o}
        return {
            "rows": [r.to_dict(self.metrics) for r in self.rows],
            "first_divergence": None
            if first is None
            else {
                "node": {"name": first.node.id, "op_type": first.node.op_type, "index": first.node.index},
                "value": first.value,
                "metrics": {k: _json_number(first.metrics[k]) for k in self.metrics if k in first.metrics},
                "note": first.note,
            },
            "compared": len(self._rows),
            "failed": self.failed,
            **self.matching(names),
            "input_mismatches": list(self.input_mismatches),
            "run": self.run_label,
            "reference": self.reference.label,
            "tolerance": {**self.tolerance.to_dict(), "rule": self.tolerance.describe()},
            "metric_names": list(self.metrics),
            "notes": list(self.notes),
        }

    def table_text(self, only_failed: bool = False) -> str:
        """The table as text: index, node, op type, value, shape, each metric, pass/fail."""
        head = ["index", "node", "op", "value", "shape", *self.metrics, "result"]
        lines = []
        for r in self.rows:
            if only_failed and r.passed:
                continue
            cells = [str(r.node.index), r.node.id, r.node.op_type, r.value, _shape(r.shape) if r.shape is not None else "seq"]
            cells += [_metric_num(m, r.metrics[m]) if m in r.metrics else "-" for m in self.metrics]
            cells.append(("FAIL (origin)" if r.origin else "fail") if not r.passed else "pass")
            if r.note:
                cells[-1] += f"  {r.note}"
            lines.append(cells)
        widths = [min(max([len(head[i])] + [len(c[i]) for c in lines]), 40) for i in range(len(head) - 1)]

        def fmt(cells: list[str]) -> str:
            return (
                "  ".join(c.ljust(w) if i in (1, 2, 3, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
                + "  "
                + cells[-1]
            )

        return "\n".join([fmt(head)] + [fmt(c) for c in lines])


def _num(v: float, digits: int = 4) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def _metric_num(metric: str, v: float) -> str:
    """Cosine similarity with enough digits to see how far from 1 it is."""
    return _num(v, 8 if metric == "cosine" else 4)


def _json_number(v: float) -> float | str:
    """JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf"."""
    return v if math.isfinite(v) else _num(v)


# -- the whole thing, as the CLI runs it ------------------------------------------


@dataclass(slots=True)
class CompareResult:
    """A finished comparison and what it ran."""

    comparison: Comparison
    run_names: set[str]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.comparison.to_dict(self.run_names)
        d["notes"] = d["notes"] + [n for n in self.notes if n not in d["notes"]]
        return d


def compare_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    reference: Reference | str | Mapping[str, Any],
    inputs: InputsArg = None,
    *,
    dims: Mapping[str, int] | None = None,
    providers: Sequence[str] | None = None,
    opt_level: str = "none",
    tolerance: Tolerance = Tolerance(),
    metrics: Sequence[str] = METRICS,
    base_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CompareResult:
    """Run ``model`` and ``reference`` in lockstep and compare every value they share.

    The run is node by node at ``opt_level`` "none" (the model's own values) or, at
    another level, the whole optimized model (only the names it keeps). With a dump
    reference and no ``inputs``, the dump's inputs are used.
    """
    from .engine import OPT_LEVELS

    graph = model if isinstance(model, Graph) else load_graph(model)
    ref = parse_reference(reference)
    if opt_level not in OPT_LEVELS:
        raise CompareError(f"unknown optimization level '{opt_level}'; expected one of {', '.join(OPT_LEVELS)}")
    if ref.kind == "opt_level" and ref.target.lower() == opt_level:
        raise CompareError(f"both sides would run at optimization level '{opt_level}'; give the run another --opt-level")
    notes: list[str] = []
    dump_source: DumpSource | None = None
    if ref.kind == "dump":
        dump_source = DumpSource(Path(base_dir or Path.cwd()) / ref.target)
        if inputs is None:
            inputs = dump_source.dump.inputs_for(graph) or None
            if inputs:
                notes.append(f"inputs: the dump's ({', '.join(inputs)})")
        if dump_source.dump.note:
            notes.append(dump_source.dump.note)
        made_from = dump_source.dump.meta.get("model", {}).get("hash")
        if made_from and made_from != model_hash(graph):
            notes.append("the dump was made from another model file (its hash differs): values are matched by name")
    feeds = resolve_inputs(graph, inputs, dims)
    source: Source = (
        dump_source if dump_source is not None else make_source(graph, feeds, ref, base_dir=base_dir, providers=providers)
    )
    primary: Source
    if opt_level == "none":
        primary = RunnerSource(graph, feeds, providers)
    else:
        primary = OptimizedSource(graph, feeds, opt_level, providers)
    comparison = Comparison(graph, source, tolerance, metrics, run_label=primary.label)
    comparison.check_inputs(feeds)
    if isinstance(source, ModelSource):
        notes.append(
            f"values matched by name: {len(source.wanted)} of this model's values have a counterpart in {_model_label(source.graph)}"
        )
    if isinstance(primary, OptimizedSource) or isinstance(source, OptimizedSource):
        notes.append(
            "onnxruntime fuses nodes when it optimizes: values it fused away have no counterpart, so they are not compared"
        )
    run_names = primary.value_names()
    if not run_names & source.value_names():
        raise CompareError(f"the run and the reference share no value name ({primary.label} vs {source.label})")
    try:
        total = len(graph.nodes)
        for node in graph.nodes:
            outs = primary.outputs(node)
            if outs or not isinstance(primary, OptimizedSource):
                comparison.observe(node, outs)
            if on_progress is not None:
                on_progress(node.order + 1, total)
    finally:
        primary.close()
        source.close()
    return CompareResult(comparison, run_names, notes)
