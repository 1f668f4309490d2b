"""The reference side of a comparison: where its values come from, and how a user names it.

A reference is a :class:`Source`: a dump read lazily (:class:`DumpSource`), the
same model on another provider (:class:`RunnerSource`), another model matched by
value name (:class:`ModelSource`), or the model as onnxruntime optimizes it
(:class:`OptimizedSource`, which can only show the values the optimized graph
still names). :func:`parse_reference` reads a launch argument or CLI option into
a :class:`Reference`; :func:`make_source` opens it.
"""

from __future__ import annotations

import enum
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import onnx
import onnxruntime as ort
from onnx import helper

from graph_dap import log as _log
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.options import ORT_ERRORS, check_opt_level, check_providers, session_options
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.tools.dump import Dump, NodeStream
from graph_dap.runtime.tools.metrics import CompareError

__all__ = [
    "DumpSource",
    "ModelSource",
    "OptimizedSource",
    "Reference",
    "ReferenceKind",
    "RunnerSource",
    "Source",
    "computed_names",
    "make_source",
    "model_label",
    "parse_reference",
]

# The sources log as part of the comparison: GRAPH_DAP_LOG=runtime.tools.compare=2 shows both sides.
_log_ = _log.get_logger("graph_dap.runtime.tools.compare")


class Source(Protocol):
    """One side of a comparison: the values of a node's outputs, asked for in run order."""

    label: str

    def outputs(self, node: Node) -> Mapping[str, Any]:
        """Values of ``node``'s outputs that this side has (possibly none)."""
        ...

    def value_names(self) -> set[str]:
        """Every value name this side can give."""
        ...

    def input_values(self) -> Mapping[str, Any]:
        """The graph inputs this side ran with, where it knows them."""
        ...

    def close(self) -> None: ...


class RunnerSource:
    """The model run node by node (one-node sessions) on the given providers; forward in run order,
    starting over when asked for a node it has passed."""

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        providers: Sequence[str] | None = None,
        opt_level: str = OptLevel.NONE,
        label: str | None = None,
    ) -> None:
        self.graph = graph
        self.runner = NodeRunner(graph, providers, opt_level)
        self.inputs = dict(inputs)
        self.stream = NodeStream(graph, self.inputs, self.runner)
        self.label = label or f"{model_label(graph)} node by node on {', '.join(self.runner.providers)}"

    def outputs(self, node: Node) -> Mapping[str, Any]:
        return self.stream.run_to(node.order)

    def value_names(self) -> set[str]:
        return computed_names(self.graph)

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self.stream.reset()


class DumpSource:
    """Values read from a dump, one array at a time, by value name."""

    def __init__(self, dump: Dump | str | os.PathLike[str]) -> None:
        self.dump = dump if isinstance(dump, Dump) else Dump(dump)
        self.label = self.dump.describe()

    def outputs(self, node: Node) -> Mapping[str, Any]:
        return {o: self.dump.get(o) for o in node.outputs if o and self.dump.has(o)}

    def value_names(self) -> set[str]:
        return set(self.dump.names) - set(self.dump.input_names)

    def input_values(self) -> Mapping[str, Any]:
        return {n: self.dump.get(n) for n in self.dump.input_names if self.dump.has(n)}

    def close(self) -> None:
        self.dump.close()


class ModelSource:
    """Another model's values, matched by value name, run node by node in its own order.

    Values are produced as the other model runs and held only until asked for; a
    value asked for again after it was handed out starts the other model over.
    """

    def __init__(
        self,
        other: Graph,
        inputs: Mapping[str, Any],
        wanted: Iterable[str],
        providers: Sequence[str] | None = None,
        opt_level: str = OptLevel.NONE,
    ) -> None:
        self.graph = other
        missing = [v.name for v in other.inputs if v.name not in inputs]
        if missing:
            raise CompareError(
                f"the other model's input '{missing[0]}' has no counterpart among this model's inputs "
                f"({', '.join(inputs) or 'none'}); both models must take inputs of the same names"
            )
        feeds = resolve_inputs(other, {v.name: inputs[v.name] for v in other.inputs})
        self.inputs = feeds
        self._outputs = computed_names(other)
        self._initializers = {t.name: t for t in other.model.graph.initializer}
        self.wanted = set(wanted) & (self._outputs | set(self._initializers))
        self.stream = NodeStream(other, feeds, NodeRunner(other, providers, opt_level))
        self._buffer: dict[str, Any] = {}
        self.label = f"{model_label(other)} node by node on {', '.join(self.stream.runner.providers)}, matched by value name"

    def _produce(self, name: str) -> Any:
        if name in self._buffer:
            return self._buffer.pop(name)
        for attempt in range(2):
            while not self.stream.at_end:
                _, outs = self.stream.next()
                for k, v in outs.items():
                    if k in self.wanted:
                        self._buffer[k] = v
                if name in self._buffer:
                    return self._buffer.pop(name)
            if attempt == 0:
                self.stream.reset()
                self._buffer.clear()
        raise CompareError(f"the other model did not produce '{name}'")

    def outputs(self, node: Node) -> Mapping[str, Any]:
        out: dict[str, Any] = {}
        for o in node.outputs:
            if not o or o not in self.wanted:
                continue
            if o in self._initializers:
                out[o] = self.graph.weights.array(self._initializers[o])
            else:
                out[o] = self._produce(o)
        return out

    def value_names(self) -> set[str]:
        return set(self._outputs)

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self._buffer.clear()
        self.stream.reset()


