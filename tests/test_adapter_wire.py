"""The DAP wire: framing, and malformed input answered or closed cleanly, never a hang or a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from dap_client import TIMEOUT, DapClient, frame

from graph_dap.adapter.protocol import MAX_CONTENT_LENGTH, FrameParser, FramingError, Malformed, encode


def test_parser_splits_frames_fed_byte_by_byte() -> None:
    data = encode({"seq": 1, "type": "request", "command": "threads"}) + encode({"seq": 2, "type": "event", "event": "x"})
    parser = FrameParser()
    got = []
    for i in range(len(data)):
        got += parser.feed(data[i : i + 1])
    assert [m["seq"] for m in got if isinstance(m, dict)] == [1, 2]
    assert not parser.pending


def test_parser_ignores_other_headers_and_reads_utf8() -> None:
    body = json.dumps({"seq": 1, "type": "request", "command": "evaluate", "arguments": {"expression": "é"}}).encode()
    data = b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    (message,) = FrameParser().feed(data)
    assert isinstance(message, dict) and message["arguments"]["expression"] == "é"


@pytest.mark.parametrize(
    "data",
    [
        b"Content-Length: abc\r\n\r\n{}",
        b"no colon here\r\n\r\n",
        b"X-Other: 1\r\n\r\n{}",
        b"Content-Length: %d\r\n\r\n" % (MAX_CONTENT_LENGTH + 1),
        b"x" * 9000,
    ],
    ids=["non-numeric length", "bad header line", "no length", "huge length", "endless header"],
)
def test_parser_refuses_streams_that_cannot_be_framed(data: bytes) -> None:
    with pytest.raises(FramingError):
        FrameParser().feed(data)


@pytest.mark.parametrize(
    ("body", "seq", "reason"),
    [
        (b"{not json", None, "invalid JSON"),
        (b"\xff\xfe", None, "invalid JSON"),
        (b"[1, 2]", None, "JSON object"),
        (b'{"seq": 4, "type": "request"}', 4, "command"),
        (b'{"seq": 5, "type": "request", "command": "next", "arguments": 3}', 5, "arguments"),
        (b'{"seq": "1", "type": "request", "command": "next"}', None, "seq"),
        (b'{"seq": 1, "type": "banana"}', None, "type"),
    ],
)
def test_parser_turns_bad_bodies_into_malformed(body: bytes, seq: int | None, reason: str) -> None:
    (message,) = FrameParser().feed(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    assert isinstance(message, Malformed)
    assert message.seq == seq
    assert reason in message.reason


def test_encode_refuses_nan() -> None:
    with pytest.raises(ValueError):
        encode({"seq": 1, "type": "event", "event": "output", "body": {"x": float("nan")}})


# -- against the adapter process ---------------------------------------------------------


@pytest.fixture
def dap() -> Iterator[DapClient]:
    client = DapClient.stdio()
    yield client
    client.close()
    assert "Traceback" not in client.stderr_text()
    client.check()


def _raw_request(client: DapClient, body: bytes) -> None:
    client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_unknown_command_gets_an_error_response(dap: DapClient) -> None:
    _raw_request(dap, json.dumps({"seq": 1, "type": "request", "command": "fly"}).encode())
    response = dap.response(1)
    assert response["success"] is False and "unknown command 'fly'" in response["message"]
    assert dap.request("threads")["threads"][0]["id"] == 1  # still answering


def test_wrong_argument_types_get_error_responses(dap: DapClient) -> None:
    dap.initialize()
    for command, arguments, expected in [
        ("launch", {"model": 3}, "'arguments.model' must be a string"),
        ("launch", {}, "'arguments.model' is required"),
        ("launch", {"model": "m.onnx", "stopOnEntry": "yes"}, "'arguments.stopOnEntry' must be a boolean"),
        ("stackTrace", {"threadId": "1"}, "must be an integer"),
        ("variables", {"variablesReference": True}, "must be an integer"),
        ("setBreakpoints", {"source": {}, "breakpoints": [{"line": "7"}]}, "'breakpoints[0].line' must be an integer"),
    ]:
        _raw_request(dap, json.dumps({"seq": 100, "type": "request", "command": command, "arguments": arguments}).encode())
        response = dap.response(100)
        assert response["success"] is False, command
        assert expected in response["message"], (command, response["message"])


def test_request_without_command_is_answered(dap: DapClient) -> None:
    _raw_request(dap, b'{"seq": 7, "type": "request"}')
    response = dap.response(7)
    assert response["success"] is False and "command" in response["message"]


def test_invalid_json_is_reported_and_the_session_goes_on(dap: DapClient) -> None:
    _raw_request(dap, b'{"seq": 1, "type": "request", "command": ')
    response = dap.response(1)  # its seq is read from its first bytes: answered
    assert response["success"] is False and "invalid JSON" in response["message"]
    _raw_request(dap, b'{"type": "request", "command": "threads", ')
    event = dap.wait_for_event("output", where=lambda b: "malformed" in b["output"])  # no seq: reported
    assert "invalid JSON" in event["output"]
    seq = dap.send("threads")
    assert dap.response(seq)["success"] is True


def test_a_request_nested_1000_deep_or_with_a_lone_surrogate_is_answered(dap: DapClient) -> None:
    deep = '{"a":' * 1000 + "1" + "}" * 1000
    _raw_request(dap, b'{"seq": 5, "type": "request", "command": "evaluate", "arguments": {"x": %s}}' % deep.encode())
    assert "nests arrays and objects more than 64 levels" in dap.response(5)["message"]
    _raw_request(dap, b'{"seq": 6, "type": "request", "command": "\\ud800"}')
    response = dap.response(6)
    assert response["success"] is False and "lone surrogate" in response["message"]
    _raw_request(dap, b'{"seq": 7, "type": "request", "command": "graphDap/tensorView", "arguments": {"name": "x", "maxSize": NaN}}')
    assert "NaN is not a JSON value" in dap.response(7)["message"]
    _raw_request(dap, b'{"seq": 8, "type": "request", "command": "graphDap/tensorView", "arguments": {"name": "x", "maxSize": 1e999}}')
    assert "out of range" in dap.response(8)["message"]
    _raw_request(dap, b'{"seq": 9, "type": "request", "command": "graphDap/tensorView", "arguments": {"name": "x", "maxSize": %d}}' % 10**30)
    assert "out of range" in dap.response(9)["message"]
    assert dap.request("threads")["threads"][0]["id"] == 1  # still answering


@pytest.mark.parametrize(
    "data",
    [b"Content-Length: 99999999999\r\n\r\n", b"Garbage without a colon\r\n\r\n", b"Content-Length: -5\r\n\r\n", b"\x00" * 10000],
    ids=["huge length", "bad header", "negative length", "binary noise"],
)
def test_unframeable_input_closes_cleanly(data: bytes) -> None:
    client = DapClient.stdio()
    client.send_raw(data)
    client.wait_closed()
    assert client.process is not None
    assert client.process.wait(timeout=TIMEOUT) == 0
    client.close()
    assert "Traceback" not in client.stderr_text()
    assert "closing the connection" in client.stderr_text()


def test_end_of_input_mid_message_exits_cleanly() -> None:
    client = DapClient.stdio()
    client.send_raw(frame({"seq": 1, "type": "request", "command": "threads"})[:-5])
    client.close()  # closes stdin: the stream ends inside a message
    assert client.process is not None and client.process.returncode == 0
    assert "Traceback" not in client.stderr_text()


def test_requests_before_launch_say_what_is_missing(dap: DapClient) -> None:
    dap.initialize()
    _raw_request(dap, json.dumps({"seq": 50, "type": "request", "command": "next", "arguments": {"threadId": 1}}).encode())
    response = dap.response(50)
    assert response["success"] is False and "launch first" in response["message"]
