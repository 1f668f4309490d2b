"""A watched, optimized continue that ran long runs in parts: a fault stops it at its part, exactly.

Runs shorter than ``runs._PARTS_MIN_S`` stay whole (each cut costs more than the parts would save);
these tests lower the threshold to see the parts at work on a small model.
"""

from __future__ import annotations

import numpy as np
import pytest
from models import ort_values, residual_stages

from graph_dap.runtime import DebugSession, StopReason
from graph_dap.runtime.session import runs

X = np.random.default_rng(8).standard_normal((1, 16, 8, 8)).astype(np.float32)


def poisoned(block: int, bad: float = np.nan):
    """Six residual blocks; block ``block``'s second Conv has one NaN (or ``bad``) weight: that Conv is the first fault."""
    model = residual_stages("pipiii")
    for t in model.graph.initializer:
        if t.name == f"b{block}b.w":
            w = np.frombuffer(t.raw_data, np.float32).copy() if t.raw_data else np.array(t.float_data, np.float32)
            w[5] = bad
            t.ClearField("float_data")
            t.raw_data = w.tobytes()
    return model


def stop_twice(model):
    s = DebugSession(model, {"x": X}, break_on=["nan", "inf"])
    s.start()
    first = s.continue_()
    built = s.segments.sessions_built
    s.restart()
    second = s.continue_()
    return s, first, second, s.segments.sessions_built - built


def test_a_fault_in_a_late_part_stops_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "_PARTS_MIN_S", 0.0)
    model = poisoned(4)
    s, first, second, built = stop_twice(model)
    assert (first.reason, first.node.id, first.value) == (StopReason.NAN, "b4b", "b4b")
    assert (second.reason, second.node.id, second.value) == (StopReason.NAN, "b4b", "b4b")
    assert second.message == first.message
    assert built >= 2  # the second continue built its parts' sessions...
    assert s.executions["b5out"] == 1  # ...and stopped in the part of the fault: the last block ran only in the first, whole run
    # The values around the fault were recomputed with the original nodes from the run's values at the part's
    # start (not from the model's input), and say so: the original graph's numbers but for the last bits.
    truth = ort_values(model, {"x": X}, ["b4b", "b4r", "b3out"])  # onnxruntime without optimizations, from x
    for name in ("b4b", "b4r", "b3out"):
        assert s.note(name).startswith("recomputed with the original nodes"), name
        np.testing.assert_allclose(s.value(name), truth[name], rtol=1e-4, atol=1e-3, equal_nan=True, err_msg=name)
    assert np.isnan(s.value("b4b")).sum() == np.isnan(truth["b4b"]).sum() == 64


def test_a_short_watched_run_is_not_cut() -> None:
    s, first, second, built = stop_twice(poisoned(4))
    assert second.node.id == first.node.id == "b4b"
    assert built == 0 and s.executions["b5out"] == 2  # the same one session, run whole again


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_weight_holding_nan_or_inf_bounds_nothing(bad: float) -> None:
    """The Conv's output is left to a bound (the Relu before it is watched, see engine.bounds); a weight holding NaN
    or Inf must not make that bound read 0 (Python's max() drops a NaN): the stop is at the Conv, not at the Add after it."""
    model = poisoned(2, bad)
    s = DebugSession(model, {"x": X}, break_on=["nan", "inf"])
    s.start()
    stop = s.continue_()
    truth = ort_values(model, {"x": X}, ["b2b"])["b2b"]
    assert (stop.node.id, stop.value) == ("b2b", "b2b") and not np.isfinite(truth).all()
    np.testing.assert_array_equal(s.value("b2b"), truth)
