"""What a model must pass before anything of it is allocated or run, each refusal one line saying why.

:func:`check_tensors` (at load, for every reader of models): every initializer and
``Constant`` tensor, in every graph and function, has non-negative dimensions and
exactly the data its shape declares, so that a tensor declaring 10^12 elements with no
data is refused before numpy is asked for it. Names are assigned once per graph.

:func:`check_runnable` (before a model is run): onnxruntime supports the model's IR
version and opsets (asked of onnxruntime itself, with an empty model of the same
imports) and knows every operator its nodes use. The language server loads models it
cannot run, so this is a separate step.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator

import onnx

from graph_dap.errors import ModelError
from graph_dap.runtime.graph import Graph, dtype_name

_FOUR_BIT = {onnx.TensorProto.INT4, onnx.TensorProto.UINT4} | (
    {onnx.TensorProto.FLOAT4E2M1} if hasattr(onnx.TensorProto, "FLOAT4E2M1") else set()
)
_COMPLEX = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}
_STANDARD = ("", "ai.onnx")


# -- tensors and names -----------------------------------------------------------------


def check_tensors(model: onnx.ModelProto) -> None:
    """Refuse (ModelError) a tensor whose shape or data is impossible, and a name assigned twice in a graph."""
    for where, graph in _graphs(model):
        _unique_names(graph, where)
        for t in graph.initializer:
            _check_tensor(t, f"initializer '{t.name}'{where}")
        for node in graph.node:
            _check_attributes(node, where)
    for f in model.functions:
        for node in f.node:
            _check_attributes(node, f" in function {f.name}")


def _graphs(model: onnx.ModelProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """Every graph of the model (main graph, subgraphs, functions' subgraphs), with where it is, iteratively."""
    stack: list[tuple[str, onnx.GraphProto]] = [("", model.graph)]
    for f in model.functions:
        stack += [(f" in function {f.name}", a.g) for n in f.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    while stack:
        where, graph = stack.pop()
        yield where, graph
        for node in graph.node:
            for a in node.attribute:
                inner = f" in the {a.name} of node {node.name or node.op_type}"
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append((inner, a.g))
                elif a.type == onnx.AttributeProto.GRAPHS:
                    stack += [(inner, g) for g in a.graphs]


def _unique_names(graph: onnx.GraphProto, where: str) -> None:
    seen: set[str] = set()
    for kind, names in (("graph input", [v.name for v in graph.input]), ("initializer", [t.name for t in graph.initializer])):
        own: set[str] = set()
        for name in names:
            if name in own:
                raise ModelError(f"{kind} '{name}'{where} is declared twice; each name must be given once")
            own.add(name)
        seen |= own
    outputs = [v.name for v in graph.output]
    if len(set(outputs)) != len(outputs):
        twice = next(n for n in outputs if outputs.count(n) > 1)
        raise ModelError(f"graph output '{twice}'{where} is declared twice; each name must be given once")


def _check_attributes(node: onnx.NodeProto, where: str) -> None:
    for a in node.attribute:
        label = f"the {a.name} attribute of node {node.name or node.op_type}{where}"
        if a.type == onnx.AttributeProto.TENSOR:
            _check_tensor(a.t, label)
        elif a.type == onnx.AttributeProto.TENSORS:
            for i, t in enumerate(a.tensors):
                _check_tensor(t, f"{label}[{i}]")


def _check_tensor(t: onnx.TensorProto, label: str) -> None:
    dims = list(t.dims)
    shape = "[" + ",".join(map(str, dims)) + "]"
    if any(d < 0 for d in dims):
        raise ModelError(f"{label} has a negative dimension in its shape {shape}; dimensions must be 0 or more")
    if t.data_type == onnx.TensorProto.UNDEFINED or t.data_type not in onnx.TensorProto.DataType.values():
        raise ModelError(f"{label} has no valid element type (data_type {t.data_type})")
    n = math.prod(dims)
    dtype = dtype_name(t.data_type) or onnx.TensorProto.DataType.Name(t.data_type).lower()
    count = f"{n:,} elements" if n < 2**63 else "more elements than an int64 counts"
    declared = f"{label} declares {dtype}{shape} ({count})"
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return  # not read (a model given as a proto without its files): onnxruntime checks it when it reads it
    if t.data_type == onnx.TensorProto.STRING:
        if len(t.string_data) != n:
            raise ModelError(f"{declared} but holds {len(t.string_data):,} strings")
        return
    if t.HasField("raw_data"):
        need = _bytes_needed(t.data_type, n)
        if len(t.raw_data) != need:
            raise ModelError(f"{declared} but holds {len(t.raw_data):,} bytes of data, not {need:,}" if n < 2**63 else f"{declared}")
        return
    field = onnx.helper.tensor_dtype_to_field(t.data_type)
    have = len(getattr(t, field))
    need = 2 * n if t.data_type in _COMPLEX else (n + 1) // 2 if t.data_type in _FOUR_BIT else n
    if have != need:
        held = "no data" if have == 0 else f"{have:,} values"
        raise ModelError(f"{declared} but holds {held}")


def _bytes_needed(data_type: int, n: int) -> int:
    if data_type in _FOUR_BIT:
        return (n + 1) // 2
    return n * onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize


# -- what onnxruntime supports ----------------------------------------------------------


def check_runnable(graph: Graph) -> None:
    """Refuse (ModelError) a model onnxruntime cannot run at all: its IR version, an opset or an operator it lacks."""
    model = graph.model
    _check_imports(model.ir_version, tuple(sorted((o.domain, o.version) for o in model.opset_import)))
    known = _operators()
    if known is None:
        return
    functions = {(f.domain, f.name) for f in model.functions}
    for node in graph.all_nodes():
        if node.calls is not None or (node.domain, node.op_type) in functions:
            continue
        domain = "" if node.domain in _STANDARD else node.domain
        since = known.get((domain, node.op_type))
        name = f"{domain}.{node.op_type}" if domain else node.op_type
        imported = graph.opsets.get(domain or "ai.onnx")
        if since is None:
            if not any(d == domain for d, _ in known):
                raise ModelError(
                    f"node {node.id} uses {name}, of the domain '{domain}' that onnxruntime does not have "
                    "(a custom-op domain: graph-dap loads no custom-op library)"
                )
            raise ModelError(f"node {node.id} uses {name}, an operator onnxruntime does not know in the domain '{domain or 'ai.onnx'}'")
        if imported is None:
            raise ModelError(f"node {node.id} uses {name}, but the model imports no opset of the domain '{domain or 'ai.onnx'}'")
        if imported < since:
            raise ModelError(
                f"node {node.id} uses {name}, which is not in opset {imported} of '{domain or 'ai.onnx'}' "
                f"(it exists from opset {since})"
            )


@functools.lru_cache(maxsize=64)
def _check_imports(ir_version: int, imports: tuple[tuple[str, int], ...]) -> None:
    """Ask onnxruntime to load an empty model with these imports: it refuses versions it does not support."""
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    probe = onnx.helper.make_model(
        onnx.helper.make_graph([], "probe", [_float_input()], [_float_input()]),
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in imports],
    )
    probe.ir_version = ir_version
    options = session_options()  # the process's global thread pool, as every session here
    options.log_severity_level = 4
    try:
        ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - onnxruntime's errors are of its own classes; the text says why
        raise ModelError(_unsupported(str(error), imports, ir_version)) from None


def _float_input() -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])


