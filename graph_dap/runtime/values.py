"""The values of a run: which are known, which are stale, setting one, and recomputing on demand.

Fixed values (graph inputs, initializers, constant-node outputs) are always kept;
computed ones within the store's budget. A value is *available* when it is kept or
its producer ran in this timeline; an available value that is not kept is recomputed
from what is kept. Setting a value makes its computed dependents *stale*: they are
recomputed before the run goes on, or when read.

Each level of the program counter (the main graph, a branch, an iteration of a body)
has its own :class:`Values`; a name its scope does not define is looked up in the
enclosing level's (``outer``).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from graph_dap.errors import GraphDapError, ValueNotFoundError
from graph_dap.kinds import Fault
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.graph import Graph, Node, Scope
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
        self.faults: dict[FaultFilter, tuple[Node, str, Fault] | None] = {}
        self._faults_stale = False
        self.generation = 0  # counts the changes of the constants (sets, restarts): ``faults`` holds for one

    @property
    def originals(self) -> dict[str, Any]:
        """The model's initializers as arrays (read once; external data mapped from its files)."""
        if self._originals is None:
            weights = self.graph.weights  # external data mapped, not copied
            self._originals = {t.name: weights.array(t) for t in self.graph.model.graph.initializer}
        return self._originals

    def reset(self) -> None:
        """Back to the model's own constants (a restart)."""
        if self._faults_stale:
            self.faults.clear()
            self._faults_stale = False
            self.generation += 1
        self.overridden = False
        self.version = 0

    def changed(self, name: str, constant_output: bool, embedded: bool) -> None:
        """A fixed value was set: forget the fault cache; new sessions where it is embedded.

        ``constant_output``: it is a constant node's output (segments must then be fed it).
        """
        self.faults.clear()
        self._faults_stale = True
        self.generation += 1
        if constant_output:
            self.overridden = True
        if embedded:
            self._versions += 1
            self.version = self._versions


