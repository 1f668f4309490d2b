"""Running a control-flow node's bodies node by node, for tools that want every value inside them.

A dump writes the values an If's taken branch, each iteration of a Loop or Scan and a function's
body compute, as a debugger shows them when it steps in: each inner node runs as a one-node
onnxruntime session (:class:`~graph_dap.runtime.engine.nodes.NodeRunner`), and the control-flow
semantics (which branch, what an iteration starts from, what the node outputs) are
:class:`~graph_dap.runtime.frames.ControlFlow`'s, as the session's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import onnx

from graph_dap.runtime.engine.executor import split_reads
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.frames import ControlFlow
from graph_dap.runtime.graph import Graph, Node, Scope
from graph_dap.runtime.stops import PathStep

Path = tuple[PathStep, ...]
#: Called for each inner node that ran: the node, its path (with iterations), its outputs.
OnInner = Callable[[Node, Path, Mapping[str, Any]], None]


class BodyRunner:
    """Runs enterable nodes (If, Loop, Scan, function calls) by running their bodies' nodes one by one."""

    def __init__(
        self, graph: Graph, runner: NodeRunner, embedded: Collection[str], constants: Mapping[str, Any], on_inner: OnInner
    ) -> None:
        """``embedded``/``constants``: the main graph's values embedded in sessions (as :func:`split_reads` takes them)."""
        self.graph = graph
        self.runner = runner
        self.flow = ControlFlow(graph)
        self.embedded = embedded
        self.constants = constants
        self.on_inner = on_inner

    def _array(self, name: str, read: Callable[[str], Any]) -> Any:
        """A value as an array, embedded constants (initializers as protos) included."""
        if name not in self.embedded:
            return read(name)
        value = self.constants[name]
        return self.graph.weights.array(value) if isinstance(value, onnx.TensorProto) else value

    def run(self, node: Node, read: Callable[[str], Any], path: Path = ()) -> dict[str, Any]:
        """``node``'s outputs, its bodies run node by node; ``read`` gives the values of its level."""
        begun = self.flow.begin(node, lambda name: self._array(name, read))
        if begun is None:  # a Loop or Scan of no iteration: runs whole
            return self._run_node(node, read)
        scope, inputs, loop = begun
        while True:
            step = PathStep(node.id, scope.attribute, loop.iteration if loop is not None else None)
            outs = self._run_scope(scope, inputs, read, (*path, step))
            if loop is None:
                return {name: outs[o] for name, o in zip(node.outputs, scope.output_names) if name}
            following = self.flow.advance(node, scope, loop, [outs[o] for o in scope.output_names], lambda name: self._array(name, read))
            if following is None:
                return self.flow.finish(node, loop)
            inputs = following

    def _run_node(self, node: Node, read: Callable[[str], Any]) -> dict[str, Any]:
        feeds, constants = split_reads(node.all_inputs, self.embedded, self.constants, read)
        return self.runner.run(node, feeds, constants=constants)

    def _run_scope(self, scope: Scope, inputs: Mapping[str, Any], read_outer: Callable[[str], Any], path: Path) -> dict[str, Any]:
        """One run of ``scope``'s nodes from ``inputs``; its values by name (those still read, and its outputs)."""
        values: dict[str, Any] = dict(inputs)
        values.update({t.name: self.graph.weights.array(t) for t in scope.initializers})
        last_use: dict[str, int] = {}
        for node in scope.nodes:
            for name in node.all_inputs:
                last_use[name] = node.order
        keep = set(scope.output_names)

        def read(name: str) -> Any:
            return values[name] if name in values else self._array(name, read_outer)

        for node in scope.nodes:
            outs = self.run(node, read, path) if node.enterable else self._run_node(node, read)
            self.on_inner(node, path, outs)
            values.update(outs)
            for name in node.all_inputs:
                if last_use.get(name) == node.order and name not in keep:
                    values.pop(name, None)
        return values
