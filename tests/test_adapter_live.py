"""The requests the editor forwards for the listing's language server: ``graphDap/summaries`` and ``graphDap/runTo``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dap_client import DapClient, DapError

from graph_dap.runtime.tensor import summarize


def test_summaries_are_the_live_values_of_the_named_values(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, values = chain
    dap.start(str(model), inputs=str(inputs), breakpoints=["add"])
    dap.wait_for_stop("function breakpoint")
    body = dap.request("graphDap/summaries", names=["r", "c", "y", "nope"])
    got = {s["name"]: s for s in body["summaries"]}
    assert set(body) == {"summaries"} and list(got) == ["r", "c", "y", "nope"]
    assert got["r"]["available"] and got["r"]["text"] == summarize(values["r"]).text()
    assert got["c"]["text"] == summarize(values["c"]).text() and got["c"]["stale"] is False
    assert got["y"]["available"] is False and got["nope"]["available"] is False
    with pytest.raises(DapError, match="'names\\[0\\]' must be"):
        dap.request("graphDap/summaries", names=[3])


def test_run_to_a_node_stops_before_it(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, values = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    assert dap.request("graphDap/runTo", node="mul") == {}
    dap.wait_for_stop()
    assert dap.top_frame()["name"].startswith("mul ")
    (s,) = dap.request("graphDap/summaries", names=["a"])["summaries"]
    assert s["text"] == summarize(values["a"]).text()
    with pytest.raises(DapError, match="no node 'ghost'"):
        dap.request("graphDap/runTo", node="ghost")
