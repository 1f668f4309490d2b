"""The three errors of each group: accumulated, local and quantization-only.

- *accumulated*: the quantized model's value against the float model's (everything before counts);
- *local*: the group's quantized nodes run on the float model's own values at its inputs, quantized
  as the model quantizes them, against the group's float nodes on those same (dequantized) inputs:
  the error the group itself adds (its weights, its arithmetic, its output's quantization), not
  its inputs' quantization, which is their producers';
- *quantization-only*: the float tensor through its own Q/DQ round trip (rounding and clipping).

Both models run once, node by node, in lockstep over the groups (:class:`~.stream.ValueStream`):
a float value is kept only until the groups that read it are done, so memory stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graph_dap.runtime import passes
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.tools.metrics import compare_arrays
from graph_dap.runtime.tools.quant.groups import Group
from graph_dap.runtime.tools.quant.local import LocalModel
from graph_dap.runtime.tools.quant.pairing import Pairing
from graph_dap.runtime.tools.quant.params import CHUNK, CHUNKED_FROM, QuantParams
from graph_dap.runtime.tools.quant.stream import Sessions, ValueStream, WholeRun, total_bytes, value_bytes
from graph_dap.runtime.tools.quant.view import Form, ModelView

__all__ = ["Error", "GroupErrors", "Scratch", "as_read", "evaluate_groups", "measure", "quant_value_bytes", "readable_value"]


@dataclass(frozen=True, slots=True)
class Error:
    """How far a value is from the float one: SQNR (dB), max_abs, mse, cosine, and max_abs in quantization steps."""

    snr: float
    max_abs: float
    mse: float
    cosine: float
    signal: float  # sum of the float value squared (SQNRs over several values or inputs add these up)
    noise: float  # sum of the differences squared
    size: int
    steps: float | None = None  # max_abs / scale (None: no scale)

    def metrics(self) -> dict[str, float]:
        """The metrics by name, as fail conditions read them (cosine only where it was computed)."""
        d = {"snr": self.snr, "max_abs": self.max_abs, "mse": self.mse}
        if not (math.isnan(self.cosine) and math.isfinite(self.noise)):
            d["cosine"] = self.cosine
        return d

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: _num(v) for k, v in self.metrics().items()}
        if self.steps is not None:
            d["steps"] = _num(self.steps)
        return d

    @staticmethod
    def combine(errors: Sequence[Error]) -> Error:
        """One error over several values (a group's outputs, a data set's inputs): energies added, maxima taken."""
        signal = sum(e.signal for e in errors)
        noise = sum(e.noise for e in errors)
        size = sum(e.size for e in errors)
        steps = [e.steps for e in errors if e.steps is not None]
        return Error(
            _snr(signal, noise),
            max(e.max_abs for e in errors),
            sum(e.mse * e.size for e in errors) / max(size, 1),
            min(e.cosine for e in errors) if not any(math.isnan(e.cosine) for e in errors) else math.nan,  # NaN: not computed
            signal,
            noise,
            size,
            max(steps) if steps else None,
        )


def _num(v: float) -> float | str:
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def _snr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def measure(
    value: np.ndarray, reference: np.ndarray, params: QuantParams | None = None, *, cosine: bool = True, signal: float | None = None,
    scratch: Scratch | None = None, sums: passes.Sums | None = None,
) -> Error:
    """``value`` against the float ``reference``: the sums of their difference in one pass (:mod:`.passes`), else
    float32 BLAS dot products over it, a chunk at a time; NaN or Inf on one side fail (as
    :func:`~graph_dap.runtime.tools.metrics.compare_arrays` says). ``cosine=False`` leaves the cosine out (NaN: not
    computed) and ``signal`` (the reference's sum of squares, when known) saves a sum; ``scratch`` holds the difference;
    ``sums``: the difference's, computed already (a round trip's own: :meth:`.QuantParams.measured_round_trip`)."""
    a = np.asarray(value, np.float32).reshape(-1)
    b = np.asarray(reference, np.float32).reshape(-1)
    if a.shape != b.shape:
        return Error(-math.inf, math.inf, math.inf, math.nan, 0.0, math.inf, int(b.size))
    if not a.size:
        return Error(math.inf, 0.0, 0.0, 1.0, 0.0, 0.0, 0)
    per_part = params is not None and not params.per_tensor  # its steps need the whole difference, channel by channel
    if per_part:
        sums = None
    elif sums is None:
        sums = passes.diff_sums(a, b)
    buf = None
    if sums is None:
        step = a.size if per_part or a.size < CHUNKED_FROM else CHUNK
        buf = scratch.take(min(a.size, step)) if scratch is not None else np.empty(min(a.size, step), np.float32)
        noise, squares, cross, high, low = 0.0, 0.0, 0.0, -math.inf, math.inf
        for i in range(0, a.size, step):
            x, y = a[i : i + step], b[i : i + step]
            d = np.subtract(x, y, out=buf[: x.size])
            noise += float(np.dot(d, d))
            if signal is None:
                squares += float(np.dot(y, y))
            if cosine:
                cross += float(np.dot(d, y))
            high, low = max(high, float(d.max())), min(low, float(d.min()))
        sums = passes.Sums(noise, squares, cross, high, low, int(a.size))
    if signal is not None:
        sums = passes.Sums(sums.noise, signal, sums.cross, sums.high, sums.low, sums.size)
    if not (math.isfinite(sums.noise) and math.isfinite(sums.signal)):
        m = compare_arrays(value, reference).metrics
        return Error(m["snr"], m["max_abs"], m["mse"], m["cosine"], sums.signal, math.inf, int(b.size))
    steps = None
    if params is not None:
        if params.per_tensor:
            steps = max(sums.high, -sums.low) / float(params.scale)
        else:
            assert buf is not None
            steps = params.max_steps(buf.reshape(np.shape(reference)))
    return error_of(sums, cosine=cosine, steps=steps)


def error_of(sums: passes.Sums, *, cosine: bool = True, steps: float | None = None) -> Error:
    """The :class:`Error` of a difference's sums (finite ones); ``cosine=False``: not computed (NaN)."""
    noise, signal, size = sums.noise, sums.signal, sums.size
    cos = math.nan
    if cosine:
        # a = b + d: a.b and a.a from one more sum (d.b), each term rounded at its own magnitude
        dot, aa = signal + sums.cross, max(signal + 2 * sums.cross + noise, 0.0)
        if aa == 0 or signal == 0:
            cos = 1.0 if aa == signal else 0.0
        else:
            cos = max(-1.0, min(1.0, dot / math.sqrt(aa * signal)))
    return Error(_snr(signal, noise), max(sums.high, -sums.low), noise / size, cos, signal, noise, size, steps)


