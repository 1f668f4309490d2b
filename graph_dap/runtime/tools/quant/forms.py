"""The forms of one quantized tensor at a debugger's stop: its integers, its dequantized values, the float model's
paired tensor and the error, for the Variables of a quantized model.

A value of a quantized model is *quantized* here when it holds integers with a known scale and zero
point (a QuantizeLinear's output, a QLinear op's output) or is a DequantizeLinear's output of an
activation (:class:`~.view.Form`) or of a weight (whose reference is the float weight it is paired with). Its forms are addressed as ``NAME@integer``, ``NAME@dequantized``,
``NAME@reference`` and ``NAME@error`` (:func:`form_name`), which expressions and the tensor view
read as values. The reference is the float model's tensor paired with the value's logical tensor
(:mod:`.pairing`), computed by onnxruntime (optimizations off) on the session's inputs, once per
tensor while the inputs stay the same.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from graph_dap.errors import CompareError, ValueNotFoundError
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.tools.quant.errors import Error, measure
from graph_dap.runtime.tools.quant.params import QuantParams
from graph_dap.runtime.tools.quant.stream import WholeRun
from graph_dap.runtime.tools.quant.view import Form, ModelView, is_quantized

__all__ = ["FormName", "FormValues", "Part", "QuantForms", "QuantValues", "form_name", "parse_form_name", "quant_values"]

_SEPARATOR = "@"
_KEEP_REFERENCES = 8  # float tensors kept, most recently read last


class Part(Enum):
    """One form of a quantized tensor."""

    INTEGER = "integer"
    DEQUANTIZED = "dequantized"
    REFERENCE = "reference"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class FormName:
    """A form's name split: the quantized value and the part."""

    value: str
    part: Part


def form_name(value: str, part: Part) -> str:
    """The name a form is read by in expressions and the tensor view: ``NAME@error``."""
    return f"{value}{_SEPARATOR}{part.value}"


def parse_form_name(name: str) -> FormName | None:
    """``NAME@part`` split, or None when ``name`` names no form."""
    value, sep, part = name.rpartition(_SEPARATOR)
    if not sep or not value:
        return None
    try:
        return FormName(value, Part(part))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class QuantForms:
    """One quantized value's forms; ``reference``, ``error``, ``snr`` and ``steps`` only against a float model."""

    name: str
    params: QuantParams
    integer: np.ndarray
    dequantized: np.ndarray
    reference_name: str | None = None
    reference: np.ndarray | None = None
    error: np.ndarray | None = None
    measured: Error | None = None  # SQNR and max error (in steps) of the dequantized values against the reference

    def array(self, part: Part) -> np.ndarray:
        """The form ``part`` (ValueNotFoundError for the reference's parts without a reference)."""
        value = {
            Part.INTEGER: self.integer,
            Part.DEQUANTIZED: self.dequantized,
            Part.REFERENCE: self.reference,
            Part.ERROR: self.error,
        }[part]
        if value is None:
            raise CompareError(
                f"'{self.name}' has no {part.value} form: it needs a float model to compare with (launch argument "
                "'reference': 'model:FLOAT.onnx') in which this tensor is paired"
            )
        return value

    @property
    def parts(self) -> tuple[Part, ...]:
        """The forms there are: integer and dequantized, and with a reference the reference and the error."""
        return tuple(Part) if self.reference is not None else (Part.INTEGER, Part.DEQUANTIZED)