class OptimizedSource:
    """The whole model as onnxruntime optimizes it at ``opt_level``: only the values that the optimized
    graph still computes under their original names can be compared (fused values do not exist there).

    The optimized model (saved by onnxruntime) is run whole with those values added as outputs, in
    chunks of at most ``budget_bytes`` of outputs each, so memory stays bounded: one full run per chunk.
    """

    def __init__(
        self,
        graph: Graph,
        inputs: Mapping[str, Any],
        opt_level: str = OptLevel.ALL,
        providers: Sequence[str] | None = None,
        budget_bytes: int = 256 << 20,
    ) -> None:
        from graph_dap.runtime.tools.profile import optimize_model

        self.graph = graph
        self.opt_level = opt_level
        self.providers = check_providers(providers)
        self.inputs = dict(inputs)
        self._tmp = tempfile.TemporaryDirectory(prefix="graph-dap-opt-")
        self.model_path = optimize_model(graph, opt_level, self.providers, Path(self._tmp.name))
        self._model = onnx.load(str(self.model_path), load_external_data=False)
        produced = {o for n in self._model.graph.node for o in n.output if o}
        produced |= {o.name for o in self._model.graph.output}
        originals = [o for n in graph.nodes for o in n.outputs if o]
        self.surviving = [o for o in originals if o in produced]
        self.total_values = len(originals)
        self._chunk_of: dict[str, int] = {}
        self._chunks: list[list[str]] = []
        used = budget_bytes + 1
        for name in self.surviving:
            size = _estimated_bytes(graph, name)
            if used + size > budget_bytes and (not self._chunks or self._chunks[-1]):
                self._chunks.append([])
                used = 0
            self._chunks[-1].append(name)
            self._chunk_of[name] = len(self._chunks) - 1
            used += size
        self._current = -1
        self._values: dict[str, Any] = {}
        self.runs = 0
        self.label = (
            f"{model_label(graph)} optimized by onnxruntime at level '{opt_level}' on {', '.join(self.providers)}, "
            f"run whole; its graph keeps {len(self.surviving)} of the model's {len(originals)} value names"
        )

    def _run_chunk(self, i: int) -> None:
        names = self._chunks[i]
        m = onnx.ModelProto()
        m.CopyFrom(self._model)
        have = {o.name for o in m.graph.output}
        used = {x for n in m.graph.node for x in n.input}
        keep_inputs = [v for v in m.graph.input if v.name in used or v.name in self.inputs]
        del m.graph.input[:]
        m.graph.input.extend(keep_inputs)
        m.graph.output.extend(helper.make_value_info(n, onnx.TypeProto()) for n in names if n not in have)
        path = self.model_path.with_name(f"chunk_{i}.onnx")
        onnx.save(m, str(path))
        try:
            sess = ort.InferenceSession(str(path), session_options(OptLevel.NONE), providers=self.providers)
            feeds = {v.name: self.inputs[v.name] for v in keep_inputs if v.name in self.inputs}
            outs = sess.run(names, feeds)
        except ORT_ERRORS as e:
            raise CompareError(
                f"onnxruntime failed on the model optimized at level '{self.opt_level}': {str(e).splitlines()[0]}"
            ) from None
        finally:
            path.unlink(missing_ok=True)
        self._values = dict(zip(names, outs))
        self._current = i
        self.runs += 1
        _log_.debug("optimized side: chunk %d of %d (%d values)", i + 1, len(self._chunks), len(names))

    def outputs(self, node: Node) -> Mapping[str, Any]:
        out: dict[str, Any] = {}
        for o in node.outputs:
            i = self._chunk_of.get(o) if o else None
            if i is None:
                continue
            if i != self._current:
                self._run_chunk(i)
            out[o] = self._values[o]
        return out

    def value_names(self) -> set[str]:
        return set(self.surviving)

    def input_values(self) -> Mapping[str, Any]:
        return self.inputs

    def close(self) -> None:
        self._values = {}
        self._tmp.cleanup()


