"""Reading a watched segment's sentinel: the bounds' checks computed from the raw sums after the run."""

from __future__ import annotations

import numpy as np

from graph_dap.runtime.engine.sentinel import Readout

F32_MAX = float(np.finfo(np.float32).max)


def test_without_checks_the_sums_are_the_sentinel() -> None:
    raw = np.array([1.0, np.nan, -np.inf], np.float32)
    r = Readout.of(["a", "b", "c"], 0, [])
    assert r.sums(raw).tolist()[0] == 1.0 and np.isnan(r.sums(raw)[1]) and r.sums(raw)[2] == -np.inf


def test_a_check_reads_its_sources_scaled_plus_its_offset() -> None:
    # a, b watched; sum(|x|) of one fed value after them; b's check: 2*sum(b) + 3*sum(a) + 0.5*sum(|x|) + 1
    r = Readout.of(["a", "b"], 1, [(1, [(1, 2.0), (0, 3.0), (2, 0.5)], 1.0)])
    out = r.sums(np.array([1.0, 10.0, 4.0], np.float32))
    assert out.dtype == np.float32 and out.shape == (2,)
    assert out.tolist() == [1.0, 2 * 10 + 3 * 1 + 0.5 * 4 + 1]


def test_a_check_that_overflows_float32_reads_inf_as_in_the_graph() -> None:
    r = Readout.of(["a"], 0, [(0, [(0, 16.0)], 0.0)])
    assert r.sums(np.array([F32_MAX / 8], np.float32))[0] == np.inf
    assert np.isfinite(r.sums(np.array([F32_MAX / 32], np.float32))[0])


def test_nan_in_a_source_makes_the_check_nan_and_a_fed_nan_reads_inf() -> None:
    r = Readout.of(["a", "b"], 1, [(1, [(1, 1.0), (2, 1.0)], 0.0)])
    made = r.sums(np.array([0.0, np.nan, 1.0], np.float32))
    assert np.isnan(made[1])
    fed = r.sums(np.array([0.0, 1.0, np.nan], np.float32))
    assert fed[1] == np.inf  # a NaN the segment did not make must not read as one it made
    inf = r.sums(np.array([np.inf, 1.0, 0.0], np.float32))
    assert inf[0] == np.inf and inf[1] == 1.0  # a's own sum, unchecked, as it came


def test_several_checks_each_read_their_own_terms() -> None:
    r = Readout.of(["a", "b", "c"], 0, [(0, [(0, 1.0)], 0.0), (2, [(2, 2.0), (0, 1.0), (1, 1.0)], 5.0)])
    out = r.sums(np.array([1.0, 2.0, 3.0], np.float32))
    assert out.tolist() == [1.0, 2.0, 2 * 3 + 1 + 2 + 5]
