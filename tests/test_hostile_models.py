"""Hostile and broken models: each gets one line saying what is wrong (CLI exit 2, a failed launch over DAP), and nothing else happens.

Nothing else: no file written beside the model, no memory taken for what a model only
declares (the CLI runs under an address-space limit far below the declared sizes), no
worker left behind by the failed launches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dap_client import TIMEOUT, DapClient, DapError
from hostile_models import CASES, Case, make
from models import chain_files as chain_model
from processes import ROOT, children

from graph_dap import cli


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[c.build.__name__ for c in CASES])
def test_the_cli_refuses_it_in_one_line(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make(case, tmp_path)
    before = _files(tmp_path)
    assert cli.main(["run", str(model)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graph-dap: "), err
    assert case.expected in lines[0], lines[0]
    assert "Traceback" not in out + err
    assert _files(tmp_path) == before  # no listing, no dump, nothing


_UNDER_A_LIMIT = """
import contextlib, io, json, resource, sys
sys.path.insert(0, sys.argv[1])
limit = int(sys.argv[2])
import numpy, onnx, onnxruntime  # loaded first: the limit is for what the models make graph-dap take
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from graph_dap import cli
results = {}
for path in sys.argv[3:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["run", path])
    results[path] = [code, err.getvalue()]
print(json.dumps(results))
"""


def test_declared_sizes_take_no_memory(tmp_path: Path) -> None:
    """Under a 3 GiB address-space limit, models declaring terabytes are refused for what they declare, not for memory."""
    models = [str(make(c, tmp_path)) for c in CASES]
    run = subprocess.run(
        [sys.executable, "-c", _UNDER_A_LIMIT, str(ROOT / "tests"), str(3 << 30), *models],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout)
    for case, model in zip(CASES, models):
        code, err = results[model]
        assert code == 2 and case.expected in err and "out of memory" not in err, (case.name, err)


def test_each_launch_fails_with_the_reason_and_the_next_launch_works(tmp_path: Path) -> None:
    dap = DapClient.stdio()
    try:
        dap.initialize()
        before = _files(tmp_path)
        for case in CASES:
            model = make(case, tmp_path / "models")
            before |= _files(tmp_path)
            with pytest.raises(DapError) as failed:
                dap.launch(str(model))
            message = failed.value.response["message"]
            assert case.expected in message and "\n" not in message, (case.name, message)
            assert failed.value.response["body"]["error"].get("showUser") is True
        assert _files(tmp_path) == before  # the failed launches wrote nothing (no listing beside the models)
        assert dap.process is not None and len(children(dap.process.pid)) <= 1  # the local worker, kept for the next launch
        good, inputs, _ = chain_model(tmp_path)
        dap.launch(str(good), inputs=str(inputs), stopOnEntry=True)
        assert dap.wait_for_stop("entry", timeout=TIMEOUT)["reason"] == "entry"
        assert len(children(dap.process.pid)) == 1
    finally:
        dap.disconnect()
    assert "Traceback" not in dap.stderr_text()