def _estimated_bytes(graph: Graph, name: str) -> int:
    size = graph.value_info(name).nbytes
    return 4 << 20 if size is None else size


def model_label(graph: Graph) -> str:
    """How a model is named in labels: its file name, or its graph name."""
    return graph.path.name if graph.path else f"model '{graph.name}'"


def computed_names(graph: Graph) -> set[str]:
    """Every value a node of ``graph`` computes (not its inputs or initializers)."""
    return {o for n in graph.nodes for o in n.outputs if o}


# -- naming a reference ---------------------------------------------------------------


class ReferenceKind(enum.StrEnum):
    """What a comparison's reference is; ``target`` says which."""

    DUMP = "dump"  # values saved in an .npz (a path)
    PROVIDER = "provider"  # the same model on another execution provider (a name)
    MODEL = "model"  # another model that computes the same values (a path)
    OPT_LEVEL = "opt_level"  # the same model as onnxruntime optimizes it (a level)


@dataclass(frozen=True, slots=True)
class Reference:
    """What to compare against: ``dump`` (a path), ``provider`` (a name), ``model`` (a path) or ``opt_level``.

    ``kind`` may be given as its word; it is made a :class:`ReferenceKind` here."""

    kind: ReferenceKind
    target: str

    KINDS = tuple(k.value for k in ReferenceKind)

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise CompareError(f"unknown reference kind '{self.kind}'; expected one of {', '.join(self.KINDS)}")
        object.__setattr__(self, "kind", ReferenceKind(self.kind))
        if not self.target:
            raise CompareError(f"reference '{self.kind}' needs a value")


def parse_reference(spec: str | Mapping[str, Any] | Reference) -> Reference:
    """A reference from a launch argument: ``"run.npz"``, ``"dump:run.npz"``, ``"provider:CUDA"``,
    ``"opt_level:all"`` (or ``opt:all``), ``"model:other.onnx"``, or ``{"dump": "run.npz"}``-style dicts."""
    if isinstance(spec, Reference):
        return spec
    if isinstance(spec, Mapping):
        items = [(k, v) for k, v in spec.items() if k in (*Reference.KINDS, "optLevel")]
        if len(items) != 1 or not isinstance(items[0][1], str):
            raise CompareError('a reference is one of {"dump": PATH}, {"provider": NAME}, {"model": PATH}, {"opt_level": LEVEL}')
        k, v = items[0]
        return Reference(ReferenceKind.OPT_LEVEL if k == "optLevel" else ReferenceKind(k), v)
    text = str(spec).strip()
    kind, sep, rest = text.partition(":")
    aliases = {**{k.value: k for k in ReferenceKind}, "opt": ReferenceKind.OPT_LEVEL, "opt-level": ReferenceKind.OPT_LEVEL}
    if sep and kind in aliases:
        return Reference(aliases[kind], rest.strip())
    if text.lower().endswith(".npz"):
        return Reference(ReferenceKind.DUMP, text)
    if text.lower().endswith(".onnx"):
        return Reference(ReferenceKind.MODEL, text)
    raise CompareError(
        f"reference '{text}' is not understood; give a dump (.npz), model:OTHER.onnx, provider:NAME or opt_level:LEVEL"
    )


def make_source(
    graph: Graph,
    inputs: Mapping[str, Any],
    reference: Reference,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    providers: Sequence[str] | None = None,
) -> Source:
    """The :class:`Source` a reference names, for ``graph`` run on ``inputs``."""
    base = Path(base_dir) if base_dir else Path.cwd()
    if reference.kind is ReferenceKind.DUMP:
        return DumpSource(base / reference.target)
    if reference.kind is ReferenceKind.PROVIDER:
        return RunnerSource(graph, inputs, [reference.target])
    if reference.kind is ReferenceKind.MODEL:
        other = load_graph(base / reference.target)
        return ModelSource(other, inputs, computed_names(graph), providers)
    level = reference.target.lower()
    check_opt_level(level, reference.target)
    if level == OptLevel.NONE:
        return RunnerSource(graph, inputs, providers, label=f"{model_label(graph)} unoptimized, node by node")
    return OptimizedSource(graph, inputs, level, providers)
