"""Looking at a stopped model: threads, frames, the listing, scopes, tensors, evaluate, set, memory, completions."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dap_client import DapClient, DapError
from models import reference, wide_model


def _summary(a: np.ndarray) -> str:
    """The summary line's first fields, from the reference array (formatting as the runtime does)."""
    return f"{a.dtype}[{','.join(map(str, a.shape))}]"


def _stat(variables: dict[str, dict[str, Any]], key: str) -> float:
    return float(variables[key]["value"])


def test_initialize_advertises_what_works(dap: DapClient) -> None:
    caps = dap.initialize()
    for key in [
        "supportsConfigurationDoneRequest", "supportsFunctionBreakpoints", "supportsConditionalBreakpoints",
        "supportsHitConditionalBreakpoints", "supportsLogPoints", "supportsEvaluateForHovers", "supportsSetVariable",
        "supportsSetExpression", "supportsStepBack", "supportsGotoTargetsRequest", "supportsRestartRequest",
        "supportsTerminateRequest", "supportsExceptionInfoRequest", "supportsExceptionFilterOptions",
        "supportsCompletionsRequest", "supportsDataBreakpoints", "supportsReadMemoryRequest",
        "supportsValueFormattingOptions", "supportsDelayedStackTraceLoading",
    ]:  # fmt: skip
        assert caps.get(key) is True, key
    filters = {f["filter"]: f for f in caps["exceptionBreakpointFilters"]}
    assert list(filters) == ["nan", "inf", "error", "mismatch"]
    assert [filters[k]["label"] for k in filters] == ["NaN", "Inf", "Node errors", "Mismatch with reference"]
    assert filters["error"]["default"] is True and not filters["nan"]["default"] and not filters["mismatch"]["default"]
    assert filters["inf"]["supportsCondition"] is True