_OPSET_LIMIT = re.compile(r"Opset (\d+) is under development.*?support for domain (\S+) is till opset (\d+)", re.S)
_IR_LIMIT = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")


def _unsupported(text: str, imports: tuple[tuple[str, int], ...], ir_version: int) -> str:
    """onnxruntime's refusal of a model's versions, as one line."""
    import onnxruntime as ort

    found = _OPSET_LIMIT.search(text)
    if found:
        opset, domain, limit = found.groups()
        return f"the model imports opset {opset} of '{domain}'; onnxruntime {ort.__version__} supports '{domain}' up to opset {limit}"
    found = _IR_LIMIT.search(text)
    if found:
        return f"the model's IR version is {found.group(1)}; onnxruntime {ort.__version__} reads IR versions up to {found.group(2)}"
    last = [line.strip() for line in text.strip().splitlines() if line.strip()]
    reason = last[-1] if last else "refused"
    return f"onnxruntime refuses the model's IR version {ir_version} or opset imports {dict(imports)}: {reason[:300]}"


@functools.lru_cache(maxsize=1)
def _operators() -> dict[tuple[str, str], int] | None:
    """``(domain, op) -> the first opset that has it``, of every schema onnxruntime knows (None if it cannot say)."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort

        schemas = ort.get_all_operator_schema()
    except (ImportError, AttributeError):
        return None
    out: dict[tuple[str, str], int] = {}
    for s in schemas:
        key = ("" if s.domain in _STANDARD else s.domain, s.name)
        out[key] = min(out.get(key, s.since_version), s.since_version)
    return out
