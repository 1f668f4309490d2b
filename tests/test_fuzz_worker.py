"""Fuzzing the worker's msgpack wire: every call with arguments drawn from its dataclass (valid, boundary, hostile),
and the token handshake of a TCP worker.

Each message goes through msgpack as it would on the wire; the service answers every one
with a result or an error of a :mod:`graph_dap.errors` class (never an internal error),
and every answer can be sent back. Without the token, a connection gets nothing but a close.
"""

from __future__ import annotations

import dataclasses
import enum
import socket
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from dap_client import TIMEOUT
from dap_fuzz import BOUNDARY_INTEGERS, EXAMPLES, PLAUSIBLE, fuzz_settings
from hypothesis import assume, given
from hypothesis import strategies as st
from models import chain_files as chain_model
from processes import listening

from graph_dap import errors
from graph_dap.worker import protocol as p
from graph_dap.worker.service import WorkerService
from graph_dap.worker.wire import plain

_STRINGS = st.one_of(
    st.sampled_from(PLAUSIBLE),
    st.sampled_from(["", "`x`.max()", "x * 2", "abs(", "__import__('os')", "load('nope.npy')", "\x00", "é" * 300, "a" * 5000]),
    st.text(max_size=20),
)
_ANY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.sampled_from(BOUNDARY_INTEGERS), st.floats(), _STRINGS, st.binary(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_STRINGS, inner, max_size=4)),
    max_leaves=12,
)