class Values:
    """The values of one level of a run over its timeline: available, stale, set, recomputed."""

    def __init__(
        self,
        scope: Scope,
        store: ValueStore,
        constants: Constants,
        executor: Executor,
        timeline: Timeline,
        last_use: Mapping[str, int],
        skip_constants: bool,
        outer: Values | None = None,
    ) -> None:
        self.scope = scope
        self.store = store
        self.constants = constants
        self.executor = executor
        self.timeline = timeline
        self.last_use = last_use
        self.skip_constants = skip_constants
        self.outer = outer
        self.started = False
        self.overrides: set[str] = set()  # computed values the user set: never evicted
        self.stale: set[str] = set()
        # Kept values an optimized segment computed: the user's own run's values, shown as they are and
        # the ones recomputations start from. Every other value a node computed was computed with the
        # original nodes (a step, or a recomputation of a value the run did not keep or fused away).
        self.from_run: set[str] = set()
        own = set(scope.initializer_names)
        if skip_constants:
            own |= {o for n in scope.nodes if n.is_constant_op for o in n.outputs if o}
        # Embedded in sessions: the model's initializers and constants, and those of every enclosing level.
        self.embedded: frozenset[str] = frozenset(own) | (outer.embedded if outer is not None else constants.embedded)
        self.fixed: Mapping[str, Any] = ChainMap(self.store.fixed, outer.fixed) if outer is not None else self.store.fixed  # type: ignore[arg-type]

    def own(self, name: str) -> bool:
        """Whether this level defines ``name`` (else it is an enclosing level's)."""
        return self.outer is None or self.scope.defines(name)

    def reset(self, inputs: Mapping[str, Any]) -> None:
        """Only the inputs and the constants are known (a new timeline)."""
        self.store.clear()
        self.store.fixed.update(inputs)
        self.store.fixed.update(self.constants.originals)
        self.store.fixed.update(self.constants.computed)
        self.overrides.clear()
        self.stale.clear()
        self.from_run.clear()
        self.started = False

    # -- what is known ------------------------------------------------------------------

    def available(self, name: str) -> bool:
        """Known in this timeline: fixed, kept, or produced by a node that ran."""
        if not self.own(name):
            return self.outer is not None and self.outer.available(name)
        if name in self.store:
            return True
        producer = self.scope.producer(name)
        return producer is not None and (
            producer.order in self.timeline.ran or (producer.is_constant and self.skip_constants and self.started)
        )

    def value(self, name: str) -> Any:
        """The current value of ``name`` (possibly stale): the run's, as an optimized segment left it, or computed
        with the original nodes from the nearest values kept (a value the run did not keep, or fused away)."""
        if not self.own(name):
            if self.outer is None:
                raise ValueNotFoundError(f"no value '{name}' in the graph")
            return self.outer.value(name)
        if name in self.store:
            return self.store.get(name)
        if not self.scope.has_value(name):
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        if self.available(name):
            return self.compute([name])[name]
        raise ValueNotFoundError(f"value '{name}' is not computed yet{self._where_made(name)}")

    def _where_made(self, name: str) -> str:
        """Which node makes ``name`` and how far the counter is from it, for the "not computed yet" message."""
        producer = self.scope.producer(name)
        if producer is None:
            return ""
        made = f": node {producer.id} ({producer.op_type}) makes it"
        position = self.timeline.positions.get(producer.id)
        if position is None:
            return made
        ahead = position - self.timeline.position
        if ahead < 0:
            return f"{made}, {-ahead} node{'s' if ahead != -1 else ''} back, not run in this run (a goto passed it)"
        return f"{made}, the next node" if ahead == 0 else f"{made}, {ahead} nodes ahead"

    def get(self, name: str) -> Any:
        """The value of ``name`` as a step or a recomputation reads it: kept and fresh (the run's own, or the user's),
        else recomputed (with what it needs) by the original nodes from the nearest values kept."""
        if not self.own(name):
            if self.outer is None:
                raise ValueNotFoundError(f"no value '{name}' in the graph")
            return self.outer.get(name)
        if self._fresh(name):
            return self.store.get(name)
        return self.compute([name])[name]

    def original(self, name: str) -> Any:
        """``name`` as its original node computes it from the values kept (the run's), without replacing a value the
        run kept: whether the original nodes make what the run made (the NaN/Inf search confirms a fault so)."""
        if not self.own(name):
            assert self.outer is not None
            return self.outer.original(name)
        if not self.executor.optimized or name not in self.from_run or name in self.store.fixed or self.scope.producer(name) is None:
            return self.value(name)  # (the run's value is the original nodes' already, or is not a node's)
        return self.compute([name], keep=False)[name]

    def computed_by_nodes(self, name: str) -> bool:
        """Whether ``name``'s value was computed here by the original nodes (a step, or a value the run did not keep),
        not by the run, fed, set by the user, or an enclosing level's."""
        if not self.own(name):
            return self.outer is not None and self.outer.computed_by_nodes(name)
        return (
            name in self.store
            and name not in self.from_run
            and name not in self.store.fixed
            and name not in self.overrides
            and self.scope.producer(name) is not None
        )

    def _fresh(self, name: str) -> bool:
        """Kept and fresh: the run's value, the user's, or one the original nodes computed."""
        return name in self.store and name not in self.stale

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

        return self.executor.execute(node, get, self.fixed, self.constants.version, count, self.embedded)

    def due(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` (this level's) that :meth:`value` would recompute."""
        return [n for n in names if self.own(n) and n not in self.store.fixed and not self._fresh(n) and self.available(n)]

    def prefetch(self, names: Sequence[str]) -> None:
        """Recompute, in one run, those of ``names`` (this level's) that :meth:`value` would recompute."""
        due = self.due(names)
        if due:
            self.compute(due)

    def compute(self, names: Sequence[str], keep: bool = True) -> dict[str, Any]:
        """Compute ``names`` with the original nodes from what is kept (the run's values first), in one segment (or one
        node), and keep the results (``keep=False``: not those that would replace the run's values)."""
        needed: dict[int, Node] = {}
        frontier = list(names)
        seen: set[str] = set()
        while frontier:
            v = frontier.pop()
            if v in seen:
                continue
            seen.add(v)
            if not self.own(v):
                continue  # an enclosing level's: read from there
            if self._fresh(v) and v not in names:
                continue
            producer = self.scope.producer(v)
            if producer is None:
                if v in self.store:
                    continue
                raise ValueNotFoundError(f"no value '{v}' in the graph")
            if producer.order not in needed:
                needed[producer.order] = producer
                frontier.extend(producer.all_inputs)
        nodes = [needed[k] for k in sorted(needed)]
        outs = self.executor.run_nodes(nodes, list(names), self.get, self.fixed, self.constants.version, self.embedded)
        self.keep(outs if keep else {k: v for k, v in outs.items() if k not in self.from_run or k in self.stale})
        self.evict()
        return outs

    def keep(self, outs: Mapping[str, Any], from_run: bool = False) -> None:
        """Keep freshly computed outputs (a recomputed value is no longer set by the user, nor stale).

        ``from_run``: a continue's segment computed them (the user's run's values, see :meth:`value`).
        """
        for k, v in outs.items():
            if k in self.store.fixed:
                self.constants.faults.clear()
            self.store.put(k, v)
            self.overrides.discard(k)
            self.stale.discard(k)
            if from_run:
                self.from_run.add(k)
            else:
                self.from_run.discard(k)

    def evict(self) -> None:
        """Stay within the budget; what the next nodes read and what the user set stay."""
        position = self.timeline.position
        self.store.evict(lambda name: self.last_use.get(name, -1) >= position or name in self.overrides)

    def forget(self, node: Node) -> None:
        """``node`` is undone: its outputs are not known any more."""
        for o in node.outputs:
            if o:
                self.store.drop(o)
                self.stale.discard(o)
                self.overrides.discard(o)
                self.from_run.discard(o)

    # -- changing them --------------------------------------------------------------------

    def set(self, name: str, value: Any) -> list[str]:
        """Replace a value; its computed dependents become stale. A scalar broadcasts. Returns the stale names."""
        if not self.own(name):
            assert self.outer is not None
            stale = self.outer.set(name, value)
            return stale + self.outer_changed([name])
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
            producer = self.scope.producer(name)
            self.constants.changed(name, producer is not None and producer.is_constant, name in self.embedded)
        self.store.put(name, np.array(new, copy=True, order="C"))
        if name not in self.store.fixed:
            self.overrides.add(name)  # kept until its producer runs again: it cannot be recomputed
        self.stale.discard(name)
        stale = [o for n in self.scope.downstream([name]) for o in n.outputs if o and self.available(o)]
        self.stale.update(stale)
        return stale

    def outer_changed(self, names: Sequence[str]) -> list[str]:
        """Values of an enclosing level changed: what this level computed from them is stale."""
        stale = [o for n in self.scope.downstream(names) for o in n.outputs if o and self.available(o)]
        self.stale.update(stale)
        return stale

    def refresh(self) -> None:
        """Recompute the stale values the next nodes read, each producer once, in as few calls as possible.

        Any other stale value is dropped and, like an evicted one, recomputed from the new values when read.
        """
        if not self.stale:
            return
        stale = [v for v in self.scope.value_names() if v in self.stale]
        if self.outer is not None:
            self.outer.refresh()
        pinned = [v for v in stale if v in self.store and self.last_use.get(v, -1) >= self.timeline.position]
        for v in stale:
            if v not in pinned and v not in self.store.fixed:
                self.store.drop(v)
        self.compute(pinned)
        self.stale.clear()
