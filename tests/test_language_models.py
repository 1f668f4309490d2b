"""A language model as an exporter writes it: layers chosen by module path, conditions on the layer, a KV cache.

The fixture is ``tests/data/llm/tiny_llama.onnx`` (``make_llm_models.py``: a two-layer ``LlamaForCausalLM``
exported with ``torch.onnx.export(..., dynamo=True)``, weights in external data). Its value names say
nothing of where they are (``linear_11``, ``val_375``); its nodes carry module paths.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import assert_same, ort_values

from graph_dap.errors import DumpError
from graph_dap.runtime import BreakpointSpec, DebugSession, StopReason, load_graph
from graph_dap.runtime.selection import Selection, layer_of, module_paths

LLM = Path(__file__).resolve().parent / "data" / "llm"
MODEL = LLM / "tiny_llama.onnx"
LAYERS = 2


def prompt(tokens: list[int]) -> dict[str, np.ndarray]:
    """The feeds of a first call: the prompt's tokens and an empty cache."""
    feeds = {"input_ids": np.array([tokens], np.int64), "attention_mask": np.ones((1, len(tokens)), np.int64)}
    for i in range(LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = np.zeros((1, 1, 0, 8), np.float32)
    return feeds


FEEDS = prompt([5, 17, 42])


@pytest.fixture(scope="module")
def truth() -> dict[str, np.ndarray]:
    return ort_values(onnx.load(str(MODEL)), FEEDS)


def _layer_nodes(graph, layer: int, part: str = "") -> list[str]:
    want = f"model.layers.{layer}{part}"
    return [n.id for n in graph.nodes if want in module_paths(graph, n)]


def test_a_layer_is_chosen_by_its_module_everywhere(truth, tmp_path, capsys):
    from graph_dap import cli
    from graph_dap.runtime.tools.dump import dump_model, open_dump

    graph = load_graph(MODEL)
    mlp0, mlp1 = _layer_nodes(graph, 0, ".mlp"), _layer_nodes(graph, 1, ".mlp")
    assert len(mlp1) == 6 and _layer_nodes(graph, 0) and not set(_layer_nodes(graph, 0)) & set(_layer_nodes(graph, 1))
    # breakpoints: where the run enters the module (once per layer for a glob), with or without module:
    s = DebugSession(graph, FEEDS, opt_level="none")
    bps = s.set_breakpoints(["module:model.layers.1.mlp", BreakpointSpec("model.layers.*.mlp"), "module:model.layer.9"])
    assert bps[0].node_ids == (mlp1[0],) and "6 nodes in module model.layers.1.mlp" in bps[0].message
    assert bps[1].node_ids == (mlp0[0], mlp1[0]) and "entered 2 times" in bps[1].message
    assert not bps[2].verified and "no node ran in a module matching 'model.layer.9'" in bps[2].message
    assert "model.layers.0" in bps[2].message
    s.start()
    assert s.continue_().node.id == mlp0[0]
    stop = s.continue_()
    assert (stop.reason, stop.node.id) == (StopReason.BREAKPOINT, mlp1[0])
    assert_same(s.value(stop.node.inputs[0]), truth[stop.node.inputs[0]], stop.node.inputs[0])
    # dump, compare, profile: the values and nodes made in the module
    layer1 = {o for n in graph.nodes if n.id in _layer_nodes(graph, 1) for o in n.outputs if o}
    np.savez(tmp_path / "prompt.npz", **FEEDS)
    dump = tmp_path / "l1.npz"
    dump_model(graph, dump, FEEDS, values=["module:model.layers.1.*"])
    with open_dump(dump) as d:
        assert set(d.names) == layer1 | set(FEEDS)
        for name in layer1:
            assert_same(d.get(name), truth[name], name)
    with pytest.raises(DumpError, match=r"--values \*layers.9\*: no value name or node id matches '\*layers.9\*'; an export's "
                       "names need not say where a value is: choose by module, e.g. module:model.layers.1$"):
        dump_model(graph, tmp_path / "none.npz", FEEDS, values=["*layers.9*"])
    # (the optimized run against the dump: only the values its graph still names; a glob over modules)
    capsys.readouterr()
    argv = ["compare", str(MODEL), "--inputs", str(tmp_path / "prompt.npz"), "--reference", str(dump), "--opt-level", "all"]
    assert cli.main([*argv, "--values", "*layers.1.mlp*", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {r["value"] for r in rows} <= {o for n in graph.nodes if n.id in mlp1 for o in n.outputs}
    assert all(r["module"].startswith("model.layers.1.mlp") for r in rows)
    assert cli.main([*argv, "--values", "module:model.layer.7"]) == 2
    assert "graph-dap: --values module:model.layer.7: no node ran in a module matching 'model.layer.7'" in capsys.readouterr().err
    argv = ["profile", str(MODEL), "--inputs", str(tmp_path / "prompt.npz"), "--repeat", "1", "--by", "module", "--depth", "3"]
    assert cli.main([*argv, "--nodes", "module:model.layers.*.mlp", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {row["module"]: row["nodes"] for row in report["by_module"]} == {"model.layers.0": 6, "model.layers.1": 6}
    assert sorted(n["name"] for n in report["nodes"]) == sorted(mlp0 + mlp1)


def test_selection_reads_module_paths_and_the_layer(tmp_path):
    graph = load_graph(MODEL)
    gate = next(n for n in graph.nodes if "model.layers.1.mlp.gate_proj" in module_paths(graph, n))
    assert module_paths(graph, gate)[-3:] == ("model.layers.1", "model.layers.1.mlp", "model.layers.1.mlp.gate_proj")
    assert layer_of(module_paths(graph, gate)) == 1 and layer_of(("encoder", "encoder.layer.3", "encoder.layer.3.attention")) == 3
    assert layer_of(module_paths(graph, graph.nodes[-1])) is None  # lm_head
    sel = Selection.of(graph, ["op:Softmax", "module:model.norm"])
    assert sum(sel.node(n) for n in graph.nodes) == 2 + 7
    assert Selection.of(graph, ["module:model.layers.1"]).kinds == Selection.of(graph, ["model.layers.1"]).kinds


def test_a_line_run_once_per_layer_stops_in_the_layer_its_condition_names():
    """The MLP's line makes 4 executions per layer; a condition on ``layer`` or ``module`` picks the layer, and the
    Python frames under the node name the block they run in."""
    from graph_dap.worker.wire import node_source

    graph = load_graph(MODEL)
    gate = next(n for n in graph.nodes if "model.layers.1.mlp.gate_proj" in module_paths(graph, n))
    line = graph.sources.of(gate).user_frame
    assert line is not None and line.qualname == "LlamaMLP.forward"
    spec = f"{line.file_name}:{line.line}"
    s = DebugSession(graph, FEEDS, opt_level="none")
    s.start()

    def stops(condition: str, hits: str | None = None) -> list[tuple[str, str]]:
        s.restart()
        (bp,) = s.set_breakpoints([BreakpointSpec(spec, condition=condition, hit_condition=hits)])
        assert bp.verified, bp.message
        out = []
        while (stop := s.continue_()).node is not None:
            out.append((stop.node.id, stop.message))
        return out

    in_layer = [n for n, _ in stops("layer == 1")]
    assert len(in_layer) == 4 and in_layer == [n for n, _ in stops('module == "model.layers.1"')] == stops_ids(graph, spec, 1)
    assert [n for n, _ in stops("layer == 1", "1")] == [gate.id]  # the first hit in layer 1, not the second layer's 4 + 1
    assert [n for n, _ in stops('module == "model.layers.*.mlp.up_proj"')] == [
        n.id for n in graph.nodes if graph.sources.of(n).module_path in ("model.layers.0.mlp.up_proj", "model.layers.1.mlp.up_proj")
    ]
    failed = stops("module > 3")
    assert failed and "module can only be compared with == or !=" in failed[0][1]
    frames = node_source(graph, gate).frames
    assert [f.name for f in frames if not f.library][:1] == ["LlamaMLP.forward  [model.layers.1.mlp]"]


def stops_ids(graph, spec: str, layer: int) -> list[str]:
    """The first nodes of the executions of ``spec``'s line inside layer ``layer``."""
    from graph_dap.runtime.breakpoints import resolve_spec

    ids, _ = resolve_spec(graph, spec, {n.id for n in graph.nodes})
    return [i for i in ids if f"model.layers.{layer}" in module_paths(graph, graph.node(i))]


def test_a_stops_summaries_are_made_once_and_the_weights_are_read_from_their_file(tmp_path, truth, monkeypatch):
    """The worker behind the Values and Initializers scopes: a page of values computed at once, each value summarized
    once however often it is shown (a step leaves the others as they were), and the model's weights summarized from
    their file a piece at a time (their pages never become the worker's)."""
    from graph_dap.runtime.tensor import summarize
    from graph_dap.worker import protocol as p
    from graph_dap.worker import wire
    from graph_dap.worker.service import WorkerService

    made: list[str] = []
    real = wire.summarize
    monkeypatch.setattr(wire, "summarize", lambda value: made.append("x") or real(value))
    np.savez(tmp_path / "prompt.npz", **FEEDS)
    service = WorkerService(lambda message: None)
    service.rpc_load(p.LoadArgs(str(MODEL), str(tmp_path / "prompt.npz"), write_listing=False, opt_level="all"))
    service.rpc_set_breakpoints(p.BreakpointsArgs((p.BreakpointSpec("module:model.layers.1.mlp"),)))
    service.rpc_run(p.RunArgs(p.RunCommand.START))
    stop = service.rpc_run(p.RunArgs(p.RunCommand.CONTINUE))
    assert stop.reason == "breakpoint"
    graph = service.s.graph
    weights = [t.name for t in graph.model.graph.initializer if graph.weights.external.get(t.name) is not None]
    computed = [n for n in service.values.rpc_values(p.LevelArgs(0)).computed if n not in graph.initializer_names and n not in FEEDS]
    (warming,) = service.values.warming.values()  # a client looks at the scopes: the weights are summarized meanwhile
    warming.join(30)
    assert set(graph.weights._summaries) == set(weights)
    page = tuple(computed[-40:])
    first = service.values.rpc_summaries(p.SummariesArgs(page))
    for s in first:
        assert s.text == summarize(truth[s.name]).text(), s.name  # exact: the original nodes' values
    assert len(made) == len(page)
    assert service.values.rpc_summaries(p.SummariesArgs(page)) == first and len(made) == len(page)  # shown again: as made
    service.rpc_run(p.RunArgs(p.RunCommand.STEP))
    again = service.values.rpc_summaries(p.SummariesArgs(page))
    assert again == first and len(made) == len(page)  # a step computes new values; these stay as they were
    full = onnx.load(str(MODEL))
    arrays = {t.name: onnx.numpy_helper.to_array(t) for t in full.graph.initializer}
    for s in service.values.rpc_summaries(p.SummariesArgs(tuple(weights))):
        assert s.text == summarize(arrays[s.name]).text() and s.stats == wire.summary(s.name, arrays[s.name]).stats, s.name
    # (the reference summaries above alone): the weights' own came from their file, a piece at a time (Weights.summary)
    assert weights and len(made) == len(page) + len(weights)


def test_a_page_of_weights_being_summarized_holds_the_idle_work_until_its_event_is_sent(tmp_path, monkeypatch):
    """A told client's page of weights comes without statistics and is summarized on a thread; the client asks for it
    again when the event comes. Until then the worker does not start its idle work (building what the next continue
    needs takes the thread that serves calls), or that request would wait for it."""
    import threading

    from graph_dap.runtime.weights import Weights
    from graph_dap.worker import protocol as p
    from graph_dap.worker.service import WorkerService

    sent: list[object] = []
    np.savez(tmp_path / "prompt.npz", **FEEDS)
    service = WorkerService(sent.append)
    service.rpc_load(p.LoadArgs(str(MODEL), str(tmp_path / "prompt.npz"), write_listing=False, opt_level="all"))
    service.rpc_set_breakpoints(p.BreakpointsArgs((p.BreakpointSpec("module:model.layers.1.mlp"),)))
    service.rpc_run(p.RunArgs(p.RunCommand.START))
    assert service.rpc_run(p.RunArgs(p.RunCommand.CONTINUE)).reason == "breakpoint"
    graph = service.s.graph
    weights = tuple(t.name for t in graph.model.graph.initializer if graph.weights.external.get(t.name) is not None)[:3]
    release = threading.Event()
    real = Weights.summary
    monkeypatch.setattr(Weights, "summary", lambda self, tensor: release.wait(30) and real(self, tensor))
    assert not service.values.pages_due()
    page = service.values.rpc_summaries(p.SummariesArgs(weights, quick=True))
    assert all(s.pending for s in page) and service.values.pages_due()  # (the server loop calls idle() only when not)
    release.set()
    deadline = time.monotonic() + 30
    while service.values.pages_due() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not service.values.pages_due()
    assert [m["body"]["names"] for m in sent if m["event"] == "summarized"] == [weights]  # (as the wire carries it)


PROGRAM = Path(__file__).resolve().parent / "programs" / "generate.py"


def _copy(folder: Path) -> Path:
    """The fixture and its external data in ``folder``."""
    import shutil

    folder.mkdir()
    for name in ("tiny_llama.onnx", "tiny_llama.onnx.data"):
        shutil.copyfile(LLM / name, folder / name)
    return folder / "tiny_llama.onnx"


def plain_generation(steps: int) -> tuple[list[int], list[dict[str, np.ndarray]]]:
    """The program's tokens as onnxruntime alone makes them, and the feeds of each of its run calls."""
    import onnxruntime as ort

    from graph_dap.runtime.engine.options import session_options

    session = ort.InferenceSession(str(MODEL), session_options("all"))
    tokens, calls = [5, 17, 42], []
    cache = {k: v for k, v in FEEDS.items() if k.startswith("past_")}
    ids = np.array([tokens], np.int64)
    for _ in range(steps):
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, len(tokens)), np.int64), **cache}
        calls.append(feeds)
        logits, *present = session.run(None, feeds)
        tokens.append(int(logits[0, -1].argmax()))
        cache = dict(zip([k for k in FEEDS if k.startswith("past_")], present))
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens, calls


def test_a_generation_loop_stops_at_the_decode_step_a_graph_breakpoint_names(dap, tmp_path):
    """A program launch of the KV-cache decoder in a generation loop, run from another folder (its weights are
    external data): a breakpoint on layer 1's MLP with ``call == 3`` stops in run #3 alone (calls 1 and 2 run as
    they are, with no graph session), with that step's feeds; the program then ends as it would alone."""
    tokens, calls = plain_generation(4)
    model = _copy(tmp_path / "model")  # (its listing is written beside it: not into the repository)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dap.initialize()
    dap.request("launch", {"program": str(PROGRAM), "args": [str(model), "4"], "cwd": str(elsewhere)}, timeout=90)
    dap.wait_for_event("initialized", timeout=90)
    dap.request("setFunctionBreakpoints", breakpoints=[{"name": "module:model.layers.1.mlp", "condition": "call == 3"}])
    dap.request("setExceptionBreakpoints", filters=["nan", "inf"])
    dap.request("configurationDone")
    stop = dap.wait_for_event("stopped", timeout=90, where=lambda body: body["reason"] == "function breakpoint")
    names = {t["name"]: t["id"] for t in dap.request("threads")["threads"]}
    assert stop["threadId"] == names["graph: tiny_llama.onnx, run #3"]
    graphs = [e["threadId"] for e in dap.events_named("thread") if e["reason"] == "started" and e["threadId"] >= 1 << 30]
    assert graphs == [stop["threadId"]]
    node = dap.request("stackTrace", threadId=stop["threadId"])["stackFrames"][0]
    ids = dap.request("evaluate", expression="input_ids[0, 0]", frameId=node["id"], context="repl")["result"]
    assert int(ids) == tokens[4]  # run #3 feeds the token step 2 chose
    length = dap.request("evaluate", expression="past_key_1.shape[2]", frameId=node["id"], context="repl")["result"]
    assert int(length) == calls[2]["past_key_1"].shape[2] == 4
    dap.request("continue", threadId=stop["threadId"])
    dap.wait_for_end(timeout=90)
    assert f"tokens: {' '.join(map(str, tokens))}" in dap.output()


def test_a_call_whose_breakpoints_cannot_stop_needs_no_graph_session():
    """The adapter answers such a call at once (the program's onnxruntime runs it): conditions on ``call`` alone are
    evaluated there, anything else is the graph session's."""
    from graph_dap.adapter.mixed.calls import can_skip, holds

    assert [holds("call == 3", n) for n in (2, 3)] == [False, True]
    assert holds("call >= 10 and call % 5 == 0", 15) and holds("not call < 4 or call == 1", 1)
    assert holds("layer == 1", 3) is None and holds("call == x.max()", 3) is None and holds("call % 0 == 1", 3) is None
    assert can_skip(["call == 3", "call > 7"], 5) and not can_skip(["call == 3", None], 5) and not can_skip([], 5)
    assert not can_skip(["call == 3", "layer == 1 and call == 3"], 5)  # (a condition it cannot read: the session's)


def test_run_script_watches_the_generation_loop_from_another_folder(tmp_path):
    """run-script's watch of every call (nan and inf) on the decoder: its weights read from the model's folder, its
    finfo.min mask no fault; the program prints what it prints alone."""
    import subprocess
    import sys

    tokens, _ = plain_generation(3)
    r = subprocess.run(
        [sys.executable, "-m", "graph_dap", "run-script", str(PROGRAM), str(MODEL), "3", "--break-on", "nan,inf"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"tokens: {' '.join(map(str, tokens))}" in r.stdout and "not watched" not in r.stderr, r.stderr
