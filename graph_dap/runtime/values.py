"""The values of a run: which are known, which are stale, setting one, and recomputing on demand.

Fixed values (graph inputs, initializers, constant-node outputs) are always kept;
computed ones within the store's budget. A value is *available* when it is kept or
its producer ran in this timeline; an available value that is not kept is recomputed
from what is kept. Setting a value makes its computed dependents *stale*: they are
recomputed before the run goes on, or when read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graph_dap.errors import GraphDapError, ValueNotFoundError
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.tensor import type_text
from graph_dap.runtime.timeline import Timeline


class Constants:
    """What does not change during a run: initializers and constant-node outputs, and their version.

    Sessions embed these values; ``version`` names the set embedded (0: the model's own),
    so that setting one of them builds new sessions. ``faults`` remembers, per filter,
    the first constant that holds a watched fault.
    """

    def __init__(self, graph: Graph, skip_constants: bool) -> None:
        self.graph = graph
        constant_outputs = [o for n in graph.nodes if n.is_constant_op for o in n.outputs]
        # onnxruntime makes Constant nodes initializers at load: embed their outputs alike.
        self.embedded = frozenset(graph.initializer_names) | frozenset(constant_outputs if skip_constants else ())
        self._originals: dict[str, Any] | None = None
        self.computed: dict[str, Any] = {}  # outputs of the constant nodes, computed once at start
        self.version = 0
        self._versions = 0
        self.overridden = False  # a constant node's output was set: segments must be fed it, not recompute it
        self.faults: dict[FaultFilter, tuple[Node, str, str] | None] = {}
        self._faults_stale = False

    @property
    def originals(self) -> dict[str, Any]:
        """The model's initializers as arrays (read once)."""
        if self._originals is None:
            self._originals = {t.name: onnx.numpy_helper.to_array(t) for t in self.graph.model.graph.initializer}
        return self._originals

    def reset(self) -> None:
        """Back to the model's own constants (a restart)."""
        if self._faults_stale:
            self.faults.clear()
            self._faults_stale = False
        self.overridden = False
        self.version = 0

    def changed(self, name: str) -> None:
        """A fixed value was set: forget the fault cache; new sessions where it is embedded."""
        self.faults.clear()
        self._faults_stale = True
        producer = self.graph.producer(name)
        if producer is not None and producer.is_static:
            self.overridden = True
        if name in self.embedded:
            self._versions += 1
            self.version = self._versions


class Values:
    """The values of one run over a timeline: available, stale, set, recomputed."""

    def __init__(
        self,
        graph: Graph,
        store: ValueStore,
        constants: Constants,
        executor: Executor,
        timeline: Timeline,
        last_use: Mapping[str, int],
        skip_constants: bool,
    ) -> None:
        self.graph = graph
        self.store = store
        self.constants = constants
        self.executor = executor
        self.timeline = timeline
        self.last_use = last_use
        self.skip_constants = skip_constants
        self.started = False
        self.overrides: set[str] = set()  # computed values the user set: never evicted
        self.stale: set[str] = set()

    def reset(self, inputs: Mapping[str, Any]) -> None:
        """Only the inputs and the constants are known (a new timeline)."""
        self.store.clear()
        self.store.fixed.update(inputs)
        self.store.fixed.update(self.constants.originals)
        self.store.fixed.update(self.constants.computed)
        self.overrides.clear()
        self.stale.clear()
        self.started = False

    # -- what is known ------------------------------------------------------------------

    def available(self, name: str) -> bool:
        """Known in this timeline: fixed, kept, or produced by a node that ran."""
        if name in self.store:
            return True
        producer = self.graph.producer(name)
        return producer is not None and (
            producer.order in self.timeline.ran or (producer.is_static and self.skip_constants and self.started)
        )

    def value(self, name: str) -> Any:
        """The current value of ``name`` (possibly stale)."""
        if name in self.store:
            return self.store.get(name)
        if not self.graph.has_value(name):
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        if self.available(name):
            return self.get(name)
        producer = self.graph.producer(name)
        where = f": node {producer.id} ({producer.op_type}) has not run yet" if producer else ""
        raise ValueNotFoundError(f"value '{name}' is not computed yet{where}")

    def get(self, name: str) -> Any:
        """The value of ``name``, recomputing it (and what it needs) when it is not kept or is stale."""
        if name in self.store and name not in self.stale:
            return self.store.get(name)
        return self.compute([name])[name]

    def resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
        def resolve(name: str) -> Any:
            if extra and name in extra:
                return extra[name]
            return self.value(name)

        return resolve

    # -- running over them ----------------------------------------------------------------

    def execute(self, node: Node, count: bool = True, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``node``'s outputs over the current values (``extra`` first)."""

        def get(name: str) -> Any:
            return extra[name] if extra and name in extra else self.get(name)

        return self.executor.execute(node, get, self.store.fixed, self.constants.version, count)

    def compute(self, names: Sequence[str]) -> dict[str, Any]:
        """Compute ``names`` from what is kept, in one segment (or one node), and keep the results."""
        needed: dict[int, Node] = {}
        frontier = list(names)
        seen: set[str] = set()
        while frontier:
            v = frontier.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.store and v not in self.stale and v not in names:
                continue
            producer = self.graph.producer(v)
            if producer is None:
                if v in self.store:
                    continue
                raise ValueNotFoundError(f"no value '{v}' in the graph")
            if producer.order not in needed:
                needed[producer.order] = producer
                frontier.extend(producer.all_inputs)
        nodes = [needed[k] for k in sorted(needed)]
        outs = self.executor.run_nodes(nodes, list(names), self.get, self.store.fixed, self.constants.version)
        self.keep(outs)
        self.evict()
        return outs

    def keep(self, outs: Mapping[str, Any]) -> None:
        """Keep freshly computed outputs (a recomputed value is no longer set by the user, nor stale)."""
        for k, v in outs.items():
            if k in self.store.fixed:
                self.constants.faults.clear()
            self.store.put(k, v)
            self.overrides.discard(k)
            self.stale.discard(k)

    def evict(self) -> None:
        """Stay within the budget; what the next nodes read and what the user set stay."""
        pc = self.timeline.pc
        self.store.evict(lambda name: self.last_use.get(name, -1) >= pc or name in self.overrides)

    def forget(self, node: Node) -> None:
        """``node`` is undone: its outputs are not known any more."""
        for o in node.outputs:
            if o:
                self.store.drop(o)
                self.stale.discard(o)
                self.overrides.discard(o)

    # -- changing them --------------------------------------------------------------------

    def set(self, name: str, value: Any) -> list[str]:
        """Replace a value; its computed dependents become stale. A scalar broadcasts. Returns the stale names."""
        current = self.value(name)
        if isinstance(current, list):
            raise GraphDapError(f"value '{name}' is a sequence; only tensors can be set")
        cur = np.asarray(current)
        new = np.asarray(value)
        if new.ndim == 0 or (new.size == 1 and new.shape != cur.shape and new.ndim <= cur.ndim):
            try:
                new = np.full(cur.shape, new.reshape(()), dtype=cur.dtype)
            except (TypeError, ValueError) as e:
                raise GraphDapError(f"cannot set '{name}' ({type_text(cur)}) to {value!r}: {e}") from None
        elif new.shape != cur.shape or new.dtype != cur.dtype:
            hint = f"; convert it with .astype('{cur.dtype}')" if new.shape == cur.shape else ""
            raise GraphDapError(f"value '{name}' is {type_text(cur)}, got {type_text(new)}{hint}")
        if name in self.store.fixed:
            self.constants.changed(name)
        self.store.put(name, np.array(new, copy=True, order="C"))
        if name not in self.store.fixed:
            self.overrides.add(name)  # kept until its producer runs again: it cannot be recomputed
        self.stale.discard(name)
        stale = [o for n in self.graph.downstream([name]) for o in n.outputs if o and self.available(o)]
        self.stale.update(stale)
        return stale

    def refresh(self) -> None:
        """Recompute the stale values the next nodes read, each producer once, in as few calls as possible.

        Any other stale value is dropped and, like an evicted one, recomputed from the new values when read.
        """
        if not self.stale:
            return
        stale = [v for v in self.graph.value_names() if v in self.stale]
        pinned = [v for v in stale if v in self.store and self.last_use.get(v, -1) >= self.timeline.pc]
        for v in stale:
            if v not in pinned and v not in self.store.fixed:
                self.store.drop(v)
        self.compute(pinned)
        self.stale.clear()
