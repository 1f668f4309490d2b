"""The DAP schema check of the tests: every message the test client sends or receives is held to it.

The official schema ships with the tests (``tests/data/debugAdapterProtocol.json``, 1.71). It
has no ``additionalProperties: false``, so property names are checked too: a misspelled
``variablesReferense`` fails here instead of passing silently.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "debugAdapterProtocol.json"

# Objects whose extra properties the protocol leaves to the implementation.
_OPEN_OBJECTS = {"LaunchRequestArguments", "AttachRequestArguments"}
# graph-dap's own requests (vscode-ext/PROTOCOL.md): held to the schema's generic Request and Response.
CUSTOM_COMMANDS = ("graphDap/tensorView", "graphDap/summaries", "graphDap/runTo", "graphDap/compareTable", "graphDap/profile")
# Properties outside the schema that VS Code reads on purpose (a Variable's context-menu key).
_VSCODE_PROPERTIES = {"__vscodeVariableMenuContext"}


class ProtocolViolation(AssertionError):
    """A message broke the schema (or used a property name the schema does not know)."""


@cache
def schema() -> dict[str, Any]:
    """The DAP schema; a missing or broken file fails loudly (every scenario relies on it)."""
    if not SCHEMA_PATH.is_file():
        raise RuntimeError(f"the DAP schema is missing: {SCHEMA_PATH} (tests/data/README.md says where it comes from)")
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    if "ProtocolMessage" not in loaded.get("definitions", {}):
        raise RuntimeError(f"{SCHEMA_PATH} is not the DAP schema (no ProtocolMessage definition)")
    return loaded


@cache
def _message_definitions() -> dict[tuple[str, str], str]:
    """(kind, command or event) -> definition name, e.g. ("request", "next") -> "NextRequest"."""
    out: dict[tuple[str, str], str] = {}
    for name, d in schema()["definitions"].items():
        for part in d.get("allOf", []):
            props = part.get("properties", {})
            for kind, key in (("request", "command"), ("event", "event")):
                enum = props.get(key, {}).get("enum")
                if enum and name.endswith(kind.capitalize()):
                    out[(kind, enum[0])] = name
            if name.endswith("Response") and name != "ErrorResponse":
                base = name[: -len("Response")]
                req = schema()["definitions"].get(base + "Request")
                if req:
                    for rpart in req.get("allOf", []):
                        enum = rpart.get("properties", {}).get("command", {}).get("enum")
                        if enum:
                            out[("response", enum[0])] = name
    return out


@cache
def _validator(definition: str) -> jsonschema.Draft4Validator:
    root = dict(schema())
    root["$ref"] = f"#/definitions/{definition}"
    return jsonschema.Draft4Validator(root)


def _resolve(node: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    name = None
    while "$ref" in node:
        name = node["$ref"].split("/")[-1]
        node = schema()["definitions"][name]
    return node, name


def _merged(node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """All ``properties`` a schema node declares through allOf/$ref, and whether it is open."""
    node, name = _resolve(node)
    props: dict[str, Any] = {}
    open_ = name in _OPEN_OBJECTS or node.get("additionalProperties") not in (None, False)
    for part in node.get("allOf", []):
        p, o = _merged(part)
        for k, v in p.items():
            props.setdefault(k, []).extend(v)
        open_ = open_ or o
    for k, v in node.get("properties", {}).items():
        props.setdefault(k, []).append(v)
    return props, open_


def unknown_properties(instance: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Paths of properties in ``instance`` that the schema node does not declare."""
    props, open_ = _merged(node)
    node, _ = _resolve(node)
    problems: list[str] = []
    if isinstance(instance, dict):
        if not props and not node.get("allOf") and not open_:
            return problems  # an object the schema leaves free-form
        for key, value in instance.items():
            if key not in props:
                if not open_ and key not in _VSCODE_PROPERTIES:
                    problems.append(f"{path}.{key}")
                continue
            for sub in props[key]:
                problems += unknown_properties(value, sub, f"{path}.{key}")
    elif isinstance(instance, list) and "items" in node:
        for i, item in enumerate(instance):
            problems += unknown_properties(item, node["items"], f"{path}[{i}]")
    return problems


def validate(message: dict[str, Any], direction: str) -> str:
    """Check one message; returns its definition name. Raises ProtocolViolation."""
    kind = message.get("type")
    key = message.get("command") if kind in ("request", "response") else message.get("event")
    if kind == "response" and not message.get("success", True):
        name = "ErrorResponse"
    else:
        name = _message_definitions().get(
            (kind, key), {"request": "Request", "response": "Response", "event": "Event"}.get(kind, "ProtocolMessage")
        )  # type: ignore[arg-type]
        if name in ("Request", "Response", "Event") and not (name != "Event" and key in CUSTOM_COMMANDS):
            raise ProtocolViolation(f"{direction}: {kind} {key!r} is not in the DAP schema: {message}")
    # The schema's RestartArguments.arguments is oneOf two open objects (launch or attach
    # arguments), which any object matches both of: that oneOf can never pass. Take it as anyOf.
    errors = [
        e
        for e in sorted(_validator(name).iter_errors(message), key=lambda e: list(e.path))
        if not (e.validator == "oneOf" and "is valid under each of" in e.message)
    ]
    if errors:
        e = errors[0]
        raise ProtocolViolation(f"{direction}: {name} invalid at {list(e.path)}: {e.message}\n{json.dumps(message)[:2000]}")
    extra = unknown_properties(message, {"$ref": f"#/definitions/{name}"})
    if extra:
        raise ProtocolViolation(
            f"{direction}: {name} has properties the schema does not know: {extra}\n{json.dumps(message)[:2000]}"
        )
    return name
