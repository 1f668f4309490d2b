"""The timeline of a run: where the program counter is, which nodes ran, and how to undo them.

Every move of the counter (a node that ran, a segment, a goto) is an entry of the
history, so ``step_back`` undoes exactly one of them and a fault found inside a
segment rewinds the run to just after its node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from graph_dap.runtime.graph import Node


class Entry(NamedTuple):
    """One entry of the history: the counter before, the nodes it marked as run, the last node before."""

    position: int
    ran: tuple[int, ...]  # orders of the nodes this entry marked as run
    last: Node | None


class _Run:
    """The entries of a segment, one per node, in one record (a continue through densenet121 ran 1,746
    nodes: as many entries took 0.6 ms): undone one node at a time, from its end."""

    __slots__ = ("count", "last", "nodes", "start")

    def __init__(self, start: int, nodes: Sequence[Node], last: Node | None) -> None:
        self.start, self.nodes, self.last, self.count = start, nodes, last, len(nodes)


class Timeline:
    """A program counter over a run sequence, the set of nodes that ran, and the undo history.

    ``on_forget(order)`` is called for every node (by its run order) that an undo takes
    back, so that the values it produced are forgotten with it.
    """

    def __init__(self, sequence: Sequence[Node], on_forget: Callable[[int], None]) -> None:
        self.sequence = tuple(sequence)
        self.positions = {n.id: i for i, n in enumerate(self.sequence)}
        self._on_forget = on_forget
        self.reset()

    def reset(self) -> None:
        self.position = 0
        self.ran: set[int] = set()
        self.history: list[Entry | _Run] = []
        self.last: Node | None = None

    # -- where --------------------------------------------------------------------------

    @property
    def next_node(self) -> Node | None:
        """The node the counter is at; None at the end."""
        return self.sequence[self.position] if self.position < len(self.sequence) else None

    @property
    def at_end(self) -> bool:
        return self.position >= len(self.sequence)

    def position_of(self, node: Node) -> int:
        """Where ``node`` is in the run sequence."""
        return self.positions[node.id]

    # -- moving -------------------------------------------------------------------------

    def advance(self, node: Node) -> None:
        """``node`` (at the counter) ran: record it and move past it."""
        self.history.append(Entry(self.position, (node.order,), self.last))
        self.ran.add(node.order)
        self.last = node
        self.position += 1

    def advance_segment(self, nodes: Sequence[Node], end: int) -> None:
        """The nodes at positions ``position..end-1`` ran in one call: one record, undone a node at a time (see ``undo``)."""
        if nodes:
            self.history.append(_Run(self.position, nodes, self.last))
            self.ran.update(n.order for n in nodes)
            self.last = nodes[-1]
        self.position = end

    def jump(self, position: int, computed: Iterable[int] = ()) -> None:
        """A goto to ``position``; ``computed``: orders of nodes run to supply the target's inputs."""
        added = tuple(o for o in computed if o not in self.ran)
        self.history.append(Entry(self.position, added, self.last))
        self.ran.update(added)
        self.position = position

    def undo(self) -> bool:
        """Take back the last entry; False when the history is empty."""
        if not self.history:
            return False
        run = self.history[-1]
        if isinstance(run, _Run):
            run.count -= 1
            k = run.count
            if k == 0:
                self.history.pop()
            order = run.nodes[k].order
            self.ran.discard(order)
            self._on_forget(order)
            self.position = run.start + k
            self.last = run.nodes[k - 1] if k else run.last
            return True
        self.history.pop()
        for order in run.ran:
            self.ran.discard(order)
            self._on_forget(order)
        self.position = run.position
        self.last = run.last
        return True

    def rewind_to(self, position: int) -> None:
        """Undo entries until the counter is at ``position`` (positions from there on did not run)."""
        while self.position > position and self.undo():
            pass
