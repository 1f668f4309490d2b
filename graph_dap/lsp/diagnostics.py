"""The problems of a model, each on its node's line: what the server publishes for a listing.

Codes (``source: graph-dap``):

- ``onnx-checker``: the onnx checker rejects the model;
- ``shape-inference``, ``type-mismatch``: strict shape inference (with type checks) fails on a node;
- ``unused-value``: a value that nothing reads and that is not a graph output (a hint, faded);
- ``no-kernel``: the chosen execution provider has no kernel for the node (an error when no
  later provider in the list has one either; else information: onnxruntime falls back);
- ``nan-sqrt``, ``inf-log``, ``inf-reciprocal``, ``inf-div``, ``nan-pow``, ``inf-pow``:
  numerical hazards (:mod:`.hazards`);
- ``load-failed``, ``not-a-listing``, ``stale-listing``: the listing cannot be served.
"""

from __future__ import annotations

from lsprotocol import types

from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.index import Span
from graph_dap.lsp.kernels import kernel_findings
from graph_dap.runtime.listing import Role, TokenKind

SOURCE = "graph-dap"
_ERROR, _WARNING, _INFO, _HINT = (
    types.DiagnosticSeverity.Error,
    types.DiagnosticSeverity.Warning,
    types.DiagnosticSeverity.Information,
    types.DiagnosticSeverity.Hint,
)


def model_diagnostics(a: Analysis, providers: tuple[str, ...]) -> list[types.Diagnostic]:
    """Every diagnostic of ``a``'s model for these execution providers, in line order."""
    out: list[types.Diagnostic] = []
    first = types.Range(types.Position(0, 0), types.Position(0, len(a.text.split("\n", 1)[0])))
    for f in a.version.findings:
        line = _finding_line(a, f.node)
        rng = _op_range(a, line) if line else first
        where = "" if line else (f" (node {f.node})" if f.node and not f.node.startswith("op:") else "")
        out.append(_diag(rng, _ERROR, f.code, f.message + where))
    for note in a.graph.notes:
        out.append(_diag(first, _WARNING, "shape-inference", note))
    for missing, fallback in kernel_findings(a.graph, providers):
        line = a.listing.line_of(missing.node.id)
        if line is None:
            continue
        if fallback is None:
            out.append(_diag(_op_range(a, line), _ERROR, "no-kernel", f"{missing.reason}: onnxruntime cannot run this node"))
        else:
            out.append(_diag(_op_range(a, line), _INFO, "no-kernel", f"{missing.reason}: it runs on {fallback}"))
    for h in a.hazards:
        line = a.listing.line_of(h.node.id)
        if line is None:
            continue
        rng = _input_range(a, line, h.node.inputs[h.input_index]) or _op_range(a, line)
        out.append(_diag(rng, _WARNING, h.code, h.message))
    out += _unused(a)
    out.sort(key=lambda d: (d.range.start.line, d.range.start.character))
    return out


def _unused(a: Analysis) -> list[types.Diagnostic]:
    out = []
    outputs = set(a.graph.output_names)
    for node in a.graph.nodes:
        line = a.listing.line_of(node.id)
        if line is None:
            continue
        for name in node.outputs:
            if name and name not in outputs and not a.graph.consumers(name):
                span = a.index.definition(a.index.resolve(name, ""))
                if span is not None:
                    d = _diag(a.range(span), _HINT, "unused-value", f"'{name}' is not read by any node and is not a graph output")
                    d.tags = [types.DiagnosticTag.Unnecessary]
                    out.append(d)
    for name in list(a.graph.input_names) + list(a.graph.initializer_names):
        if not a.graph.consumers(name) and name not in outputs:
            span = a.index.definition(a.index.resolve(name, ""))
            if span is not None:
                d = _diag(a.range(span), _HINT, "unused-value", f"'{name}' is not read by any node")
                d.tags = [types.DiagnosticTag.Unnecessary]
                out.append(d)
    return out


def listing_problem(code: str, message: str, first_line: str = "") -> list[types.Diagnostic]:
    """One diagnostic on the first line: the listing cannot be served (``load-failed``, ``not-a-listing``, ...)."""
    severity = _WARNING if code == "stale-listing" else _ERROR
    return [_diag(types.Range(types.Position(0, 0), types.Position(0, len(first_line))), severity, code, message)]


def _diag(rng: types.Range, severity: types.DiagnosticSeverity, code: str, message: str) -> types.Diagnostic:
    return types.Diagnostic(range=rng, message=message, severity=severity, code=code, source=SOURCE)


def _finding_line(a: Analysis, node: str | None) -> int | None:
    """The line of a node named in onnx's message: by id, by name, or the only node of an op type."""
    if not node:
        return None
    if node.startswith("op:"):
        of_type = [n for n in a.graph.nodes if n.op_type == node[3:]]
        return a.listing.line_of(of_type[0].id) if len(of_type) == 1 else None
    if a.graph.has_node(node):
        return a.listing.line_of(node)
    named = [n for n in a.graph.nodes if n.proto.name == node]
    return a.listing.line_of(named[0].id) if named else None


def _op_range(a: Analysis, line: int) -> types.Range:
    op = next((t for t in a.listing.tokens_at(line) if t.kind is TokenKind.OP), None)
    return a.range(Span(line, op.start, op.end)) if op else a.line_range(line)


def _input_range(a: Analysis, line: int, name: str) -> types.Range | None:
    for t in a.listing.tokens_at(line):
        if t.kind is TokenKind.VALUE and t.role is Role.USE and t.text == name:
            return a.range(Span(line, t.start, t.end))
    return None
