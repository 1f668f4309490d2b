"""The adapter's token over TCP: ``--token T`` admits only a client whose launch carries ``adapterToken: T``.

Every listener here is on 127.0.0.1 (a token is honoured on loopback too when given);
the refusal to listen elsewhere without a token is checked before anything is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dap_client import TIMEOUT, DapClient, DapError
from models import chain_files
from processes import ROOT, listening

from graph_dap.adapter import __main__ as adapter_main
from graph_dap.adapter import server, transports
from graph_dap.adapter.access import TOKEN_ENV, TOKEN_NEEDED, is_loopback

TOKEN = "t0ken-for-tests"


@pytest.fixture
def adapter_port() -> Iterator[int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(TOKEN_ENV, None)
    args = ["-m", "graph_dap.adapter", "--port", "0", "--host", "127.0.0.1", "--token", TOKEN]
    with listening(args, "graph-dap adapter listening on 127.0.0.1:", env) as address:
        yield int(address.rsplit(":", 1)[1])


def test_only_initialize_is_answered_until_the_launch_shows_the_token(adapter_port: int, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    client = DapClient.tcp("127.0.0.1", adapter_port)
    assert client.initialize()["supportsConfigurationDoneRequest"] is True
    for command, args in [("threads", None), ("configurationDone", None), ("setExceptionBreakpoints", {"filters": []})]:
        with pytest.raises(DapError) as refused:
            client.request(command, args)
        assert str(refused.value) == TOKEN_NEEDED
    with pytest.raises(DapError, match='add "adapterToken"') as refused:
        client.launch(str(model), inputs=str(inputs))
    assert refused.value.response["body"]["error"]["showUser"] is True
    client.launch(str(model), inputs=str(inputs), stopOnEntry=True, adapterToken=TOKEN)
    client.wait_for_stop("entry")
    assert client.top_frame()["name"] == "conv (Conv)"
    client.request("continue", threadId=1)
    client.wait_for_end()
    client.disconnect()


def test_a_wrong_token_closes_the_connection(adapter_port: int, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    for wrong in ["not-the-token", TOKEN + "x", 12]:
        intruder = DapClient.tcp("127.0.0.1", adapter_port)
        intruder.initialize()
        with pytest.raises(DapError, match="wrong"):
            intruder.launch(str(model), adapterToken=wrong)
        intruder.wait_closed()
        intruder.close()
        intruder.check()
    # the adapter still serves the right token afterwards
    client = DapClient.tcp("127.0.0.1", adapter_port)
    client.initialize()
    client.launch(str(model), inputs=str(inputs), stopOnEntry=True, adapterToken=TOKEN)
    client.wait_for_stop("entry")
    client.disconnect()


def test_a_client_yet_to_show_the_token_keeps_no_one_waiting(adapter_port: int, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    idle = DapClient.tcp("127.0.0.1", adapter_port)
    idle.initialize()  # and nothing more
    client = DapClient.tcp("127.0.0.1", adapter_port)
    client.initialize()
    client.launch(str(model), inputs=str(inputs), stopOnEntry=True, adapterToken=TOKEN)
    client.wait_for_stop("entry")
    client.disconnect()
    with pytest.raises(DapError, match="requires a token"):
        idle.request("threads")
    idle.close()


def test_a_client_that_never_shows_the_token_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "AUTH_TIMEOUT", 0.5)
    loop = asyncio.new_event_loop()
    ports: queue.Queue[int] = queue.Queue()
    serving = loop.create_task(transports.serve_tcp_async("127.0.0.1", 0, ports.put, token=TOKEN))

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(serving)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        client = DapClient.tcp("127.0.0.1", ports.get(timeout=TIMEOUT))
        client.initialize()
        client.wait_closed()
        client.close()
        client.check()
    finally:
        loop.call_soon_threadsafe(serving.cancel)
        thread.join(TIMEOUT)
        loop.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", ""])
def test_listening_beyond_loopback_needs_a_token(
    host: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def must_not_listen(*args: Any) -> None:
        raise AssertionError(f"listened on {args}")

    monkeypatch.setattr(transports, "serve_tcp", must_not_listen)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert adapter_main.main(["--port", "0", "--host", host]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a loopback address" in err and "--token" in err


def test_the_token_comes_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(transports, "serve_tcp", lambda *args: calls.append(args))
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert adapter_main.main(["--port", "5", "--host", "0.0.0.0"]) == 0
    assert adapter_main.main(["--port", "5", "--host", "0.0.0.0", "--token", "given"]) == 0
    monkeypatch.delenv(TOKEN_ENV)
    assert adapter_main.main(["--port", "5"]) == 0
    assert calls == [("0.0.0.0", 5, "from-env"), ("0.0.0.0", 5, "given"), ("127.0.0.1", 5, None)]


def test_a_token_without_a_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert adapter_main.main(["--token", TOKEN]) == 2
    assert "--token needs --port" in capsys.readouterr().err


def test_what_counts_as_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "192.0.2.1"))