class Scratch:
    """A float32 work array reused from one :func:`measure` to the next (a new one costs its pages' first touch)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = np.empty(0, np.float32)

    def take(self, size: int) -> np.ndarray:
        """``size`` elements of it (grown when too small); valid until the next take."""
        if self._buf.size < size:
            self._buf = np.empty(size, np.float32)
        return self._buf[:size]


def readable_value(view: ModelView, name: str, value: Any) -> np.ndarray:
    """A quantized model's value as float: integers dequantized with their params."""
    if view.form.get(name) is Form.INT:
        return view.params[name].dequantize(value)
    return np.asarray(value)


def as_read(view: ModelView, name: str, float_value: np.ndarray) -> np.ndarray:
    """A float tensor in the form the quantized model's value ``name`` has: quantized, round-tripped, or as it is."""
    form = view.form.get(name)
    if form is Form.INT:
        return view.params[name].quantize(float_value)
    if form is Form.DEQUANTIZED:
        return view.params[name].round_trip(float_value)
    return float_value


def quant_value_bytes(
    pairing: Pairing, graph: Any, names: Iterable[str], feeds: Mapping[str, Any], float_sizes: Mapping[str, int | None] | None = None
) -> dict[str, int | None]:
    """The bytes of the quantized model's values ``names`` (None: unknown). A value onnx's shape inference cannot size
    (at and after a contrib op: QLinearAdd, QLinearMul..., and a recomputed value before requantizing) is sized by its
    float counterpart, whose shape it has (and at most its 4 bytes an element): else a QOperator model's values would
    never be held. ``float_sizes``: the float tensors' sizes where known already."""
    sizes = value_bytes(graph, names, {k: feeds[k] for k in graph.input_names if k in feeds})
    paired = {p.quant_name: p.float_name for p in pairing.pairs.values()}  # a recomputed value is its pair's alone
    unknown = {v: paired.get(v) or pairing.by_logical.get(pairing.quant_view.logical(v)) for v, n in sizes.items() if n is None}
    if unknown:
        known = dict(float_sizes or {})
        fg = pairing.float_view.graph
        missing = [f for f in unknown.values() if f and f not in known]
        if missing:
            known.update(value_bytes(fg, missing, {k: feeds[k] for k in fg.input_names if k in feeds}))
        sizes.update({v: None if f is None else known.get(f) for v, f in unknown.items()})
    return sizes


@dataclass(frozen=True, slots=True)
class GroupErrors:
    """A group's three errors (over its outputs), the SQNR it starts from, and its output's quantization."""

    group: Group
    accumulated: Error
    local: Error
    quant_only: Error | None
    params: QuantParams | None
    clipped: float | None  # share of the float output outside the quantized range
    input_snr: float  # the worst accumulated SQNR among the paired tensors it reads (inf: it reads only inputs)
    per_output: dict[str, Error] = field(default_factory=dict)

    @property
    def snr_drop(self) -> float:
        """How much SQNR the group loses: its inputs' worst accumulated SQNR minus its output's (inf inputs: not defined)."""
        if math.isinf(self.input_snr):
            return math.nan
        return self.input_snr - self.accumulated.snr


