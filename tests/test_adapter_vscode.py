"""What the VS Code extension expects (vscode-ext/PROTOCOL.md): its launch attributes, and where the listing lives
(beside the model, at ``listingPath``, or served by reference)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from dap_client import DapClient
from models import chain_files
from processes import ROOT


def _cli_listing(model: Path) -> str:
    """What ``python -m graph_dap listing MODEL`` prints: the text the extension writes."""
    done = subprocess.run(
        [sys.executable, "-m", "graph_dap", "listing", str(model)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _line_of(text: str, node: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.endswith(f"# {node}") or f"# {node} " in line)


def _unwritable_beside(model: Path) -> None:
    """Make ``<model>.onnxtxt`` impossible to write (a folder of that name; permissions do not stop root)."""
    model.with_suffix(".onnxtxt").mkdir()


def _gutter_session(dap: DapClient, model: Path, file: Path, line: int, **launch: Any) -> dict[str, Any]:
    """As VS Code does it: breakpoints set in the file before the run starts, then configurationDone."""
    dap.initialize()
    dap.send("launch", {"model": str(model), "inputs": str(model.with_name("chain_inputs.npz")), **launch})
    dap.wait_for_event("initialized")
    got = dap.request("setBreakpoints", source={"name": file.name, "path": str(file)}, breakpoints=[{"line": line}])
    dap.request("configurationDone")
    return got["breakpoints"][0]


def test_gutter_breakpoints_in_the_file_beside_the_model(dap: DapClient, tmp_path: Path) -> None:
    model, _, _ = chain_files(tmp_path)
    file = model.with_suffix(".onnxtxt")
    text = _cli_listing(model)
    file.write_text(text)  # the extension wrote it when the model was opened
    bp = _gutter_session(dap, model, file, _line_of(text, "add"))
    assert bp["verified"] and bp["line"] == _line_of(text, "add")
    assert bp["source"]["path"] == str(file) and bp["source"].get("sourceReference", 0) == 0
    dap.wait_for_stop("breakpoint")
    frame = dap.top_frame()
    assert frame["name"].startswith("add ") and frame["line"] == _line_of(text, "add")
    assert frame["source"]["path"] == str(file) and frame["source"].get("sourceReference", 0) == 0
    assert file.read_text() == text


def test_listing_path_when_the_model_folder_is_not_writable(dap: DapClient, tmp_path: Path) -> None:
    model, _, _ = chain_files(tmp_path)
    _unwritable_beside(model)
    storage = tmp_path / "storage" / "listings" / "3f2a" / "chain.onnxtxt"  # not written yet: the adapter writes it
    text = _cli_listing(model)
    bp = _gutter_session(dap, model, storage, _line_of(text, "relu"), listingPath=str(storage))
    assert bp["verified"] and bp["line"] == _line_of(text, "relu") and bp["source"]["path"] == str(storage)
    dap.wait_for_stop("breakpoint")
    frame = dap.top_frame()
    assert frame["name"].startswith("relu ") and frame["line"] == _line_of(text, "relu")
    assert frame["source"]["path"] == str(storage) and frame["source"].get("sourceReference", 0) == 0
    assert storage.read_text() == text
    assert model.with_suffix(".onnxtxt").is_dir()  # nothing was written beside the model


def test_without_a_file_the_listing_is_served_by_reference(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    _unwritable_beside(model)
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    source = dap.listing_source()
    assert source["sourceReference"] > 0 and "path" not in source and source["name"] == "chain.onnxtxt"
    text = dap.source_text(source)
    assert text == _cli_listing(model)
    got = dap.request("setBreakpoints", source=source, breakpoints=[{"line": _line_of(text, "mul")}])["breakpoints"]
    assert got[0]["verified"] and got[0]["source"]["sourceReference"] == source["sourceReference"]
    dap.request("continue", threadId=1)
    dap.wait_for_stop("breakpoint")
    assert dap.top_frame()["line"] == _line_of(text, "mul")


def test_a_launch_as_vs_code_sends_it(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    dap.initialize()
    config = {
        "type": "graph-dap",
        "request": "launch",
        "name": "Debug chain.onnx",
        "__sessionId": "0d3e2a4c",
        "__configurationTarget": 6,
        "debugServer": 4711,
        "providers": "CPUExecutionProvider",  # a lone string
        "memoryBudgetMB": 64,
        "dims": {},
        "stopOnEntry": True,
    }
    dap.launch(str(model), inputs=str(inputs), **config)
    dap.wait_for_stop("entry")
    frame = dap.top_frame()
    assert frame["name"].startswith("conv ") and frame["source"]["path"] == str(model.with_suffix(".onnxtxt"))
    var = dap.scope_variables("Inputs")["x"]
    assert var["type"].startswith("tensor") and "[" in var["value"] and "min=" in var["value"]
