"""``graph-dap run-script`` and ``graph-dap capture`` from the command line, on programs that run models.

The values reported and recorded are checked against onnxruntime's; the programs include one that
crashes, one that exits non-zero and one that runs a model (given as bytes) from several threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from mixed_program import PROGRAM, call_inputs, loop_models, program_line
from processes import ROOT

from graph_dap.runtime.engine.options import session_options

MISBEHAVING = PROGRAM.parent / "misbehaving.py"
TIMEOUT = 180


def graph_dap(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "graph_dap", *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, env=env
    )


@pytest.fixture
def models(tmp_path: Path) -> tuple[Path, Path]:
    return loop_models(tmp_path)


def run_root(root: Path, y: np.ndarray) -> np.ndarray:
    (z,) = ort.InferenceSession(str(root), session_options("none"), providers=["CPUExecutionProvider"]).run(None, {"y": y})
    return z


# -- run-script -------------------------------------------------------------------------------


def test_run_script_reports_the_first_call_that_makes_nan_and_exits_1(models):
    done = graph_dap("run-script", str(PROGRAM), str(models[0]), str(models[1]), "9", "--break-on", "nan,inf")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "call 6:" in out and "call 7:" not in out  # the program ends at the break
    assert "stopped (NaN) at sqrt1 (Sqrt)" in out
    assert "in call 7 of root.onnx" in out
    assert f"{PROGRAM}:{program_line('root.run(')} in main" in out


def test_run_script_json_names_the_call_the_model_and_the_python_stack(models):
    done = graph_dap("run-script", "--json", "--break", "plus1", str(PROGRAM), str(models[0]), str(models[1]), "4")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["status"], report["reason"], report["node"]["id"]) == ("stopped", "breakpoint", "plus1")
    assert report["call"] == 1 and report["model"] == str(models[0])
    assert report["python_stack"][0] == {"path": str(PROGRAM), "line": program_line("scale.run("), "function": "main"}
    assert report["python_stack"][-1]["function"] == "<module>"
    assert report["summaries"]["doubled"]["max"] == pytest.approx(2.0)  # x = 1 doubled, as onnxruntime computes it


def test_run_script_exits_0_when_the_program_ends_without_a_break(models):
    done = graph_dap("run-script", str(PROGRAM), str(models[0]), str(models[1]), "5", "--break-on", "nan")
    assert done.returncode == 0, done.stderr
    assert "call 5:" in done.stdout and "total:" in done.stdout and "stopped" not in done.stdout


def test_run_script_passes_on_the_status_of_a_program_that_exits_non_zero(models):
    done = graph_dap("run-script", "--break-on", "nan", str(MISBEHAVING), "exit", str(models[1]))
    assert done.returncode == 3
    assert "call 1:" in done.stdout


def test_run_script_on_a_program_that_crashes_shows_its_traceback_and_status(models):
    done = graph_dap("run-script", "--break-on", "nan", str(MISBEHAVING), "crash", str(models[1]))
    assert done.returncode == 1
    assert "call 2:" in done.stdout and "stopped" not in done.stdout
    assert "RuntimeError: the program crashed on purpose" in done.stderr


def test_run_script_finds_the_nan_in_the_thread_that_made_it(models):
    done = graph_dap("run-script", "--json", "--break-on", "nan", str(MISBEHAVING), "threads", str(models[1]))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["node"]["id"] == "sqrt1" and report["model"] is None  # given as bytes
    assert [f["function"] for f in report["python_stack"]][:1] == ["worker"]
    assert "worker-2 call 3:" not in done.stdout


def test_run_script_refuses_a_missing_program_in_one_line(tmp_path):
    done = graph_dap("run-script", str(tmp_path / "nope.py"))
    assert done.returncode == 2 and "no such program" in done.stderr and "Traceback" not in done.stderr


# -- capture ----------------------------------------------------------------------------------


def test_capture_records_every_call_for_replay(models, tmp_path):
    out = tmp_path / "cap"
    done = graph_dap("capture", "--out", str(out), "--", sys.executable, str(PROGRAM), str(models[0]), str(models[1]), "3")
    assert done.returncode == 0, done.stderr
    assert "6 run call(s) recorded" in done.stderr
    records = sorted(out.glob("run-*.json"))
    assert [r.name for r in records] == [f"run-{i:04d}.json" for i in range(1, 7)]
    assert not list(out.glob(".run-*"))  # the reservations are gone
    second = json.loads((out / "run-0002.json").read_text())
    assert second["model"] == str(models[1]) and second["call"] == 1
    assert second["caller"] == {"path": str(PROGRAM), "line": program_line("root.run("), "function": "main"}
    assert second["time_ms"] > 0
    with np.load(out / "run-0002.npz") as feeds, np.load(out / "run-0002.outputs.npz") as outputs:
        y = feeds["y"]
        assert np.array_equal(outputs["z"], run_root(models[1], y))
    with np.load(out / "run-0001.npz") as feeds:
        assert np.array_equal(feeds["x"], call_inputs(1))
    replay = graph_dap("run", str(models[1]), "--inputs", str(out / "run-0002.npz"), "--json")
    assert replay.returncode == 0
    z = run_root(models[1], y)
    assert json.loads(replay.stdout)["summaries"]["z"]["mean"] == pytest.approx(float(z.mean()))


def test_capture_only_nonfinite_keeps_the_call_whose_outputs_hold_nan(models, tmp_path):
    out = tmp_path / "cap"
    done = graph_dap(
        "capture", "--out", str(out), "--only-nonfinite", "--", sys.executable, str(PROGRAM), str(models[0]), str(models[1]), "8"
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(p.read_text()) for p in sorted(out.glob("run-*.json"))]
    assert [(r["model"], r["call"]) for r in records] == [(str(models[1]), 7)]


def test_capture_of_a_program_that_crashes_keeps_its_calls_and_its_status(models, tmp_path):
    out = tmp_path / "cap"
    done = graph_dap("capture", "--out", str(out), "--", sys.executable, str(MISBEHAVING), "crash", str(models[1]))
    assert done.returncode == 1
    assert "the program crashed on purpose" in done.stderr
    assert len(list(out.glob("run-*.json"))) == 2


def test_capture_of_threads_and_a_model_given_as_bytes(models, tmp_path):
    out = tmp_path / "cap"
    done = graph_dap("capture", "--out", str(out), "--", sys.executable, str(MISBEHAVING), "threads", str(models[1]))
    assert done.returncode == 0, done.stderr
    records = [json.loads(p.read_text()) for p in sorted(out.glob("run-*.json"))]
    assert len(records) == 12
    assert sorted(r["call"] for r in records) == list(range(1, 13))  # one model: its calls numbered across the threads
    assert {r["thread"] for r in records} == {"worker-0", "worker-1", "worker-2"}
    assert all(r["model"] is None and r["model_sha256"] for r in records)
    copy = Path(records[0]["model_file"])
    assert copy.parent == out / "models" and copy.read_bytes() == models[1].read_bytes()


def test_capture_exits_with_the_status_of_a_program_that_exits_non_zero(models, tmp_path):
    done = graph_dap("capture", "--out", str(tmp_path / "cap"), "--", sys.executable, str(MISBEHAVING), "exit", str(models[1]))
    assert done.returncode == 3


def test_capture_without_a_command_is_a_usage_error(tmp_path):
    done = graph_dap("capture", "--out", str(tmp_path / "cap"))
    assert done.returncode == 2 and "after --" in done.stderr
