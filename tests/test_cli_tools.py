"""`graph-dap dump`, `compare`, `profile` and `run --set/--set-from/--repeat` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import chain_feeds, chain_model, ort_values
from onnx import numpy_helper

from graph_dap.runtime import summarize

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "nan_demo.onnx"


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "graph_dap", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=180
    )



@pytest.fixture
def models(tmp_path):
    """chain.onnx, bad.onnx (bias 'b' of node 'add' shifted) and inputs in.npz."""
    base = chain_model()
    onnx.save(base, str(tmp_path / "chain.onnx"))
    bad = onnx.ModelProto()
    bad.CopyFrom(base)
    b = bad.graph.initializer[1]
    b.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(b) + np.float32(0.01), "b"))
    onnx.save(bad, str(tmp_path / "bad.onnx"))
    np.savez(tmp_path / "in.npz", **chain_feeds(3))
    return tmp_path, base, bad


def test_dump_then_compare_names_the_first_divergence(models):
    tmp, base, _ = models
    r = cli("dump", tmp / "chain.onnx", "--inputs", tmp / "in.npz", "--out", tmp / "run.npz")
    assert r.returncode == 0, r.stderr
    assert "dumped 7 values" in r.stdout and (tmp / "run.npz.json").is_file()
    truth = ort_values(base, chain_feeds(3))
    with np.load(tmp / "run.npz") as z:
        for name, value in truth.items():
            np.testing.assert_array_equal(z[name], value)
    r = cli("compare", tmp / "bad.onnx", "--reference", tmp / "run.npz")
    assert r.returncode == 1, r.stderr  # a divergence was found
    assert "first divergence: add (Add), index 2, value 'a'" in r.stdout
    assert "FAIL (origin)" in r.stdout and "its compared inputs (r) are within tolerance" in r.stdout
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("index"))
    assert header.split() == ["index", "node", "op", "value", "shape", "max_abs", "max_rel", "mse", "cosine", "snr", "result"]
    r = cli("compare", tmp / "chain.onnx", "--reference", tmp / "run.npz")
    assert r.returncode == 0 and "no divergence" in r.stdout


def test_compare_json_has_rows_and_the_first_divergence(models):
    tmp, _, _ = models
    r = cli(
        "compare",
        tmp / "bad.onnx",
        "--inputs",
        tmp / "in.npz",
        "--against-model",
        tmp / "chain.onnx",
        "--json",
        "--metric",
        "max_abs,cosine",
    )
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["first_divergence"]["node"] == {"id": "add", "name": "add", "op_type": "Add", "index": 2, "path": []}
    assert d["first_divergence"]["value"] == "a" and set(d["first_divergence"]["metrics"]) == {"max_abs", "cosine"}
    assert d["matched"] == 6 and d["unmatched_run"] == 0 and d["unmatched_reference"] == 0
    row = d["rows"][0]
    assert set(row) >= {"index", "node", "value", "shape", "metrics", "pass", "origin"}
    assert row["node"]["op_type"] == "Conv" and row["shape"] == [1, 4, 8, 8] and row["pass"] is True


def test_compare_with_a_fail_condition(models):
    tmp, _, _ = models
    r = cli("compare", tmp / "bad.onnx", "--against-model", tmp / "chain.onnx", "--fail-if", "max_abs>0.1", "--json")
    assert r.returncode == 0, r.stderr  # the shift is 0.01 at most
    r = cli("compare", tmp / "bad.onnx", "--against-model", tmp / "chain.onnx", "--fail-if", "snr<60", "--failed")
    assert r.returncode == 1
    body = [ln for ln in r.stdout.splitlines() if ln.split()[:1] and ln.split()[0].isdigit()]
    assert [ln.split()[1] for ln in body] == ["add", "mul", "sigmoid"]  # --failed lists only those


def test_compare_against_an_optimization_level_says_what_it_compared(models):
    tmp, _, _ = models
    r = cli("compare", tmp / "chain.onnx", "--against-opt-level", "none", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert "optimized by onnxruntime at level 'all'" in d["run"] and "keeps" in d["run"]
    assert "unoptimized" in d["reference"]
    assert 0 < d["compared"] <= 6


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["compare", "MODEL"],
            "one of the arguments --reference --against-provider --against-model --against-opt-level is required",
        ),
        (["compare", "MODEL", "--reference", "a.npz", "--against-provider", "CPU"], "not allowed with argument"),
        (["compare", "MODEL", "--reference", "nothing.npz"], "dump not found"),
        (["compare", "MODEL", "--against-provider", "CPU", "--metric", "speed"], "unknown metric 'speed'"),
        (["compare", "MODEL", "--against-provider", "CPU", "--fail-if", "cosine"], "fail condition 'cosine' is not understood"),
        (["compare", "MODEL", "--against-provider", "CPU", "--atol", "-1"], "expected a non-negative number"),
        (
            ["compare", "MODEL", "--against-opt-level", "all", "--opt-level", "all"],
            "both sides would run at optimization level 'all'",
        ),
        (["compare", "MODEL", "--against-opt-level", "max"], "invalid choice"),
        (["dump", "MODEL", "--out", "run.bin"], "ending in .npz"),
        (["dump", "MODEL"], "the following arguments are required: --out"),
        (["profile", "MODEL", "--repeat", "0"], "expected a positive integer"),
        (["profile", "MODEL", "--save-optimized", "o.onnx"], "--save-optimized needs --opt-level"),
        (["run", "MODEL", "--set", "a"], "--set expects NAME=FILE.npy"),
        (["run", "MODEL", "--set", "nope=a.npy"], "the model has no value 'nope'"),
        (["run", "MODEL", "--set", "a=missing.npy"], "file not found"),
        (["run", "MODEL", "--set-from", "run.txt"], "--set-from expects a dump (.npz)"),
        (["run", "MODEL", "--repeat", "x"], "expected a positive integer"),
    ],
)
def test_bad_usage_exits_2_with_one_clear_line(models, args, message):
    tmp, _, _ = models
    args = [str(tmp / "chain.onnx") if a == "MODEL" else a for a in args]
    r = cli(*args, cwd=tmp)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_compare_help_says_what_the_exit_status_means():
    r = cli("compare", "--help")
    assert r.returncode == 0
    assert "1 when some value is not" in " ".join(r.stdout.split())


def test_profile_json_and_chrome_trace(models):
    tmp, base, _ = models
    r = cli("profile", tmp / "chain.onnx", "--repeat", "2", "--json", "--chrome-trace", tmp / "trace.json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {n["name"] for n in d["nodes"]} == {n.name for n in base.graph.node}
    assert d["total_ms"] > 0 and sum(n["share"] for n in d["nodes"]) == pytest.approx(1.0, abs=1e-4)
    assert all(set(n) == {"name", "op_type", "index", "time_ms", "share", "bytes", "source", "module"} for n in d["nodes"])
    trace = json.loads((tmp / "trace.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "run") == 6 * 2


def test_profile_text_says_how_it_timed(models):
    tmp, _, _ = models
    r = cli("profile", tmp / "chain.onnx", "--repeat", "1", "--top", "2")
    assert r.returncode == 0, r.stderr
    assert "onnxruntime profiling" in r.stdout and "median of 1 run(s)" in r.stdout
    assert "... 4 more" in r.stdout
    r = cli("profile", tmp / "chain.onnx", "--repeat", "1", "--opt-level", "extended", "--save-optimized", tmp / "opt.onnx")
    assert r.returncode == 0, r.stderr
    assert "FusedConv" in r.stdout and "conv, relu" in r.stdout and (tmp / "opt.onnx").is_file()
    r = cli("profile", tmp / "chain.onnx", "--repeat", "1", "--fused")
    assert r.returncode == 0, r.stderr
    assert "# onnxruntime's optimized graph at level 'all'" in r.stdout


def test_run_set_from_a_dump_restores_the_original_values(models):
    """bad.onnx differs from chain.onnx only at 'a': injecting the original 'a' gives the original outputs."""
    tmp, base, _ = models
    assert cli("dump", tmp / "chain.onnx", "--inputs", tmp / "in.npz", "--out", tmp / "run.npz").returncode == 0
    truth = ort_values(base, chain_feeds(3))
    r = cli("run", tmp / "bad.onnx", "--inputs", tmp / "in.npz", "--set-from", f"{tmp / 'run.npz'}:a", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["injected"] == ["a"]
    assert report["summaries"]["y"] == json.loads(json.dumps(summarize(truth["y"]).to_dict()))
    np.save(tmp / "a.npy", truth["a"])
    r = cli("run", tmp / "bad.onnx", "--inputs", tmp / "in.npz", "--set", f"a={tmp / 'a.npy'}", "--json")
    assert json.loads(r.stdout)["summaries"]["y"] == report["summaries"]["y"]
    # without the injection the outputs are the bad model's
    r = cli("run", tmp / "bad.onnx", "--inputs", tmp / "in.npz", "--json")
    assert json.loads(r.stdout)["summaries"]["y"] != report["summaries"]["y"]


def test_run_set_from_a_whole_dump_sets_its_inputs_too(models):
    tmp, base, _ = models
    assert cli("dump", tmp / "chain.onnx", "--inputs", tmp / "in.npz", "--out", tmp / "run.npz").returncode == 0
    r = cli("run", tmp / "chain.onnx", "--set-from", tmp / "run.npz", "--json")  # no --inputs: the dump's x is set
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["injected"][0] == "x"
    truth = ort_values(base, chain_feeds(3))
    assert report["summaries"]["side"] == json.loads(json.dumps(summarize(truth["side"]).to_dict()))


def test_run_set_replaces_a_nan_so_the_run_goes_on(tmp_path):
    """The example's Sqrt makes NaN; replacing its output lets the run complete."""
    np.save(tmp_path / "std.npy", np.ones((1, 8, 1, 1), np.float32))
    r = cli("run", EXAMPLE, "--break-on", "nan")
    assert r.returncode == 1 and "stopped (NaN) at norm/std" in r.stdout
    r = cli("run", EXAMPLE, "--break-on", "nan", "--set", f"norm_std={tmp_path / 'std.npy'}", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["status"] == "completed" and report["injected"] == ["norm_std"]
    assert report["summaries"]["probs"]["nan"] == 0


def test_run_set_with_a_wrong_shape_is_one_clear_line(models):
    tmp, _, _ = models
    np.save(tmp / "wrong.npy", np.ones((2, 2), np.float32))
    r = cli("run", tmp / "chain.onnx", "--set", f"a={tmp / 'wrong.npy'}")
    assert r.returncode == 2
    assert "cannot set 'a'" in r.stderr and "float32[1,4,8,8]" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_run_set_keeps_user_breakpoints(models):
    tmp, base, _ = models
    truth = ort_values(base, chain_feeds(3))
    np.save(tmp / "a.npy", truth["a"])
    r = cli("run", tmp / "bad.onnx", "--inputs", tmp / "in.npz", "--set", f"a={tmp / 'a.npy'}", "--break", "mul", "--json")
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["reason"] == "breakpoint" and report["node"]["name"] == "mul"  # 'mul' is also where 'a' is set
    assert report["summaries"]["a"] == json.loads(json.dumps(summarize(truth["a"]).to_dict()))


def test_run_repeat_runs_n_times_and_checks_the_outputs(models):
    tmp, _, _ = models
    r = cli("run", tmp / "chain.onnx", "--repeat", "3", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)["repeat"]
    assert rep["runs"] == 3 and len(rep["times_ms"]) == 3 and rep["outputs_identical"] is True
    r = cli("run", tmp / "chain.onnx", "--repeat", "2")
    assert "ran 2 of 2 times" in r.stdout and "outputs identical in every run" in r.stdout
    r = cli("run", tmp / "chain.onnx", "--repeat", "3", "--break", "mul", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["repeat"]["runs"] == 1  # a stop ends the repeats
