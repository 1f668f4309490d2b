"""The corpus of converters' models (see tests/converters.py, RELIABILITY.md): every model runs, dumps and
compares as onnxruntime computes it, the NaN/Inf watch finds a fault injected at two depths where an
exhaustive check over onnxruntime's own values finds it, and the command line, the adapter and the
language server show each without a traceback.

Cost: one load of each model for the module; the command line runs in this process (its exit status and
one-line errors are checked; an exception would escape main()); one adapter goes through the whole corpus
(a restart with the next model).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from converters import CORPUS, FAULTS, NAMES, Subject, first_fault, load, truth
from dap_client import DapClient
from models import assert_same

from graph_dap.cli import main as cli_main
from graph_dap.lsp import diagnostics, highlighting, hover, outline
from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.versions import load_version
from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.tools.compare import compare_model
from graph_dap.runtime.tools.dump import dump_model, open_dump


@pytest.fixture(scope="module")
def subjects() -> dict[str, Subject]:
    """The corpus models loaded so far in this module (each model's cases share one load)."""
    return {}


def _subject(subjects: dict[str, Subject], name: str) -> Subject:
    if name not in subjects:
        subjects[name] = load(name)
    return subjects[name]


def _same(got: Any, want: Any, name: str) -> None:
    """Exactly equal; maps (skl2onnx's ZipMap) key by key."""
    if isinstance(want, list) and want and isinstance(want[0], dict):
        assert isinstance(got, list) and len(got) == len(want), name
        for g, w in zip(got, want):
            assert list(g) == list(w) and all(g[k] == w[k] for k in w), name
        return
    assert_same(got, want, name)


@pytest.mark.parametrize("name", NAMES)
def test_run_dump_and_compare_equal_onnxruntime(subjects: dict[str, Subject], name: str, tmp_path) -> None:
    subject = _subject(subjects, name)
    values = truth(subject)
    s = DebugSession(subject.graph, subject.feeds, opt_level="none")  # the outputs are the run's: unoptimized, as the truth
    s.start()
    assert s.continue_().reason is StopReason.END
    for out, value in s.outputs().items():
        _same(value, values[out], out)
    result = dump_model(subject.graph, tmp_path / "d.npz", subject.feeds)
    assert result.skipped == ()
    with open_dump(result.path) as d:
        assert len(d.names) == result.values
        for key in d.names:  # every value, inside If branches too
            _same(d.get(key), values[key], key)
    report = compare_model(subject.graph, f"dump:{result.path}", subject.feeds).to_dict()
    assert report["failed"] == 0 and report["first_divergence"] is None


def _cases() -> list[Any]:
    return [pytest.param(name, k, id=f"{name}-{fault.kind}-{fault.target}") for name in NAMES for k, fault in enumerate(FAULTS[name])]


@pytest.mark.parametrize("name,k", _cases())
def test_the_watch_finds_an_injected_fault_where_onnxruntime_first_makes_it(subjects: dict[str, Subject], name: str, k: int) -> None:
    subject = _subject(subjects, name)
    fault = FAULTS[name][k]
    s = DebugSession(subject.graph, subject.feeds, break_on=[fault.filter])
    s.start()
    injected = fault.inject(s.value(fault.target))
    if fault.target in subject.feeds:
        s = DebugSession(subject.graph, dict(subject.feeds, **{fault.target: injected}), break_on=[fault.filter])
        s.start()
    else:
        s.set_value(fault.target, injected)
    stop = s.continue_()
    expected = first_fault(subject.graph, truth(subject, fault, injected), fault)
    if expected is None:
        assert stop.reason is StopReason.END, stop.message
        return
    assert stop.reason is (StopReason.NAN if fault.kind == "nan" else StopReason.INF), stop.message
    assert stop.node is not None and expected in stop.node.outputs, f"stopped at {stop.node.id if stop.node else None}, expected the producer of {expected}"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_command_line_shows_every_model_without_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    for name in NAMES:
        model, inputs = CORPUS / f"{name}.onnx", CORPUS / f"{name}.inputs.npz"
        code, out, err = _cli(capsys, "run", model, "--inputs", inputs, "--break-on", "nan,inf,error", "--json")
        report = json.loads(out)
        assert code == 0 and report["status"] == "completed", (name, err)
        assert all(s["dtype"] != "object" for s in report["summaries"].values()), name  # strings are string, maps named
        code, out, _ = _cli(capsys, "listing", model)
        assert code == 0 and "?" not in out.split("\n", 1)[0], name
    zipmap, inputs = CORPUS / "skl_pipeline_str_zipmap.onnx", CORPUS / "skl_pipeline_str_zipmap.inputs.npz"
    code, out, _ = _cli(capsys, "run", zipmap, "--inputs", inputs)
    assert code == 0 and "output_probability: seq(map(string,float32)) len=3 [{'bird': " in out
    code, out, _ = _cli(capsys, "dump", zipmap, "--inputs", inputs, "--out", tmp_path / "z.npz")
    assert code == 0 and "not stored" not in out
    code, out, _ = _cli(capsys, "compare", zipmap, "--inputs", inputs, "--against-opt-level", "all")
    assert code == 0 and "output_probability" in out
    code, _, err = _cli(capsys, "run", zipmap, "--inputs", inputs, "--shape", "X=1,5")
    assert code == 2 and err.count("\n") == 1  # one line: the shape set does not fit X


def test_the_language_server_analyses_every_model() -> None:
    """What the server computes for a listing (its diagnostics, outline, tokens, hovers) on each model."""
    for name in NAMES:
        version = load_version(CORPUS / f"{name}.onnx")
        assert not hasattr(version, "message"), (name, getattr(version, "message", ""))
        a = Analysis(version, "utf-16")  # type: ignore[arg-type]
        diagnostics.model_diagnostics(a, ("CPUExecutionProvider",))
        outline.document_symbols(a)
        highlighting.semantic_tokens(a)
        for node in a.graph.all_nodes():
            hover.node_markdown(a, node)
            line = a.listing.line_of(node.id)
            if line is not None:
                for value in [*node.all_inputs, *node.outputs][:4]:
                    if value:
                        hover.value_markdown(a, a.index.resolve(value, a.index.scope_at(line)))


def test_the_adapter_goes_through_the_corpus(dap: DapClient, tmp_path) -> None:
    """One adapter, each model in turn (a restart with the next): stop on entry, every scope and a level of
    every variable, a step in, the nan/inf/error filters to the end; no traceback, outputs summarized."""
    first = True
    for name in NAMES:
        launch = {
            "model": str(CORPUS / f"{name}.onnx"),
            "inputs": str(CORPUS / f"{name}.inputs.npz"),
            "listingPath": str(tmp_path / f"{name}.onnxtxt"),  # not beside the committed model
            "stopOnEntry": True,
        }
        ended = len(dap.events_named("terminated"))
        if first:
            dap.start(launch.pop("model"), exceptions=["nan", "inf", "error"], **launch)
            first = False
        else:
            dap.request("restart", {"arguments": launch})
        dap.wait_for_stop("entry")
        frame = dap.top_frame()
        for scope in dap.scopes(frame["id"]).values():
            for var in dap.variables(scope["variablesReference"]).values():
                assert "not computed yet" in var["value"] or "object" not in var.get("type", ""), (name, var)
                if var["variablesReference"]:
                    dap.variables(var["variablesReference"], start=0, count=2)
        dap.request("continue", threadId=1)
        while len(dap.events_named("terminated")) <= ended:  # no stop on the way: the inputs are clean
            dap.wait_for_event("terminated")
    text = dap.output()
    assert "Traceback" not in text and "internal error" not in text
    assert "output_probability: seq(map(int64,float32)) len=3" in text and "label: string[3] ['" in text
