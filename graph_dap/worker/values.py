"""The worker's calls that look at values: summaries, slices, raw bytes, expressions, edits.

An object that :class:`~graph_dap.worker.service.WorkerService` owns (its ``values``). Results
of expressions that are whole tensors stay here as numbered *temps* until the next stop,
so that the adapter can page through them like any value. A quick ``summaries`` call answers a weight not
summarized yet with what costs nothing (its type, shape and bytes), and summarizes it in a thread; a value the
run did not keep with its declared type, and recomputes it once no call waits (:meth:`ValueCalls.work_idle`: the
session is driven by one thread); either says so with a :class:`~graph_dap.worker.protocol.SummarizedEvent`.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graph_dap.errors import BadIndexError, ExpressionError, GraphDapError, UnknownNameError, ValueKindError, ValueNotFoundError
from graph_dap.names import quoted, unquoted
from graph_dap.runtime import expr
from graph_dap.runtime.session import DebugSession
from graph_dap.runtime.tensor import element_type
from graph_dap.runtime.tools.tensor_view import tensor_view
from graph_dap.runtime.values import Values
from graph_dap.runtime.weights import Weights
from graph_dap.worker import protocol as p
from graph_dap.worker import wire

if TYPE_CHECKING:
    from graph_dap.runtime.tools.quant.forms import FormValues, QuantValues

_MAX_CHILDREN = 10_000  # slices summarized per children call
_MAX_READ = 1 << 24  # bytes per read_memory call
_NAME_LIKE = re.compile(r"^[^\s()\[\],]+$")  # no spaces, calls or subscripts: meant as a value name


class ValueCalls:
    """``rpc_<method>`` calls on the values of the session at its current stop; ``session``: the loaded one (NotLoadedError before)."""

    def __init__(
        self,
        session: Callable[[], DebugSession],
        notify: Callable[[p.Event], None] = lambda event: None,
        quant: Callable[[], QuantValues | None] = lambda: None,
    ) -> None:
        self._session = session
        self._notify = notify
        self._quant = quant  # the loaded model's quantized values (None: a float model)
        self._temps: dict[int, Any] = {}
        self._next_temp = 0
        self._summaries = SummaryCache()
        self.warming: dict[int, threading.Thread] = {}  # the model's weights being summarized in the background
        self._idle: list[Callable[[], None]] = []  # what quick pages left to compute at this stop, once no call waits
        self._tried: set[tuple[str, int]] = set()  # (name, level) computed so at this stop: asked again, computed at once
        self._pages_due = 0  # pages of weights being summarized whose event is not sent yet (see pages_due)
        self._pages_lock = threading.Lock()

    @property
    def s(self) -> DebugSession:
        return self._session()

    def forget_temps(self) -> None:
        """Drop the results of expressions (at a stop or a new model: they describe the old values), and what quick
        pages left to compute."""
        self._temps.clear()
        self._idle.clear()
        self._tried.clear()

    def has_idle_work(self) -> bool:
        """Whether a quick page left values to compute (:meth:`work_idle`, when no call waits)."""
        return bool(self._idle)

    def pages_due(self) -> bool:
        """Whether a page's weights are being summarized for a client that will ask for the page again when told
        (:class:`~.protocol.SummarizedEvent`): the session's idle work waits until then, or it would keep that request
        waiting (a segment built while stopped takes the thread that serves calls for 0.1-0.5 s)."""
        with self._pages_lock:
            return self._pages_due > 0

    def work_idle(self) -> None:
        """Compute what the oldest quick page left (on the thread that serves calls: the session's)."""
        self._idle.pop(0)()

    def _value(self, name: str, temp: int | None = None, level: int = 0) -> Any:
        if temp is not None:
            if temp not in self._temps:
                raise ValueNotFoundError("that result is gone: evaluate the expression again")
            return self._temps[temp]
        return self.s.value(name, level)

    def _keep(self, value: Any) -> int:
        """Keep ``value`` as a temp until the next stop; its number."""
        self._next_temp += 1
        self._temps[self._next_temp] = value
        return self._next_temp

    def _forms(self, level: int) -> FormValues | None:
        """The forms of a quantized model's values (``NAME@error``...) as extra names of expressions, at level 0."""
        quant = self._quant()
        if quant is None or level:
            return None
        from graph_dap.runtime.tools.quant.forms import FormValues

        s = self.s
        return FormValues(lambda name: quant.forms(name, s.value, s.has_value, s.inputs), quant)

    def _quantized(self, summary: p.Summary, level: int) -> p.Summary:
        quant = self._quant()
        if quant is None or level or not summary.available or not quant.is_quantized(summary.name):
            return summary
        return replace(summary, quantized=True)

    def rpc_quant_forms(self, a: p.QuantFormsArgs) -> p.QuantForms:
        """A quantized value's forms, each kept as a temp (its children, memory and picture), with its summary; the
        error's summary also with its SQNR against the reference and its largest size in quantization steps."""
        from graph_dap.runtime.tools.quant.forms import Part, form_name

        quant = self._quant()
        if quant is None or a.level or not quant.is_quantized(a.name):
            raise ValueKindError(f"'{a.name}' is no quantized value (integers with a scale, or a DequantizeLinear's output)")
        s = self.s
        forms = quant.forms(a.name, s.value, s.has_value, s.inputs)
        out: list[p.QuantForm] = []
        for part in forms.parts:
            value = forms.array(part)
            name = form_name(a.name, part)
            summary = wire.summary(name, value, hex_=a.hex)
            if part is Part.ERROR and forms.measured is not None:
                m = forms.measured
                extra = [("sqnr dB", wire.number_text(np.float32(m.snr))), ("max error", wire.number_text(np.float32(m.max_abs)))]
                if m.steps is not None:
                    extra.append(("max error (steps)", f"{m.steps:.3g}"))
                words = f"SQNR {m.snr:.2f} dB" + (f", max {m.steps:.3g} steps" if m.steps is not None else "")
                summary = replace(summary, text=f"{summary.text} ({words})", stats=(*extra, *summary.stats))
            elif part is Part.REFERENCE and forms.reference_name:
                summary = replace(summary, text=f"{summary.text} ({forms.reference_name})")
            out.append(p.QuantForm(part.value, quoted(name), self._keep(value), summary))
        return p.QuantForms(a.name, forms.params.describe(), tuple(out), forms.reference_name or "")

    def _knows(self, name: str, level: int) -> bool:
        """Whether ``name`` is a value the level sees (its own, or an enclosing level's), computed or not."""
        values: Values | None = self.s.frame(level).values
        while values is not None:
            if values.scope.has_value(name):
                return True
            values = values.outer
        return False

    def rpc_values(self, a: p.LevelArgs) -> p.ValueNames:
        s = self.s
        weights = s.graph.weights
        if a.warm and weights.has_external and self.warming.get(id(weights)) is None:
            # A client looks at the scopes: the model's weights are summarized in the background, so that its
            # Initializers scope (a page of 100 reads about 1 GB of a 0.5 B model) finds them done when opened.
            self.warming = {id(weights): threading.Thread(target=weights.summarize_all, name="graph-dap-weights", daemon=True)}
            self.warming[id(weights)].start()
        computed = s.computed_values(a.level)
        return p.ValueNames(tuple(computed), tuple(n for n in computed if s.is_stale(n, a.level)))

    def rpc_summaries(self, a: p.SummariesArgs) -> tuple[p.Summary, ...]:
        """A page of a scope: what a value the run left must be recomputed with is recomputed for the page at once
        (one by one, each would run again what comes before it), and a value's summary is made once (see SummaryCache)."""
        s = self.s
        out: list[p.Summary] = []
        values = s.frame(a.level).values
        scope = values.scope
        shown = [n for n in a.names if n not in values.stale]  # (a stale one is shown as it is)
        due = {n for n in values.due(shown) if (n, a.level) not in self._tried} if a.quick else set()
        values.prefetch([n for n in shown if n not in due])
        later: list[tuple[str, onnx.TensorProto]] = []
        for name in a.names:
            if name in due:
                out.append(wire.computing(name, s.graph.info_at(scope.path, name)))
                continue
            if s.has_value(name, a.level):
                value, stale = s.value(name, a.level), s.is_stale(name, a.level)
                tensor = self._summaries.unsummarized(s, name, value, a.hex, a.level) if a.quick else None
                if tensor is not None:
                    out.append(wire.pending(name, value, stale, s.note(name, a.level)))
                    later.append((name, tensor))
                else:
                    out.append(self._quantized(self._summaries.summary(s, name, value, stale, a.hex, a.level), a.level))
                continue
            producer = scope.producer(name) or s.graph.producer(name)
            info = s.graph.info_at(scope.path, name)
            out.append(wire.missing(name, info, producer.label if producer else None))
        if due:
            self._idle.append(lambda: self._compute([n for n in a.names if n in due], a.hex, a.level))
        weights = s.graph.weights
        warm = a.quick and weights.has_external and self.warming.get(id(weights)) is None
        if later or warm:
            if later:
                with self._pages_lock:
                    self._pages_due += 1
            thread = threading.Thread(target=self._summarize, args=(weights, later, a.level, warm), name="graph-dap-weights", daemon=True)
            if warm:
                self.warming = {id(weights): thread}
            thread.start()
        return tuple(out)

    def _compute(self, names: list[str], hex_: bool, level: int) -> None:
        """Recompute and summarize the values a quick page showed by type only, then say so. (Asked again, they are
        computed at once if they are gone again: a memory budget too small to keep them, or a failure to show.)"""
        s = self.s
        self._tried |= {(n, level) for n in names}
        try:
            s.frame(level).values.prefetch(names)
            for name in names:
                self._summaries.summary(s, name, s.value(name, level), s.is_stale(name, level), hex_, level)
        except (GraphDapError, MemoryError):  # (asked again, the page says what is wrong)
            pass
        self._notify(p.SummarizedEvent(tuple(names), level))

    def _summarize(self, weights: Weights, tensors: list[tuple[str, onnx.TensorProto]], level: int, warm: bool) -> None:
        """Summarize the weights a quick page showed shape only (read from their files, beside the session's own
        work) and say so (the adapter asks its client to show the page again); then, with ``warm``, the others."""
        try:
            for _, tensor in tensors:
                try:
                    weights.summary(tensor)
                except (GraphDapError, OSError):  # (asked again, the page says what is wrong with it)
                    pass
            if tensors:
                self._notify(p.SummarizedEvent(tuple(name for name, _ in tensors), level))
        finally:
            if tensors:
                with self._pages_lock:
                    self._pages_due -= 1
        if warm:
            try:
                weights.summarize_all()
            except (GraphDapError, OSError):
                pass

    def _element(self, name: str, temp: int | None, index: Sequence[int], level: int = 0) -> Any:
        """``value[index]``: through a sequence's elements (lists), then into an array; a map as it is."""
        value = self._value(name, temp, level)
        while index and isinstance(value, list):
            try:
                value = value[index[0]]
            except IndexError:
                raise BadIndexError(f"bad index {index[0]} into a sequence of {len(value)}") from None
            index = index[1:]
        if isinstance(value, list) or isinstance(value, dict):
            if index:
                raise ValueKindError("a map's items are named by key, not by index")
            return value
        a = np.asarray(value)
        try:
            return a[tuple(index)] if index else a
        except IndexError as e:
            raise BadIndexError(f"bad index {list(index)}: {e}") from None

    def _array(self, name: str, temp: int | None, index: Sequence[int], level: int = 0) -> np.ndarray:
        value = self._element(name, temp, index, level)
        if isinstance(value, list):
            raise ValueKindError("a sequence has no elements to show here")
        if isinstance(value, dict):
            raise ValueKindError("a map has no elements to show here")
        return value

    def rpc_children(self, a: p.ChildrenArgs) -> p.ChildrenPage:
        """Slices of ``value[index]`` along its first axis: summaries, or numbers at the last axis; a map's items."""
        value = self._element(a.name, a.temp, a.index, a.level)
        start = max(a.start, 0)
        if isinstance(value, list):
            elements = value[start : start + (a.count or len(value))]
            return p.ChildrenPage(tuple(p.Child(i, wire.summary(f"[{i}]", v)) for i, v in enumerate(elements, start)), len(value))
        if isinstance(value, dict):
            keys = list(value)[start : min(start + (a.count or len(value)), start + _MAX_CHILDREN)]
            items = tuple(
                p.Child(i, scalar=wire.number_text(value[k], a.hex), dtype=element_type(value[k]), key=repr(k))
                for i, k in enumerate(keys, start)
            )
            return p.ChildrenPage(items, len(value))
        array = value
        if array.ndim == 0:
            return p.ChildrenPage((), 0)
        total = int(array.shape[0])
        stop = min(total, a.start + (a.count or total), a.start + _MAX_CHILDREN)
        dtype = element_type(array)
        items_: list[p.Child] = []
        for i in range(start, stop):
            sub = np.asarray(array[i], dtype=array.dtype)
            if sub.ndim == 0:
                items_.append(p.Child(i, scalar=wire.number_text(sub[()], a.hex), dtype=dtype))
            else:
                items_.append(p.Child(i, wire.summary(f"[{i}]", sub, hex_=a.hex)))
        return p.ChildrenPage(tuple(items_), total)

    def rpc_read_memory(self, a: p.ReadMemoryArgs) -> p.MemoryRead:
        array = np.ascontiguousarray(self._array(a.name, a.temp, [], a.level))
        if array.dtype.kind in "OUS":
            raise ValueKindError(f"'{a.name}' holds {array.dtype} data, which has no raw bytes to show")
        raw = array.reshape(-1).view(np.uint8)
        size = int(raw.size)
        begin = max(0, min(a.offset, size))
        end = max(begin, min(size, a.offset + min(a.count, _MAX_READ)))
        return p.MemoryRead(raw[begin:end].tobytes(), size, begin)

    def rpc_evaluate(self, a: p.EvaluateArgs) -> p.Evaluated:
        s = self.s
        text = a.expression.strip()
        name = unquoted(text)
        if self._knows(name, a.level):
            value = s.value(name, a.level)  # raises "not computed yet" with the producer's name
            summary = self._quantized(wire.summary(name, value, s.is_stale(name, a.level), a.hex, s.note(name, a.level)), a.level)
            return p.Evaluated(value=name, summary=summary, text=self._full_text(value) if a.clipboard else "")
        value = s.evaluate(text, self._forms(a.level), level=a.level)
        if isinstance(value, list) and not all(isinstance(v, np.ndarray) for v in value):
            # plain Python data (``.tolist()``), not a sequence of tensors: shown as text
            return p.Evaluated(text=expr.format_value(value, 100_000 if a.clipboard else 1_000), type="list")
        if isinstance(value, np.ndarray | list | dict) and not (isinstance(value, np.ndarray) and value.size == 1 and value.ndim == 0):
            temp = self._keep(value)
            summary = wire.summary(text, value, hex_=a.hex)
            return p.Evaluated(temp=temp, summary=summary, text=self._full_text(value) if a.clipboard else "")
        if isinstance(value, np.generic | int | float | bool | complex) or (isinstance(value, np.ndarray) and value.ndim == 0):
            scalar = np.asarray(value).reshape(())[()]
            kind = type(scalar).__name__ if not isinstance(scalar, np.generic) else str(scalar.dtype)
            return p.Evaluated(text=wire.number_text(scalar, a.hex), type=kind)
        return p.Evaluated(text=expr.format_value(value, 100_000 if a.clipboard else 1_000), type=type(value).__name__)

    @staticmethod
    def _full_text(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(ValueCalls._full_text(v) for v in value) + "]"
        with np.printoptions(threshold=100_000, linewidth=120):
            return np.array2string(np.asarray(value), separator=", ")

    def rpc_set_value(self, a: p.SetValueArgs) -> p.ValueSet:
        s = self.s
        name, index, level = a.name, a.index, a.level
        new = s.evaluate(a.expression, level=level)
        if index:
            current = np.array(s.value(name, level), copy=True)
            try:
                target = current[index]
            except IndexError as e:
                raise BadIndexError(f"bad index {list(index)} into '{name}': {e}") from None
            new_arr = np.asarray(new)
            if new_arr.dtype.kind not in "biufc" or (new_arr.ndim and not np.can_cast(new_arr.dtype, current.dtype, "same_kind")):
                raise ValueKindError(f"cannot store {new_arr.dtype} values into '{name}' ({current.dtype})")
            try:
                current[index] = new_arr
            except (ValueError, TypeError) as e:
                raise ValueKindError(f"'{name}'{list(index)} is {current.dtype}{list(np.shape(target))}: {e}") from None
            stale = s.set_value(name, current, level)
            part = current[index]
        else:
            stale = s.set_value(name, new, level)
            part = s.value(name, level)
        if np.ndim(part) == 0:
            return p.ValueSet(tuple(stale), scalar=wire.number_text(np.asarray(part)[()]))
        return p.ValueSet(tuple(stale), wire.summary(name, part))

    def rpc_outputs(self, _: p.NoArgs) -> tuple[p.Summary, ...]:
        return tuple(wire.summary(name, v) for name, v in self.s.outputs().items())

    def rpc_tensor_view(self, a: p.TensorViewArgs) -> p.TensorView:
        """A 2-D slice of a value (or of what an expression gives), downsampled here, with its statistics."""
        s = self.s
        text = a.name.strip()
        plain = unquoted(text)
        if self._knows(plain, a.level):
            value = s.value(plain, a.level)  # raises "not computed yet" with the producer's name
        else:
            try:
                value = s.evaluate(text, self._forms(a.level), level=a.level)
            except UnknownNameError as e:
                raise ValueNotFoundError(str(e) if e.known else f"no value named '{e.name}' (not computed yet?)") from None
            except ExpressionError:
                if _NAME_LIKE.match(text):
                    raise ValueNotFoundError(f"no value named '{plain}' (not computed yet?)") from None
                raise
        view = wire.tensor_view(tensor_view(a.name, value, a.index, a.max_size))
        if self._quant() is not None and a.level == 0:
            from graph_dap.runtime.tools.quant.forms import Part, parse_form_name

            form = parse_form_name(plain)
            if form is not None and form.part is Part.ERROR:
                return replace(view, colormap="diverging")  # the error of a quantized tensor: centred on 0
        return view


class SummaryCache:
    """The summaries of values already shown, by the array they describe: a value a stop keeps (or that a step left
    as it was) is summarized once, whatever the requests that show it again (a step, then stackTrace, scopes and
    variables on a model of large tensors); a value recomputed or set is a new array, and gets a new summary. The
    model's own initializers are summarized by :meth:`~graph_dap.runtime.weights.Weights.summary` (external data
    read a piece at a time, not through the mapping)."""

    def __init__(self) -> None:
        self._by_name: dict[tuple[str, bool, int], tuple[weakref.ref[Any], p.Summary]] = {}

    def unsummarized(self, s: DebugSession, name: str, value: Any, hex_: bool, level: int = 0) -> onnx.TensorProto | None:
        """The model's external initializer that ``value`` is, when its summary would read its data now (None when
        :meth:`summary` costs nothing: made already, or not such a weight)."""
        if not isinstance(value, np.ndarray):
            return None
        held = self._by_name.get((name, hex_, level))
        if held is not None and held[0]() is value:
            return None
        tensor = s.graph.weights.reference(value)
        return tensor if tensor is not None and s.graph.weights.known(tensor) is None else None

    def summary(self, s: DebugSession, name: str, value: Any, stale: bool, hex_: bool, level: int = 0) -> p.Summary:
        """``name``'s summary at ``level``: as made before while ``value`` is the same array, else made now (with its
        note: how it was computed, see ``DebugSession.note``)."""
        if not isinstance(value, np.ndarray):
            return wire.summary(name, value, stale, hex_, s.note(name, level))
        held = self._by_name.get((name, hex_, level))
        if held is not None and held[0]() is value:
            return replace(held[1], stale=stale)
        tensor = s.graph.weights.reference(value)
        known = s.graph.weights.summary(tensor) if tensor is not None else None
        made = wire.summary(name, value, stale, hex_, s.note(name, level), known)
        self._by_name[(name, hex_, level)] = (weakref.ref(value), made)
        return made


