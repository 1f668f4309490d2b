"""The launch arguments ``breakOn`` and ``infExclude``: exception filters a launch turns on itself.

A client that replays a failing input (``graph-dap scan``'s launch configurations) must stop
at the first NaN/Inf whatever the user's own filter choices are: VS Code sends those with
setExceptionBreakpoints, and its extensions cannot set them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dap_client import DapClient, DapError
from models import inf_model, nan_model, reference


def test_break_on_stops_at_the_first_nan_though_the_client_enables_no_filter(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = nan_model(tmp_path)
    ref = reference(model, feeds)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=[], breakOn=["nan", "inf", "error"])
    stop = dap.wait_for_stop("exception")
    assert stop["text"] == "NaN" and dap.top_frame()["name"] == "log1 (Log)"
    info = dap.request("exceptionInfo", threadId=1)
    assert f"{int(np.isnan(ref['logged']).sum())} NaN in 'logged'" in info["description"]


def test_inf_exclude_keeps_expected_infinities_from_stopping(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = inf_model(tmp_path)
    dap.initialize()
    dap.launch(str(model), inputs=str(inputs), exceptions=[], breakOn=["inf"], infExclude=["op:Div"])
    dap.wait_for_stop("exception")
    assert dap.top_frame()["name"] == "add1 (Add)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"breakOn": ["nan", "often"]}, "breakOn: unknown filter 'often'"),
        ({"breakOn": ["mismatch"]}, "the mismatch filter needs a 'reference'"),
        ({"breakOn": "nan"}, "'arguments.breakOn' must be an array"),
    ],
)
def test_bad_break_on_is_refused_with_a_message(dap: DapClient, tmp_path: Path, args: dict, message: str) -> None:
    model, inputs, _ = nan_model(tmp_path)
    dap.initialize()
    with pytest.raises(DapError, match=message):
        dap.launch(str(model), inputs=str(inputs), **args)
