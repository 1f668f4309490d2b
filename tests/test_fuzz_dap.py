"""Fuzzing the DAP wire with hypothesis: requests drawn from the protocol's schema, and byte-level framing mutations.

Every drawn request gets an answer within 5 s (an event-driven wait), every message the
adapter sends is valid under the schema (the test client checks each one, property names
too), and the adapter still answers ``initialize`` after every case. The number of cases
is ``GRAPH_DAP_FUZZ_EXAMPLES`` (a short run by default; RELIABILITY.md has the long one).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dap_client import TIMEOUT, DapClient, frame
from dap_fuzz import ANSWER_TIMEOUT, EXAMPLES, arguments, fuzz_settings, raw_request, request_schemas
from hypothesis import given
from hypothesis import strategies as st
from models import chain_files as chain_model

from graph_dap.adapter.protocol import FrameParser, FramingError, Malformed

_seqs = itertools.count(1_000_000)

#: Requests that end the session or run the model to its end: the state machine (test_fuzz_session.py) drives those.
_ENDING = {"disconnect", "terminate", "restart", "launch", "attach", "continue", "next", "stepIn", "stepOut"}


class Live:
    """One adapter on stdio, made again when a case ended its session."""

    def __init__(self, folder: Path, launched: bool) -> None:
        self.folder = folder
        self.launched = launched
        self.client: DapClient | None = None
        self.cases = 0

    def get(self) -> DapClient:
        client = self.client
        if client is not None and not client.events_named("terminated") and not client.closed:
            return client
        if client is not None:
            self.close()
        client = DapClient.stdio()
        client.initialize()
        if self.launched:
            model, inputs, _ = chain_model(self.folder)
            client.launch(str(model), inputs=str(inputs), stopOnEntry=True)
            client.wait_for_stop("entry")
            client.step()  # conv has run: values to look at
        self.client = client
        return client

    def close(self) -> None:
        if self.client is not None:
            self.client.disconnect()
            assert "Traceback" not in self.client.stderr_text(), self.client.stderr_text()[-3000:]
            self.client = None


def answered(client: DapClient, data: bytes, seq: int) -> dict[str, Any]:
    """Send ``data`` (a request numbered ``seq``) and wait for its response; then the adapter must still answer initialize."""
    client.send_raw(data)
    response = client.response(seq, ANSWER_TIMEOUT)
    check = next(_seqs)
    client.send_raw(raw_request(check, "initialize", {"adapterID": "graph-dap"}))
    again = client.response(check, ANSWER_TIMEOUT)
    assert again["command"] == "initialize" and again["success"] is False, again  # "already initialized": still answering
    client.check()  # every message so far valid under the schema
    assert client.process is not None and client.process.poll() is None
    return response


@pytest.fixture(scope="module")
def before_launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    live = Live(tmp_path_factory.mktemp("fuzz-new"), launched=False)
    yield live
    live.close()


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    live = Live(tmp_path_factory.mktemp("fuzz-stopped"), launched=True)
    yield live
    live.close()


_COMMANDS = sorted(request_schemas())


@st.composite
def requests(draw: st.DrawFn, commands: list[str]) -> tuple[str, Any]:
    command = draw(st.one_of(st.sampled_from(commands), st.text(max_size=20)))
    return command, draw(arguments(command))


@fuzz_settings()
@given(request=requests([c for c in _COMMANDS if c != "disconnect"]))
def test_every_request_is_answered_before_launch(before_launch: Live, request: tuple[str, Any]) -> None:
    command, args = request
    seq = next(_seqs)
    response = answered(before_launch.get(), raw_request(seq, command, args), seq)
    assert response["request_seq"] == seq
    if not response["success"]:
        assert response["message"] and "Traceback" not in response["message"]
        assert "internal error" not in response["message"], response["message"]


@fuzz_settings()
@given(request=requests([c for c in _COMMANDS if c not in _ENDING]))
def test_every_request_is_answered_while_stopped(stopped: Live, request: tuple[str, Any]) -> None:
    command, args = request
    client = stopped.get()
    seq = next(_seqs)
    response = answered(client, raw_request(seq, command, args), seq)
    assert response["request_seq"] == seq
    if not response["success"]:
        assert response["message"] and "internal error" not in response["message"], response["message"]
    elif command in ("stepBack", "reverseContinue", "goto", "graphDap/runTo"):
        client.wait_for_event("stopped", ANSWER_TIMEOUT)  # the run that the answer started stops again


# -- bytes -------------------------------------------------------------------------------------


def _messages(count: int) -> list[dict[str, Any]]:
    return [{"seq": i + 1, "type": "request", "command": "threads"} for i in range(count)]


@fuzz_settings(examples=max(EXAMPLES * 5, 300))
@given(data=st.binary(max_size=2000))
def test_the_parser_takes_any_bytes(data: bytes) -> None:
    """Bytes never raise anything but FramingError, and each frame comes out as a message or a Malformed."""
    parser = FrameParser()
    try:
        out = parser.feed(data)
    except FramingError:
        return
    assert all(isinstance(m, dict | Malformed) for m in out)


@fuzz_settings(examples=max(EXAMPLES * 5, 300))
@given(count=st.integers(1, 6), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_split_and_merged_frames_give_the_same_messages(count: int, cuts: list[int]) -> None:
    messages = _messages(count)
    data = b"".join(frame(m) for m in messages)
    parser = FrameParser()
    got: list[Any] = []
    start = 0
    for cut in sorted({min(c, len(data)) for c in cuts}) + [len(data)]:
        got += parser.feed(data[start:cut])
        start = cut
    assert got == messages and not parser.pending


def _mutate(data: bytes, how: str, at: int) -> bytes:
    at = at % max(len(data), 1)
    if how == "truncate":
        return data[:at]
    if how == "duplicate header":
        head, _, rest = data.partition(b"\r\n\r\n")
        return head + b"\r\n" + head + b"\r\n\r\n" + rest
    if how == "bigger length":
        return data.replace(b"Content-Length: ", b"Content-Length: 9", 1)
    if how == "smaller length":
        head, _, rest = data.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        return b"Content-Length: %d\r\n\r\n" % max(n - 1 - at % 10, 0) + rest
    if how == "no CRLF":
        return data.replace(b"\r\n\r\n", b"\n\n", 1)
    if how == "invalid UTF-8":  # in the last string of the body (a value, after the seq and command)
        head, _, rest = data.partition(b"\r\n\r\n")
        end = rest.rindex(b'"')
        body = rest[:end] + b"\xff\xfe" + rest[end:]
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    if how == "NaN":
        body = b'{"seq": 7, "type": "request", "command": "graphDap/tensorView", "arguments": {"maxSize": NaN}}'
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    if how == "noise":
        return data[:at] + bytes(range(256)) + data[at:]
    return data


_MUTATIONS = ["truncate", "duplicate header", "bigger length", "smaller length", "no CRLF", "invalid UTF-8", "NaN", "noise"]


@fuzz_settings(examples=max(EXAMPLES * 5, 300))
@given(how=st.sampled_from(_MUTATIONS), at=st.integers(0, 10_000))
def test_the_parser_takes_mutated_frames(how: str, at: int) -> None:
    data = _mutate(frame({"seq": 7, "type": "request", "command": "evaluate", "arguments": {"expression": "x"}}), how, at)
    parser = FrameParser()
    try:
        out = parser.feed(data + frame({"seq": 8, "type": "request", "command": "threads"}))
    except FramingError:
        return
    for m in out:
        assert isinstance(m, dict | Malformed)
        if isinstance(m, Malformed) and how in ("invalid UTF-8", "NaN"):
            assert m.seq == 7, m  # still answerable: its seq is read from its first bytes


@fuzz_settings(examples=max(EXAMPLES // 4, 8))
@given(how=st.sampled_from(_MUTATIONS), at=st.integers(0, 10_000))
def test_the_adapter_answers_or_closes_cleanly_after_mutated_frames(how: str, at: int) -> None:
    """Against the process: the request after the mutation is answered, or the stream closes (exit 0, no traceback)."""
    client = DapClient.stdio()
    try:
        client.send_raw(_mutate(frame({"seq": 7, "type": "request", "command": "threads"}), how, at))
        client.send_raw(frame({"seq": 8, "type": "request", "command": "threads"}))
        if how in ("truncate", "bigger length"):
            # a frame that announces more bytes than come: the adapter waits for them, and ends cleanly with the stream
            client.close()
            assert client.process is not None and client.process.returncode == 0
        else:
            try:
                response = client.response(8, ANSWER_TIMEOUT)
                assert response["success"] is True
            except EOFError:
                assert client.process is not None and client.process.wait(TIMEOUT) == 0
                assert "closing the connection" in client.stderr_text()
    finally:
        client.close()
    assert "Traceback" not in client.stderr_text()
