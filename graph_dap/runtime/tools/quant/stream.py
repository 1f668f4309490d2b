"""A model run node by node, forward only, that keeps each value until its last reader, in the graph or outside it.

Like :class:`~graph_dap.runtime.tools.dump.NodeStream`, with readers outside the graph: ``demand``
says how many times each value will be :meth:`ValueStream.take`-n; a value is dropped once the
graph's last reader ran and every outside reader took it. Memory stays at the run's working set
plus the values waiting for their outside readers.
"""

from __future__ import annotations

import threading
from collections import ChainMap, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from graph_dap.errors import CompareError
from graph_dap.runtime.engine.executor import split_reads
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.graph import Graph

__all__ = ["Sessions", "ValueStream", "WholeRun", "demanded_bytes", "total_bytes", "value_bytes"]


class Sessions:
    """Sessions kept from one input's compare to the next (``scan --reference model:``): each input runs the same
    models (the whole runs' and the local batches'), which then are built once, not once per input.

    Keyed by what built them (the graph, the values asked for, the feeds' types and shapes); the ``size`` most
    recently used are kept (inputs of other shapes make other models).
    """

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The session kept under ``key``, else ``build()``'s, kept."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        made = build()
        with self._lock:
            self._kept[key] = made
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return made


class ValueStream:
    """Runs ``graph``'s nodes in run order on demand; values held for the graph's readers and for ``demand``'s."""

    def __init__(self, graph: Graph, inputs: Mapping[str, Any], runner: NodeRunner, demand: Mapping[str, int]) -> None:
        self.graph = graph
        self.runner = runner
        self.initializers = {t.name: t for t in graph.model.graph.initializer}
        constant_outputs = {o for n in graph.nodes if n.is_constant_op for o in n.outputs if o}
        self.embedded = (set(self.initializers) - set(inputs)) | constant_outputs
        self._last_use: dict[str, int] = {}
        for node in graph.nodes:
            for name in node.all_inputs:
                self._last_use[name] = node.order
        self._demand = dict(demand)
        self._values: dict[str, Any] = dict(inputs)
        self._constants = ChainMap(self._values, self.initializers)
        self._produced_at = {o: n.order for n in graph.nodes for o in n.outputs if o}
        self._pos = 0
        self.peak_bytes = 0

    def _keep(self, name: str, order: int) -> bool:
        return self._last_use.get(name, -1) > order or self._demand.get(name, 0) > 0

    def advance(self, names: Iterable[str]) -> None:
        """Run forward until every one of ``names`` has been computed."""
        target = max((self._produced_at.get(n, -1) for n in names), default=-1)
        while self._pos <= target:
            node = self.graph.nodes[self._pos]
            feeds, constants = split_reads(node.all_inputs, self.embedded, self._constants, self._get)
            outs = self.runner.run(node, feeds, constants=constants)
            order = node.order
            for name, value in outs.items():
                if self._keep(name, order):
                    self._values[name] = value
            for name in node.all_inputs:
                if self._last_use.get(name) == order and self._demand.get(name, 0) <= 0:
                    self._values.pop(name, None)
            self._pos += 1
            held = sum(getattr(v, "nbytes", 0) for v in self._values.values())
            self.peak_bytes = max(self.peak_bytes, held)

    def _get(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise CompareError(f"value '{name}' of {self.graph.path or self.graph.name} is not available") from None

    def take(self, name: str) -> Any:
        """``name``'s value, for one of its outside readers (it must have been demanded and computed)."""
        self.advance([name])
        value = self._values[name] if name in self._values else self._constants[name]
        left = self._demand.get(name, 0) - 1
        self._demand[name] = left
        if left <= 0 and self._last_use.get(name, -1) < self._pos and name not in self.graph.input_names:
            self._values.pop(name, None)
        return value



class WholeRun:
    """The values ``demand`` names from one whole run of ``graph`` (onnxruntime, optimizations off), when they fit a budget.

    The same reading interface as :class:`ValueStream`: a value is handed out as many times as demanded, then dropped.
    ``deferred``: build the session only (another can be built meanwhile); :meth:`run` computes the values.
    """

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        providers: Sequence[str],
        demand: Mapping[str, int],
        *,
        deferred: bool = False,
        sessions: Sessions | None = None,
    ) -> None:
        import onnxruntime as ort
        from onnx import helper

        from graph_dap.runtime.engine.options import ORT_ERRORS, ort_message, session_options

        self.graph = graph
        self._demand = dict(demand)
        self._names = [n for n in demand if n not in inputs]
        self._feeds = {k: inputs[k] for k in graph.input_names}
        self._values: dict[str, Any] = {k: v for k, v in inputs.items() if k in demand}

        def build() -> Any:
            model = graph.wire.skeleton()
            have = {o.name for o in model.graph.output}
            model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in self._names if n not in have)
            try:
                folder = graph.weights.folder if graph.weights.has_external else None
                return ort.InferenceSession(graph.wire.to_bytes(model), session_options("none", folder), providers=list(providers))
            except ORT_ERRORS as e:
                raise CompareError(f"onnxruntime failed on {graph.path or graph.name}: {ort_message(e)}") from None

        key = ("whole", id(graph), tuple(self._names), tuple(providers))
        self._session: Any = build() if sessions is None else sessions.get(key, build)
        self.peak_bytes = 0
        if not deferred:
            self.run()

    def run(self) -> None:
        """Run the model (once): every demanded value is then at hand."""
        from graph_dap.runtime.engine.options import ORT_ERRORS, ort_message

        if self._session is None:
            return
        try:
            values = self._session.run(self._names, self._feeds)
        except ORT_ERRORS as e:
            raise CompareError(f"onnxruntime failed on {self.graph.path or self.graph.name}: {ort_message(e)}") from None
        self._session = None
        self._values.update(zip(self._names, values))
        self.peak_bytes = sum(getattr(v, "nbytes", 0) for v in self._values.values())

    def advance(self, names: Iterable[str]) -> None:
        """Nothing to run: the whole run computed every value."""

    def take(self, name: str) -> Any:
        value = self._values[name]
        self._demand[name] -= 1
        if self._demand[name] <= 0:
            del self._values[name]
        return value