def for_type(kind: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Plain data for a field declared as ``kind``: mostly of that type, sometimes anything at all."""
    return st.one_of(_typed(kind, depth), _typed(kind, depth), _typed(kind, depth), _ANY)


def _typed(kind: Any, depth: int) -> st.SearchStrategy[Any]:
    if kind is str:
        return _STRINGS
    if kind is int:
        return st.one_of(st.integers(-3, 40), st.sampled_from(BOUNDARY_INTEGERS))
    if kind is float:
        return st.one_of(st.floats(), st.integers(-3, 40))
    if kind is bool:
        return st.booleans()
    if kind is bytes:
        return st.binary(max_size=30)
    if kind is type(None):
        return st.none()
    if kind is Any:
        return _ANY
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return st.one_of(st.sampled_from([m.value for m in kind]), _STRINGS)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return fields_of(kind, depth + 1)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of([_typed(a, depth) for a in args])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(for_type(args[0], depth + 1), max_size=5 if depth < 3 else 0)
        return st.tuples(*[for_type(a, depth + 1) for a in args]).map(list)
    if origin is dict:
        return st.dictionaries(_STRINGS, for_type(args[1], depth + 1), max_size=3)
    return _ANY


def fields_of(cls: type, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: for_type(hints[f.name], depth) for f in dataclasses.fields(cls)}
    known = st.fixed_dictionaries({}, optional=fields)
    return st.one_of(known, known, st.builds(lambda a, b: {**b, **a}, known, st.dictionaries(_STRINGS, _ANY, max_size=2)))


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.one_of(st.sampled_from(sorted(set(p.METHODS) - {"shutdown"})), _STRINGS))
    method = p.METHODS.get(name)
    args = draw(st.one_of(fields_of(method.args), _ANY) if method is not None else _ANY)
    message: dict[str, Any] = {"id": draw(st.one_of(st.integers(1, 2**31), _ANY)), "method": name, "args": args}
    if draw(st.booleans()) and draw(st.booleans()):
        message.pop(draw(st.sampled_from(["id", "args"])))
    try:  # what the worker receives is what msgpack carries
        return msgpack.unpackb(msgpack.packb(message, use_bin_type=True), raw=False, strict_map_key=False)
    except (OverflowError, TypeError, ValueError):
        assume(False)
        raise


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerService]:
    folder = tmp_path_factory.mktemp("fuzz-worker")
    model, inputs, _ = chain_model(folder)
    sent: list[dict[str, Any]] = []
    service = WorkerService(sent.append)
    service.rpc_load(p.LoadArgs(model=str(model), inputs=str(inputs), write_listing=False))
    service.rpc_run(p.RunArgs(p.RunCommand.STEP))
    service.model = model  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)  # a drawn relative path (save_outputs to 'r') lands here, not in the repository
        yield service
    service.close()


_KINDS = {name for name in dir(errors) if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), errors.GraphDapError)}
_PACKER = msgpack.Packer(use_bin_type=True, default=plain)


@fuzz_settings(examples=max(EXAMPLES * 4, 120))
@given(message=messages())
def test_every_call_is_answered_with_a_result_or_a_known_error(service: WorkerService, message: dict[str, Any]) -> None:
    answer = service.handle(message)
    assert answer.get("id") == message.get("id")
    assert ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        kind = answer["error"]["kind"]
        assert kind in _KINDS and kind != "InternalError", answer["error"]
        assert answer["error"]["message"] and "Traceback" not in answer["error"]["message"]
    _PACKER.pack(answer)  # every answer can be sent back
    if service.session is None or service.session.graph.path != Path(service.model).resolve():  # type: ignore[attr-defined]
        service.rpc_load(p.LoadArgs(model=str(service.model), write_listing=False))  # type: ignore[attr-defined]


# -- the token handshake -----------------------------------------------------------------------

_TOKEN = "fuzz-token-0123456789"


@pytest.fixture(scope="module")
def remote_worker() -> Iterator[str]:
    with listening(["-m", "graph_dap.worker", "--listen", "127.0.0.1:0", "--token", _TOKEN], "graph-dap worker listening on", stop="kill") as address:
        yield address


def _exchange(address: str, data: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = b""
        while True:
            try:
                chunk = sock.recv(4096)
            except (ConnectionResetError, OSError):
                return got
            if not chunk:
                return got
            got += chunk


def _packable(value: Any) -> Any:
    """``value`` with every integer msgpack has no encoding for (outside -2^63 .. 2^64-1) written as text, at any depth."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, list):
        return [_packable(v) for v in value]
    if isinstance(value, dict):
        return {_packable(k): _packable(v) for k, v in value.items()}
    return value


def _pack(value: Any) -> bytes:
    return msgpack.packb(_packable(value), use_bin_type=True, default=str)


_HELLOS = st.one_of(
    st.binary(max_size=300),
    _ANY.map(_pack),
    st.fixed_dictionaries({"token": st.one_of(_STRINGS, _ANY), "version": _ANY}).map(_pack),
    st.sampled_from([_TOKEN[:-1], _TOKEN + "x", _TOKEN.upper(), ""]).map(lambda t: msgpack.packb({"token": t, "version": p.PROTOCOL_VERSION})),
)


@fuzz_settings(examples=max(EXAMPLES, 30))
@given(hello=_HELLOS)
def test_without_the_token_a_connection_gets_nothing_but_a_close(remote_worker: str, hello: bytes) -> None:
    call = msgpack.packb({"id": 1, "method": "load", "args": {"model": "/etc/passwd"}})
    assert _exchange(remote_worker, hello + call) == b""


@pytest.mark.parametrize("where", ["", "."])
def test_saving_the_outputs_to_no_file_or_to_a_folder_is_refused_in_one_line(service: WorkerService, where: str) -> None:
    """Found by the fuzzer: save_outputs to '' answered an internal error (OSError 16 from renaming onto the folder)."""
    answer = service.handle({"id": 7, "method": "save_outputs", "args": {"path": where}})
    assert answer["error"]["kind"] == "DumpError", answer
    message = answer["error"]["message"]
    assert "\n" not in message and ("give a file name" in message if not where else "cannot write the outputs to ." in message), message


@pytest.mark.parametrize("field", ["model", "inputs"])
def test_a_file_name_too_long_is_refused_in_one_line(service: WorkerService, field: str) -> None:
    """Found by the fuzzer: a model path of 5,000 characters answered an internal error (Path.exists raised ENAMETOOLONG)."""
    args = {"model": str(service.model), "write_listing": False, field: "a" * 5000}  # type: ignore[attr-defined]
    answer = service.handle({"id": 8, "method": "load", "args": args})
    message = answer["error"]["message"]
    assert answer["error"]["kind"] == ("ModelError" if field == "model" else "InputError"), answer
    assert "File name too long" in message and f"cannot open the {field}" in message and len(message) < 400, message


def test_with_the_token_the_worker_answers(remote_worker: str) -> None:
    got = _exchange(remote_worker, msgpack.packb({"token": _TOKEN, "version": p.PROTOCOL_VERSION}))
    assert msgpack.unpackb(got)["hello"] == p.HELLO
