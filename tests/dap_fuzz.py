"""Hypothesis strategies for DAP requests, built from the protocol's JSON schema (``tests/data/debugAdapterProtocol.json``).

For each request of the schema (and graph-dap's own, described here in the same form),
:func:`arguments` draws argument objects whose every property is valid, at a boundary
or hostile: wrong types, huge numbers and strings, lone surrogates, deep nesting,
unknown keys. :func:`raw_request` frames one as bytes the way a client would (or with
``seq`` and ``type`` broken). How many examples a test draws comes from
``GRAPH_DAP_FUZZ_EXAMPLES`` (CI's short default here; RELIABILITY.md has the long run, 900).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from dap_schema import schema
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

#: Examples per fuzz test: a short run in CI; the long run (RELIABILITY.md) sets GRAPH_DAP_FUZZ_EXAMPLES=900.
EXAMPLES = int(os.environ.get("GRAPH_DAP_FUZZ_EXAMPLES", "30"))
#: Each answer must come within this many seconds (an event-driven wait, not a sleep).
ANSWER_TIMEOUT = 5.0


def fuzz_settings(examples: int = EXAMPLES, **kw: Any) -> settings:
    """Settings for a fuzz test: no deadline per example (the answer timeout is the bound), no database files, no shrinking."""
    long_run = examples > EXAMPLES or "GRAPH_DAP_FUZZ_EXAMPLES" in os.environ
    kw.setdefault("phases", (Phase.explicit, Phase.reuse, Phase.generate))  # shrinking a failure takes minutes: it is printed as drawn
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=not long_run,  # CI draws the same cases every time; the long run draws new ones
        suppress_health_check=list(HealthCheck),
        **kw,
    )


# -- graph-dap's own requests, in the schema's form -----------------------------------------

_CUSTOM: dict[str, dict[str, Any]] = {
    "graphDap/tensorView": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "index": {"type": "array", "items": {"type": "integer"}},
            "maxSize": {"type": "integer"},
            "frameId": {"type": "integer"},
        },
    },
    "graphDap/summaries": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}},
    "graphDap/runTo": {"type": "object", "properties": {"node": {"type": "string"}}},
    "graphDap/compareTable": {"type": "object", "properties": {}},
    "graphDap/profile": {"type": "object", "properties": {"iterations": {"type": "integer"}}},
}


@cache
def request_schemas() -> dict[str, dict[str, Any] | None]:
    """command -> the schema node of its ``arguments`` (None for a request without), every request of the schema."""
    out: dict[str, dict[str, Any] | None] = {}
    for name, d in schema()["definitions"].items():
        if not name.endswith("Request") or name == "Request":
            continue
        for part in d.get("allOf", []):
            props = part.get("properties", {})
            command = props.get("command", {}).get("enum")
            if command:
                out[command[0]] = props.get("arguments")
    out.update(_CUSTOM)
    return out


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema()["definitions"][node["$ref"].split("/")[-1]]
    return node


def _properties(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    node = _resolve(node)
    props: dict[str, dict[str, Any]] = {}
    for part in node.get("allOf", []):
        props.update(_properties(part))
    props.update(node.get("properties", {}))
    return props


# -- values ----------------------------------------------------------------------------------

BOUNDARY_INTEGERS = [0, 1, -1, 2, 1000, 2**31 - 1, 2**31, -(2**31), 2**53 - 1, 2**53, 2**63, -(2**63), 2**64, 10**30, -(10**30)]
_BOUNDARY_NUMBERS = [0.0, -0.0, 0.5, 1e-320, 1e308, -1e308, 1.7976931348623157e308]
_HOSTILE_STRINGS = [
    "", " ", "\x00", "\ud800", "\udfff", "x\ud83dy", "`", "``", "`x", "\n" * 50, "é" * 1000, "a" * 20_000,
    "../../../../etc/passwd", "/dev/zero", "/proc/self/mem", "__import__('os').system('true')", "%s%n%x", "{}" * 100,
    "NaN", "Infinity", "-1", "1e999", "'; DROP TABLE x; --", "\u202e", "\ufeff", "op:Conv", "*", "**", "[", "]",
]  # fmt: skip
#: Names of the fuzzed session's model and others a person might type: values, nodes, expressions.
PLAUSIBLE = ["x", "w", "b", "s", "y", "c", "r", "a", "m", "side", "conv", "relu", "add", "mul", "sigmoid", "op:Conv", "*"]


def _text(node: dict[str, Any] | None = None) -> st.SearchStrategy[str]:
    options: list[st.SearchStrategy[str]] = [
        st.text(max_size=30),
        st.sampled_from(_HOSTILE_STRINGS),
        st.sampled_from(PLAUSIBLE),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=300),
    ]
    if node is not None and node.get("enum"):
        options.insert(0, st.sampled_from(node["enum"]))
    return st.one_of(options)


def _integers() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, 12), st.sampled_from(BOUNDARY_INTEGERS), st.integers(-(2**70), 2**70))


def _numbers() -> st.SearchStrategy[float]:
    return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(_BOUNDARY_NUMBERS))


@cache
def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Any JSON value (finite numbers; strings may hold lone surrogates).

    Built once per size: strategies are immutable, and building a recursive one for every draw
    (thousands per fuzz test) took most of the test's time in hypothesis's strategy cache."""
    leaves = st.one_of(st.none(), st.booleans(), _integers(), _numbers(), _text())
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)),
        max_leaves=max_leaves,
    )