def _values(
    graph: Any, inputs: Mapping[str, Any], runner: NodeRunner, demand: dict[str, int], budget: int, size: int | None, sessions: Sessions | None
) -> Any:
    """A whole run when the demanded values (``size`` bytes; None: unknown) fit the budget (its session built, to
    :meth:`~.stream.WholeRun.run`), else a node-by-node stream."""
    feeds = {k: inputs[k] for k in graph.input_names}
    if size is not None and size <= budget:
        return WholeRun(graph, feeds, runner.providers, demand, deferred=True, sessions=sessions)
    return ValueStream(graph, feeds, runner, demand)


def _both(make_a: Callable[[], Any], make_b: Callable[[], Any]) -> tuple[Any, Any]:
    """``make_a()`` and ``make_b()`` side by side: building a session mostly keeps one core busy (its runs take both)."""
    with ThreadPoolExecutor(1) as pool:
        a = pool.submit(make_a)
        b = make_b()
        return a.result(), b


@dataclass(slots=True)
class _Pending:
    """A group whose full-run values are in hand, waiting for its batch's local run."""

    group: Group
    quant_feeds: dict[str, Any]
    float_feeds: dict[str, Any]
    floats: dict[str, np.ndarray]
    accumulated: list[Error]
    quant_only: list[Error]
    params: QuantParams | None
    clipped: float | None
    input_snr: float
    nbytes: int