def test_stop_on_entry_shows_the_first_node_in_the_listing(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    assert dap.request("threads")["threads"] == [{"id": 1, "name": "model run: chain.onnx"}]
    trace = dap.request("stackTrace", threadId=1)
    assert trace["totalFrames"] == 1
    (frame,) = trace["stackFrames"]
    assert frame["name"] == "conv (Conv)"
    # the listing file is written beside the model: the frame names it by path alone (VS Code opens the file)
    source = frame["source"]
    written = model.with_suffix(".onnxtxt")
    assert source["path"] == str(written) and source.get("sourceReference", 0) == 0
    listing = written.read_text()
    assert dap.request("source", source=source, sourceReference=0)["content"] == listing
    line = listing.splitlines()[frame["line"] - 1]
    assert line.startswith("c: float32[1,4,8,8] = Conv<") and line.endswith("  # conv")
    assert "pads=[1,1,1,1]" in line
    assert "= Relu(c)" in listing.splitlines()[frame["line"]]


def test_scopes_of_the_top_frame(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.step()  # conv ran; relu is next
    scopes = dap.scopes()
    assert list(scopes) == ["Inputs", "Attributes", "Last outputs", "Values", "Initializers", "Graph outputs"]
    assert scopes["Last outputs"]["presentationHint"] == "returnValue"
    assert list(dap.scope_variables("Inputs")) == ["c"]
    assert list(dap.scope_variables("Last outputs")) == ["c"]
    assert set(dap.scope_variables("Values")) == {"x", "w", "b", "s", "c"}
    assert list(dap.scope_variables("Initializers")) == ["w", "b", "s"]
    outputs = dap.scope_variables("Graph outputs")
    assert list(outputs) == ["y", "side"]
    assert "not computed yet" in outputs["y"]["value"] and outputs["y"]["variablesReference"] == 0
    dap.step()
    dap.step()  # mul is next: it has no attributes; go back to conv for some
    assert dap.scope_variables("Attributes") == {}
    dap.step("stepBack")
    dap.step("stepBack")
    dap.step("stepBack")
    assert dap.top_frame()["name"] == "conv (Conv)"
    attrs = dap.scope_variables("Attributes")
    assert attrs["pads"]["value"] == "[1, 1, 1, 1]"


def test_a_tensor_variable_and_its_children(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.step()
    conv = ref["c"]
    var = dap.scope_variables("Last outputs")["c"]
    assert var["type"] == "tensor(float)"
    assert var["evaluateName"] == "c"
    assert var["value"].startswith(_summary(conv) + " min=")
    assert var["namedVariables"] == 10 and var["indexedVariables"] == 1
    children = dap.variables(var["variablesReference"])
    assert _stat(children, "min") == pytest.approx(conv.min(), rel=1e-6)
    assert _stat(children, "max") == pytest.approx(conv.max(), rel=1e-6)
    assert _stat(children, "mean") == pytest.approx(conv.mean(), rel=1e-5, abs=1e-6)
    assert children["shape"]["value"] == "[1,4,8,8]"
    assert children["zeros"]["value"] == str(int((conv == 0).sum()))
    # slices along the first axis, down to numbers
    level = children["[0]"]
    assert level["evaluateName"] == "c[0]" and level["indexedVariables"] == 4
    rows = dap.variables(level["variablesReference"], filter="indexed", start=1, count=2)
    assert list(rows) == ["[1]", "[2]"]
    row = dap.variables(rows["[2]"]["variablesReference"], filter="indexed", start=0, count=5)
    numbers = dap.variables(row["[4]"]["variablesReference"], filter="indexed", start=0, count=5)
    assert numbers["[3]"]["evaluateName"] == "c[0, 2, 4, 3]"
    assert float(numbers["[3]"]["value"]) == pytest.approx(float(conv[0, 2, 4, 3]), rel=1e-6)
    assert numbers["[3]"]["variablesReference"] == 0


def test_large_scopes_and_long_axes_are_paged(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = wide_model(tmp_path, count=130, rows=250)
    dap.start(str(model), inputs=str(inputs), breakpoints=["neg129"])
    dap.wait_for_stop("function breakpoint")
    scopes = dap.scopes()
    values = scopes["Values"]
    assert values["indexedVariables"] == 130  # x and v0..v128
    page = dap.variables(values["variablesReference"], filter="indexed", start=100, count=30)
    assert list(page) == [f"v{i}" for i in range(99, 129)]
    x = dap.variables(values["variablesReference"], filter="indexed", start=0, count=1)["x"]
    assert x["indexedVariables"] == 250
    rows = dap.variables(x["variablesReference"], filter="indexed", start=200, count=50)
    assert list(rows)[0] == "[200]" and len(rows) == 50
    named = dap.variables(x["variablesReference"], filter="named")
    assert "[0]" not in named and named["max"]["value"] == str(int(feeds["x"].max()))


def test_read_memory_returns_the_raw_bytes(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    w = dap.scope_variables("Initializers")["w"]
    raw = ref["w"].tobytes()
    got = dap.request("readMemory", memoryReference=w["memoryReference"], offset=8, count=64)
    assert base64.b64decode(got["data"]) == raw[8:72]
    assert int(got["address"], 16) == 8
    tail = dap.request("readMemory", memoryReference=w["memoryReference"], offset=len(raw) - 4, count=16)
    assert base64.b64decode(tail["data"]) == raw[-4:] and tail["unreadableBytes"] == 12
    with pytest.raises(DapError, match="unknown memoryReference"):
        dap.request("readMemory", memoryReference="nope", count=4)


def test_evaluate_in_repl_watch_hover_and_clipboard(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.step()
    result = dap.evaluate("c.max() + 1")
    assert float(result["result"]) == pytest.approx(float(ref["c"].max()) + 1, rel=1e-6)
    assert result["variablesReference"] == 0
    watch = dap.evaluate("c * 2", context="watch")
    assert watch["result"].startswith("float32[1,4,8,8] min=") and watch["variablesReference"] > 0
    kids = dap.variables(watch["variablesReference"])
    assert _stat(kids, "max") == pytest.approx(2 * float(ref["c"].max()), rel=1e-6)
    assert kids["[0]"]["evaluateName"] == "(c * 2)[0]"
    hover = dap.evaluate("c", context="hover")
    assert hover["result"] == dap.scope_variables("Last outputs")["c"]["value"]
    node_hover = dap.evaluate("conv", context="hover")
    assert node_hover["result"].startswith("conv (Conv) -> c: float32[1,4,8,8]")
    clip = dap.evaluate("b", context="clipboard")
    assert np.allclose(np.array(eval(clip["result"]), np.float32), ref["b"])  # noqa: S307 - numpy's own list text
    with pytest.raises(DapError, match="never closed|syntax"):
        dap.evaluate("c.max(")
    with pytest.raises(DapError, match="not computed yet"):
        dap.evaluate("a")
    hexed = dap.evaluate("255", format={"hex": True})
    assert hexed["result"] == "0xff"


def test_set_variable_and_expression_mark_downstream_stale(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, ref = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    dap.step()
    dap.step()  # conv and relu ran; add is next
    values = dap.scopes()["Values"]["variablesReference"]
    got = dap.request("setVariable", variablesReference=values, name="c", value="0")
    assert got["value"].startswith("float32[1,4,8,8] min=0 max=0")
    dap.wait_for_event("invalidated")
    after = dap.variables(values)
    assert "stale" in after["r"]["value"]
    assert "stale" not in after["c"]["value"]
    dap.step()  # recomputes r (all zeros now), then runs add: a = r + b is the bias alone
    assert float(dap.evaluate("(a - b).max()")["result"]) == 0.0
    assert float(dap.evaluate("r.max()")["result"]) == 0.0
    assert "stale" not in dap.scope_variables("Values")["r"]["value"]
    # setExpression on an element, through its evaluateName
    got = dap.request("setExpression", expression="c[0, 1, 2, 3]", value="7.5", frameId=1)
    assert got["value"] == "7.5"
    assert float(dap.evaluate("c[0, 1, 2, 3]")["result"]) == 7.5
    assert float(dap.evaluate("c.sum()")["result"]) == 7.5
    # an element through setVariable on its container
    conv = dap.scope_variables("Values")["c"]
    level0 = dap.variables(conv["variablesReference"])["[0]"]
    dap.request("setVariable", variablesReference=level0["variablesReference"], name="[2]", value="1")
    assert float(dap.evaluate("c[0, 2].sum()")["result"]) == 64.0
    with pytest.raises(DapError, match="float32\\[1,4,8,8\\], got float32\\[2\\]"):
        dap.request("setVariable", variablesReference=values, name="c", value="c[0, 0, 0, :2]")
    with pytest.raises(DapError, match="statistic"):
        dap.request("setVariable", variablesReference=conv["variablesReference"], name="max", value="1")


def test_set_variable_loads_an_npy_file(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    model, inputs, ref = chain
    replacement = np.full((1, 2, 8, 8), 0.25, np.float32)
    np.save(tmp_path / "x.npy", replacement)
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    inputs_ref = dap.scopes()["Inputs"]["variablesReference"]
    got = dap.request("setVariable", variablesReference=inputs_ref, name="x", value=f"load('{tmp_path / 'x.npy'}')")
    assert got["value"].startswith("float32[1,2,8,8] min=0.25 max=0.25")


def test_completions_offer_values_nodes_and_functions(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    items = dap.request("completions", text="1 + r", column=6, frameId=1)["targets"]
    labels = {i["label"]: i for i in items}
    assert "r" in labels and labels["r"]["type"] == "variable"
    assert "relu" in labels and labels["relu"]["type"] == "reference"
    assert "reshape" in labels and labels["reshape"]["type"] == "function"
    assert labels["relu"]["start"] == 5 and labels["relu"]["length"] == 1
    functions = {i["label"] for i in dap.request("completions", text="ab", column=3)["targets"]}
    assert "abs" in functions


def test_inspecting_while_running_or_with_bad_ids_is_refused(dap: DapClient, chain: tuple[Path, Path, dict[str, Any]]) -> None:
    model, inputs, _ = chain
    dap.start(str(model), inputs=str(inputs), stopOnEntry=True)
    dap.wait_for_stop("entry")
    with pytest.raises(DapError, match="unknown variablesReference"):
        dap.request("variables", variablesReference=999)
    with pytest.raises(DapError, match="unknown thread"):
        dap.request("stackTrace", threadId=2)
    with pytest.raises(DapError, match="unknown frameId"):
        dap.request("scopes", frameId=42)


def test_values_evicted_under_a_memory_budget_are_still_shown(dap: DapClient, tmp_path: Path) -> None:
    model, inputs, feeds = wide_model(tmp_path, count=40, rows=2000)
    ref = reference(model, feeds)
    dap.start(str(model), inputs=str(inputs), memoryBudgetMB=0.1, breakpoints=["neg39"])
    dap.wait_for_stop("function breakpoint")
    for name in ("v0", "v17", "v38"):
        assert float(dap.evaluate(f"{name}.sum()")["result"]) == pytest.approx(float(ref[name].sum()), rel=1e-6)
    values = dap.scope_variables("Values")
    assert values["v5"]["value"].startswith("float32[2000,3] min="), values["v5"]
