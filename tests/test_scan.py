"""graph-dap scan on a local pool: sources, first bad nodes (also inside a Loop), a reference, resume, the report, exit codes.

Every first bad node is checked against onnxruntime's own values: the model with every
node output made a graph output, the first node in run order whose output holds NaN or
Inf (a Loop unrolled, for a NaN inside its body). Outputs of clean inputs are checked
against onnxruntime's outputs for the same inputs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from cf_models import loop_model, unrolled_loop
from models import ort_values
from scan_inputs import W, clean_x, fault_chain_model, poisoned, signed_model, write_tensor_folder

from graph_dap.cli import main
from graph_dap.runtime.tensor import summarize
from graph_dap.runtime.tools.metrics import Tolerance, compare_arrays

TESTS = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]]]:
    """``graph-dap scan ... --json`` in this process: the exit status and the JSON events."""
    code = main(["scan", *args, "--json"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def results(out: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((out / "scan.json").read_text())
    return {r["id"]: r for r in data["results"]}


def first_bad(model: onnx.ModelProto, feeds: dict[str, Any]) -> tuple[str, str] | None:
    """onnxruntime's answer: the first node (in run order) with a NaN or Inf output, and which."""
    values = ort_values(model, feeds)
    for node in model.graph.node:
        for o in node.output:
            v = np.asarray(values[o])
            if v.dtype.kind == "f" and not np.isfinite(v).all():
                return node.name, "nan" if np.isnan(v).any() else "inf"
    return None


@pytest.fixture(scope="module")
def folder_scan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A folder of .npz files, a .npy, nested test-data folders: clean, poisoned four ways, one not fitting; scanned."""
    root = tmp_path_factory.mktemp("folder")
    model = fault_chain_model()
    onnx.save(model, root / "chain.onnx")
    data = root / "data"
    (data / "more").mkdir(parents=True)
    feeds: dict[str, np.ndarray] = {}
    for i in range(6):
        feeds[f"clean_{i}"] = clean_x(i)
        np.savez(data / f"clean_{i}.npz", x=feeds[f"clean_{i}"])
    for i, kind in enumerate(("nan", "ninf", "inf")):
        feeds[f"more/{kind}"] = poisoned(kind, i)
        np.savez(data / "more" / f"{kind}.npz", x=feeds[f"more/{kind}"])
    feeds["case_error"] = poisoned("error", 0)
    write_tensor_folder(data / "case_error", feeds["case_error"])
    feeds["single"] = clean_x(9)
    np.save(data / "single.npy", feeds["single"])
    np.savez(data / "wrong_dtype.npz", x=clean_x(0).astype(np.float64))
    (data / "notes.txt").write_text("not an input")
    return {"root": root, "model": model, "feeds": feeds, "out": root / "out"}


@pytest.mark.xdist_group("folder_scan")
def test_a_folder_of_inputs_each_with_its_status_and_first_bad_node_as_onnxruntime_computes(folder_scan, capsys):
    root, model, feeds, out = folder_scan["root"], folder_scan["model"], folder_scan["feeds"], folder_scan["out"]
    code, events = scan(capsys, str(root / "chain.onnx"), "--inputs", str(root / "data"), "--out", str(out), "--workers", "2")
    assert code == 1
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("result") == 12 and "saved" in kinds
    assert events[0]["total"] == 12
    got = results(out)
    assert sorted(got) == sorted([*feeds, "wrong_dtype"])
    for ident, x in feeds.items():
        r = got[ident]
        if ident == "case_error":
            assert r["status"] == "error" and r["node"]["id"] == "matmul"
            assert "matmul (MatMul) failed in onnxruntime" in r["message"]
            continue
        truth = first_bad(model, {"x": x})
        if truth is None:
            assert r["status"] == "clean", ident
            y = ort_values(model, {"x": x}, ["y"])["y"]
            assert r["outputs"]["y"] == json.loads(json.dumps(summarize(y).to_dict())), ident
        else:
            node, kind = truth
            assert (r["status"], r["node"]["id"], r["node"]["path"]) == (kind, node, []), ident
            assert r["tensor"] == {"root": "r", "log": "l", "exp": "e"}[node]
    assert {n: got[i]["node"]["id"] for i, n in (("more/nan", "nan"), ("more/ninf", "ninf"), ("more/inf", "inf"))} == {
        "nan": "root", "ninf": "log", "inf": "exp"}
    assert got["more/nan"]["details"]["count"] == 1 and got["more/nan"]["details"]["first_index"] == [1, 0]
    assert got["wrong_dtype"]["status"] == "invalid" and "expects float32[2,k]" in got["wrong_dtype"]["message"]
    data = json.loads((out / "scan.json").read_text())
    assert data["finished"] and data["counts"] == {"clean": 7, "nan": 1, "inf": 2, "error": 1, "mismatch": 0, "invalid": 1, "crash": 0}
    assert {g["node"]: g["count"] for g in data["first_bad_nodes"]} == {"root": 1, "log": 1, "exp": 1, "matmul": 1}
    assert len(data["slowest"]) == 10 and data["slowest"][0]["seconds"] >= data["slowest"][-1]["seconds"]


def scanned(folder_scan: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> Path:
    """The folder's scan output; scanned here when its own test ran on another xdist worker, or was deselected."""
    out = folder_scan["out"]
    if not (out / "scan.json").exists() or not (out / "report.html").exists():
        scan(capsys, str(folder_scan["root"] / "chain.onnx"), "--inputs", str(folder_scan["root"] / "data"), "--out", str(out), "--workers", "2")
    return out


