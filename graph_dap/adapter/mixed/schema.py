"""What debugpy sends beyond the DAP schema, removed before it reaches the client (every message stays schema-valid).

Found so far (debugpy 1.8): ``Module.package`` in ``module`` events and ``modules`` responses,
``ExceptionDetails.source`` in ``exceptionInfo`` responses; and debugpy's own events (``debugpySockets``,
``debugpyAttach``), which :mod:`.session` does not pass on.
"""

from __future__ import annotations

from typing import Any

#: The properties of the schema's ``Module``.
MODULE_KEYS = frozenset(
    {"id", "name", "path", "isOptimized", "isUserCode", "version", "symbolStatus", "symbolFilePath", "dateTimeStamp", "addressRange"}
)
#: The properties of the schema's ``ExceptionDetails``.
EXCEPTION_DETAILS_KEYS = frozenset({"message", "typeName", "fullTypeName", "evaluateName", "stackTrace", "innerException"})


def _only(obj: Any, keys: frozenset[str]) -> Any:
    return {k: v for k, v in obj.items() if k in keys} if isinstance(obj, dict) else obj


def _details(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = _only(obj, EXCEPTION_DETAILS_KEYS)
    if isinstance(out.get("innerException"), list):
        out["innerException"] = [_details(d) for d in out["innerException"]]
    return out


def response_body(command: str, body: dict[str, Any]) -> dict[str, Any]:
    """A debugpy response body as the schema has it."""
    if command == "exceptionInfo" and "details" in body:
        body = dict(body, details=_details(body["details"]))
    elif command == "modules" and isinstance(body.get("modules"), list):
        body = dict(body, modules=[_only(m, MODULE_KEYS) for m in body["modules"]])
    return body


def event_body(event: str, body: dict[str, Any]) -> dict[str, Any]:
    """A debugpy event body as the schema has it."""
    if event == "module" and isinstance(body.get("module"), dict):
        body = dict(body, module=_only(body["module"], MODULE_KEYS))
    return body
