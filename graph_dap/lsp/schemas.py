"""Operator schemas from ``onnx.defs``, for the model's opset: what an op hover shows.

Schemas are looked up once per ``(op, domain, opset)`` and their hover text is cached.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Any

import onnx
import onnx.defs

from graph_dap import log as _log

_logger = _log.get_logger(__name__)

_DOC_CHARS = 1500  # of an operator's doc shown in a hover


@functools.lru_cache(maxsize=4096)
def schema(op_type: str, domain: str, opset: int) -> Any | None:
    """The ``OpSchema`` of ``op_type`` as of ``opset`` of ``domain`` ("" or "ai.onnx" for the standard one)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:  # no such op at that version
        return None


def opset_of(opsets: dict[str, int], domain: str) -> int:
    """The version the model imports of ``domain`` (the highest known when it imports none)."""
    key = domain or "ai.onnx"
    if key in opsets:
        return opsets[key]
    return onnx.defs.onnx_opset_version() if key == "ai.onnx" else 1


@functools.lru_cache(maxsize=1024)
def schema_markdown(op_type: str, domain: str, opset: int) -> str:
    """The hover text of an op: its summary, inputs, outputs, attributes and type constraints."""
    s = schema(op_type, domain, opset)
    where = domain or "ai.onnx"
    if s is None:
        return f"**{op_type}** ({where}): no schema in onnx {onnx.__version__} for opset {opset} of {where}"
    lines = [f"**{s.name}** — {where}, version {s.since_version} (the model imports opset {opset})", ""]
    doc = textwrap.dedent(s.doc or "").strip()
    if len(doc) > _DOC_CHARS:
        doc = doc[:_DOC_CHARS].rsplit(" ", 1)[0] + " …"
    if doc:
        lines += [doc, ""]
    if s.inputs:
        lines.append("**Inputs**")
        lines += [_formal(p) for p in s.inputs]
        lines.append("")
    if s.outputs:
        lines.append("**Outputs**")
        lines += [_formal(p) for p in s.outputs]
        lines.append("")
    if s.attributes:
        lines.append("**Attributes**")
        for name, a in sorted(s.attributes.items()):
            kind = str(a.type).rsplit(".", 1)[-1].lower()
            need = "required" if a.required else _default(a)
            lines.append(f"- `{name}`: {kind}{need}: {_short(a.description)}")
        lines.append("")
    if s.type_constraints:
        lines.append("**Type constraints**")
        for c in s.type_constraints:
            lines.append(f"- `{c.type_param_str}`: {', '.join(c.allowed_type_strs)}")
    return "\n".join(lines).strip()


def attribute_markdown(op_type: str, domain: str, opset: int, name: str) -> str | None:
    """The schema's words on one attribute of an op."""
    s = schema(op_type, domain, opset)
    if s is None or name not in s.attributes:
        return None
    a = s.attributes[name]
    kind = str(a.type).rsplit(".", 1)[-1].lower()
    need = "required" if a.required else _default(a)
    return f"`{name}` ({kind}{need}) of **{op_type}**: {_short(a.description, 600)}"


def _formal(p: Any) -> str:
    options = onnx.defs.OpSchema.FormalParameterOption
    option = {options.Optional: " (optional)", options.Variadic: " (variadic)"}.get(p.option, "")
    return f"- `{p.name}`: `{p.type_str}`{option} — {_short(p.description)}"


def _default(a: Any) -> str:
    try:
        value = onnx.helper.get_attribute_value(a.default_value)
    except Exception as error:  # noqa: BLE001 - onnx raises many kinds on an odd default: the hover shows none
        _logger.info("no default shown for attribute %s: %s: %s", a.name, type(error).__name__, error)
        return ""
    if value is None or value == [] or (isinstance(value, bytes) and not value and a.default_value.type == 0):
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return f", default {value!r}" if isinstance(value, str) else f", default {value}"


def _short(text: str, limit: int = 200) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= limit else one[: limit - 1].rsplit(" ", 1)[0] + " …"
