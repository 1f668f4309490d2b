"""`graph-dap run` and `graph-dap listing` as a user runs them: exit codes, reports, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import chain_model

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "nan_demo.onnx"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "graph_dap", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_example_model_is_the_one_its_script_builds(tmp_path):
    sys.path.insert(0, str(ROOT / "examples"))
    import make_example

    assert make_example.build().SerializeToString() == onnx.load(str(EXAMPLE)).SerializeToString()


def test_run_breaks_at_the_examples_nan_with_a_report():
    r = cli("run", EXAMPLE, "--break-on", "nan,inf,error")
    assert r.returncode == 1, r.stderr
    assert "stopped (NaN) at norm/std (Sqrt)" in r.stdout
    assert "norm_var_eps: float32[1,8,1,1]" in r.stdout and "nan=" in r.stdout
    assert "Traceback" not in r.stderr


def test_run_json_report():
    r = cli("run", EXAMPLE, "--break-on", "nan", "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["status"] == "stopped" and report["reason"] == "nan"
    assert report["node"] == {"id": "norm/std", "name": "norm/std", "op_type": "Sqrt", "index": 9, "path": [], "source": [], "module": "norm"}
    assert report["tensor"] == "norm_std"
    assert report["summaries"]["norm_std"]["nan"] > 0
    r = cli("run", EXAMPLE, "--json")
    assert r.returncode == 0
    report = json.loads(r.stdout)
    assert report["status"] == "completed" and report["reason"] is None and report["node"] is None
    assert report["summaries"]["probs"]["shape"] == [1, 10]


def test_run_breakpoint_and_inputs(tmp_path):
    model = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(model))
    np.savez(tmp_path / "in.npz", x=np.ones((1, 2, 8, 8), np.float32))
    r = cli("run", model, "--inputs", tmp_path / "in.npz", "--break", "op:Mul", "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["reason"] == "breakpoint" and report["node"]["name"] == "mul"
    assert report["summaries"]["a"]["shape"] == [1, 4, 8, 8]


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "/nonexistent.onnx"], "model not found: /nonexistent.onnx"),
        (["run", EXAMPLE, "--dim", "batch"], "--dim expects NAME=N"),
        (["run", EXAMPLE, "--break-on", "nan,bogus"], "unknown break filter 'bogus'"),
        (["run", EXAMPLE, "--break", "no_such_node"], "no node, value or op type matches 'no_such_node'"),
        (["run", EXAMPLE, "--inputs", "/nonexistent.npz"], "inputs not found"),
        (["run", EXAMPLE, "--provider", "NoSuch"], "execution provider 'NoSuch' is not available"),
        (["run"], "the following arguments are required: model"),
        (["frobnicate"], "invalid choice"),
        (["profile", EXAMPLE, "--top", "-1"], "expected a count, 0 or more, got '-1'"),  # [:-1] would drop the last row
    ],
)
def test_bad_usage_exits_2_with_one_clear_line(args, message):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_inputs_and_broken_model(tmp_path):
    np.savez(tmp_path / "bad.npz", image=np.ones((2,), np.int64))
    r = cli("run", EXAMPLE, "--inputs", tmp_path / "bad.npz")
    assert r.returncode == 2
    assert "input 'image' expects float32[1,3,32,32], got int64[2]" in r.stderr
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(EXAMPLE.read_bytes()[:200])
    r = cli("run", broken)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "broken.onnx" in r.stderr


def test_a_path_that_cannot_be_written_and_an_output_reader_that_leaves_are_one_line_or_none(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r = cli("listing", EXAMPLE, "--out", blocker / "sub" / "x.onnxtxt")  # a folder under a file
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"graph-dap: {blocker}") and r.stderr.strip().endswith("Not a directory"), r.stderr
    r = cli("graph", EXAMPLE, "--out", tmp_path / "no" / "such" / "g.html")  # named by its folder, not a temporary file's
    assert r.returncode == 2 and r.stderr.strip() == f"graph-dap: {tmp_path / 'no' / 'such'}: No such file or directory", r.stderr
    # stdout's reader left (| head): no traceback and nothing at exit, the shell's SIGPIPE status. (This machine's
    # pipes take writes after their reader closed, so the error a write would meet is raised where the command writes.)
    code = (
        "import sys\n"
        "from graph_dap.cli import commands, main\n"
        "def listing(args):\n"
        "    sys.stdout.write('x' * 100)\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "commands.COMMANDS['listing'] = listing\n"
        f"sys.exit(main(['listing', {str(EXAMPLE)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 141 and r.stderr == "", r.stderr


def test_listing_command(tmp_path):
    r = cli("listing", EXAMPLE)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    node_lines = [ln for ln in lines if ln and not ln.startswith("#")]
    assert len(node_lines) == 16
    assert "norm_std: float32[1,8,1,1] = Sqrt(norm_var_eps)  # norm/std" in node_lines
    out = tmp_path / "x.onnxtxt"
    assert cli("listing", EXAMPLE, "--out", out).returncode == 0
    assert out.read_text() == r.stdout


def test_adapter_and_worker_subcommands():
    r = cli("worker", "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "--listen needs --token" in r.stderr
    proc = subprocess.Popen([sys.executable, "-m", "graph_dap", "adapter", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("graph-dap adapter listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        import socket

        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            body = b'{"seq":1,"type":"request","command":"initialize","arguments":{"adapterID":"t"}}'
            sock.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            data = b""
            while b'"command": "initialize"' not in data and b'"command":"initialize"' not in data:
                chunk = sock.recv(65536)
                assert chunk, data
                data += chunk
            assert b'"success": true' in data or b'"success":true' in data
    finally:
        proc.kill()
        proc.wait(10)


def test_graph_dap_threads_sizes_the_pool_and_a_bad_value_is_one_clear_line():
    import os

    def with_threads(value: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, GRAPH_DAP_THREADS=value)
        return subprocess.run([sys.executable, "-m", "graph_dap", "run", str(EXAMPLE), "--break-on", "nan"], capture_output=True, text=True, env=env, timeout=120)

    for good in ("2", "0"):
        r = with_threads(good)
        assert r.returncode == 1 and "stopped (NaN) at norm/std (Sqrt)" in r.stdout, (good, r.stderr)
    r = with_threads("many")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip() == "graph-dap: GRAPH_DAP_THREADS must be a number of threads, 0 (one per core) or more; got 'many'"
