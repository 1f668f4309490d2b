"""Which ops an onnxruntime execution provider implements: its kernel registry.

``onnxruntime``'s pybind module lists every registered kernel (op, domain,
provider, the schema versions it covers, the types it takes). A node is
implemented by a provider when a kernel of that provider covers the version of
the node's schema at the model's opset and, where the node's input types are
known, takes them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from graph_dap.kinds import ValueKind
from graph_dap.lsp import schemas
from graph_dap.runtime.graph import Graph, Node

_DTYPE_TO_ONNX = {
    "float32": "float",
    "float64": "double",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "string": "string",
    "complex64": "complex64",
    "complex128": "complex128",
}


@dataclass(frozen=True, slots=True)
class Kernel:
    """One registered kernel: the schema versions it covers and, per type parameter, the types it takes."""

    start: int
    end: int
    types: dict[str, frozenset[str]]


@functools.lru_cache(maxsize=1)
def registry() -> dict[tuple[str, str, str], tuple[Kernel, ...]]:
    """``(provider, domain, op) -> kernels``, for the providers this onnxruntime build has."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort

    table: dict[tuple[str, str, str], list[Kernel]] = {}
    for k in ort.get_all_opkernel_def():
        start, end = k.version_range
        key = (k.provider, k.domain or "ai.onnx", k.op_name)
        table.setdefault(key, []).append(Kernel(start, end, {p: frozenset(ts) for p, ts in k.type_constraints.items()}))
    return {key: tuple(ks) for key, ks in table.items()}


@functools.lru_cache(maxsize=1)
def providers_present() -> frozenset[str]:
    """The execution providers whose kernels the registry lists."""
    return frozenset(p for p, _, _ in registry())


@dataclass(frozen=True, slots=True)
class Missing:
    """A node that a provider has no kernel for, and why."""

    node: Node
    provider: str
    reason: str


def missing_kernels(graph: Graph, provider: str) -> list[Missing]:
    """The nodes of ``graph`` that ``provider`` cannot run (empty when the registry does not know ``provider``)."""
    if provider not in providers_present():
        return []
    table = registry()
    out = []
    for node in graph.nodes:
        domain = node.domain or "ai.onnx"
        kernels = table.get((provider, domain, node.op_type))
        if not kernels:
            if domain in ("ai.onnx", "ai.onnx.ml") or any(d == domain for _, d, _ in table):
                out.append(Missing(node, provider, f"{provider} has no kernel for {_op(node)}"))
            continue
        opset = schemas.opset_of(graph.opsets, node.domain)
        s = schemas.schema(node.op_type, node.domain, opset)
        version = s.since_version if s is not None else opset
        versioned = [k for k in kernels if k.start <= version <= k.end]
        if not versioned:
            ranges = ", ".join(f"{k.start}-{k.end if k.end < 2**31 - 1 else ''}" for k in kernels)
            out.append(Missing(node, provider, f"{provider} implements {_op(node)} for versions {ranges}, not version {version}"))
            continue
        if s is not None:
            wanted = _input_types(graph, node, s)
            if wanted and not any(_takes(k, wanted) for k in versioned):
                kinds = ", ".join(f"{p}={t}" for p, t in sorted(wanted.items()))
                out.append(Missing(node, provider, f"{provider} has no {_op(node)} kernel for {kinds}"))
    return out


def _op(node: Node) -> str:
    return node.op_type if not node.domain or node.domain == "ai.onnx" else f"{node.domain}.{node.op_type}"


def _input_types(graph: Graph, node: Node, schema: object) -> dict[str, str]:
    """Type parameter -> ``tensor(float)``-style type, from the node's inputs whose dtype is known."""
    out: dict[str, str] = {}
    formals = list(getattr(schema, "inputs", ()))
    params = {c.type_param_str for c in getattr(schema, "type_constraints", ())}
    for k, name in enumerate(node.inputs):
        if not name or not formals:
            continue
        formal = formals[min(k, len(formals) - 1)]
        if formal.type_str not in params:
            continue
        info = graph.value_info(name)
        onnx_type = _DTYPE_TO_ONNX.get(info.dtype or "")
        if info.kind == ValueKind.TENSOR and onnx_type:
            out.setdefault(formal.type_str, f"tensor({onnx_type})")
    return out


def _takes(kernel: Kernel, wanted: dict[str, str]) -> bool:
    return all(p not in kernel.types or t in kernel.types[p] for p, t in wanted.items())


def kernel_findings(graph: Graph, providers: Iterable[str]) -> list[tuple[Missing, str | None]]:
    """Nodes that the first of ``providers`` this build knows cannot run, each with the later provider
    that can (onnxruntime falls back to it), or None when none of them can."""
    chosen = [p for p in providers if p in providers_present()]
    if not chosen:
        return []
    later = [{m.node.id for m in missing_kernels(graph, p)} for p in chosen[1:]]
    out: list[tuple[Missing, str | None]] = []
    for m in missing_kernels(graph, chosen[0]):
        fallback = next((p for p, lacking in zip(chosen[1:], later) if m.node.id not in lacking), None)
        out.append((m, fallback))
    return out