@pytest.mark.xdist_group("folder_scan")
def test_each_failing_input_is_kept_and_replays_to_the_same_node(folder_scan, capsys):
    out, feeds = scanned(folder_scan, capsys), folder_scan["feeds"]
    got = results(out)
    kept = sorted(p.name for p in (out / "failing").iterdir())
    assert kept == ["case_error.npz", "more__inf.npz", "more__nan.npz", "more__ninf.npz"]
    r = got["more/inf"]
    with np.load(out / r["failing_file"]) as z:
        np.testing.assert_array_equal(z["x"], feeds["more/inf"])
    replay = r["replay"]
    assert replay["launch"] == {
        "type": "graph-dap", "request": "launch", "name": "Scan: more/inf", "model": str(folder_scan["root"] / "chain.onnx"),
        "inputs": str(out / "failing" / "more__inf.npz"), "breakOn": ["nan", "inf", "error"]}
    run = subprocess.run([sys.executable, "-m", "graph_dap", *replay["command"].split()[1:], "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert (report["reason"], report["node"]["name"], report["tensor"]) == ("inf", "exp", "e")


@pytest.mark.xdist_group("folder_scan")
def test_the_report_opens_in_chromium_with_its_plots_drawn(folder_scan, tmp_path, capsys):
    out = scanned(folder_scan, capsys)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    page = subprocess.run(
        [CHROMIUM, "--headless", *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", (out / "report.html").as_uri()],
        capture_output=True, text=True, timeout=120, env=env,
    )
    dom = page.stdout
    assert re.search(r'<body[^>]*data-drawn="1"', dom), page.stderr[-2000:]
    assert "data-error" not in dom
    bars = re.search(r'<svg id="bars"[^>]*data-bars="(\d+)"', dom)
    points = re.search(r'<svg id="points"[^>]*data-points="(\d+)"[^>]*data-marks="(\d+)"', dom)
    assert bars and int(bars.group(1)) == 4  # root, log, exp, matmul: one status each
    assert dom.count('class="bar"') == 4 and dom.count('class="point"') == 7 and dom.count('class="fail-mark"') == 5
    assert points and (int(points.group(1)), int(points.group(2))) == (7, 5)
    assert len(re.findall(r'<tr data-id="', dom)) == 5
    assert "graph-dap run " in dom and "VS Code launch configuration" in dom
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1300",
                    f"--screenshot={shot}", (out / "report.html").as_uri()], capture_output=True, timeout=120, env=env)
    assert shot.stat().st_size > 10_000


def test_a_glob_picks_its_files_and_names_them_from_its_folder(folder_scan, tmp_path, capsys):
    root = folder_scan["root"]
    code, events = scan(capsys, str(root / "chain.onnx"), "--inputs", str(root / "data" / "**" / "n*.npz"), "--out", str(tmp_path / "o"))
    assert code == 1
    assert {e["id"]: e["status"] for e in events if e["event"] == "result"} == {"more/nan": "nan", "more/ninf": "inf"}


def test_samples_of_one_archive_along_an_axis_with_batches(tmp_path, capsys):
    onnx.save(signed_model(), tmp_path / "signed.onnx")
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((7, 4)).astype(np.float32)
    np.savez(tmp_path / "stored.npz", x=xs)
    np.savez_compressed(tmp_path / "packed.npz", x=np.ascontiguousarray(xs.T))  # samples along axis 1
    code, events = scan(capsys, str(tmp_path / "signed.onnx"), "--inputs", str(tmp_path / "stored.npz"), "--sample-axis", "0",
                        "--out", str(tmp_path / "a"))
    assert code == 0 and events[0]["total"] == 7
    got = results(tmp_path / "a")
    assert sorted(got) == [f"sample_{i}" for i in range(7)]
    for i in range(7):  # a sample one rank short of the model's input gets a batch axis of 1
        y = ort_values(signed_model(), {"x": xs[i : i + 1]}, ["y"])["y"]
        assert got[f"sample_{i}"]["outputs"]["y"] == json.loads(json.dumps(summarize(y).to_dict()))
    code, events = scan(capsys, str(tmp_path / "signed.onnx"), "--inputs", str(tmp_path / "packed.npz"), "--sample-axis", "1",
                        "--batch", "3", "--out", str(tmp_path / "b"))
    got = results(tmp_path / "b")
    assert code == 0 and sorted(got) == ["sample_6", "samples_0-2", "samples_3-5"]
    for ident, (a, b) in {"samples_0-2": (0, 3), "samples_3-5": (3, 6), "sample_6": (6, 7)}.items():
        y = ort_values(signed_model(), {"x": xs[a:b]}, ["y"])["y"]
        assert got[ident]["outputs"]["y"]["shape"] == [b - a, 2]
        assert got[ident]["outputs"]["y"] == json.loads(json.dumps(summarize(y).to_dict()))


def test_a_generator_of_feed_dicts(tmp_path, capsys):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    code, events = scan(capsys, str(tmp_path / "chain.onnx"), "--inputs-from", "scan_inputs:twelve", "--out", str(tmp_path / "o"))
    assert code == 1 and events[0]["total"] is None
    got = results(tmp_path / "o")
    assert sorted(got) == [f"gen-{i:02d}" for i in range(12)]
    assert {k: r["status"] for k, r in got.items() if r["status"] != "clean"} == {"gen-07": "nan"}
    assert got["gen-07"]["node"]["id"] == first_bad(fault_chain_model(), {"x": poisoned("nan", 7)})[0] == "root"
    with np.load(tmp_path / "o" / got["gen-07"]["failing_file"]) as z:
        np.testing.assert_array_equal(z["x"], poisoned("nan", 7))


def test_a_nan_inside_a_loop_body_is_found_at_its_node_and_iteration(tmp_path, capsys):
    model = loop_model(trip=6)
    onnx.save(model, tmp_path / "loop.onnx")
    h0 = np.zeros((1, 4), np.float32)
    cases = {"clean": np.full((1, 4), 0.5, np.float32), "at_0": np.array([[0.5, np.inf, 0.5, 0.5]], np.float32),
             "at_2": np.array([[0.5, 2e38, 0.5, 0.5]], np.float32)}
    for name, x in cases.items():
        np.savez(tmp_path / f"{name}.npz", h0=h0, x=x)
    code, _ = scan(capsys, str(tmp_path / "loop.onnx"), "--inputs", str(tmp_path / "*.npz"), "--out", str(tmp_path / "o"))
    assert code == 1
    got = results(tmp_path / "o")
    unrolled = unrolled_loop(model, 6)
    for name, x in cases.items():
        truth = first_bad(unrolled, {"h0": h0, "x": x})
        r = got[name]
        if truth is None:
            assert r["status"] == "clean"
            continue
        node, kind = truth  # the unrolled model names a body node of iteration k "node@k"
        inner, iteration = node.split("@")
        assert (r["status"], r["node"]["id"]) == (kind, inner), name
        assert r["node"]["path"] == [{"node": "loop", "attribute": "body", "iteration": int(iteration)}], name
    assert got["at_0"]["node"]["where"] == "loop > body (iteration 0) > xi" and got["at_0"]["status"] == "nan"
    assert got["at_2"]["node"]["where"] == "loop > body (iteration 2) > xi" and got["at_2"]["status"] == "inf"


def test_a_mismatch_against_a_reference_model_names_where_the_difference_starts(tmp_path, capsys):
    onnx.save(signed_model(), tmp_path / "relu.onnx")
    onnx.save(signed_model("LeakyRelu"), tmp_path / "leaky.onnx")
    rng = np.random.default_rng(5)
    xs = {f"in_{i}": (rng.standard_normal((2, 4)) + (3.0 if i % 2 == 0 else 0.0)).astype(np.float32) for i in range(6)}
    for name, x in xs.items():
        np.savez(tmp_path / f"{name}.npz", x=x)
    code, events = scan(capsys, str(tmp_path / "relu.onnx"), "--inputs", str(tmp_path / "in_*.npz"), "--out", str(tmp_path / "o"),
                        "--reference", f"model:{tmp_path / 'leaky.onnx'}", "--tolerance", "atol=1e-6,rtol=0")
    got = results(tmp_path / "o")
    differs = {n for n, x in xs.items() if (x @ W < 0).any()}
    assert differs and differs != set(xs)
    assert code == 1
    for name, x in xs.items():
        r = got[name]
        ours = ort_values(signed_model(), {"x": x}, ["y"])["y"]
        theirs = ort_values(signed_model("LeakyRelu"), {"x": x}, ["y"])["y"]
        expected = compare_arrays(ours, theirs, Tolerance(1e-6, 0.0))
        assert r["comparison"]["outputs"]["y"]["passed"] == expected.passed == (name not in differs)
        assert r["comparison"]["worst_metrics"]["max_abs"] == pytest.approx(expected.metrics["max_abs"])
        if name in differs:
            assert (r["status"], r["node"]["id"], r["node"]["op_type"]) == ("mismatch", "act", "Relu")
            assert r["details"]["value"] == "a"
            assert r["replay"]["launch"]["breakOn"] == ["mismatch", "error"]
            assert r["replay"]["launch"]["reference"] == f"model:{tmp_path / 'leaky.onnx'}"
        else:
            assert r["status"] == "clean"
    worst = json.loads((tmp_path / "o" / "scan.json").read_text())["worst"]
    assert [w["id"] for w in worst][: len(differs)] == sorted(differs, key=lambda n: -got[n]["comparison"]["worst_metrics"]["max_abs"])


def test_a_scan_killed_midway_resumes_where_its_file_ends(tmp_path):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    cmd = [sys.executable, "-m", "graph_dap", "scan", str(tmp_path / "chain.onnx"), "--inputs-from", "scan_inputs:gated",
           "--out", str(tmp_path / "o"), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), "SCAN_GATE": str(gate)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        for line in proc.stdout:  # the scan stalls after three inputs: the generator waits on the gate
            event = json.loads(line)
            if event["event"] == "saved" and event["done"] >= 1:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    before = results(tmp_path / "o")  # a valid file, though the scan was killed
    assert 1 <= len(before) <= 3
    env.pop("SCAN_GATE")
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    end = json.loads(done.stdout.splitlines()[-1])
    assert (end["event"], end["resumed"], end["ran"], end["done"]) == ("end", len(before), 10 - len(before), 10)
    after = results(tmp_path / "o")
    assert sorted(after) == [f"item_{i:06d}" for i in range(10)]
    assert all(after[k] == v for k, v in before.items())  # not run again


def test_an_input_that_kills_its_worker_is_retried_once_then_reported(tmp_path, capsys, monkeypatch):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    monkeypatch.setenv("SCAN_MARKER", str(tmp_path / "died-once"))
    code, events = scan(capsys, str(tmp_path / "chain.onnx"), "--inputs-from", "scan_inputs:killers", "--out", str(tmp_path / "o"),
                        "--workers", "2")
    assert code == 1
    got = results(tmp_path / "o")
    assert len(got) == 10
    assert {k: r["status"] for k, r in got.items() if r["status"] != "clean"} == {"item_000007": "crash"}
    assert got["item_000003"]["attempts"] == 2 and got["item_000003"]["outputs"]["y"]["shape"] == [2, 2]
    assert "alone, twice" in got["item_000007"]["message"] and "exited with status 70" in got["item_000007"]["message"]
    incidents = [e["message"] for e in events if e["event"] == "incident"]
    assert len(incidents) == 3 and sum("item_000007" in m for m in incidents) == 2


def test_exit_status_zero_when_every_input_is_clean(tmp_path, capsys):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    for i in range(3):
        np.savez(tmp_path / f"c{i}.npz", x=clean_x(i))
    code, events = scan(capsys, str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path), "--out", str(tmp_path / "o"))
    assert code == 0 and events[-1]["counts"]["clean"] == 3 and events[-1]["failed"] == 0
    assert not (tmp_path / "o" / "failing").exists()
    code, events = scan(capsys, str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path), "--out", str(tmp_path / "o"), "--resume")
    assert code == 0 and (events[-1]["resumed"], events[-1]["ran"]) == (3, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--inputs", "nowhere"], "inputs not found: nowhere"),
        (["--inputs", "{dir}", "--break-on", "mismatch"], "--break-on mismatch needs a --reference"),
        (["--inputs", "{dir}", "--ship"], "--ship puts the model in Ray's object store: it needs --ray"),
        (["--inputs", "{dir}", "--sample-axis", "0"], "--sample-axis needs one .npz"),
        (["--inputs", "{dir}", "--reference", "run.npz"], "not a dump"),
        (["--inputs", "{dir}", "--tolerance", "atol=1"], "--tolerance and --metric need a --reference"),
        (["--inputs-from", "no_such_module:f"], "cannot import 'no_such_module'"),
        (["--inputs", "{dir}", "--break-on", "nan,sometimes"], "unknown --break-on filter 'sometimes'"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    np.savez(tmp_path / "c.npz", x=clean_x(0))
    code = main(["scan", str(tmp_path / "chain.onnx"), *[a.format(dir=tmp_path) for a in args], "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_resuming_another_scans_file_is_refused(tmp_path, capsys):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    np.savez(tmp_path / "c.npz", x=clean_x(0))
    assert scan(capsys, str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path / "c.npz"), "--out", str(tmp_path / "o"))[0] == 0
    code = main(["scan", str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path / "c.npz"), "--out", str(tmp_path / "o"), "--resume",
                 "--break-on", "nan"])
    err = capsys.readouterr().err
    assert code == 2 and "is from another scan (options differs" in err
    saved = json.loads((tmp_path / "o" / "scan.json").read_text())
    saved["results"][0]["status"] = "sometimes"  # not a status a scan writes
    (tmp_path / "o" / "scan.json").write_text(json.dumps(saved))
    code = main(["scan", str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path / "c.npz"), "--out", str(tmp_path / "o"), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "is not one a scan writes (unknown status 'sometimes'; expected one of clean, nan" in err and len(err.strip().splitlines()) == 1, err


def test_ray_missing_says_how_to_install_it(tmp_path):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    np.savez(tmp_path / "c.npz", x=clean_x(0))
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError('No module named ray')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    run = subprocess.run([sys.executable, "-m", "graph_dap", "scan", str(tmp_path / "chain.onnx"), "--inputs", str(tmp_path / "c.npz"),
                          "--ray", "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == "graph-dap: --ray needs Ray, which is not installed: pip install 'graph-dap[ray]' (or pip install 'ray>=2.9')"


def test_on_a_terminal_a_progress_bar_shows_the_rate_and_the_failures_so_far(tmp_path):
    import pty

    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        np.savez(data / f"c{i}.npz", x=clean_x(i))
    np.savez(data / "n.npz", x=poisoned("nan", 0))
    controller, terminal = pty.openpty()  # stderr a terminal, as in a shell
    try:
        done = subprocess.run([sys.executable, "-m", "graph_dap", "scan", str(tmp_path / "chain.onnx"), "--inputs", str(data),
                               "--out", str(tmp_path / "o")], stdout=subprocess.PIPE, stderr=terminal, timeout=180)  # fmt: skip
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end is closed: all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    assert done.returncode == 1
    text = shown.decode()
    assert re.search(r"\[#{30}\] 5/5 inputs  \d+(\.\d)?/s, 1 failing", text), text
    assert text.endswith("\r")  # the bar is wiped at the end, before the summary on stdout
    assert "scanned 5 inputs" in done.stdout.decode()
