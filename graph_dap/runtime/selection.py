"""Choosing nodes and values by what the user knows of a model: module paths, op types, names.

An exported language model's node and value names say nothing of where they are (the dynamo
exporter names layer 8's ``gate_proj`` weight ``val_1262``), but its nodes carry their module
paths (see :mod:`.source`). ``module:PATH`` chooses the nodes that ran in a module, those of the
modules inside it included: ``module:model.layers.8`` is layer 8, ``module:model.layers.8.*``
the same (a trailing ``.*`` takes the module itself too), ``module:model.layers.*.mlp`` every
layer's MLP. Models from the TorchScript exporter, tf2onnx or paddle2onnx give their modules by
their node names (``/encoder/layer.0/attention/MatMul``: ``encoder.layer.0.attention``).

A :class:`Selection` is what ``dump --values``, ``compare --values`` and ``profile --nodes`` take:
``module:PATH``, ``op:TYPE``, or a glob over value names and node ids. Breakpoints take
``module:PATH`` too (:mod:`.breakpoints`). :func:`layer_of` is a node's index among repeated
blocks (``model.layers.8`` -> 8): what a breakpoint's condition reads as ``layer``.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_dap.module_paths import MODULE, in_module

if TYPE_CHECKING:
    from graph_dap.runtime.graph import Graph, Node

__all__ = ["MODULE", "PatternKind", "Selection", "at_depth", "in_module", "layer_of", "module_nodes", "module_paths", "where_names"]

_INDEX = re.compile(r"^\d+$")


def module_paths(graph: Graph, node: Node) -> tuple[str, ...]:
    """The paths of the modules ``node`` ran in, outermost first (``()``: its model says nothing)."""
    source = graph.sources.of(node)
    return tuple(m.path for m in source.modules) if source is not None else ()


def module_nodes(graph: Graph, pattern: str) -> list[Node]:
    """The nodes of every scope that ran in a module ``pattern`` names, in :meth:`Graph.all_nodes` order."""
    return [n for n in graph.all_nodes() if in_module(module_paths(graph, n), pattern)]


def no_module_message(graph: Graph, pattern: str) -> str:
    """Why ``module:pattern`` chose nothing, with a few of the model's module paths to choose from."""
    paths = {p for n in graph.nodes for p in module_paths(graph, n) if p}
    if not paths:
        return f"no node of this model says which module it ran in (module:{pattern} needs a torch export's metadata or module-style node names)"
    near = sorted(paths, key=lambda p: (p.count("."), p))[:8]
    return f"no node ran in a module matching '{pattern}' (modules here include {', '.join(near)}{' ...' if len(paths) > 8 else ''})"


def layer_of(paths: Sequence[str]) -> int | None:
    """The index of the repeated block a node ran in: the first number among the components of its innermost module
    path (``model.layers.8.mlp`` -> 8, ``encoder.layer.3.attention`` -> 3); None outside such blocks."""
    parts = re.split(r"[./]", paths[-1]) if paths else []
    return next((int(part) for part in parts if _INDEX.match(part)), None)


#: The names a breakpoint's condition reads for where its node is (unless the graph has values of those names).
MODULE_NAME = "module"
LAYER_NAME = "layer"


@dataclass(frozen=True, slots=True)
class ModuleValue:
    """What ``module`` reads in a breakpoint's condition: the modules the node ran in. ``module == "model.layers.8"``
    holds for a node inside that module (a glob names several: ``module == "model.layers.*.mlp"``); ``!=`` is its negation."""

    paths: tuple[str, ...]

    def matches(self, pattern: object) -> bool:
        return isinstance(pattern, str) and in_module(self.paths, pattern)

    def __str__(self) -> str:
        return self.paths[-1] if self.paths else ""


def where_names(graph: Graph, node: Node) -> dict[str, object]:
    """``module`` and ``layer`` (-1 outside numbered blocks) for a condition at ``node``: a source line that runs once
    per layer stops in the layer it names (``layer == 8``)."""
    import numpy as np

    paths = module_paths(graph, node)
    layer = layer_of(paths)
    return {MODULE_NAME: ModuleValue(paths), LAYER_NAME: np.int64(-1 if layer is None else layer)}


def at_depth(path: str, depth: int) -> str:
    """``path`` cut to its first ``depth`` components (``model.layers.8.mlp`` at 3: ``model.layers.8``); 0 or less: as it is."""
    if depth <= 0 or not path:
        return path
    sep = "/" if "/" in path and "." not in path else "."
    return sep.join(path.split(sep)[:depth])


class PatternKind(enum.StrEnum):
    """How a pattern of a :class:`Selection` chooses."""

    MODULE = "module"  # ``module:PATH``, or a glob that matches module paths only: the nodes of those modules
    OP = "op"  # ``op:TYPE``: the nodes of that op type
    NAME = "name"  # a glob over value names and node ids


