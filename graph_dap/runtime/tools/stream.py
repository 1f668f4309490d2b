"""Running a graph's nodes in order with bounded memory: what dumps and compares stream through.

:class:`NodeStream` runs the main graph's nodes one at a time and keeps only the values a
later node reads. With ``on_inner`` it also runs the bodies of If, Loop, Scan and function
calls node by node (:mod:`.bodies`) and hands each inner node's outputs to it.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from graph_dap.errors import DumpError
from graph_dap.runtime.engine.executor import split_reads
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.tools.bodies import BodyRunner, OnInner

__all__ = ["NodeStream"]


class NodeStream:
    """Runs a graph's nodes in order, one at a time, keeping only values a later node reads.

    ``next()`` runs the next node and returns it with its outputs; a value is dropped
    after its last reader has run (graph outputs too: whoever wants them takes them
    from the returned outputs). ``keep`` names values never dropped. ``reset()``
    starts over from the inputs, which is how a consumer seeks backwards. ``on_inner``: the
    bodies of control-flow nodes run node by node, each inner node's outputs handed to it.
    """

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        runner: NodeRunner,
        keep: Iterable[str] = (),
        on_inner: OnInner | None = None,
    ) -> None:
        self.graph = graph
        self.runner = runner
        self.inputs = dict(inputs)
        self.keep = set(keep)
        self._initializers = {t.name: t for t in graph.model.graph.initializer}
        constant_outputs = {o for n in graph.nodes if n.is_constant_op for o in n.outputs if o}
        self._embedded = (set(self._initializers) - set(self.inputs)) | constant_outputs
        self._last_use: dict[str, int] = {}
        for node in graph.nodes:
            for name in node.all_inputs:
                self._last_use[name] = node.order
        self._values: dict[str, Any] = {}
        self._constants = ChainMap(self._values, self._initializers)
        self._bodies = BodyRunner(graph, runner, self._embedded, self._constants, on_inner) if on_inner is not None else None
        self._pos = 0
        self.reset()

    def reset(self) -> None:
        self._values.clear()
        self._values.update(self.inputs)
        self._pos = 0

    @property
    def position(self) -> int:
        """The run order of the next node to run (``len(graph.nodes)`` at the end)."""
        return self._pos

    @property
    def at_end(self) -> bool:
        return self._pos >= len(self.graph.nodes)

    def live_values(self) -> list[str]:
        """Names held now (for tests and logs: the working set)."""
        return list(self._values)

    def _get(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise DumpError(f"value '{name}' is not available (no node produced it and it is no input or initializer)") from None

    def next(self) -> tuple[Node, dict[str, Any]]:
        """Run the next node; its outputs by name."""
        node = self.graph.nodes[self._pos]
        if node.enterable and self._bodies is not None:
            outs = self._bodies.run(node, self._get)
        else:
            feeds, constants = split_reads(node.all_inputs, self._embedded, self._constants, self._get)
            outs = self.runner.run(node, feeds, constants=constants)
        order = node.order
        for name, value in outs.items():
            if self._last_use.get(name, -1) > order or name in self.keep:
                self._values[name] = value
        for name in node.all_inputs:
            if self._last_use.get(name) == order and name not in self.keep:
                self._values.pop(name, None)
        self._pos += 1
        return node, outs

    def __iter__(self) -> Iterator[tuple[Node, dict[str, Any]]]:
        while not self.at_end:
            yield self.next()

    def run_to(self, order: int) -> dict[str, Any]:
        """Outputs of the node at run order ``order``, running forward (or from the start) to it."""
        if order < self._pos:
            self.reset()
        while True:
            node, outs = self.next()
            if node.order == order:
                return outs