class Deep:
    """An array in an object in an array... ``depth`` levels deep, made when the request is written (short to print)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"

    def value(self) -> Any:
        value: Any = 1
        for i in range(self.depth):
            value = [value] if i % 2 else {"a": value}
        return value


@cache
def hostile() -> st.SearchStrategy[Any]:
    """A value of the wrong type, or nested far too deep."""
    return st.one_of(json_values(), st.sampled_from([63, 64, 65, 200, 1000]).map(Deep))


def value_for(node: dict[str, Any] | None, depth: int = 0) -> st.SearchStrategy[Any]:
    """A value for a schema node: valid, at a boundary, or (one draw in four) hostile."""
    if node is None:
        return hostile()
    return st.one_of(_valid(node, depth), _valid(node, depth), _valid(node, depth), hostile())


def _valid(node: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    node = _resolve(node)
    kind = node.get("type")
    if isinstance(kind, list):
        return st.one_of([_valid({**node, "type": k}, depth) for k in kind])
    if node.get("enum"):
        return st.one_of(st.sampled_from(node["enum"]), _text())
    if kind == "string":
        return _text(node)
    if kind == "integer":
        return _integers()
    if kind == "number":
        return st.one_of(_numbers(), _integers())
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = node.get("items")
        if depth > 4:
            return st.just([])
        return st.lists(value_for(items, depth + 1) if items else json_values(5), max_size=6)
    if "properties" in node or "allOf" in node or kind == "object":
        if depth > 4:
            return st.just({})
        return object_for(node, depth + 1)
    return json_values(5)


def object_for(node: dict[str, Any], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """An object with some of the node's properties (each valid, at a boundary or hostile), and maybe unknown keys."""
    props = _properties(node)
    if not props:
        return st.dictionaries(st.text(max_size=12), json_values(5), max_size=3)
    known = st.fixed_dictionaries({}, optional={k: value_for(v, depth) for k, v in props.items()})
    unknown = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in props), json_values(5), max_size=2)
    return st.builds(lambda a, b: {**b, **a}, known, st.one_of(st.just({}), unknown))


@cache
def arguments(command: str) -> st.SearchStrategy[Any]:
    """The ``arguments`` of a ``command`` request: drawn from its schema; sometimes absent or not an object.

    Built once per command (the same strategy, so the same draws, as building it for each one)."""
    node = request_schemas().get(command)
    drawn = object_for(node) if node is not None else st.just({})
    return st.one_of(drawn, drawn, drawn, st.none(), hostile())


def raw_request(seq: int, command: str, args: Any) -> bytes:
    """One framed request (``arguments`` left out when None); ``ensure_ascii`` writes lone surrogates as ``\\udXXX``."""
    message: dict[str, Any] = {"seq": seq, "type": "request", "command": command}
    if args is not None:
        message["arguments"] = args
    body = _dumps(message)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _dumps(message: Any) -> bytes:
    try:
        return json.dumps(message, ensure_ascii=True, default=_expand).encode()
    except RecursionError:  # deeper than the encoder goes: written by hand
        return _dumps_deep(message).encode()


def _expand(value: Any) -> Any:
    if isinstance(value, Deep):
        return value.value()
    raise TypeError(f"not JSON: {value!r}")


def _dumps_deep(value: Any) -> str:
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Deep):
            stack.append(item.value())
        elif isinstance(item, _Close):
            parts.append(item.text)
        elif isinstance(item, dict):
            parts.append("{")
            stack.append(_Close("}"))
            entries = list(item.items())
            for i, (k, v) in reversed(list(enumerate(entries))):
                stack.append(v)
                stack.append(_Close(("," if i else "") + json.dumps(k) + ":"))
        elif isinstance(item, list):
            parts.append("[")
            stack.append(_Close("]"))
            for i, v in reversed(list(enumerate(item))):
                stack.append(v)
                if i:
                    stack.append(_Close(","))
        else:
            parts.append(json.dumps(item, ensure_ascii=True))
    return "".join(parts)


class _Close:
    def __init__(self, text: str) -> None:
        self.text = text
