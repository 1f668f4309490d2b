"""Dumps: every computed value, exactly onnxruntime's, written while the run goes, never half a file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import LIGHT_MODELS, assert_same, chain_model, init, light_inputs, make_model, ort_values, tensor
from onnx import helper

from graph_dap.runtime import load_graph
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.tools.dump import DumpError, NodeStream, dump_model, inputs_hash, model_hash, open_dump

ROOT = Path(__file__).resolve().parents[1]


def _feeds(seed=1):
    return {"x": np.random.default_rng(seed).standard_normal((1, 2, 8, 8)).astype(np.float32)}


def test_dump_holds_every_value_exactly_as_onnxruntime_computes_it(tmp_path):
    model, feeds = chain_model(), _feeds()
    out = tmp_path / "run.npz"
    result = dump_model(model, out, feeds)
    truth = ort_values(model, feeds)
    with np.load(out) as z:  # a plain .npz: numpy reads it
        assert set(z.files) == set(truth) | {"x"}
        for name, value in truth.items():
            assert_same(z[name], value, name)
        assert_same(z["x"], feeds["x"], "x")
    assert result.values == len(truth) + 1
    assert result.bytes == sum(v.nbytes for v in truth.values()) + feeds["x"].nbytes


def test_side_file_records_hashes_providers_and_producers(tmp_path):
    model, feeds = chain_model(), _feeds()
    out = tmp_path / "run.npz"
    dump_model(model, out, feeds)
    meta = json.loads((tmp_path / "run.npz.json").read_text())
    graph = load_graph(model)
    assert meta["model"]["hash"] == model_hash(graph)
    assert meta["inputs"]["hash"] == inputs_hash(feeds) and meta["inputs"]["names"] == ["x"]
    assert meta["providers"] == ["CPUExecutionProvider"] and meta["options"]["opt_level"] == "none"
    producers = {e["name"]: e["producer"] for e in meta["values"]}
    assert producers["x"] is None
    for node in graph.nodes:
        for o in node.outputs:
            assert producers[o] == {"id": node.id, "name": node.name, "op_type": node.op_type, "index": node.index, "path": []}
    with open_dump(out) as d:
        assert d.producer("a") == {"id": "add", "name": "add", "op_type": "Add", "index": 2, "path": []}
        assert d.input_names == ["x"]
        assert_same(d.inputs_for(graph)["x"], feeds["x"])


def test_different_inputs_hash_differently():
    a, b = _feeds(1), _feeds(2)
    assert inputs_hash(a) == inputs_hash({"x": a["x"].copy()})
    assert inputs_hash(a) != inputs_hash(b)
    assert inputs_hash(a) != inputs_hash({"x": a["x"].astype(np.float64)})


def test_value_names_with_slashes_and_colons_round_trip(tmp_path):
    names = ["/blocks.0/attn/MatMul_output_0", "layer:1/out", "x.npy", "plain"]
    nodes = [
        helper.make_node("Relu", ["in"], [names[0]], name="n0"),
        helper.make_node("Neg", [names[0]], [names[1]], name="n1"),
        helper.make_node("Abs", [names[1]], [names[2]], name="n2"),
        helper.make_node("Sigmoid", [names[2]], [names[3]], name="n3"),
    ]
    model = make_model(nodes, [tensor("in", [3, 4])], [tensor("plain", [3, 4])])
    feeds = {"in": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    out = tmp_path / "names.npz"
    dump_model(model, out, feeds)
    truth = ort_values(model, feeds)
    with open_dump(out) as d:
        assert d.names == ["in", *names]
        for name in names:
            assert_same(d.get(name), truth[name], name)
    with np.load(out) as z:  # what the expression language's load("names.npz", name) reads
        assert_same(z[names[0]], truth[names[0]], names[0])
        assert_same(z[names[1]], truth[names[1]], names[1])


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_light_model_dump_equals_onnxruntime(tmp_path, name):
    path = next(p for p in LIGHT_MODELS if name in p)
    model = onnx.load(path)
    feeds = light_inputs(model)
    out = tmp_path / "light.npz"
    dump_model(path, out, feeds)
    truth = ort_values(model, feeds)
    assert len(truth) > 100
    with open_dump(out) as d:
        assert set(d.names) == set(truth) | set(feeds)
        for value_name, value in truth.items():
            assert_same(d.get(value_name), value, value_name)


def test_values_globs_select_by_value_name_or_node_id(tmp_path):
    model, feeds = chain_model(), _feeds()
    out = tmp_path / "some.npz"
    result = dump_model(model, out, feeds, values=["a", "sig*"])
    with open_dump(out) as d:
        assert d.names == ["x", "a", "y"]  # inputs always; 'y' is made by node 'sigmoid'
    assert result.values == 3


def _long_chain(n):
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i in range(n)]
    return make_model(nodes, [tensor("v0", [64])], [tensor(f"v{n}", [64])])


def test_the_stream_keeps_only_what_later_nodes_read():
    graph = load_graph(_long_chain(40))
    feeds = {"v0": np.arange(64, dtype=np.float32)}
    stream = NodeStream(graph, feeds, NodeRunner(graph))
    most = 0
    seen = 0
    for _node, _outs in stream:
        seen += 1
        most = max(most, len(stream.live_values()))
    assert seen == 40
    assert most <= 2  # a chain needs only the value in flight (plus the input until its reader ran)


def test_an_interrupted_dump_leaves_no_file_and_no_temporary(tmp_path):
    model, feeds = chain_model(), _feeds()
    out = tmp_path / "run.npz"
    written = []

    def stop_after_two(node, name, nbytes):
        written.append(name)
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dump_model(model, out, feeds, on_value=stop_after_two)
    assert written == ["c", "r"]
    assert os.listdir(tmp_path) == []


def test_an_interrupted_dump_keeps_the_previous_file_whole(tmp_path):
    model = chain_model()
    out = tmp_path / "run.npz"
    dump_model(model, out, _feeds(1))
    before = out.read_bytes()

    def interrupt(node, name, nbytes):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dump_model(model, out, _feeds(2), on_value=interrupt)
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["run.npz", "run.npz.json"]


_KILLED_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from graph_dap import cli
    from graph_dap.runtime.tools import dump

    real_next = dump.NodeStream.next
    count = 0

    def next_then_wait(self):
        global count
        count += 1
        if count == 3:  # midway: two values are in the temporary archive
            print("midway", flush=True)
            sys.stdin.readline()  # block until the test signals us
        return real_next(self)

    dump.NodeStream.next = next_then_wait
    # as in a terminal: a job started in the background by a shell inherits SIGINT ignored
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(cli.main(["dump", sys.argv[1], "--out", sys.argv[2]]))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_dump_killed_midway_leaves_no_file_under_the_final_name(tmp_path, sig):
    model = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(model))
    out = tmp_path / "run.npz"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_SCRIPT, str(model), str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout.readline().strip() == "midway"
        temporaries = [p for p in os.listdir(tmp_path) if p.startswith(".run.npz.")]
        assert len(temporaries) == 1 and not out.exists()  # the dump is under way, in a temporary
        proc.send_signal(sig)
        proc.wait(timeout=60)  # stdin stays open: the dump cannot go on unless the signal is ignored
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert not out.exists() and not (tmp_path / "run.npz.json").exists()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # a handled signal also removes the temporary
        assert proc.returncode == (143 if sig == signal.SIGTERM else 130), err
        assert "Traceback" not in err
        assert sorted(os.listdir(tmp_path)) == ["chain.onnx"]


def test_an_npz_without_side_file_is_read_by_its_keys(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.ones(3, np.float32), b=np.zeros(2, np.int64))
    with open_dump(tmp_path / "plain.npz") as d:
        assert sorted(d.names) == ["a", "b"] and d.producer("a") is None
        assert_same(d.get("b"), np.zeros(2, np.int64))
        with pytest.raises(DumpError, match="no value 'c'"):
            d.get("c")


def test_a_side_file_of_another_dump_is_not_trusted(tmp_path):
    model = chain_model()
    dump_model(model, tmp_path / "one.npz", _feeds(1))
    dump_model(model, tmp_path / "two.npz", _feeds(2))
    (tmp_path / "one.npz.json").write_bytes((tmp_path / "two.npz.json").read_bytes())
    with open_dump(tmp_path / "one.npz") as d:
        assert "another dump" in d.note
        assert_same(d.get("x"), _feeds(1)["x"])


def test_bad_targets_are_refused(tmp_path):
    model = chain_model()
    with pytest.raises(DumpError, match="ending in .npz"):
        dump_model(model, tmp_path / "run.bin", _feeds())
    with pytest.raises(DumpError, match="folder not found"):
        dump_model(model, tmp_path / "missing" / "run.npz", _feeds())
    with pytest.raises(DumpError, match="dump not found"):
        open_dump(tmp_path / "nothing.npz")


def test_initializer_weights_in_a_dump_model_stay_out_of_the_archive(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    model = make_model(nodes, [tensor("x", [1, 2])], [tensor("y", [1, 3])], [init("w", w)])
    feeds = {"x": np.ones((1, 2), np.float32)}
    dump_model(model, tmp_path / "mm.npz", feeds)
    with open_dump(tmp_path / "mm.npz") as d:
        assert d.names == ["x", "y"]
        assert_same(d.get("y"), ort_values(model, feeds)["y"])


def test_the_expression_language_loads_a_dumped_value_by_name(tmp_path):
    """What the REPL and setVariable do with load("run.npz", "name")."""
    from graph_dap.runtime import DebugSession

    nodes = [
        helper.make_node("Relu", ["in"], ["/blocks.0/relu:0"], name="n0"),
        helper.make_node("Neg", ["/blocks.0/relu:0"], ["out"], name="n1"),
    ]
    model = make_model(nodes, [tensor("in", [3, 4])], [tensor("out", [3, 4])])
    feeds = {"in": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    dump_model(model, tmp_path / "run.npz", feeds)
    truth = ort_values(model, feeds)
    session = DebugSession(model, {"in": np.zeros((3, 4), np.float32)}, base_dir=tmp_path)
    session.start()
    assert_same(session.evaluate('load("run.npz", "/blocks.0/relu:0")'), truth["/blocks.0/relu:0"])
    session.set_value("in", session.evaluate('load("run.npz", "in")'))
    session.continue_()
    assert_same(session.value("out"), truth["out"])