def demanded_bytes(graph: Graph, demand: Iterable[str], feeds: Mapping[str, Any] | None = None) -> int | None:
    """The bytes of the values ``demand`` names, from the graph's value types (None: some size is unknown). A model
    with dynamic dimensions (paddle2onnx writes -1) is sized again at the shapes of ``feeds``."""
    return total_bytes(value_bytes(graph, demand, feeds))


def total_bytes(sizes: Mapping[str, int | None]) -> int | None:
    """The sum of :func:`value_bytes`' sizes; None when one is unknown."""
    known = [n for n in sizes.values() if n is not None]
    return sum(known) if len(known) == len(sizes) else None


def value_bytes(graph: Graph, names: Iterable[str], feeds: Mapping[str, Any] | None = None) -> dict[str, int | None]:
    """Each value's bytes, from the graph's value types, at the shapes of ``feeds`` where the model's are dynamic
    (None: unknown, as a contrib op's output and everything after it are to onnx's shape inference)."""
    sizes = {name: graph.value_info(name).nbytes for name in names}
    if None in sizes.values() and feeds:
        from graph_dap.runtime.loading import infos_at_input_shapes

        infos = infos_at_input_shapes(graph.model, {k: getattr(v, "shape", ()) for k, v in feeds.items()})
        sizes = {
            name: size if size is not None else _nbytes(feeds[name]) if name in feeds else infos[name].nbytes if name in infos else None
            for name, size in sizes.items()
        }
    return sizes


def _nbytes(value: Any) -> int | None:
    n = getattr(value, "nbytes", None)
    return int(n) if n is not None else None
