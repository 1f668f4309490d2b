"""A watched, optimized continue runs whole, however long it took: a fault stops it exactly, its values the user's run's."""

from __future__ import annotations

import numpy as np
import pytest
from models import assert_exact, ort_values, residual_stages, run_values

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


def test_a_long_watched_run_stays_whole_and_is_the_users_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """However long a watched run at an optimization level took, the next continue runs it whole again (parts would
    be optimized apart, and compute the values between them otherwise than the user's run): a fault stops at the same
    node, and without one the outputs are the plain run's bit for bit."""
    monkeypatch.setattr(runs, "_PAUSE_GRAIN_S", 0.0)  # every run counts as long
    model = poisoned(4)
    s, first, second, built = stop_twice(model)
    assert (first.reason, first.node.id, first.value) == (StopReason.NAN, "b4b", "b4b")
    assert (second.reason, second.node.id, second.value) == (StopReason.NAN, "b4b", "b4b")
    assert second.message == first.message and built == 0
    clean = residual_stages("pipiii")
    s = DebugSession(clean, {"x": X}, break_on=["nan", "inf"])
    for _ in range(2):
        s.restart()
        assert s.continue_().reason is StopReason.END
        for name, want in run_values(clean, {"x": X}, [o.name for o in clean.graph.output]).items():
            assert_exact(s.value(name), want, name)


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