@dataclass(frozen=True, slots=True)
class Selection:
    """The nodes and values some patterns choose: ``module:PATH``, ``op:TYPE``, or globs over value names and
    node ids; a glob that matches no name nor id but matches module paths chooses those modules (``*layers.8*``).
    No patterns: everything. Made by :meth:`of`."""

    graph: Graph
    patterns: tuple[str, ...]  # as given
    kinds: tuple[tuple[PatternKind, str], ...]  # each as understood, with its text

    @classmethod
    def of(cls, graph: Graph, patterns: Iterable[str]) -> Selection:
        given = tuple(p.strip() for p in patterns)
        kinds: list[tuple[PatternKind, str]] = []
        names: list[str] | None = None
        for p in given:
            if p.startswith(MODULE):
                kinds.append((PatternKind.MODULE, p[len(MODULE) :].strip()))
            elif p.startswith("op:"):
                kinds.append((PatternKind.OP, p[3:].strip()))
            else:
                if names is None:
                    names = [v for n in graph.all_nodes() for v in (n.id, *n.outputs) if v] + list(graph.input_names)
                named = any(fnmatch.fnmatchcase(v, p) for v in names)
                kinds.append((PatternKind.MODULE, p) if not named and module_nodes(graph, p) else (PatternKind.NAME, p))
        return cls(graph, given, tuple(kinds))

    @classmethod
    def checked(cls, graph: Graph, patterns: Iterable[str], flag: str, error: type[Exception]) -> Selection:
        """:meth:`of`, and an ``error`` naming ``flag`` (``--values``) for a pattern that chooses none of the values
        the graph's nodes make, inside bodies too: a mistake that would otherwise choose nothing silently."""
        selection = cls.of(graph, patterns)
        missed = selection.unmatched((o, n) for n in graph.all_nodes() for o in n.outputs if o)  # bodies' values too
        if missed:
            raise error(f"{flag} {missed[0]}: {selection.explain(missed[0])}")
        return selection

    def _node_matches(self, node: Node, kind: PatternKind, text: str) -> bool:
        if kind is PatternKind.MODULE:
            return in_module(module_paths(self.graph, node), text)
        if kind is PatternKind.OP:
            return node.op_type == text or f"{node.domain}.{node.op_type}" == text
        return fnmatch.fnmatchcase(node.id, text)

    def node(self, node: Node) -> bool:
        """Whether ``node`` is chosen."""
        return not self.kinds or any(self._node_matches(node, k, t) for k, t in self.kinds)

    def value(self, name: str, producer: Node | None) -> bool:
        """Whether the value ``name`` (made by ``producer``; None for a graph input) is chosen: by its name, or by its producer."""
        return not self.kinds or any(self._value_matches(name, producer, k, t) for k, t in self.kinds)

    def _value_matches(self, name: str, producer: Node | None, kind: PatternKind, text: str) -> bool:
        if producer is not None and self._node_matches(producer, kind, text):
            return True
        return kind is PatternKind.NAME and fnmatch.fnmatchcase(name, text)

    def unmatched(self, values: Iterable[tuple[str, Node | None]]) -> list[str]:
        """The patterns that choose none of ``values`` ((name, producer) pairs): each a mistake worth one clear line."""
        pending = list(zip(self.patterns, self.kinds))
        for name, producer in values:
            if not pending:
                break
            pending = [(p, (k, t)) for p, (k, t) in pending if not self._value_matches(name, producer, k, t)]
        return [p for p, _ in pending]

    def explain(self, pattern: str) -> str:
        """Why ``pattern`` chose nothing."""
        kind, text = self.kinds[self.patterns.index(pattern.strip())]
        if kind is PatternKind.MODULE:
            return no_module_message(self.graph, text)
        if kind is PatternKind.OP:
            ops = sorted({n.op_type for n in self.graph.all_nodes()})
            return f"no node has op type '{text}' (this graph has: {', '.join(ops)})"
        layers = sorted({at_depth(p, _layer_depth(p)) for n in self.graph.nodes for p in module_paths(self.graph, n) if layer_of([p]) is not None})
        hint = f"; an export's names need not say where a value is: choose by module, e.g. module:{layers[-1]}" if layers else ""
        return f"no value name or node id matches '{text}'{hint}"

    def to_dict(self) -> list[dict[str, str]]:
        """Each pattern as given and as understood (a dump's side file records it)."""
        return [{"pattern": p, "kind": k, "text": t} for p, (k, t) in zip(self.patterns, self.kinds)]


def _layer_depth(path: str) -> int:
    """The depth of the first numbered component of ``path`` (``model.layers.8.mlp``: 3)."""
    parts = re.split(r"[./]", path)
    return next((k + 1 for k, part in enumerate(parts) if _INDEX.match(part)), len(parts))
