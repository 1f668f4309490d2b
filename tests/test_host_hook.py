"""The wrapper around ``onnxruntime.InferenceSession`` (``graph_dap.host.hook``), in a process of its own.

What a mode's handler sees (the model, the call's number, its feeds and outputs), what it can return, and
that runs it does not take go to onnxruntime untouched: ``run``, ``run_with_ort_values`` and
``run_with_iobinding``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mixed_program import loop_models
from models import error_model
from processes import ROOT

SCRIPT = r'''
import json, sys
import numpy as np
from graph_dap.host import hook

class Recorder(hook.Handler):
    def __init__(self):
        self.seen = []
        self.failures = []
    def loaded(self, session, model):
        self.seen.append(("loaded", model.name if model else None))
    def run(self, call):
        feeds = call.numpy_feeds()
        results = call.original()
        self.seen.append(("run", call.model.name, call.number, call.kind, call.names, sorted(feeds), call.stack()[0].function))
        if call.kind == "run":
            return call.results({n: np.asarray(v) * 10 for n, v in zip(call.names, results)})
        return results
    def failed(self, call, error):
        self.failures.append((call.model.name, call.number, hook.is_node_failure(error)))
        return ["handled"]

recorder = Recorder()
hook.install_when_imported(recorder)
import onnxruntime as ort

scale_path, root_path, broken_path = sys.argv[1:4]
scale = ort.InferenceSession(scale_path, providers=["CPUExecutionProvider"])
x = np.full((2, 4), 3.0, np.float32)
plain = scale.run(None, {"x": x})[0]           # not engaged: onnxruntime's own
recorder.engaged = True
def caller():
    return scale.run(["y"], {"x": x})[0]       # engaged: the handler's (y * 10)
wrapped = caller()
ort_values = scale.run_with_ort_values(None, {"x": ort.OrtValue.ortvalue_from_numpy(x)})[0].numpy()
binding = scale.io_binding()
binding.bind_cpu_input("x", x)
binding.bind_output("y")
scale.run_with_iobinding(binding)
bound = binding.copy_outputs_to_cpu()[0]
recorder.engaged = False
recorder.on_error = True
broken = ort.InferenceSession(broken_path, providers=["CPUExecutionProvider"])
handled = broken.run(None, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
try:
    broken.run(None, {"nope": np.zeros(1, np.float32)})
    bad_name = "no error"
except Exception as error:
    bad_name = type(error).__name__
print(json.dumps({
    "plain": plain.tolist(), "wrapped": wrapped.tolist(), "ort_values": ort_values.tolist(), "bound": bound.tolist(),
    "handled": handled, "bad_name": bad_name, "seen": recorder.seen, "failures": recorder.failures,
}))
'''


def test_the_handler_sees_each_session_and_call_and_the_rest_runs_untouched(tmp_path: Path):
    scale, root = loop_models(tmp_path)
    broken, _, _ = error_model(tmp_path)
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(scale), str(root), str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    y = [[7.0] * 4] * 2  # 2 * 3 + 1, as onnxruntime computes it
    assert got["plain"] == y and got["bound"] == y and got["ort_values"] == y
    assert got["wrapped"] == [[70.0] * 4] * 2  # what the handler returned is what the program got
    runs = [s for s in got["seen"] if s[0] == "run"]
    assert runs == [
        ["run", "scale.onnx", 2, "run", ["y"], ["x"], "caller"],
        ["run", "scale.onnx", 3, "ort_values", ["y"], ["x"], "<module>"],
    ]  # call 1 was counted, not handed over; the IOBinding run is not handed over
    assert ["loaded", "scale.onnx"] in got["seen"] and ["loaded", "broken.onnx"] in got["seen"]
    assert got["handled"] == ["handled"] and got["failures"] == [["broken.onnx", 1, True]]
    assert got["bad_name"] != "no error"  # a bad feed name is the program's error, never graph-dap's business