def evaluate_groups(
    pairing: Pairing,
    groups: Sequence[Group],
    inputs: Mapping[str, Any],
    float_runner: NodeRunner,
    quant_runner: NodeRunner,
    on_group: Callable[[int, int], None] | None = None,
    batch_bytes: int | None = None,
    budget_bytes: int = 1 << 30,
    sessions: Sessions | None = None,
) -> tuple[list[GroupErrors], dict[str, int]]:
    """Run both models once in lockstep over ``groups`` and measure each group's three errors.

    Each model runs whole when the values the groups need fit ``budget_bytes``, else node by node,
    each value kept only until its groups are done. The local runs go in batches of groups (about
    ``batch_bytes`` of values each; default half the budget, at least 64 MB): one model and one
    session per batch and side (see :mod:`.local`). ``sessions``: sessions kept from an earlier input's call.
    Returns the errors in group order and the peak bytes each side held.
    """
    fv, qv = pairing.float_view, pairing.quant_view
    if batch_bytes is None:
        batch_bytes = max(64 << 20, budget_bytes // 2)  # each batch costs two sessions and two runs: few and large
    float_demand: dict[str, int] = {}
    quant_demand: dict[str, int] = {}
    for g in groups:
        for p in g.outputs:
            float_demand[p.float_name] = float_demand.get(p.float_name, 0) + 1
            quant_demand[p.quant_name] = quant_demand.get(p.quant_name, 0) + 1
        for p in g.inputs:
            float_demand[p.float_name] = float_demand.get(p.float_name, 0) + 1
    float_sizes = value_bytes(fv.graph, float_demand, {k: inputs[k] for k in fv.graph.input_names})
    float_size, quant_size = total_bytes(float_sizes), total_bytes(quant_value_bytes(pairing, qv.graph, quant_demand, inputs, float_sizes))
    fs, qs = _both(
        lambda: _values(fv.graph, inputs, float_runner, float_demand, budget_bytes, float_size, sessions),
        lambda: _values(qv.graph, inputs, quant_runner, quant_demand, budget_bytes, quant_size, sessions),
    )
    for values in (fs, qs):
        if isinstance(values, WholeRun):
            values.run()
    acc_snr: dict[str, float] = {n: math.inf for n in fv.graph.input_names}
    read_later: dict[str, int] = {}  # groups still to read each paired tensor
    for g in groups:
        for p in g.inputs:
            read_later[p.float_name] = read_later.get(p.float_name, 0) + 1
    scratch = Scratch()
    # round trips of paired tensors (and their integers, for a model that reads them so), kept for their readers
    trips: dict[str, tuple[str, np.ndarray, np.ndarray | None]] = {}  # float name: quantized name, round trip, integers
    out: list[GroupErrors] = []
    batch: list[_Pending] = []
    held = 0
    peak_batch = 0
    for i, g in enumerate(groups):
        fs.advance([p.float_name for p in g.outputs])
        floats_in = {p.float_name: fs.take(p.float_name) for p in g.inputs}
        quant_feeds: dict[str, Any] = {}
        # the float nodes on the same inputs, dequantized: the reference of the local error
        float_feeds: dict[str, Any] = {}
        for raw, p in g.reads:
            cached = trips.get(p.float_name) if raw == p.quant_name else None
            if cached is None or cached[0] != raw:
                quant_feeds[raw] = as_read(qv, raw, floats_in[p.float_name])
                float_feeds.setdefault(p.float_name, readable_value(qv, raw, quant_feeds[raw]))
            else:
                _, trip, ints = cached
                quant_feeds[raw] = trip if ints is None else ints
                float_feeds.setdefault(p.float_name, trip)  # = readable_value of the integers
        for p in g.inputs:
            read_later[p.float_name] -= 1
            if read_later[p.float_name] <= 0:
                trips.pop(p.float_name, None)
        for n in g.float_nodes:
            for r in n.all_inputs:
                if r in fv.graph.input_names and r not in float_feeds:
                    float_feeds[r] = inputs[r]
        acc, qonly = [], []
        floats: dict[str, np.ndarray] = {}
        params: QuantParams | None = None
        clipped = None
        for p in g.outputs:
            f = fs.take(p.float_name)
            floats[p.float_name] = f
            q = readable_value(qv, p.quant_name, qs.take(p.quant_name))
            pp = qv.params.get(p.quant_name)
            a = measure(q, f, pp, scratch=scratch)
            acc.append(a)
            acc_snr[p.float_name] = a.snr
            if pp is not None:
                form = qv.form.get(p.quant_name) if p.float_name in read_later else None
                # its readers are fed the integers (INT; their float nodes the round trip) or the round trip
                ints, trip, clips, sums = pp.measured_round_trip(f, integers=form is Form.INT)
                if form is Form.INT or form is Form.DEQUANTIZED:
                    trips[p.float_name] = (p.quant_name, trip, ints)
                qonly.append(measure(trip, f, pp, cosine=False, signal=a.signal, scratch=scratch, sums=sums))
                if params is None:
                    params, clipped = pp, clips / max(np.size(f), 1)
        input_snr = min((acc_snr.get(p.float_name, math.inf) for p in g.inputs), default=math.inf)
        unique = {id(v): v for d in (quant_feeds, float_feeds, floats) for v in d.values()}  # a feed read as it is: one array
        size = sum(np.asarray(v).nbytes for v in unique.values())
        batch.append(_Pending(g, quant_feeds, float_feeds, floats, acc, qonly, params, clipped, input_snr, size))
        held += size
        peak_batch = max(peak_batch, held)
        if held >= batch_bytes or i == len(groups) - 1:
            out += _finish(pairing, batch, quant_runner.providers, scratch, sessions)
            batch, held = [], 0
        if on_group is not None:
            on_group(i + 1, len(groups))
    return out, {"float_peak_bytes": fs.peak_bytes, "quant_peak_bytes": qs.peak_bytes, "local_batch_peak_bytes": peak_batch}


def _finish(pairing: Pairing, batch: list[_Pending], providers: Sequence[str], scratch: Scratch, sessions: Sessions | None) -> list[GroupErrors]:
    """The local runs of a batch of groups (one model per side), then each group's errors."""
    qv = pairing.quant_view
    quant_runs = [(b.group.index, b.group.quant_nodes, b.quant_feeds, [p.quant_name for p in b.group.outputs]) for b in batch]
    float_runs = [
        (b.group.index, b.group.float_nodes, b.float_feeds, [p.float_name for p in b.group.outputs])
        for b in batch
        if b.group.float_nodes
    ]
    q_model, f_model = _both(
        lambda: LocalModel(qv.graph, [r for r in quant_runs if r[1]], providers, sessions),
        lambda: LocalModel(pairing.float_view.graph, float_runs, providers, sessions) if float_runs else None,
    )
    local_q = q_model.run()
    local_f = f_model.run() if f_model is not None else {}
    out = []
    for b in batch:
        g = b.group
        loc = []
        for p in g.outputs:
            f = b.floats[p.float_name]
            ref = local_f.get((g.index, p.float_name), b.float_feeds.get(p.float_name, f))
            value = local_q.get((g.index, p.quant_name), b.quant_feeds.get(p.quant_name))
            loc.append(measure(readable_value(qv, p.quant_name, value), ref, qv.params.get(p.quant_name), cosine=False, scratch=scratch))
        per = {p.float_name: a for p, a in zip(g.outputs, b.accumulated)}
        out.append(
            GroupErrors(
                g,
                Error.combine(b.accumulated),
                Error.combine(loc),
                Error.combine(b.quant_only) if b.quant_only else None,
                b.params,
                b.clipped,
                b.input_snr,
                per,
            )
        )
    return out