class QuantValues:
    """Which values of a quantized model are quantized, and their forms (see the module).

    ``view``: the quantized model's view; ``float_graph`` and ``by_logical`` (logical tensor -> float tensor, a
    pairing's): the reference, when there is one."""

    def __init__(
        self,
        view: ModelView,
        float_graph: Graph | None = None,
        by_logical: Mapping[str, str] | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        weights: Mapping[str, str] | None = None,
        float_view: ModelView | None = None,
    ) -> None:
        self.view = view
        self.float_graph = float_graph
        self.by_logical = dict(by_logical or {})
        self.providers = list(providers)
        self.weights = dict(weights or {})  # a weight's DequantizeLinear output -> its float weight (a pairing's)
        self.float_view = float_view
        self._references: OrderedDict[str, np.ndarray] = OrderedDict()
        self._inputs: tuple[int, ...] = ()
        self._weight_params: dict[str, QuantParams | None] = {}

    @property
    def has_reference(self) -> bool:
        return self.float_graph is not None

    def params(self, name: str) -> QuantParams | None:
        """``name``'s scale and zero point when it is a quantized activation (integers or a DequantizeLinear's output)."""
        form = self.view.form.get(name)
        if form is Form.INT or form is Form.DEQUANTIZED:
            return self.view.params.get(name)
        return self._weight(name)

    def _weight(self, name: str) -> QuantParams | None:
        """A weight's DequantizeLinear output (computed from constants): its scale and zero point."""
        if name not in self._weight_params:
            p = self.view.graph.producer(name)
            params = None
            if p is not None and p.op_type == "DequantizeLinear" and p.is_constant and p.inputs:
                q = self.view.integers(p.inputs[0])
                params = None if q is None else self.view.quant_params(p, 1, 2, dtype=str(q.dtype))
            self._weight_params[name] = params
        return self._weight_params[name]

    def is_quantized(self, name: str) -> bool:
        return self.params(name) is not None

    def reference_name(self, name: str) -> str | None:
        """The float model's tensor paired with ``name``'s logical tensor (or the float weight of a weight's)."""
        if not self.has_reference:
            return None
        return self.weights.get(name) or self.by_logical.get(self.view.logical(name))

    def forms(self, name: str, value_of: Callable[[str], Any], has_value: Callable[[str], bool], inputs: Mapping[str, Any]) -> QuantForms:
        """``name``'s forms at a stop: ``value_of`` reads the session's values, ``inputs`` are its graph inputs."""
        params = self.params(name)
        if params is None:
            raise ValueNotFoundError(f"'{name}' is no quantized value (integers with a scale, or a DequantizeLinear's output)")
        value = np.asarray(value_of(name))
        if self._weight(name) is not None:
            producer = self.view.graph.producer(name)
            ints = self.view.integers(producer.inputs[0]) if producer is not None else None
            integer, dequantized = (params.quantize(value) if ints is None else ints), value
        elif self.view.form[name] is Form.INT:
            integer, dequantized = value, params.dequantize(value)
        else:
            producer = self.view.graph.producer(name)
            source = producer.inputs[0] if producer is not None else ""
            integer = np.asarray(value_of(source)) if source and has_value(source) else params.quantize(value)
            dequantized = value
        ref_name = self.reference_name(name)
        if ref_name is None:
            return QuantForms(name, params, integer, dequantized)
        weight = self.float_view.constant(ref_name) if self.float_view is not None and name in self.weights else None
        reference = np.asarray(weight) if weight is not None else self._reference(ref_name, inputs)
        if reference.shape != dequantized.shape:
            raise CompareError(
                f"'{name}' {list(dequantized.shape)} and its float tensor '{ref_name}' {list(reference.shape)} differ in shape"
            )
        error = np.subtract(dequantized, reference, dtype=np.float32)
        return QuantForms(name, params, integer, dequantized, ref_name, reference, error, measure(dequantized, reference, params))

    def _reference(self, name: str, inputs: Mapping[str, Any]) -> np.ndarray:
        """The float model's ``name`` on ``inputs``: kept while the inputs are the same arrays."""
        assert self.float_graph is not None
        key = tuple(id(inputs[k]) for k in self.float_graph.input_names if k in inputs)
        if key != self._inputs:
            self._references.clear()
            self._inputs = key
        held = self._references.get(name)
        if held is None:
            held = np.asarray(WholeRun(self.float_graph, inputs, self.providers, {name: 1}).take(name))
            self._references[name] = held
            while len(self._references) > _KEEP_REFERENCES:
                self._references.popitem(last=False)
        self._references.move_to_end(name)
        return held


class FormValues(Mapping[str, np.ndarray]):
    """The forms of a stop's quantized values by :func:`form_name`, as extra names of expressions (computed when read)."""

    def __init__(self, forms: Callable[[str], QuantForms], quant: QuantValues) -> None:
        self._forms = forms
        self._quant = quant

    def __contains__(self, key: object) -> bool:
        parsed = parse_form_name(key) if isinstance(key, str) else None
        return parsed is not None and self._quant.is_quantized(parsed.value)  # (without a reference, its parts say why)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self:
            raise KeyError(key)
        parsed = parse_form_name(key)
        assert parsed is not None
        return self._forms(parsed.value).array(parsed.part)

    def __iter__(self) -> Iterator[str]:
        for name in self._quant.view.form:
            if self._quant.is_quantized(name):
                yield from (form_name(name, p) for p in Part)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:  # (an expression's every name asks; counting them all each time is not needed)
        return True


def quant_values(graph: Graph, comparison: Any = None, providers: Sequence[str] = ("CPUExecutionProvider",)) -> QuantValues | None:
    """``graph``'s quantized values, with the float model of ``comparison`` (a QuantComparison) as their reference when
    ``graph`` is its quantized side; None when ``graph`` is a float model."""
    pairing = comparison.pairing if comparison is not None else None
    if pairing is not None and pairing.source_graph is graph:
        weights = {w.quant_name: w.float_name for w in pairing.weights}
        return QuantValues(pairing.quant_view, pairing.float_view.graph, pairing.by_logical, providers, weights, pairing.float_view)
    if not is_quantized(graph):
        return None  # (a float model's view is not built)
    return QuantValues(ModelView(graph), providers=providers)
